package replica

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/testutil"
)

// noController fails every AlterPartition, like a controller that finds
// the new ISR ineligible.
type noController struct{}

func (noController) AlterPartition(context.Context, [16]byte, int32, int32, int32, []int32) ([]int32, int32, error) {
	return nil, 0, errors.New("INELIGIBLE_REPLICA")
}

// newTestManager hosts partitions of broker 1 in a temporary log dir.
func newTestManager(t testing.TB) *Manager {
	t.Helper()
	m, _ := newFSManager(t, t.TempDir(), nil, 0)
	return m
}

// newFSManager is a Manager of broker 1 with workers creators (0: the
// default) over one log dir, dir, on fsys (nil: the OS's), closed at the
// end of t.
func newFSManager(t testing.TB, dir string, fsys vfs.FS, workers int) (*Manager, *storage.Manager) {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "replica-test", FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(logs, Options{NodeID: 1, Controller: noController{}, LeaderAddr: func(int32) (string, bool) { return "", false }, CreateWorkers: workers})
	t.Cleanup(func() {
		m.Close()
		logs.Close()
	})
	return m, logs
}

// batch is a batch of n records at base offset base written by epoch.
func batch(t *testing.T, base int64, epoch int32, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := record.Build(record.Spec{BaseOffset: base, PartitionLeaderEpoch: epoch, ProducerID: record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, BaseTimestamp: 1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var testTP = TopicPartition{Topic: "t", Partition: 0}

// follow hosts testTP on broker 1 as a follower of broker 2 at epoch and
// appends the batches as replicated from it, with leaderHW.
func follow(t *testing.T, m *Manager, epoch int32, leaderHW int64, batches ...[]byte) *Partition {
	t.Helper()
	p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 2, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := p.appendAsFollower(b, leaderHW); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// A follower joins the ISR only once it has every record of the leader's
// current epoch start, not just the high-watermark: a new leader's HW may
// lag records that were committed under the previous leader, and a
// replica without them must not become electable (Kafka's
// leaderEpochStartOffset check).
func TestISRExpandWaitsForLeaderEpochStart(t *testing.T) {
	m := newTestManager(t)
	// Broker 1 replicated offsets 0-9 from leader 2, whose HW it last
	// heard as 5.
	p := follow(t, m, 0, 5, batch(t, 0, 0, 10))
	// Broker 2 fails; broker 1 leads epoch 1 with ISR {1, 2}; broker 3
	// was out of the ISR.
	p.makeLeader(State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, time.Now())
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("HW %d after the leader change, want 5", hw)
	}
	now := time.Now()
	if isr := p.UpdateFollower(3, 7, 0, now); isr != nil {
		t.Fatalf("replica 3 at offset 7, below the epoch start 10, proposed for the ISR: %v", isr)
	}
	isr := p.UpdateFollower(3, 10, 0, now)
	if !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("replica 3 at the epoch start: ISR proposal %v, want [1 2 3]", isr)
	}
}

// After a failed AlterPartition the leader waits before asking again,
// rather than asking on every follower fetch.
func TestISRChangeBacksOffAfterFailure(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 0, 0)
	p.makeLeader(State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, time.Now())
	now := time.Now()
	if isr := p.UpdateFollower(3, 0, 0, now); isr == nil {
		t.Fatal("caught-up replica 3 not proposed")
	}
	_, gen := p.isrState()
	p.isrUpdated(gen, nil, 0, false)
	if isr := p.UpdateFollower(3, 0, 0, time.Now()); isr != nil {
		t.Fatalf("proposed again at once after a failure: %v", isr)
	}
	if isr := p.UpdateFollower(3, 0, 0, time.Now().Add(isrRetryBackoff+time.Millisecond)); isr == nil {
		t.Fatal("not proposed again after the backoff")
	}
	// Shrinking backs off too, twice as long after a second failure.
	p.isrUpdated(gen, nil, 0, false)
	later := time.Now().Add(time.Hour)
	if isr := p.laggingFollowers(time.Now(), time.Millisecond); isr != nil {
		t.Fatalf("shrink proposed at once after a failure: %v", isr)
	}
	if isr := p.laggingFollowers(later, time.Millisecond); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("shrink after the backoff: %v, want [1]", isr)
	}
}

// A follower told that it diverged truncates to the end of the diverging
// epoch in its own log when that comes first (KIP-595's follower side;
// Kafka's min of both end offsets), or to the end of its largest earlier
// epoch when it never had the leader's epoch, and so always makes
// progress.
func TestFollowerTruncatesToOwnEpochEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		epoch    int32 // the leader's diverging epoch
		end      int64 // and its end offset there
		wantLEO  int64
		batches  func(t *testing.T) [][]byte
		leaderHW int64
	}{
		{
			// We have epochs 0 [0,10) and 2 [10,15); the leader knows
			// epoch 1 (not ours) ending at 20: keep what epoch 0 wrote.
			name: "epoch unknown here", epoch: 1, end: 20, wantLEO: 10,
			batches: func(t *testing.T) [][]byte { return [][]byte{batch(t, 0, 0, 10), batch(t, 10, 2, 5)} },
		},
		{
			// Epoch 0 is [0,10) here and [0,8) at the leader.
			name: "leader's epoch ends first", epoch: 0, end: 8, wantLEO: 8,
			batches: func(t *testing.T) [][]byte { return [][]byte{batch(t, 0, 0, 8), batch(t, 8, 0, 2), batch(t, 10, 2, 5)} },
		},
		{
			// Epoch 0 is [0,10) here and [0,12) at the leader, which
			// never had our epoch 2.
			name: "own epoch ends first", epoch: 0, end: 12, wantLEO: 10,
			batches: func(t *testing.T) [][]byte { return [][]byte{batch(t, 0, 0, 10), batch(t, 10, 2, 5)} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			p := follow(t, m, 3, 0, tc.batches(t)...)
			if leo := p.LogEndOffset(); leo != 15 {
				t.Fatalf("log end %d before, want 15", leo)
			}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = tc.epoch, tc.end
			f := &fetcher{m: m, leader: 2}
			if err := f.apply(p, &rp); err != nil {
				t.Fatal(err)
			}
			if leo := p.LogEndOffset(); leo != tc.wantLEO {
				t.Fatalf("log end %d after truncation, want %d", leo, tc.wantLEO)
			}
		})
	}
}

// TestFollowerDropsUnwrittenEpochAtLogEnd: a replica that led epoch 2
// (its start assigned at the log end, 10) and wrote nothing in it before
// another leader took over follows a leader that never had epoch 2. The
// leader answers its fetch (last fetched epoch 2) with the diverging epoch
// 0 ending at 10, its log end: nothing to remove, but epoch 2 must leave
// the history, or every fetch names it again and the follower spins,
// fetching and "truncating" in a loop (found by hand: millions of log
// lines a minute after kill -9 restarts of a 3-node cluster). Kafka's
// UnifiedLog.truncateTo truncates the epoch cache from the log end.
func TestFollowerDropsUnwrittenEpochAtLogEnd(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 3, 0, batch(t, 0, 0, 10))
	if !p.log.AssignEpoch(2) {
		t.Fatal("AssignEpoch(2): want true")
	}
	if fp := paramsOf(p); fp.lastEp != 2 || fp.offset != 10 {
		t.Fatalf("fetch params before: last epoch %d offset %d, want 2 and 10", fp.lastEp, fp.offset)
	}
	w := NewSessionWatch()
	p.Watch(w)
	defer p.Unwatch(w)
	w.Drain(nil)
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 0, 10
	f := &fetcher{m: m, leader: 2}
	if err := f.apply(p, &rp); err != nil {
		t.Fatal(err)
	}
	if fp := paramsOf(p); fp.lastEp != 0 || fp.offset != 10 {
		t.Fatalf("fetch params after the diverging epoch: last epoch %d offset %d, want 0 and 10 (the leader's history)", fp.lastEp, fp.offset)
	}
	// The incremental fetch session sends the new parameters at once,
	// not at its next sweep of every partition (30 s of spinning).
	if marked := w.Drain(nil); !slices.Contains(marked, p) {
		t.Fatalf("partition not marked in the fetch session's watch after the truncation (marked %v)", marked)
	}
}

// Metadata that re-applies the same partition state leaves an AlterPartition
// in flight alone (one request per partition, not one per image); new
// metadata for the partition makes the answer of the one in flight stale
// and lets the next go at once; failures in a row back off longer.
func TestISRChangeAgainstLatestMetadata(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 0, 0)
	st := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}
	p.makeLeader(st, time.Now())
	if isr := p.UpdateFollower(3, 0, 0, time.Now()); isr == nil {
		t.Fatal("caught-up replica 3 not proposed")
	}
	_, gen := p.isrState()
	p.makeLeader(st, time.Now()) // the same state again
	if isr := p.UpdateFollower(3, 0, 0, time.Now()); isr != nil {
		t.Fatalf("proposed again while one is in flight: %v", isr)
	}
	st.PartitionEpoch = 2 // another change committed meanwhile
	p.makeLeader(st, time.Now())
	if stale, _ := p.isrUpdated(gen, nil, 0, false); !stale {
		t.Fatal("the answer for the old partition epoch is not stale")
	}
	if isr := p.UpdateFollower(3, 0, 0, time.Now()); isr == nil {
		t.Fatal("not proposed at once with the new metadata")
	}
	_, gen = p.isrState()
	if _, n := p.isrUpdated(gen, nil, 0, false); n != 1 {
		t.Fatalf("failures %d, want 1", n)
	}
	if isr := p.UpdateFollower(3, 0, 0, time.Now().Add(isrRetryBackoff+time.Millisecond)); isr == nil {
		t.Fatal("not proposed again after the backoff")
	}
	if _, n := p.isrUpdated(gen, nil, 0, false); n != 2 {
		t.Fatalf("failures %d, want 2", n)
	}
	if isr := p.UpdateFollower(3, 0, 0, time.Now().Add(isrRetryBackoff+time.Millisecond)); isr != nil {
		t.Fatal("second failure did not double the backoff")
	}
	if isr := p.UpdateFollower(3, 0, 0, time.Now().Add(2*isrRetryBackoff+time.Millisecond)); isr == nil {
		t.Fatal("not proposed after the doubled backoff")
	}
}

// metadataFirst commits every AlterPartition and applies the new ISR to
// the partition through the manager before answering, as a broker sees it
// when the metadata record carrying the change arrives before the
// controller's response.
type metadataFirst struct {
	m  *Manager
	tp TopicPartition
}

func (c metadataFirst) AlterPartition(_ context.Context, id [16]byte, _ int32, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	st := State{Leader: 1, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch + 1, Replicas: []int32{1, 2, 3}, ISR: isr}
	if _, err := c.m.Apply(c.tp, id, st, LogConfig{}); err != nil {
		return nil, 0, err
	}
	return isr, partitionEpoch + 1, nil
}

// An ISR change this broker asked for counts in IsrExpands/IsrShrinks even
// when its metadata arrived before the controller's answer (which is then
// stale): the metric had stayed 0 in a 3-node cluster whose follower
// rejoined its ISRs.
func TestISRChangeCountedWhenMetadataArrivesFirst(t *testing.T) {
	m := newTestManager(t)
	m.opts.Controller = metadataFirst{m: m, tp: testTP}
	p := follow(t, m, 0, 0)
	p.makeLeader(State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, time.Now())
	isr := p.UpdateFollower(3, 0, 0, time.Now())
	if isr == nil {
		t.Fatal("caught-up replica 3 not proposed")
	}
	m.alterISR(p, isr)
	testutil.WaitFor(t, 10*time.Second, "IsrExpands counted", func() bool { return m.ISRExpands.Load() == 1 })
	if got := p.ISR(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("ISR %v, want [1 2 3]", got)
	}
}
