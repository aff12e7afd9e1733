package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// appendLog records the number of records of every Append.
type appendLog struct {
	quorum.Log
	mu      sync.Mutex
	appends [][]metadata.Record
}

func (l *appendLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	l.mu.Lock()
	l.appends = append(l.appends, recs)
	l.mu.Unlock()
	return l.Log.Append(ctx, recs)
}

// since returns the appends from the n-th on.
func (l *appendLog) since(n int) [][]metadata.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.appends[n:])
}

func (l *appendLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.appends)
}

// longSessions gives c's brokers sessions of an hour: on a loaded
// machine a test can take longer than broker.session.timeout.ms (9 s),
// and the tracker would fence the brokers it registered.
func longSessions(c *Controller) {
	c.brokers.mu.Lock()
	c.brokers.timeout = time.Hour
	c.brokers.mu.Unlock()
}

// spreadTopics creates topics of 100 partitions, replicas 1, 2, 3 in
// turn as leaders (a third each), until n partitions.
func spreadTopics(t *testing.T, ctx context.Context, c *Controller, n int) {
	t.Helper()
	for i := 0; i*100 < n; i++ {
		var as [][]int32
		for p := range 100 {
			l := int32(p%3) + 1
			as = append(as, []int32{l, l%3 + 1, (l+1)%3 + 1})
		}
		errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: fmt.Sprintf("t%d", i), Assignments: as}}, false)
		if err != nil || errs[0] != nil {
			t.Fatalf("create: %v %v", err, errs)
		}
	}
}

// checkChunkedFence checks that the appends of a fence of broker id are
// chunks of at most chunkRecords partition records, every leadership
// move before the first ISR-only removal, and that the image holds the
// whole fence.
func checkChunkedFence(t *testing.T, c *Controller, appends [][]metadata.Record, id int32, ledBefore int) {
	t.Helper()
	parts, moves, leftLeading := 0, 0, false
	for _, recs := range appends {
		n := 0
		for _, r := range recs {
			p, ok := r.(metadata.PartitionRecord)
			if !ok {
				continue
			}
			n++
			parts++
			if p.Leader != id && p.LeaderEpoch > 0 { // a move (created at epoch 0)
				if leftLeading {
					t.Fatalf("leadership of %v moved after an ISR-only removal", p)
				}
				moves++
			} else {
				leftLeading = true
			}
		}
		if n > chunkRecords {
			t.Fatalf("one append of %d partition records, want at most %d", n, chunkRecords)
		}
	}
	if moves != ledBefore {
		t.Fatalf("%d leaderships moved, broker %d led %d", moves, id, ledBefore)
	}
	if len(appends) < 2 {
		t.Fatalf("%d appends for %d partition records", len(appends), parts)
	}
	im := c.Image()
	if b := im.Broker(id); !b.Fenced {
		t.Fatalf("broker %d not fenced", id)
	}
	for tp := range im.Topics() {
		for i, p := range tp.Partitions {
			if p.Leader == id || slices.Contains(p.ISR, id) || p.Leader < 0 {
				t.Fatalf("%s-%d after the fence of %d: leader %d, ISR %v", tp.Name, i, id, p.Leader, p.ISR)
			}
		}
	}
}

// A broker's fence in a cluster of thousands of partitions is committed
// in chunks of at most chunkRecords partitions, the leaderships first,
// as well after its session expired as in a controlled shutdown: one
// entry of every partition (30,000 records at 30,000 partitions) held the
// quorum leader and every metadata listener for seconds; at 5,000
// partitions it was one append of 5,001 records.
func TestFenceInChunks(t *testing.T) {
	for _, how := range []string{"session", "controlled shutdown"} {
		t.Run(how, func(t *testing.T) {
			var log *appendLog
			c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log {
				log = &appendLog{Log: l}
				return log
			})
			longSessions(c)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			epochs := registerBrokers(t, ctx, c, 3)
			spreadTopics(t, ctx, c, 5000)
			led := 0
			for tp := range c.Image().Topics() {
				for _, p := range tp.Partitions {
					if p.Leader == 2 {
						led++
					}
				}
			}
			before := log.count()
			switch how {
			case "session":
				if err := c.FenceBroker(ctx, 2); err != nil {
					t.Fatal(err)
				}
			default:
				fenced, should, err := c.Heartbeat(ctx, 2, epochs[2], true, nil)
				if err != nil || !fenced || !should {
					t.Fatalf("controlled shutdown: fenced %v, should shut down %v, %v", fenced, should, err)
				}
			}
			checkChunkedFence(t, c, log.since(before), 2, led)
		})
	}
}

// The session tracker does not fence a broker in controlled shutdown
// that no other live broker could take over from (the last node of a
// cluster stopping, or a single node): its leaderships would move
// nowhere, a write of every partition its node's stop then waited for
// (seen at 20,000 partitions and load 58). A silent broker that is not
// stopping is fenced once its session expired.
func TestSessionTrackerSparesLastBrokerInShutdown(t *testing.T) {
	c := newLocalController(t)
	longSessions(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epochs := registerBrokers(t, ctx, c, 2)
	errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Assignments: [][]int32{{1, 2}, {2, 1}}}}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	// Broker 2 stops first and moves out; broker 1 then stops with no
	// other live broker, keeping its leaderships.
	if _, should, err := c.Heartbeat(ctx, 2, epochs[2], true, nil); err != nil || !should {
		t.Fatalf("shutdown of 2: should shut down %v, %v", should, err)
	}
	fenced, should, err := c.Heartbeat(ctx, 1, epochs[1], true, nil)
	if err != nil || !fenced || !should {
		t.Fatalf("shutdown of 1: fenced %v, should shut down %v, %v", fenced, should, err)
	}
	if b := c.Image().Broker(1); b.Fenced {
		t.Fatal("the last live broker was fenced by its controlled shutdown")
	}
	// Neither heartbeats again: both sessions expire.
	c.brokers.check(ctx, time.Now().Add(2*c.brokers.timeout))
	im := c.Image()
	if im.Broker(1).Fenced {
		t.Fatal("the session tracker fenced broker 1, in controlled shutdown with no other live broker")
	}
	for i, p := range im.Topic("t").Partitions {
		if p.Leader != 1 {
			t.Fatalf("partition %d: leader %d, want 1", i, p.Leader)
		}
	}

	// A broker not in controlled shutdown is fenced when its session
	// expires.
	c2 := newLocalController(t)
	longSessions(c2)
	registerBrokers(t, ctx, c2, 2)
	c2.brokers.seen(1)
	c2.brokers.check(ctx, time.Now().Add(2*c2.brokers.timeout))
	if im := c2.Image(); !im.Broker(1).Fenced || !im.Broker(2).Fenced {
		t.Fatalf("silent brokers not fenced: 1 %v, 2 %v", im.Broker(1).Fenced, im.Broker(2).Fenced)
	}
}

// describedLog reports voter activity as quorum.Raft's Describe does.
type describedLog struct {
	quorum.Log
	mu        sync.Mutex
	lastFetch map[int32]int64 // Unix ms, -1 never in this epoch
}

func (l *describedLog) Describe(context.Context) (quorum.QuorumInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var qi quorum.QuorumInfo
	for _, id := range []int32{1, 2, 3} {
		qi.Voters = append(qi.Voters, quorum.VoterState{ID: id, LogEndOffset: -1, LastFetchTimestamp: l.lastFetch[id], LastCaughtUpTimestamp: -1})
	}
	return qi, nil
}

// A new active controller fences the broker of the former quorum leader
// formerLeaderGrace after its activation when that node has neither
// heartbeated nor answered the new quorum leader (killed with its
// controller: Kafka waits out its whole broker.session.timeout.ms, and
// its partitions stay leaderless that long); it gets a full session when
// it answered either, and before the grace.
func TestFormerLeaderFencedEarly(t *testing.T) {
	// A grace the tracker's own ticker, on the real clock, never reaches:
	// the test calls check with the times it wants.
	const grace = time.Hour
	for _, tc := range []struct {
		name      string
		answered  bool // voter 2 answered the new leader
		heartbeat bool // broker 2 heartbeated since the activation
		at        time.Duration
		fenced    bool
	}{
		{name: "silent", at: grace, fenced: true},
		{name: "before the grace", at: grace / 2},
		{name: "answers the quorum", answered: true, at: grace},
		{name: "heartbeats", heartbeat: true, at: grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log *describedLog
			c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log {
				log = &describedLog{Log: l, lastFetch: map[int32]int64{1: time.Now().UnixMilli(), 2: -1, 3: -1}}
				return log
			})
			if tc.answered {
				log.lastFetch[2] = time.Now().UnixMilli()
			}
			c.brokers.mu.Lock()
			c.brokers.grace, c.brokers.timeout = grace, 2*grace
			c.brokers.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			epochs := registerBrokers(t, ctx, c, 3)
			spreadTopics(t, ctx, c, 300)
			// Node 2 led the quorum; node 1 is elected without it.
			c.onLeaderChange(quorum.Leadership{Epoch: 1, LeaderID: 2})
			c.onLeaderChange(quorum.Leadership{Epoch: 2, LeaderID: 1})
			if !c.Active() {
				t.Fatal("not active")
			}
			if tc.heartbeat {
				if _, _, err := c.Heartbeat(ctx, 2, epochs[2], false, nil); err != nil {
					t.Fatal(err)
				}
			}
			c.brokers.mu.Lock()
			since, former := c.brokers.since, c.brokers.former
			c.brokers.mu.Unlock()
			if former != 2 {
				t.Fatalf("former leader %d, want 2", former)
			}
			c.brokers.check(ctx, since.Add(tc.at))
			im := c.Image()
			if got := im.Broker(2).Fenced; got != tc.fenced {
				t.Fatalf("broker 2 fenced %v, want %v", got, tc.fenced)
			}
			if im.Broker(1).Fenced || im.Broker(3).Fenced {
				t.Fatal("another broker was fenced")
			}
			for tp := range im.Topics() {
				for i, p := range tp.Partitions {
					if tc.fenced && (p.Leader == 2 || slices.Contains(p.ISR, 2)) {
						t.Fatalf("%s-%d: leader %d, ISR %v after the fence of 2", tp.Name, i, p.Leader, p.ISR)
					}
				}
			}
		})
	}
}

// BenchmarkFence computes a broker's fence over an image of 30,000
// partitions of replication factor 3 on 3 brokers (it leads 10,000 and
// is in every ISR): all at once (fenceRecords, one write) and in chunks
// of chunkRecords, each applied to the image before the next is computed
// (as the loop does, writeChunks); both apply their records to the image
// once, as the loop does for its speculative image. The controller's
// loop does this work.
func BenchmarkFence(b *testing.B) {
	node := &config.Node{NodeID: 1}
	c := &Controller{node: node, logger: slog.New(slog.DiscardHandler), shuttingDown: map[int32]bool{}}
	im := metadata.Empty("bench")
	var recs []metadata.Record
	for id := int32(1); id <= 3; id++ {
		recs = append(recs, metadata.RegisterBrokerRecord{BrokerID: id, Epoch: int64(id)})
	}
	for i := range 300 {
		var tid metadata.UUID
		tid[0], tid[1] = byte(i), byte(i>>8)
		recs = append(recs, metadata.TopicRecord{Name: fmt.Sprintf("t%d", i), ID: tid})
		for p := range int32(100) {
			l := p%3 + 1
			rs := []int32{l, l%3 + 1, (l+1)%3 + 1}
			recs = append(recs, metadata.PartitionRecord{TopicID: tid, Partition: p, Replicas: rs, ISR: rs, Leader: l})
		}
	}
	im = im.Apply(0, recs)
	b.Run("one write", func(b *testing.B) {
		for b.Loop() {
			recs := c.fenceRecords(im, 2)
			if n := len(recs); n != 30001 {
				b.Fatalf("%d records", n)
			}
			im.Apply(im.Offset+1, recs)
		}
	})
	b.Run("chunks", func(b *testing.B) {
		for b.Loop() {
			cur, n := im, 0
			for {
				recs := c.fenceChunk(cur, 2, chunkRecords)
				if len(recs) == 0 {
					break
				}
				n += len(recs)
				cur = cur.Apply(cur.Offset+1, recs)
			}
			if n != 30001 {
				b.Fatalf("%d records", n)
			}
		}
	})
}

// A fence a former active controller left half done (it lost the
// leadership between two chunks: the broker fenced, still in ISRs and
// leading) is completed by the next active controller.
func TestActivationCompletesHalfDoneFence(t *testing.T) {
	c, ctx := fenceSetup(t, nil, 3, 300)
	halfFence(t, ctx, c, 2)
	half := func(im *metadata.Image) bool {
		for tp := range im.Topics() {
			for _, p := range tp.Partitions {
				if p.Leader == 2 || slices.Contains(p.ISR, 2) {
					return true
				}
			}
		}
		return false
	}
	if im := c.Image(); !im.Broker(2).Fenced || !half(im) {
		t.Fatalf("setup: broker 2 fenced %v, still in ISRs %v", im.Broker(2).Fenced, half(im))
	}
	c.onLeaderChange(quorum.Leadership{Epoch: 1, LeaderID: 3})
	c.onLeaderChange(quorum.Leadership{Epoch: 2, LeaderID: 1})
	if !c.WaitImage(ctx, func(im *metadata.Image) bool { return !half(im) }) {
		t.Fatal("the new active controller did not complete the fence of broker 2")
	}
}
