package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/wire"
)

// idleFollowerSession makes a leader (node 1) of n empty partitions, in
// topics of 100 (n a multiple of 100), and opens the fetch session of
// its follower (node 2) with a full fetch; fetch sends the follower's
// next incremental fetch (max_wait_ms 0), naming nothing, and fails tb
// unless the answer is empty.
func idleFollowerSession(tb testing.TB, n int) (fetch func()) {
	tb.Helper()
	return idleSession(tb, n, 2, 0)
}

// idleConsumerSession is idleFollowerSession for a consumer (replica id
// -1) with isolation level iso (0 read_uncommitted, 1 read_committed) at
// the end of each partition.
func idleConsumerSession(tb testing.TB, n int, iso int8) (fetch func()) {
	tb.Helper()
	return idleSession(tb, n, -1, iso)
}

func idleSession(tb testing.TB, n int, replicaID int32, iso int8) (fetch func()) {
	tb.Helper()
	m := newReplicas(tb)
	for i := range int32(n) {
		if _, err := m.Apply(replica.TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: i % 100}, [16]byte{1},
			replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, replica.LogConfig{}); err != nil {
			tb.Fatal(err)
		}
	}
	br := &Broker{node: &config.Node{FetchMaxBytes: 1 << 20}, replicas: m, sessions: newFetchSessions(10)}
	full := kmsg.NewPtrFetchRequest()
	full.Version, full.ReplicaID, full.MaxBytes, full.SessionEpoch, full.IsolationLevel = 12, replicaID, 1<<20, 0, iso
	for t := range n / 100 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = fmt.Sprintf("t%d", t)
		for p := range int32(100) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p, 1<<20, 1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		full.Topics = append(full.Topics, rt)
	}
	ctx := context.Background()
	kresp, err := handleFetch(ctx, br, nil, full)
	if err != nil {
		tb.Fatal(err)
	}
	id := kresp.(*wire.FetchResponse).SessionID
	if id == 0 {
		tb.Fatal("no session")
	}
	epoch := int32(1)
	fetch = func() {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.IsolationLevel = 12, replicaID, 1<<20, iso
		req.SessionID, req.SessionEpoch = id, epoch
		epoch = replica.NextSessionEpoch(epoch)
		kresp, err := handleFetch(ctx, br, nil, req)
		if err != nil {
			tb.Fatal(err)
		}
		if r := kresp.(*wire.FetchResponse); r.ErrorCode != 0 || len(r.Topics) != 0 {
			tb.Fatalf("incremental fetch: error %d, %d topics; want none", r.ErrorCode, len(r.Topics))
		}
	}
	fetch() // the first incremental fetch may read the session whole
	return fetch
}

// BenchmarkFollowerFetchIdle is the leader's work for one incremental
// follower fetch (KIP-227, max_wait_ms 0) of a session over n partitions
// none of which changed: the cost an idle cluster pays on every fetch of
// every follower (issue 13).
func BenchmarkFollowerFetchIdle(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			fetch := idleFollowerSession(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				fetch()
			}
		})
	}
}

// TestFollowerFetchIdleCost: an incremental follower fetch of a session
// none of whose partitions changed costs the leader the same whatever
// the session's size (fetchsession.go): allocations counted over a
// session of 100 and of 1,000 partitions. When every fetch read every
// partition of the session they grew with it (22 and 174).
func TestFollowerFetchIdleCost(t *testing.T) {
	small := testing.AllocsPerRun(20, idleFollowerSession(t, 100))
	large := testing.AllocsPerRun(20, idleFollowerSession(t, 1000))
	if large > small+2 {
		t.Fatalf("idle follower fetch: %.0f allocations over 1,000 partitions, %.0f over 100: the leader reads every partition of the session", large, small)
	}
}

// BenchmarkConsumerFetchIdle is BenchmarkFollowerFetchIdle for a
// consumer's session (read_uncommitted, at the end of every partition):
// the broker's work for each poll of a consumer of n idle partitions.
func BenchmarkConsumerFetchIdle(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			fetch := idleConsumerSession(b, n, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				fetch()
			}
		})
	}
}

// TestConsumerFetchIdleCost: an incremental consumer fetch of a session
// none of whose partitions changed costs the broker the same whatever
// the session's size, read_uncommitted and read_committed: allocations
// counted over a session of 100 and of 1,000 partitions. When every
// consumer fetch read every partition of the session they grew with it.
func TestConsumerFetchIdleCost(t *testing.T) {
	for _, iso := range []int8{0, 1} {
		t.Run(fmt.Sprintf("isolation_level=%d", iso), func(t *testing.T) {
			small := testing.AllocsPerRun(20, idleConsumerSession(t, 100, iso))
			large := testing.AllocsPerRun(20, idleConsumerSession(t, 1000, iso))
			if large > small+2 {
				t.Fatalf("idle consumer fetch: %.0f allocations over 1,000 partitions, %.0f over 100: the broker reads every partition of the session", large, small)
			}
		})
	}
}

// TestIdleSessionDropsWatches: a consumer session idle for
// sessionEvictionAge stops being marked by its partitions' changes
// (fetchSessions.expire: its watches are dropped), and its next fetch
// reads every partition again. Before, a session no new one needed to
// evict kept its watches for good.
func TestIdleSessionDropsWatches(t *testing.T) {
	m := newReplicas(t)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	st := replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	if _, err := m.Apply(tp, [16]byte{1}, st, replica.LogConfig{}); err != nil {
		t.Fatal(err)
	}
	br := &Broker{node: &config.Node{FetchMaxBytes: 1 << 20}, replicas: m, sessions: newFetchSessions(10)}
	ctx := context.Background()
	fetch := func(id, epoch int32) *wire.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = 12, -1, 1<<20, id, epoch
		if epoch == 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := handleFetch(ctx, br, nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*wire.FetchResponse)
	}
	id := fetch(0, 0).SessionID
	fetch(id, 1)
	fetch(id, 2)
	s := br.sessions.lookup(id, time.Now())
	// markedBy reports whether a change of the partition (a new leader
	// epoch) marks the session's watch.
	epoch := int32(1)
	markedBy := func() bool {
		t.Helper()
		s.watch.Drain(nil)
		epoch++
		st.LeaderEpoch = epoch
		if _, err := m.Apply(tp, [16]byte{1}, st, replica.LogConfig{}); err != nil {
			t.Fatal(err)
		}
		return len(s.watch.Drain(nil)) > 0
	}
	if !markedBy() {
		t.Fatal("an active session's watch was not marked by a new leader epoch")
	}
	br.sessions.expire(time.Now().Add(sessionEvictionAge))
	if markedBy() {
		t.Fatal("a session idle for sessionEvictionAge is still marked by its partitions")
	}
	before := br.ConsumerPartitionsRead()
	if r := fetch(id, 3); r.ErrorCode != 0 {
		t.Fatalf("fetch after idling: error %d", r.ErrorCode)
	}
	if br.ConsumerPartitionsRead() == before {
		t.Fatal("the fetch after idling read nothing")
	}
	if !markedBy() {
		t.Fatal("the session, used again, is not marked by its partition")
	}
}
