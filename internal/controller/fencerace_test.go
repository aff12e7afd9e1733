package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// chunkGateLog holds back the first later chunk of a fence (an append
// that starts with a partition record, the first chunk starting with the
// broker's fenced registration), or the first chunk when first is set,
// once armed: the append waits until release closes, then fails with err
// or, when err is nil, appends.
type chunkGateLog struct {
	quorum.Log
	first   bool
	mu      sync.Mutex
	armed   bool
	appends int
	entered chan struct{}
	release chan struct{}
	err     error
}

func newChunkGateLog(err error) *chunkGateLog {
	return &chunkGateLog{entered: make(chan struct{}), release: make(chan struct{}), err: err}
}

func (g *chunkGateLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	g.mu.Lock()
	g.appends++
	first := false
	if r, ok := recs[0].(metadata.RegisterBrokerRecord); ok && r.Fenced {
		first = true
	}
	_, later := recs[0].(metadata.PartitionRecord)
	hold := g.armed && len(recs) > 1 && (later && !g.first || first && g.first)
	if hold {
		g.armed = false
	}
	g.mu.Unlock()
	if hold {
		close(g.entered)
		<-g.release
		if g.err != nil {
			return 0, g.err
		}
	}
	return g.Log.Append(ctx, recs)
}

func (g *chunkGateLog) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *chunkGateLog) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.appends
}

// holds reports whether broker id still leads a partition or is in an
// ISR of more than itself: its fence is not complete.
func holds(im *metadata.Image, id int32) bool {
	for tp := range im.Topics() {
		for _, p := range tp.Partitions {
			if p.Leader == id || len(p.ISR) > 1 && slices.Contains(p.ISR, id) {
				return true
			}
		}
	}
	return false
}

// waitFences waits until no goroutine of c completes a fence.
func waitFences(t *testing.T, c *Controller) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.fences.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a fence's goroutine outlived the controller's leadership")
	}
}

// fenceSetup is a local controller (over wrap(its log) when wrap is not
// nil) with hour-long sessions, brokers 1 to n registered and, when parts
// is positive, spreadTopics(parts); ctx ends with the test.
func fenceSetup(t *testing.T, wrap func(quorum.Log) quorum.Log, n int32, parts int) (*Controller, context.Context) {
	t.Helper()
	c := newLocalControllerWith(t, wrap)
	longSessions(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	registerBrokers(t, ctx, c, n)
	if parts > 0 {
		spreadTopics(t, ctx, c, parts)
	}
	return c, ctx
}

// halfFence commits the first 10 moves of broker id's fence only, as a
// controller that lost the leadership between two chunks leaves it.
func halfFence(t *testing.T, ctx context.Context, c *Controller, id int32) {
	t.Helper()
	if err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) { return c.fenceChunk(im, id, 10), nil }); err != nil {
		t.Fatal(err)
	}
}

// A new process of a broker that registers while a fence of its former
// process is half done (committed in chunks, the controller lost the
// leadership between two, or the request gave up) gets none of what the
// former process still held: the rest of the fence is committed first,
// and a chunk computed after the registration (a goroutine of the old
// fence running late) writes nothing, so the new incarnation stays
// unfenced. Before, the registration of a fenced broker skipped the fence
// and the new process kept the leaderships the chunks had not moved yet,
// at the old leader epochs.
func TestRegisterCompletesHalfDoneFence(t *testing.T) {
	c, ctx := fenceSetup(t, nil, 3, 3000)
	halfFence(t, ctx, c, 2)
	old := c.Image().Broker(2).Epoch
	if im := c.Image(); !im.Broker(2).Fenced || !holds(im, 2) {
		t.Fatal("setup: the fence of broker 2 is not half done")
	}
	epoch, err := c.RegisterBroker(ctx, 2, incarnation(22), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9002}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	im := c.Image()
	if b := im.Broker(2); b.Fenced || b.Epoch != epoch || epoch == old {
		t.Fatalf("broker 2 after registering: fenced %v, epoch %d (returned %d, old %d)", b.Fenced, b.Epoch, epoch, old)
	}
	if holds(im, 2) {
		t.Fatal("the new process of broker 2 holds leaderships or ISR places of its former process")
	}
	n, err := c.continueFence(ctx, 2, old)
	if err != nil || n != 0 {
		t.Fatalf("a late chunk of the old fence: %d records, %v", n, err)
	}
	if b := c.Image().Broker(2); b.Fenced {
		t.Fatal("a late chunk of the old fence fenced the new process")
	}
}

// A controller that loses the leadership while a fence's chunks are in
// flight stops them (its goroutine ends, nothing more is appended), and
// the next active controller completes the fence from the metadata: the
// broker fenced and still holding partitions.
func TestFenceStopsOnLeadershipLoss(t *testing.T) {
	g := newChunkGateLog(quorum.ErrNotLeader)
	c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log { g.Log = l; return g }, 3, 6000)
	g.arm()
	fenced := make(chan error, 1)
	go func() { fenced <- c.FenceBroker(ctx, 2) }()
	<-g.entered // the second chunk is being appended, the next ones queued
	c.onLeaderChange(quorum.Leadership{Epoch: 1, LeaderID: 3})
	close(g.release)
	if err := <-fenced; !errors.Is(err, ErrNotController) {
		t.Fatalf("fence across the loss of the leadership: %v, want ErrNotController", err)
	}
	waitFences(t, c)
	appends := g.count()
	if im := c.Image(); !im.Broker(2).Fenced || !holds(im, 2) {
		t.Fatalf("after the loss: broker 2 fenced %v, holds partitions %v; want a half-done fence", im.Broker(2).Fenced, holds(im, 2))
	}
	if n := g.count(); n != appends {
		t.Fatalf("%d appends after the fence's goroutine ended", n-appends)
	}
	c.onLeaderChange(quorum.Leadership{Epoch: 2, LeaderID: 1})
	if !c.WaitImage(ctx, func(im *metadata.Image) bool { return !holds(im, 2) }) {
		t.Fatal("the fence was not completed once this controller was active again")
	}
}

// Two brokers fenced at once: their chunks interleave on the loop, each
// computed over the image the other's chunks make, and both fences
// complete with every partition led by a live in-sync replica (four
// brokers, replication factor 3: each partition keeps one of 1 and 4).
func TestTwoFencesInterleave(t *testing.T) {
	var log *appendLog
	c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log {
		log = &appendLog{Log: l}
		return log
	}, 4, 0)
	for i := range 40 {
		errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: fmt.Sprintf("t%d", i), Partitions: 100, ReplicationFactor: 3}}, false)
		if err != nil || errs[0] != nil {
			t.Fatalf("create: %v %v", err, errs)
		}
	}
	before := log.count()
	type key struct {
		topic     metadata.UUID
		partition int
	}
	was := map[key]metadata.Partition{}
	for tp := range c.Image().Topics() {
		for i, p := range tp.Partitions {
			was[key{tp.ID, i}] = p
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []int32{2, 3} {
		wg.Go(func() { errs[i] = c.FenceBroker(ctx, id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, recs := range log.since(before) {
		n := 0
		for _, r := range recs {
			if _, ok := r.(metadata.PartitionRecord); ok {
				n++
			}
		}
		if n > chunkRecords {
			t.Fatalf("one append of %d partition records, want at most %d", n, chunkRecords)
		}
	}
	im := c.Image()
	if !im.Broker(2).Fenced || !im.Broker(3).Fenced {
		t.Fatal("not both fenced")
	}
	for tp := range im.Topics() {
		for i, p := range tp.Partitions {
			if p.Leader != 1 && p.Leader != 4 || slices.Contains(p.ISR, 2) || slices.Contains(p.ISR, 3) || !slices.Contains(p.ISR, p.Leader) {
				t.Fatalf("%s-%d: leader %d, ISR %v", tp.Name, i, p.Leader, p.ISR)
			}
			if prev := was[key{tp.ID, i}]; (prev.Leader == 2 || prev.Leader == 3) && p.LeaderEpoch <= prev.LeaderEpoch {
				t.Fatalf("%s-%d: leader %d at epoch %d, was %d at %d", tp.Name, i, p.Leader, p.LeaderEpoch, prev.Leader, prev.LeaderEpoch)
			}
		}
	}
}

// A chunk whose append fails while this controller stays active is tried
// again: a fence left half done would stay so (only an unfenced broker's
// session expires), the broker's remaining partitions led by a dead
// broker until the next controller. Before, the fence stopped at the
// failed chunk.
func TestFenceChunkRetriedAfterFailedAppend(t *testing.T) {
	g := newChunkGateLog(errors.New("injected append failure"))
	close(g.release)
	c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log { g.Log = l; return g }, 3, 6000)
	g.arm()
	if err := c.FenceBroker(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	default:
		t.Fatal("no chunk append failed")
	}
	if im := c.Image(); !im.Broker(2).Fenced || holds(im, 2) {
		t.Fatalf("broker 2 fenced %v, holds partitions %v; want a complete fence", im.Broker(2).Fenced, holds(im, 2))
	}
}

// The session tracker's own ticker, on a fake clock (testing/synctest):
// a new active controller fences the silent former quorum leader's
// broker between formerLeaderGrace and one tick after it, far sooner
// than broker.session.timeout.ms; a former leader that heartbeats once
// gets a full session from its last heartbeat instead, and is fenced
// when that expires.
func TestFormerLeaderFenceTimers(t *testing.T) {
	for _, heartbeats := range []bool{false, true} {
		t.Run(fmt.Sprintf("heartbeats=%v", heartbeats), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log {
					return &describedLog{Log: l, lastFetch: map[int32]int64{1: time.Now().UnixMilli(), 2: -1, 3: -1}}
				})
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				epochs := registerBrokers(t, ctx, c, 3)
				spreadTopics(t, ctx, c, 300)
				c.onLeaderChange(quorum.Leadership{Epoch: 1, LeaderID: 2})
				c.onLeaderChange(quorum.Leadership{Epoch: 2, LeaderID: 1})
				activated := time.Now()
				fenced := func() bool { return c.Image().Broker(2).Fenced }
				// Brokers 1 and 3 heartbeat every interval throughout.
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() {
					tick := time.NewTicker(DefaultHeartbeatInterval)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							for _, id := range []int32{1, 3} {
								c.Heartbeat(ctx, id, epochs[id], false, nil)
							}
						}
					}
				})
				defer func() { close(stop); wg.Wait() }()
				if heartbeats {
					if _, _, err := c.Heartbeat(ctx, 2, epochs[2], false, nil); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(formerLeaderGrace - time.Millisecond)
				synctest.Wait()
				if fenced() {
					t.Fatalf("broker 2 fenced %v after the activation, before the grace", time.Since(activated))
				}
				period := min(c.brokers.timeout/4, formerLeaderGrace/2)
				if !heartbeats {
					time.Sleep(period + time.Millisecond)
					synctest.Wait()
					if !fenced() {
						t.Fatalf("the silent former leader's broker not fenced %v after the activation", time.Since(activated))
					}
					if im := c.Image(); holds(im, 2) || im.Broker(1).Fenced || im.Broker(3).Fenced {
						t.Fatalf("after the early fence: broker 2 holds partitions %v, 1 fenced %v, 3 fenced %v", holds(im, 2), im.Broker(1).Fenced, im.Broker(3).Fenced)
					}
					return
				}
				// A full session from its heartbeat at the activation.
				time.Sleep(c.brokers.timeout - formerLeaderGrace)
				synctest.Wait()
				if fenced() {
					t.Fatalf("broker 2 fenced %v after its heartbeat, within its session", time.Since(activated))
				}
				time.Sleep(period + time.Millisecond)
				synctest.Wait()
				if !fenced() || holds(c.Image(), 2) {
					t.Fatalf("broker 2 not fenced %v after its last heartbeat (session %v)", time.Since(activated), c.brokers.timeout)
				}
			})
		})
	}
}

// A fence whose request gives up (its context ends) before the first
// chunk's commit is applied still completes once that chunk commits: the
// rest of the fence is started whatever the request's context. Seen at
// 10,000 partitions and load 55: the early fence of a killed controller's
// broker committed its first chunk in 3.3 s and applied it 7.7 s later,
// past the tracker's 10 s; the other 1,333 leaderships it held stayed
// with the dead broker until the next controller, over a minute later
// (the tracker skips fenced brokers).
func TestFenceContinuesAfterRequestGivesUp(t *testing.T) {
	g := newChunkGateLog(nil)
	g.first = true
	c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log { g.Log = l; return g }, 3, 6000)
	g.arm()
	rctx, rcancel := context.WithCancel(ctx)
	fenced := make(chan error, 1)
	go func() { fenced <- c.FenceBroker(rctx, 2) }()
	<-g.entered // the first chunk is being appended
	rcancel()
	if err := <-fenced; !errors.Is(err, context.Canceled) {
		t.Fatalf("fence: %v, want context.Canceled", err)
	}
	close(g.release)
	if !c.WaitImage(ctx, func(im *metadata.Image) bool { return im.Broker(2).Fenced && !holds(im, 2) }) {
		t.Fatal("the fence stopped after its first chunk")
	}
}

// An AlterPartition batch of more partitions than one chunk is committed
// in writes of at most chunkRecords partitions, each item answered: the
// leaders of a killed broker's followers shrink thousands of ISRs at
// once (3,102 and 3,269 records in one entry each at 10,000 partitions).
func TestAlterPartitionsInChunks(t *testing.T) {
	var log *appendLog
	c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log {
		log = &appendLog{Log: l}
		return log
	}, 3, 7000)
	var items []AlterPartitionItem
	for tp := range c.Image().Topics() {
		for i, p := range tp.Partitions {
			if p.Leader == 1 {
				isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == 2 })
				items = append(items, AlterPartitionItem{TopicID: tp.ID, Partition: int32(i), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr})
			}
		}
	}
	if len(items) <= chunkRecords {
		t.Fatalf("setup: %d items, want more than %d", len(items), chunkRecords)
	}
	before := log.count()
	res, err := c.AlterPartitions(ctx, 1, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || slices.Contains(r.ISR, 2) || r.PartitionEpoch != items[i].PartitionEpoch+1 {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	appends := log.since(before)
	for _, recs := range appends {
		if len(recs) > chunkRecords {
			t.Fatalf("one append of %d records, want at most %d", len(recs), chunkRecords)
		}
	}
	im := c.Image()
	for _, it := range items {
		if p := im.TopicByID(it.TopicID).Partitions[it.Partition]; slices.Contains(p.ISR, 2) {
			t.Fatalf("partition %d: ISR %v", it.Partition, p.ISR)
		}
	}
}

// leaderLog reports another quorum leader than the wrapped log once
// deposed is set, as a quorum leader that stepped down does at once while
// the change reaches its listeners only after the commits before it.
type leaderLog struct {
	quorum.Log
	deposed atomic.Bool
}

func (l *leaderLog) Leader() quorum.Leadership {
	if l.deposed.Load() {
		return quorum.Leadership{Epoch: 9, LeaderID: 3}
	}
	return l.Log.Leader()
}

// A controller whose quorum no longer names it the leader is not active,
// though the leadership change has not reached it yet (its listener busy
// applying commits: 13-30 s at 10,000 partitions and load 55): it answers
// no heartbeat, so its own broker's go to the new controller (Leader),
// and its session checks fence nobody. Before, it answered its own
// broker's heartbeats, the new controller heard none and fenced that live
// broker after broker.session.timeout.ms, and a CreateTopics of
// replication factor 3 failed with INVALID_REPLICATION_FACTOR.
func TestDeposedControllerNotActive(t *testing.T) {
	ll := &leaderLog{}
	c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log { ll.Log = l; return ll })
	longSessions(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	epochs := registerBrokers(t, ctx, c, 2)
	ll.deposed.Store(true)
	if c.Active() || c.Leader() != 3 {
		t.Fatalf("deposed: active %v, leader %d", c.Active(), c.Leader())
	}
	if _, _, err := c.Heartbeat(ctx, 1, epochs[1], false, nil); !errors.Is(err, ErrNotController) {
		t.Fatalf("heartbeat to a deposed controller: %v, want ErrNotController", err)
	}
	c.brokers.check(ctx, time.Now().Add(2*c.brokers.timeout))
	if im := c.Image(); im.Broker(1).Fenced || im.Broker(2).Fenced {
		t.Fatal("a deposed controller fenced a broker")
	}
	ll.deposed.Store(false)
	if _, _, err := c.Heartbeat(ctx, 1, epochs[1], false, nil); err != nil {
		t.Fatalf("heartbeat once leading again: %v", err)
	}
}

// stepLog holds back, while armed, every append of more than one record
// (the chunks of a fence): each sends on entered, then waits for a value
// on release.
type stepLog struct {
	quorum.Log
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (l *stepLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	if l.armed.Load() && len(recs) > 1 {
		l.entered <- struct{}{}
		<-l.release
	}
	return l.Log.Append(ctx, recs)
}

// Every node of a cluster stopped at once, the active controller's own
// broker's controlled shutdown in chunks: another broker whose controlled
// shutdown has nothing left to move is answered only once every chunk of
// the controller's own committed. Before, it was answered with the first
// chunk (its barrier), before the next was posted; its node stopped, and
// with it the quorum's majority, so the next chunk never committed and
// the last node waited out its 5 s controlled-shutdown timeout
// ("controlled shutdown did not finish": 3 nodes of 3,000 partitions
// stopped together).
func TestShutdownWaitsForOwnShutdownChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl := &stepLog{entered: make(chan struct{}), release: make(chan struct{})}
		c, ctx := fenceSetup(t, func(l quorum.Log) quorum.Log { sl.Log = l; return sl }, 3, 3000)
		epochs := map[int32]int64{}
		for _, id := range []int32{1, 2, 3} {
			epochs[id] = c.Image().Broker(id).Epoch
		}
		if _, should, err := c.Heartbeat(ctx, 2, epochs[2], true, nil); err != nil || !should {
			t.Fatalf("broker 2's controlled shutdown: should shut down %v, %v", should, err)
		}
		// Broker 1 is the controller's own: its moves out of 3,000 ISRs
		// take two chunks.
		sl.armed.Store(true)
		var wg sync.WaitGroup
		var ownErr error
		wg.Go(func() { _, _, ownErr = c.Heartbeat(ctx, 1, epochs[1], true, nil) })
		<-sl.entered // the first chunk
		answered := make(chan error, 1)
		wg.Go(func() {
			_, should, err := c.Heartbeat(ctx, 3, epochs[3], true, nil)
			if err == nil && !should {
				err = errors.New("answered without shouldShutdown")
			}
			answered <- err
		})
		synctest.Wait()
		sl.release <- struct{}{}
		<-sl.entered // the second chunk
		synctest.Wait()
		early := false
		select {
		case err := <-answered:
			// Errorf, not Fatalf: the held chunk must go on.
			t.Errorf("broker 3's controlled shutdown answered (err %v) while a chunk of broker 1's was uncommitted", err)
			early = true
		default:
		}
		sl.armed.Store(false)
		sl.release <- struct{}{}
		if !early {
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if ownErr != nil {
			t.Fatal(ownErr)
		}
		if holds(c.Image(), 1) {
			t.Fatal("broker 1 still leads or shares an ISR after its controlled shutdown")
		}
	})
}
