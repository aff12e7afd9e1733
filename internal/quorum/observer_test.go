package quorum

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// errUnreachable is memFetcher's error for a voter that is down or cut.
var errUnreachable = errors.New("voter unreachable")

// memFetcher sends an observer's fetches to the harness's voters in
// memory, encoding and decoding requests and responses as on the wire.
type memFetcher struct {
	h    *harness
	self int32

	// corrupt is how many of the next responses holding record batches
	// get the last byte of their last batch flipped (its CRC-32C no
	// longer matches), as a NIC or a proxy might damage them.
	corrupt atomic.Int32

	mu      sync.Mutex // guards offsets
	offsets []int64    // fetch offsets sent, in order
}

func (f *memFetcher) Fetch(ctx context.Context, voter config.Voter, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	r := f.h.raft(voter.ID)
	if r == nil || f.h.f.isCut(f.self, voter.ID) {
		return nil, fmt.Errorf("%w: %d", errUnreachable, voter.ID)
	}
	got := kmsg.NewPtrFetchRequest()
	got.SetVersion(req.GetVersion())
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.offsets = append(f.offsets, got.Topics[0].Partitions[0].FetchOffset)
	f.mu.Unlock()
	resp := r.HandleFetch(ctx, got)
	out := kmsg.NewPtrFetchResponse()
	out.SetVersion(resp.GetVersion())
	if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
		return nil, err
	}
	if rb := out.Topics[0].Partitions[0].RecordBatches; len(rb) > 0 && f.corrupt.Add(-1) >= 0 {
		rb[len(rb)-1] ^= 0x40
	}
	return out, ctx.Err()
}

func (f *memFetcher) Close() error { return nil }

func (f *memFetcher) sent() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.offsets)
}

// testObserver is an observer of the harness's quorum.
type testObserver struct {
	id    int32
	log   *storage.Log
	o     *Observer
	f     *memFetcher
	rec   *recorder
	unreg func()
}

// openObserverLog opens observer id's metadata log.
func (h *harness) openObserverLog(id int32) *storage.Log {
	h.t.Helper()
	l, err := storage.Open(storage.OpenOptions{
		Dir:    filepath.Join(h.dir, fmt.Sprint("observer", id), MetadataTopic+"-0"),
		Logger: testLogger(h.t),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// startObserver starts observer id on l (nil: its own log) with a recorder
// from offset 0.
func (h *harness) startObserver(id int32, l *storage.Log) *testObserver {
	h.t.Helper()
	return h.startObserverFetching(id, l, &memFetcher{h: h, self: id})
}

// startObserverFetching is startObserver with the fetcher f.
func (h *harness) startObserverFetching(id int32, l *storage.Log, f *memFetcher) *testObserver {
	h.t.Helper()
	if l == nil {
		l = h.openObserverLog(id)
	}
	o, err := OpenObserver(ObserverConfig{
		NodeID:     id,
		Voters:     h.voters,
		Log:        l,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		Fetcher:    f,
		Logger:     testLogger(h.t),
	})
	if err != nil {
		l.Close()
		h.t.Fatal(err)
	}
	to := &testObserver{id: id, log: l, o: o, f: f, rec: &recorder{poke: h.poke}}
	to.unreg = o.Register(0, to.rec.listener())
	h.t.Cleanup(func() { to.stop(h.t) })
	return to
}

func (to *testObserver) stop(t testing.TB) {
	if to.o == nil {
		return
	}
	to.unreg()
	if err := to.o.Close(); err != nil {
		t.Errorf("closing observer %d: %v", to.id, err)
	}
	if err := to.log.Close(); err != nil {
		t.Errorf("closing observer %d's log: %v", to.id, err)
	}
	to.o = nil
}

// hasAll reports whether the observer's listener got every (offset, seq)
// of want.
func (to *testObserver) hasAll(want map[int64]int64) bool {
	commits, _ := to.rec.state()
	for off, seq := range want {
		i, ok := slices.BinarySearchFunc(commits, off, func(c commitRec, o int64) int { return int(c.offset - o) })
		if !ok || len(commits[i].recs) != 1 || commits[i].recs[0] != seqRecord(seq) {
			return false
		}
	}
	return true
}

// sameAsLeader checks that the observer stores the leader's entries below
// the observer's high-watermark (LEADER_CHANGE batches by offset and
// epoch).
func (h *harness) sameAsLeader(to *testObserver, lead int32) {
	h.t.Helper()
	hw := to.o.HighWatermark()
	got := readLog(h.t, to.log, hw)
	want := readLog(h.t, h.nodes[lead].log, hw)
	if !slices.Equal(got, want) {
		h.t.Fatalf("observer log below %d differs from the leader's:\n got %v\nwant %v", hw, got, want)
	}
}

func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		h.startAll()
		obs := h.startObserver(10, nil)
		want := map[int64]int64{}
		h.appendSeqs(want, 1, 10)
		lead := h.waitLeader(nil, 10*time.Second)
		h.waitFor("the observer to get every commit", 10*time.Second, func() bool { return obs.hasAll(want) })
		h.waitFor("the observer to know the leader", 10*time.Second, func() bool {
			_, l := obs.rec.state()
			return l.LeaderID == lead
		})
		h.sameAsLeader(obs, lead)
		if _, err := obs.o.Append(context.Background(), []metadata.Record{seqRecord(99)}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("append on an observer: %v, want ErrNotLeader", err)
		}
		qi, err := h.nodes[lead].r.Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(qi.Observers) != 1 || qi.Observers[0].ID != 10 || qi.Observers[0].LogEndOffset > obs.log.LogEndOffset() || qi.Observers[0].LastFetchTimestamp <= 0 {
			t.Fatalf("leader's observers %+v, want node 10 at or below %d", qi.Observers, obs.log.LogEndOffset())
		}

		// The leader stops: the observer finds the next one.
		h.stop(lead)
		next := h.waitLeader(nil, 10*time.Second)
		h.appendSeqs(want, 11, 20)
		h.waitFor("the observer to follow the new leader", 10*time.Second, func() bool {
			_, l := obs.rec.state()
			return obs.hasAll(want) && l.LeaderID == next
		})
		h.sameAsLeader(obs, next)
		h.start(lead)

		// The observer restarts: it keeps its log, fetches from its end and
		// delivers the whole committed log once the leader answers.
		end := obs.log.LogEndOffset()
		obs.stop(t)
		h.appendSeqs(want, 21, 25)
		obs = h.startObserver(10, h.openObserverLog(10))
		if err := obs.o.WaitCaughtUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		for off := range want {
			last = max(last, off)
		}
		if hw := obs.o.HighWatermark(); hw <= last {
			t.Fatalf("caught-up observer's high-watermark %d, want past %d", hw, last)
		}
		h.waitFor("the restarted observer to get every commit", 10*time.Second, func() bool { return obs.hasAll(want) })
		if sent := obs.f.sent(); len(sent) == 0 || sent[0] != end {
			t.Fatalf("restarted observer fetched from %v, want %d first", sent, end)
		}
		h.sameAsLeader(obs, h.waitLeader(nil, 10*time.Second))
	})
}

// TestObserverTruncatesDivergentTail: an observer whose log holds a tail
// the leader never had (a former voter's uncommitted entry) truncates it
// to the leader's history.
func TestObserverTruncatesDivergentTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		h.startAll()
		want := map[int64]int64{}
		h.appendSeqs(want, 1, 5)
		lead := h.waitLeader(nil, 10*time.Second)
		h.waitCommitted(want, 10*time.Second)
		hw := h.nodes[lead].r.HighWatermark()

		l := h.openObserverLog(10)
		err := readBatches(h.nodes[lead].log, 0, hw, func(b []byte, _ record.Header) error {
			_, err := l.AppendAsFollower(append([]byte(nil), b...))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		stray, err := encodeEntry([]metadata.Record{seqRecord(1000)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		record.SetBaseOffset(stray, hw)
		record.SetPartitionLeaderEpoch(stray, 99)
		if _, err := l.AppendAsFollower(stray); err != nil {
			t.Fatal(err)
		}

		obs := h.startObserver(10, l)
		want[h.mustAppend(nil, 6)] = 6
		h.waitFor("the observer to replace its stray tail", 10*time.Second, func() bool { return obs.hasAll(want) })
		h.sameAsLeader(obs, h.waitLeader(nil, 10*time.Second))
		commits, _ := obs.rec.state()
		for _, c := range commits {
			if c.recs[0] == seqRecord(1000) {
				t.Fatalf("the stray entry was delivered at offset %d", c.offset)
			}
		}
	})
}

// TestObserverRefusesCorruptBatches: fetched metadata batches whose CRC-32C
// does not match are refused whole (the good batches before the damaged
// one too): nothing is stored, the observer backs off and fetches the same
// offset again, and stores the leader's bytes once they arrive undamaged.
func TestObserverRefusesCorruptBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		h.startAll()
		want := map[int64]int64{}
		h.appendSeqs(want, 1, 5)
		h.waitCommitted(want, 10*time.Second)
		const damaged = 3
		f := &memFetcher{h: h, self: 10}
		f.corrupt.Store(damaged)
		obs := h.startObserverFetching(10, nil, f)
		h.waitFor("the observer to get every commit", 10*time.Second, func() bool { return obs.hasAll(want) })
		h.sameAsLeader(obs, h.waitLeader(nil, 10*time.Second))
		if n := f.corrupt.Load(); n >= 0 {
			t.Fatalf("%d damaged responses left to send", n+1)
		}
		// Each damaged response held the batches from the fetch offset on
		// (the first from offset 0): the fetch after it asks for the same
		// offset again.
		sent := f.sent()
		if len(sent) < damaged+1 {
			t.Fatalf("fetch offsets %v, want at least %d", sent, damaged+1)
		}
		for i := 1; i <= damaged; i++ {
			if sent[i] != sent[0] {
				t.Fatalf("fetch offsets %v: a damaged response moved the fetch offset (batches stored)", sent)
			}
		}
	})
}

// fetchReq is a v12 fetch of the metadata partition.
func fetchReq(offset int64, lastEpoch, leaderEpoch int32, wait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = 10
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = MetadataTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.LastFetchedEpoch, rp.CurrentLeaderEpoch = offset, lastEpoch, leaderEpoch
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestHandleFetchErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		h.startAll()
		h.mustAppend(nil, 1)
		lead := h.waitLeader(nil, 10*time.Second)
		_, ld := h.nodes[lead].rec.state()
		epoch := int32(ld.Epoch)
		follower := others(h.ids, lead)[0]
		hw := h.nodes[lead].r.HighWatermark()
		ctx := context.Background()

		part := func(resp *kmsg.FetchResponse) kmsg.FetchResponseTopicPartition {
			t.Helper()
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("response %+v", resp)
			}
			return resp.Topics[0].Partitions[0]
		}
		p := part(h.nodes[follower].r.HandleFetch(ctx, fetchReq(0, -1, -1, 0)))
		if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != lead || p.CurrentLeader.LeaderEpoch != epoch {
			t.Fatalf("follower answered %v, current leader %+v; want NOT_LEADER_OR_FOLLOWER naming %d in %d", kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader, lead, epoch)
		}
		for _, c := range []struct {
			epoch int32
			code  int16
		}{{epoch - 1, kerr.FencedLeaderEpoch.Code}, {epoch + 1, kerr.UnknownLeaderEpoch.Code}, {epoch, 0}, {-1, 0}} {
			p = part(h.nodes[lead].r.HandleFetch(ctx, fetchReq(0, -1, c.epoch, 0)))
			if p.ErrorCode != c.code {
				t.Errorf("current leader epoch %d: %v, want %v", c.epoch, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(c.code))
			}
			if c.code == 0 && (len(p.RecordBatches) == 0 || p.HighWatermark != hw) {
				t.Errorf("current leader epoch %d: %d bytes, high-watermark %d; want batches up to %d", c.epoch, len(p.RecordBatches), p.HighWatermark, hw)
			}
		}
		// A last fetched epoch the leader never had diverges.
		p = part(h.nodes[lead].r.HandleFetch(ctx, fetchReq(hw, epoch+5, -1, 0)))
		if p.DivergingEpoch.Epoch != epoch || p.DivergingEpoch.EndOffset != h.nodes[lead].log.LogEndOffset() {
			t.Fatalf("diverging epoch %+v, want epoch %d ending at %d", p.DivergingEpoch, epoch, h.nodes[lead].log.LogEndOffset())
		}
		// Past the log end.
		p = part(h.nodes[lead].r.HandleFetch(ctx, fetchReq(hw+100, epoch, -1, 0)))
		if p.DivergingEpoch.EndOffset < 0 && p.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("fetch past the end: %v, diverging %+v", kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch)
		}
		// Another partition.
		req := fetchReq(0, -1, -1, 0)
		req.Topics[0].Partitions[0].Partition = 1
		if p = part(h.nodes[lead].r.HandleFetch(ctx, req)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("partition 1: %v", kerr.ErrorForCode(p.ErrorCode))
		}

		// At the high-watermark the fetch waits for the next commit, up
		// to max wait.
		start := time.Now()
		p = part(h.nodes[lead].r.HandleFetch(ctx, fetchReq(hw, epoch, epoch, 3*time.Second)))
		if d := time.Since(start); len(p.RecordBatches) != 0 || d != 3*time.Second {
			t.Fatalf("idle fetch returned %d bytes after %v, want none after 3s", len(p.RecordBatches), d)
		}
		got := make(chan kmsg.FetchResponseTopicPartition, 1)
		go func() { got <- part(h.nodes[lead].r.HandleFetch(ctx, fetchReq(hw, epoch, epoch, 10*time.Second))) }()
		synctest.Wait()
		off, err := h.appendOn(ctx, lead, 2)
		if err != nil {
			t.Fatal(err)
		}
		p = <-got
		if len(p.RecordBatches) == 0 || p.HighWatermark <= off {
			t.Fatalf("waiting fetch: %d bytes, high-watermark %d, want the batch at %d", len(p.RecordBatches), p.HighWatermark, off)
		}
	})
}

func TestLocalFetchAndDescribe(t *testing.T) {
	m, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := OpenLocal(m)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(context.Background(), []metadata.Record{seqRecord(1), seqRecord(2)}); err != nil {
		t.Fatal(err)
	}
	req := fetchReq(0, -1, -1, 0)
	req.ClusterID = kmsg.StringPtr("other")
	if resp := l.HandleFetch(context.Background(), req); resp.ErrorCode != kerr.InconsistentClusterID.Code {
		t.Fatalf("other cluster: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	req.ClusterID = kmsg.StringPtr("c1")
	resp := l.HandleFetch(context.Background(), req)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 2 || p.CurrentLeader.LeaderID != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch: %v, high-watermark %d, leader %+v, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.CurrentLeader, len(p.RecordBatches))
	}
	qi, err := l.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if qi.LeaderID != 1 || qi.HighWatermark != 2 || len(qi.Voters) != 1 || qi.Voters[0].LogEndOffset != 2 || len(qi.Observers) != 1 || qi.Observers[0].ID != 10 {
		t.Fatalf("describe %+v", qi)
	}
}

func TestObserverWaitCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		obs := h.startObserver(10, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := obs.o.WaitCaughtUp(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("catching up with no voter: %v", err)
		}
		if l := obs.o.Leader(); l.LeaderID != -1 {
			t.Fatalf("leader %+v with no voter running", l)
		}
		h.startAll()
		off := h.mustAppend(nil, 1)
		if err := obs.o.WaitCaughtUp(context.Background()); err != nil {
			t.Fatal(err)
		}
		if hw := obs.o.HighWatermark(); hw <= off {
			t.Fatalf("caught up at %d, before the append at %d", hw, off)
		}
		o := obs.o
		obs.stop(t)
		if err := o.WaitCaughtUp(context.Background()); err != nil {
			t.Fatalf("after close: %v, want nil (it had caught up)", err)
		}
	})
}

// FuzzObserverAppend feeds arbitrary fetched bytes to an observer's log:
// no panic, and whatever is stored is whole, valid batches continuing
// the log.
func FuzzObserverAppend(f *testing.F) {
	b1, _ := encodeEntry([]metadata.Record{seqRecord(1), seqRecord(2)}, 0)
	record.SetPartitionLeaderEpoch(b1, 1)
	b2, _ := encodeEntry([]metadata.Record{seqRecord(3)}, 0)
	record.SetBaseOffset(b2, 2)
	record.SetPartitionLeaderEpoch(b2, 1)
	f.Add(append(append([]byte(nil), b1...), b2...), int64(0))
	f.Add(b2, int64(2))
	f.Add(append(append([]byte(nil), b1...), b2[:20]...), int64(0))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, leo int64) {
		if leo != 0 && leo != 2 {
			return
		}
		l, err := storage.Open(storage.OpenOptions{Dir: filepath.Join(t.TempDir(), MetadataTopic+"-0")})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if leo == 2 {
			if _, err := l.AppendAsFollower(append([]byte(nil), b1...)); err != nil {
				t.Fatal(err)
			}
		}
		o := &Observer{cfg: ObserverConfig{Log: l}}
		_ = o.append(data, leo)
		next := int64(0)
		err = readBatches(l, 0, l.LogEndOffset(), func(b []byte, h record.Header) error {
			if h.BaseOffset != next {
				t.Fatalf("batch at %d, want %d", h.BaseOffset, next)
			}
			if _, err := record.Validate(b); err != nil {
				t.Fatalf("stored an invalid batch: %v", err)
			}
			next = h.NextOffset()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
