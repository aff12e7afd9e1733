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

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsahq/samsa/internal/metadata"
)

// others is ids without id.
func others(ids []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(x int32) bool { return x == id })
}

// sameLogs checks that the running nodes hold the same entries below the
// lowest high-watermark (LEADER_CHANGE batches compare by offset and epoch:
// each voter writes its own) and returns that high-watermark.
func (h *harness) sameLogs() int64 {
	h.t.Helper()
	hw := int64(-1)
	for _, id := range h.running(nil) {
		if w := h.nodes[id].r.HighWatermark(); hw < 0 || w < hw {
			hw = w
		}
	}
	var ref []storedEntry
	for i, id := range h.running(nil) {
		got := readLog(h.t, h.nodes[id].log, hw)
		if i == 0 {
			ref = got
			continue
		}
		if !slices.Equal(got, ref) {
			h.t.Fatalf("node %d log below %d differs from node %d's", id, hw, h.running(nil)[0])
		}
	}
	if end := ref[len(ref)-1].next; end != hw {
		h.t.Fatalf("entries below high-watermark %d end at %d", hw, end)
	}
	return hw
}

func TestRaftElectsAndCommits(t *testing.T) {
	h := newHarness(t, 3, false)
	start := time.Now()
	h.startAll()
	lead := h.waitLeader(nil, 10*time.Second)
	t.Logf("node %d elected in %v", lead, time.Since(start))

	want := map[int64]int64{}
	prev := int64(-1)
	for seq := int64(1); seq <= 20; seq++ {
		off := h.mustAppend(nil, seq)
		if off <= prev {
			t.Fatalf("offset %d after %d", off, prev)
		}
		prev, want[off] = off, seq
	}
	h.waitCommitted(want, 10*time.Second)
	if hw := h.nodes[lead].r.HighWatermark(); hw <= prev {
		t.Fatalf("leader high-watermark %d, last append at %d", hw, prev)
	}

	// One Append of several records is one batch, an offset per record.
	lead = h.waitLeader(nil, 10*time.Second)
	many := []metadata.Record{seqRecord(21), seqRecord(22), seqRecord(23)}
	off, err := h.nodes[lead].r.Append(context.Background(), many)
	if err != nil {
		t.Fatal(err)
	}
	next := h.mustAppend(nil, 24)
	if next < off+3 {
		t.Fatalf("batch of 3 at %d, next append at %d", off, next)
	}
	prev = next
	h.waitFor("the batch on every node", 10*time.Second, func() bool {
		for id := range h.nodes {
			commits, _ := h.nodes[id].rec.state()
			i := slices.IndexFunc(commits, func(c commitRec) bool { return c.offset == off })
			if i < 0 || !slices.Equal(commits[i].recs, many) || !h.hasCommit(id, next, 24) {
				return false
			}
		}
		return true
	})

	follower := others(h.ids, lead)[0]
	if _, err := h.appendOn(context.Background(), follower, 99); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on follower %d: %v, want ErrNotLeader", follower, err)
	}
	if l := h.nodes[follower].r.Leader(); l.LeaderID != lead {
		t.Fatalf("follower knows leader %+v, want %d", l, lead)
	}
	qi, err := h.nodes[lead].r.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if qi.LeaderID != lead || len(qi.Voters) != 3 || qi.HighWatermark <= prev {
		t.Fatalf("describe: %+v", qi)
	}
	caughtUp := 0
	for _, v := range qi.Voters {
		if v.LogEndOffset > prev {
			caughtUp++
		}
		if v.ID == lead && v.LogEndOffset <= prev {
			t.Fatalf("leader's log end offset %d, last append at %d", v.LogEndOffset, prev)
		}
	}
	if caughtUp < 2 {
		t.Fatalf("describe: %d voters past the last append, want a majority: %+v", caughtUp, qi)
	}
	// Every voter answered the leader's appends and heartbeats: each has
	// fetched and caught up (the leader: now).
	h.waitFor("fetch and caught-up times of every voter", 10*time.Second, func() bool {
		qi, err := h.nodes[lead].r.Describe(context.Background())
		if err != nil {
			return false
		}
		now := time.Now().UnixMilli()
		for _, v := range qi.Voters {
			if v.LastFetchTimestamp <= 0 || v.LastCaughtUpTimestamp <= 0 || v.LastFetchTimestamp > now || v.LastCaughtUpTimestamp > v.LastFetchTimestamp {
				return false
			}
		}
		return true
	})
	h.sameLogs()
}

// TestReplicaTimes follows Kafka's ReplicaState.updateFollowerState: a
// fetch at the leader's log end catches the replica up now; one that
// reaches the end the leader had at the previous fetch, then; one short
// of both leaves the caught-up time as it was.
func TestReplicaTimes(t *testing.T) {
	rt := newReplicaTimes()
	step := func(now, offset, leaderEnd, wantFetch, wantCaughtUp int64) {
		t.Helper()
		rt.fetched(now, offset, leaderEnd)
		if rt.lastFetch != wantFetch || rt.lastCaughtUp != wantCaughtUp {
			t.Fatalf("fetch at %d of offset %d, leader end %d: last fetch %d, caught up %d; want %d, %d",
				now, offset, leaderEnd, rt.lastFetch, rt.lastCaughtUp, wantFetch, wantCaughtUp)
		}
	}
	step(100, 0, 10, 100, -1)   // behind, no earlier fetch
	step(200, 5, 20, 200, -1)   // behind the end at 100 (10)
	step(300, 20, 30, 300, 200) // reached the end at 200 (20): caught up then
	step(400, 30, 30, 400, 400) // at the end now
	step(350, 25, 40, 400, 400) // a late answer moves neither time back
	step(500, 45, 45, 500, 500)
}

func TestRaftFailoverAndCatchUp(t *testing.T) {
	h := newHarness(t, 3, false)
	h.startAll()
	want := map[int64]int64{}
	h.appendSeqs(want, 1, 10)
	old := h.waitLeader(nil, 10*time.Second)
	_, oldLeadership := h.nodes[old].rec.state()

	h.stop(old)
	start := time.Now()
	lead := h.waitLeader(nil, 10*time.Second)
	elapsed := time.Since(start)
	t.Logf("node %d stopped, node %d leads after %v", old, lead, elapsed)
	if _, l := h.nodes[lead].rec.state(); lead == old || l.Epoch <= oldLeadership.Epoch {
		t.Fatalf("new leadership %+v after %+v", l, oldLeadership)
	}
	// Nothing committed is lost, and the new leader commits.
	h.waitCommitted(want, 10*time.Second)
	h.appendSeqs(want, 11, 20)
	h.waitCommitted(want, 10*time.Second)

	// The old leader comes back and catches up.
	h.start(old)
	h.waitCommitted(want, 10*time.Second)
	want[h.mustAppend(nil, 21)] = 21
	h.waitCommitted(want, 10*time.Second)
	h.sameLogs()
}

// TestRaftRefusesCorruptEntries: a follower drops a raft message whose
// entries do not check (a batch's CRC-32C does not match, as when a NIC
// or a proxy damaged it) and stores none of its entries; the leader sends
// them again and every voter ends with the leader's log.
func TestRaftRefusesCorruptEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		h.startAll()
		lead := h.waitLeader(nil, 10*time.Second)
		h.f.mu.Lock()
		for _, id := range h.ids {
			if id != lead {
				h.f.damage[id] = 3
			}
		}
		h.f.mu.Unlock()
		want := map[int64]int64{}
		h.appendSeqs(want, 1, 10)
		h.waitCommitted(want, 20*time.Second)
		for _, id := range h.ids {
			if n := h.f.damageLeft(id); n != 0 {
				t.Fatalf("node %d: %d damaged messages left to send", id, n)
			}
		}
		h.sameLogs()
	})
}

func TestRaftMinorityPartitionTCP(t *testing.T) { testMinorityPartition(t, false) }

func TestRaftMinorityPartitionSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { testMinorityPartition(t, true) })
}

// testMinorityPartition cuts the leader off: it cannot commit and steps
// down, the majority elects a leader and commits, and after healing the
// old leader's uncommitted tail is replaced by the majority's entries.
func testMinorityPartition(t *testing.T, mem bool) {
	h := newHarness(t, 3, mem)
	h.startAll()
	want := map[int64]int64{}
	want[h.mustAppend(nil, 1)] = 1
	old := h.waitLeader(nil, 10*time.Second)
	_, oldLeadership := h.nodes[old].rec.state()
	majority := others(h.ids, old)

	h.f.isolate(old, h.ids)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := h.appendOn(ctx, old, 100)
	cancel()
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on the cut-off leader: %v, want ErrNotLeader", err)
	}
	stale := readLog(t, h.nodes[old].log, h.nodes[old].log.LogEndOffset())
	last := stale[len(stale)-1]
	if last.control || len(last.data) == 0 {
		t.Fatalf("cut-off leader's last entry %+v is not the failed append", last)
	}
	h.waitFor("the cut-off leader to step down", 10*time.Second, func() bool {
		_, l := h.nodes[old].rec.state()
		return l.LeaderID != old
	})

	lead := h.waitLeader(majority, 10*time.Second)
	if _, l := h.nodes[lead].rec.state(); l.Epoch <= oldLeadership.Epoch {
		t.Fatalf("majority leadership %+v after %+v", l, oldLeadership)
	}
	for seq := int64(2); seq <= 6; seq++ {
		want[h.mustAppend(majority, seq)] = seq
	}
	if hw := h.nodes[old].r.HighWatermark(); hw > last.offset {
		t.Fatalf("cut-off node's high-watermark %d covers its uncommitted entry at %d", hw, last.offset)
	}

	h.f.heal()
	h.waitCommitted(want, 10*time.Second)
	h.waitFor("the old leader to follow", 10*time.Second, func() bool { return h.agreedLeader(nil) >= 0 })
	hw := h.sameLogs()
	if hw <= last.offset {
		t.Fatalf("high-watermark %d does not cover offset %d", hw, last.offset)
	}
	for _, e := range readLog(t, h.nodes[old].log, hw) {
		if e == last {
			t.Fatalf("the uncommitted entry at %d survived the partition", last.offset)
		}
	}
	for _, id := range h.ids {
		commits, _ := h.nodes[id].rec.state()
		for _, c := range commits {
			if c.recs[0] == seqRecord(100) {
				t.Fatalf("node %d committed the cut-off leader's entry at %d", id, c.offset)
			}
		}
	}
}

func TestRaftRestartFromDisk(t *testing.T) {
	h, want, lead := committedTen(t)
	_, before := h.nodes[lead].rec.state()
	for _, id := range h.ids {
		h.stop(id)
	}
	for _, id := range h.ids {
		st, ok, err := readState(nil, filepath.Join(h.dir, fmt.Sprint("node", id), MetadataTopic+"-0", StateFile))
		if err != nil || !ok {
			t.Fatalf("node %d quorum-state: %v %v", id, ok, err)
		}
		if st.LeaderEpoch < before.Epoch || st.CommitIndex < int64(len(want)) {
			t.Fatalf("node %d quorum-state %+v; leadership was %+v, %d entries appended", id, st, before, len(want))
		}
		if id == lead && st.VotedID != lead {
			t.Fatalf("leader %d voted for %d", id, st.VotedID)
		}
	}

	// Cut off from each other, restarted voters still replay what they
	// committed, from their own disk.
	for _, id := range h.ids {
		h.f.isolate(id, h.ids)
	}
	h.startAll()
	for _, id := range h.ids {
		var got int
		if err := h.nodes[id].r.Replay(func(off int64, recs []metadata.Record) error {
			if want[off] == 0 || recs[0] != seqRecord(want[off]) {
				t.Errorf("node %d replayed %v at %d", id, recs, off)
			}
			got++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got != len(want) {
			t.Fatalf("node %d replayed %d of %d batches", id, got, len(want))
		}
	}
	h.f.heal()
	h.waitCommitted(want, 10*time.Second)
	want[h.mustAppend(nil, 11)] = 11
	h.waitCommitted(want, 10*time.Second)
	if _, after := h.nodes[h.waitLeader(nil, 10*time.Second)].rec.state(); after.Epoch <= before.Epoch {
		t.Fatalf("leadership %+v after restart, %+v before", after, before)
	}
	h.sameLogs()
}

// TestRaftLongLog replicates entries over many small segments to a
// follower that was down, and restarts the whole quorum on a long log.
func TestRaftLongLog(t *testing.T) {
	h := newHarness(t, 3, false)
	h.segment = 4096
	h.startAll()
	lead := h.waitLeader(nil, 10*time.Second)
	lagging := others(h.ids, lead)[0]
	h.stop(lagging)
	const n, writers = 600, 8
	var (
		mu   sync.Mutex
		want = map[int64]int64{}
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for seq := int64(w + 1); seq <= n; seq += writers {
				off, err := h.appendRetrying(nil, seq, 30*time.Second)
				if err != nil {
					t.Errorf("append %d: %v", seq, err)
					return
				}
				mu.Lock()
				want[off] = seq
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d appends by %d writers on 2 of 3 voters in %v", n, writers, time.Since(start))
	start = time.Now()
	h.start(lagging)
	h.waitCommitted(want, 20*time.Second)
	t.Logf("restarted voter caught up on %d entries in %v", n, time.Since(start))
	if segs := countSegments(t, h.nodes[lead].log.Dir()); segs < 10 {
		t.Fatalf("%d segments, want many", segs)
	}
	h.sameLogs()

	for _, id := range h.ids {
		h.stop(id)
	}
	start = time.Now()
	h.startAll()
	h.waitCommitted(want, 20*time.Second)
	t.Logf("quorum restarted and replayed %d entries in %v", n, time.Since(start))
}

func countSegments(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestRaftSynctestFailover measures election and failover in fake time
// with the default tick (100 ms) and election timeout (10 ticks).
func TestRaftSynctestFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3, true)
		start := time.Now()
		h.startAll()
		lead := h.waitLeader(nil, 10*time.Second)
		t.Logf("node %d elected in %v of fake time", lead, time.Since(start))
		// 1-2 s of election timeout, plus one more round after a split
		// vote (all three voters timing out in the same tick).
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("first election took %v", d)
		}
		want := map[int64]int64{h.mustAppend(nil, 1): 1}
		h.stop(lead)
		start = time.Now()
		next := h.waitLeader(nil, 10*time.Second)
		d := time.Since(start)
		t.Logf("failover from %d to %d in %v of fake time", lead, next, d)
		if d > 5*time.Second {
			t.Fatalf("failover took %v", d)
		}
		want[h.mustAppend(nil, 2)] = 2
		h.start(lead)
		h.waitCommitted(want, 10*time.Second)
		h.sameLogs()
	})
}

// BenchmarkRaftAppend measures Append on the leader of 3 voters over TCP
// on loopback, entries fsynced on every voter: one writer (commit latency)
// and 16 concurrent writers (throughput).
func BenchmarkRaftAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			h := newHarness(b, 3, false)
			h.startAll()
			lead := h.waitLeader(nil, 10*time.Second)
			r := h.nodes[lead].r
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for {
						seq := next.Add(1)
						if seq > int64(b.N) {
							return
						}
						if _, err := r.Append(context.Background(), []metadata.Record{seqRecord(seq)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// TestRaftWaitCaughtUp: a voter restarted with a stored commit index older
// than the quorum's (a crash before it was written) replays only that
// much at start; WaitCaughtUp waits, while the voter hears from no one,
// and returns once the leader's read index is delivered, after which a
// Replay covers every entry committed before the restart.
func TestRaftWaitCaughtUp(t *testing.T) {
	h, want, lead := committedTen(t)
	f := others(h.ids, lead)[0]
	h.stop(f)
	h.lagCommit(f)

	h.f.isolate(f, h.ids)
	n := h.start(f)
	if got := replayed(t, n.r); got >= len(want) {
		t.Fatalf("node %d replayed %d batches at start with a stored commit index of 2", f, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := n.r.WaitCaughtUp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCaughtUp of a voter cut off from the quorum: %v, want a deadline", err)
	}
	h.f.heal()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := replayed(t, n.r); got != len(want) {
		t.Fatalf("node %d replayed %d of %d batches once caught up", f, got, len(want))
	}
}

// committedTen starts three voters over TCP and appends 10 entries; it
// returns them as waitCommitted wants them and the leader.
func committedTen(t *testing.T) (*harness, map[int64]int64, int32) {
	t.Helper()
	h := newHarness(t, 3, false)
	h.startAll()
	want := map[int64]int64{}
	h.appendSeqs(want, 1, 10)
	h.waitCommitted(want, 10*time.Second)
	return h, want, h.waitLeader(nil, 10*time.Second)
}

// lagCommit sets the commit index in stopped voter id's quorum-state file
// to 2, as a crash that lost the later commit points leaves it.
func (h *harness) lagCommit(id int32) {
	h.t.Helper()
	path := filepath.Join(h.dir, fmt.Sprint("node", id), MetadataTopic+"-0", StateFile)
	st, ok, err := readState(nil, path)
	if err != nil || !ok {
		h.t.Fatalf("node %d quorum-state: %v %v", id, ok, err)
	}
	st.CommitIndex = 2
	if err := writeState(nil, path, st); err != nil {
		h.t.Fatal(err)
	}
}

// replayed is the number of batches r's Replay delivers.
func replayed(t *testing.T, r *Raft) int {
	t.Helper()
	var got int
	if err := r.Replay(func(int64, []metadata.Record) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRaftCatchUpForwarded: a restarted voter asks a voter it takes for
// the leader for its read index, and that voter, a follower by then,
// forwards the request to the leader as raft does, with the requester's
// id as its sender. The leader's transport passes it on (it closed the
// forwarding voter's connection, a message not from that voter, and the
// request was lost) and the requester catches up from the answer.
func TestRaftCatchUpForwarded(t *testing.T) {
	h, want, lead := committedTen(t)
	f, x := others(h.ids, lead)[0], others(h.ids, lead)[1]
	h.stop(f)
	h.lagCommit(f)
	// f's own read-index requests are lost: only the one x forwards
	// reaches the leader.
	h.f.mu.Lock()
	h.f.drop = func(sender int32, m *raftpb.Message) bool {
		return sender == f && m.GetType() == raftpb.MsgReadIndex
	}
	h.f.mu.Unlock()
	n := h.start(f)
	h.waitFor(fmt.Sprintf("node %d to follow node %d", f, lead), 10*time.Second, func() bool {
		_, l := n.rec.state()
		return l.LeaderID == lead
	})
	// Over an election timeout (10 ticks of 20 ms): f asked and asked
	// again, and heard nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := n.r.WaitCaughtUp(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCaughtUp of a voter whose requests are lost: %v, want a deadline", err)
	}
	// f's request, as it reaches x when x no longer leads.
	h.raft(x).receive(&raftpb.Message{Type: raftpb.MsgReadIndex.Enum(), From: new(raftID(f)), To: new(raftID(x)), Entries: []*raftpb.Entry{{Data: catchUpCtx}}})
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.r.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("node %d catching up through node %d: %v", f, x, err)
	}
	if got := replayed(t, n.r); got != len(want) {
		t.Fatalf("node %d replayed %d of %d batches once caught up", f, got, len(want))
	}
}
