package samsa_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// Consumer groups and committed offsets (issue 3), through real nodes and
// franz-go consumers.

// groupProps are broker properties that keep the group tests fast: no
// initial rebalance delay, and short sessions allowed.
var groupProps = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
}

// loadDebian reads the Debian package index: one record per line, keyed by
// package.
func loadDebian(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for _, l := range testutil.DebianLines(t, 0) {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(l.Package), Value: l.Line})
	}
	return recs
}

// tpo names one record: partition and offset.
type tpo struct {
	partition int32
	offset    int64
}

// groupRun is the shared state of the consumers of one group.
type groupRun struct {
	t     *testing.T
	topic string
	want  int

	mu       sync.Mutex
	seen     map[tpo]string // record -> consumer that processed it
	dups     int
	changed  chan struct{} // closed and replaced on every change (signal)
	leftAt   time.Time     // when the leaving consumer closed
	movedAt  time.Time     // when a partition of the leaver was assigned to another
	leaverTP []int32       // the leaver's partitions when it left
}

// member is one consumer of the group.
type member struct {
	name string
	cl   *kgo.Client
	run  *groupRun

	// guarded by run.mu
	assigned    map[int32]bool
	revokedKept []int32   // partitions revoked after the leave
	revocations int       // calls of OnPartitionsRevoked with partitions
	blockedAt   time.Time // last time a rebalance waited for this member's poll
	polls       []polled  // polls after the leave
}

// polled is one poll's records of one partition.
type polled struct {
	at        time.Time
	partition int32
	records   int
}

// signal wakes every waitFor; called with r.mu held.
func (r *groupRun) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// newMember starts a consumer of the group that processes records by
// noting them and marking them for commit; marks are committed in the
// background and, blocking, whenever partitions are revoked (also when the
// consumer leaves). Rebalances are blocked between a poll and the marking
// of its records (kgo.BlockRebalanceOnPoll), so no processed record is left
// uncommitted when partitions move, and commits never hold up polling while
// the group rebalances.
func (r *groupRun) newMember(n *samsa.Node, name, groupID string, balancer kgo.GroupBalancer, extra ...kgo.Opt) *member {
	return r.newMemberOf([]string{n.Addr()}, name, groupID, balancer, extra...)
}

// newMemberOf is newMember with the brokers at seeds.
func (r *groupRun) newMemberOf(seeds []string, name, groupID string, balancer kgo.GroupBalancer, extra ...kgo.Opt) *member {
	m := &member{name: name, run: r, assigned: map[int32]bool{}}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(balancer),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.FetchMaxBytes(64 << 10),
		kgo.FetchMaxPartitionBytes(16 << 10),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, p := range a[r.topic] {
				m.assigned[p] = true
				if r.movedAt.IsZero() && !r.leftAt.IsZero() && slices.Contains(r.leaverTP, p) {
					r.movedAt = time.Now()
				}
			}
			r.signal()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, rv map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				r.t.Errorf("%s: commit on revoke: %v", name, err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(rv[r.topic]) > 0 {
				m.revocations++
			}
			for _, p := range rv[r.topic] {
				delete(m.assigned, p)
				if !r.leftAt.IsZero() && m.name != "c3" {
					m.revokedKept = append(m.revokedKept, p)
				}
			}
			r.signal()
		}),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
			r.mu.Lock()
			defer r.mu.Unlock()
			m.blockedAt = time.Now()
			r.signal()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, p := range l[r.topic] {
				delete(m.assigned, p)
			}
			r.t.Errorf("%s lost partitions %v", name, l)
		}),
	}
	if os.Getenv("KGO_LOG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") + name + " " })))
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	m.cl = cl
	return m
}

// startMember starts member name of groupID consuming in the background
// until stop says so or ctx ends (see consume), counted in wg; the
// function returned ends its polling and waits for it (the caller then
// commits and closes).
func (r *groupRun) startMember(ctx context.Context, wg *sync.WaitGroup, seeds []string, name, groupID string, stop func() bool, extra ...kgo.Opt) (*member, func()) {
	m := r.newMemberOf(seeds, name, groupID, kgo.CooperativeStickyBalancer(), extra...)
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		m.consume(mctx, stop, nil)
	}()
	return m, func() {
		mcancel()
		<-done
	}
}

// assignment returns each member's partitions.
func (r *groupRun) assignment(ms ...*member) [][]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]int32, len(ms))
	for i, m := range ms {
		out[i] = slices.Sorted(maps.Keys(m.assigned))
	}
	return out
}

// waitFor waits until cond holds, checked on every change.
func (r *groupRun) waitFor(ctx context.Context, what string, cond func() bool) {
	r.t.Helper()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			r.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// disjointCover reports whether the assignments are non-empty, disjoint
// and cover partitions 0..n-1.
func disjointCover(as [][]int32, n int32) bool {
	seen := map[int32]bool{}
	for _, a := range as {
		if len(a) == 0 {
			return false
		}
		for _, p := range a {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == int(n)
}

// consume polls until ctx ends or stop returns true, noting and marking
// every record; gate, if set, runs after that and before AllowRebalance.
func (m *member) consume(ctx context.Context, stop func() bool, gate func()) {
	r := m.run
	for ctx.Err() == nil {
		fs := m.cl.PollRecords(ctx, 200)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				r.t.Errorf("%s: fetch %s/%d: %v", m.name, topic, p, err)
			}
		})
		recs := fs.Records()
		now := time.Now()
		r.mu.Lock()
		perPartition := map[int32]int{}
		for _, rec := range recs {
			k := tpo{rec.Partition, rec.Offset}
			if prev, ok := r.seen[k]; ok {
				r.dups++
				r.t.Errorf("record %d/%d processed twice: by %s and %s", rec.Partition, rec.Offset, prev, m.name)
				continue
			}
			r.seen[k] = m.name
			perPartition[rec.Partition]++
		}
		if !r.leftAt.IsZero() {
			for p, n := range perPartition {
				m.polls = append(m.polls, polled{now, p, n})
			}
		}
		r.signal()
		r.mu.Unlock()
		m.cl.MarkCommitRecords(recs...)
		if gate != nil {
			gate()
		}
		m.cl.AllowRebalance()
		if stop != nil && stop() {
			return
		}
	}
}

// done reports whether every record expected was processed.
func (r *groupRun) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen) >= r.want
}

func (r *groupRun) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// Three consumers of one group on a 12-partition topic holding the Debian
// data set get disjoint partitions covering all 12. One leaves part-way:
// its partitions move, and with commits after processing no record is
// lost or processed twice. With cooperative-sticky, partitions that do not
// move keep being consumed during the rebalance; eager range revokes all.
func TestGroupConsumersDebian(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	const topic = "debian"
	const partitions = 12
	admin := newClient(t, n)
	createTopic(t, admin, topic, partitions, nil)
	recs := loadDebian(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20))
	manual := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	begin := time.Now()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	t.Logf("produced %d records in %v", len(recs), time.Since(begin))

	for _, tc := range []struct {
		name        string
		balancer    kgo.GroupBalancer
		cooperative bool
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), true},
		{"range", kgo.RangeBalancer(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
			r := &groupRun{t: t, topic: topic, want: total, seen: map[tpo]string{}, changed: make(chan struct{})}
			groupID := "debian-" + tc.name
			c1 := r.newMember(n, "c1", groupID, tc.balancer)
			c2 := r.newMember(n, "c2", groupID, tc.balancer)
			c3 := r.newMember(n, "c3", groupID, tc.balancer)
			r.waitFor(ctx, "three disjoint assignments covering 12 partitions", func() bool {
				return disjointCover(r.assignment(c1, c2, c3), partitions)
			})
			t.Logf("assignment: %v", r.assignment(c1, c2, c3))

			var wg sync.WaitGroup
			cctx, stop := context.WithCancel(ctx) // ends the polls once all is consumed
			defer stop()
			// c3 consumes about a third of the data, then leaves. In the
			// cooperative run, c2 first holds a poll open across the
			// leave (BlockRebalanceOnPoll), so the rebalance cannot end
			// until c2 lets it; meanwhile records are produced to c1's
			// partitions, and c2 lets the rebalance end once c1 consumed
			// them. (An eager c1 revokes everything when the rebalance
			// starts and consumes nothing until it ends.)
			leaving, holding := make(chan struct{}), make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				c3.consume(cctx, func() bool { return r.count() >= len(recs)/3 }, nil)
				if tc.cooperative {
					close(leaving)
					select {
					case <-holding:
					case <-cctx.Done():
					}
				}
				r.mu.Lock()
				r.leaverTP = slices.Sorted(maps.Keys(c3.assigned))
				r.leftAt = time.Now()
				r.signal()
				r.mu.Unlock()
				c3.cl.Close() // LeaveGroup
			}()
			var during []polled
			var gate func()
			if tc.cooperative {
				gated := false
				gate = func() {
					if gated {
						return
					}
					select {
					case <-leaving:
					default:
						return
					}
					gated = true
					close(holding)
					var blockedAt time.Time
					r.waitFor(ctx, "the rebalance waiting for c2", func() bool {
						r.mu.Lock()
						defer r.mu.Unlock()
						blockedAt = c2.blockedAt
						return !r.leftAt.IsZero() && blockedAt.After(r.leftAt)
					})
					// New records for c1's partitions, produced while the
					// rebalance waits.
					r.mu.Lock()
					kept := slices.Sorted(maps.Keys(c1.assigned))
					r.mu.Unlock()
					var extra []*kgo.Record
					for _, p := range kept {
						for i := range 10 {
							extra = append(extra, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "during the rebalance %d", i)})
						}
					}
					if err := manual.ProduceSync(ctx, extra...).FirstErr(); err != nil {
						t.Errorf("produce during the rebalance: %v", err)
					}
					r.mu.Lock()
					r.want += len(extra)
					r.mu.Unlock()
					r.waitFor(ctx, "c1 consuming while the rebalance waits for c2", func() bool {
						r.mu.Lock()
						defer r.mu.Unlock()
						during = during[:0]
						n := 0
						for _, p := range c1.polls {
							if p.at.After(blockedAt) && slices.Contains(kept, p.partition) {
								during = append(during, p)
								n += p.records
							}
						}
						return n >= len(extra)
					})
				}
			}
			done := r.done
			for _, m := range []*member{c1, c2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g := gate
					if m != c2 {
						g = nil
					}
					m.consume(cctx, done, g)
				}()
			}
			r.waitFor(ctx, "all records", done)
			stop()
			wg.Wait()

			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.seen) != r.want || r.dups != 0 {
				t.Fatalf("processed %d distinct records (%d twice), want %d", len(r.seen), r.dups, r.want)
			}
			// Every offset of every partition, none missing.
			next := map[int32]int64{}
			for _, k := range slices.SortedFunc(maps.Keys(r.seen), func(a, b tpo) int {
				if a.partition != b.partition {
					return int(a.partition - b.partition)
				}
				return int(a.offset - b.offset)
			}) {
				if k.offset != next[k.partition] {
					t.Fatalf("partition %d: offset %d processed after %d", k.partition, k.offset, next[k.partition]-1)
				}
				next[k.partition]++
			}
			// The leaver's partitions were processed by the others after it left.
			if len(r.leaverTP) == 0 {
				t.Fatal("the leaving consumer had no partitions")
			}
			final := map[int32]bool{}
			for p := range c1.assigned {
				final[p] = true
			}
			for p := range c2.assigned {
				final[p] = true
			}
			for _, p := range r.leaverTP {
				if !final[p] {
					t.Errorf("partition %d of the leaver was not reassigned: c1 %v c2 %v", p, c1.assigned, c2.assigned)
				}
			}
			consumed := map[int32]int{}
			for _, p := range during {
				consumed[p.partition] += p.records
			}
			t.Logf("leaver had %v, reassigned %v after it left; c1 consumed %v (partition: records) while the rebalance waited for c2; revoked after the leave: c1 %v c2 %v",
				r.leaverTP, r.movedAt.Sub(r.leftAt), consumed, c1.revokedKept, c2.revokedKept)
			if tc.cooperative {
				if len(c1.revokedKept)+len(c2.revokedKept) > 0 {
					t.Errorf("cooperative rebalance revoked kept partitions: c1 %v c2 %v", c1.revokedKept, c2.revokedKept)
				}
				if len(during) == 0 || !r.movedAt.After(during[0].at) {
					t.Errorf("c1's consumption %v was not during the rebalance (reassigned at %v)", during, r.movedAt)
				}
			} else if len(c1.revokedKept) == 0 || len(c2.revokedKept) == 0 {
				t.Errorf("eager rebalance did not revoke: c1 %v c2 %v", c1.revokedKept, c2.revokedKept)
			}
		})
	}
}

// A static member (group.instance.id, KIP-345) that restarts within its
// session timeout gets its partitions back without a rebalance.
func TestGroupStaticMemberRestart(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	const topic = "static"
	admin := newClient(t, n)
	createTopic(t, admin, topic, 4, nil)
	produceN(t, admin, topic, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &groupRun{t: t, topic: topic, seen: map[tpo]string{}, changed: make(chan struct{})}
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.InstanceID(id), kgo.SessionTimeout(10 * time.Second)}
	}
	a := r.newMember(n, "a", "static-group", kgo.RangeBalancer(), opts("a")...)
	r.waitFor(ctx, "a assigned", func() bool { return len(r.assignment(a)[0]) == 4 })
	b := r.newMember(n, "b", "static-group", kgo.RangeBalancer(), opts("b")...)
	r.waitFor(ctx, "a and b assigned", func() bool { return disjointCover(r.assignment(a, b), 4) })
	before := r.assignment(a, b)
	_, genA := a.cl.GroupMetadata()
	oldID, genB := b.cl.GroupMetadata()
	r.mu.Lock()
	revA := a.revocations
	r.mu.Unlock()

	b.cl.Close() // a static member does not leave the group
	b2 := r.newMember(n, "b2", "static-group", kgo.RangeBalancer(), opts("b")...)
	r.waitFor(ctx, "b restarted", func() bool { return len(r.assignment(b2)[0]) > 0 })
	if got := r.assignment(b2)[0]; !slices.Equal(got, before[1]) {
		t.Fatalf("restarted b got %v, had %v", got, before[1])
	}
	newID, genB2 := b2.cl.GroupMetadata()
	if newID == oldID || genB2 != genB {
		t.Fatalf("restart: member %s gen %d, was %s gen %d (want a new id, same generation)", newID, genB2, oldID, genB)
	}
	// a saw no rebalance: same generation, nothing revoked, same partitions.
	if _, g := a.cl.GroupMetadata(); g != genA {
		t.Fatalf("a's generation moved from %d to %d", genA, g)
	}
	r.mu.Lock()
	if a.revocations != revA {
		t.Errorf("a had partitions revoked during the static restart")
	}
	r.mu.Unlock()
	if got := r.assignment(a)[0]; !slices.Equal(got, before[0]) {
		t.Fatalf("a has %v, had %v", got, before[0])
	}
	described, err := kadm.NewClient(admin).DescribeGroups(ctx, "static-group")
	if err != nil {
		t.Fatal(err)
	}
	dg := described["static-group"]
	if dg.State != "Stable" || len(dg.Members) != 2 {
		t.Fatalf("group %s with %d members", dg.State, len(dg.Members))
	}
	for _, m := range dg.Members {
		if m.MemberID == oldID {
			t.Fatalf("old member id %s still in the group", oldID)
		}
	}
}

// A member that stops heartbeating is evicted after session.timeout.ms and
// the remaining consumer gets its partitions.
func TestGroupSessionEviction(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	const topic = "evict"
	admin := newClient(t, n)
	createTopic(t, admin, topic, 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &groupRun{t: t, topic: topic, seen: map[tpo]string{}, changed: make(chan struct{})}
	c := r.newMember(n, "c", "evict-group", kgo.RangeBalancer())
	r.waitFor(ctx, "c assigned", func() bool { return len(r.assignment(c)[0]) == 4 })

	// A raw member joins by hand, syncs, and never heartbeats.
	raw := newClient(t, n)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{topic}
	join := func(memberID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = "evict-group"
		req.MemberID = memberID
		req.SessionTimeoutMillis = 2000
		req.RebalanceTimeoutMillis = 10000
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		p.Metadata = meta.AppendTo(nil)
		req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	jr := join("")
	if err := kerr.ErrorForCode(jr.ErrorCode); err != kerr.MemberIDRequired {
		t.Fatalf("first join: %v", err)
	}
	jr = join(jr.MemberID)
	if err := kerr.ErrorForCode(jr.ErrorCode); err != nil {
		t.Fatalf("join: %v", err)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group = "evict-group"
	sreq.MemberID = jr.MemberID
	sreq.Generation = jr.Generation
	sreq.ProtocolType = kmsg.StringPtr("consumer")
	sreq.Protocol = jr.Protocol
	sresp, err := sreq.RequestWith(ctx, raw)
	if err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("sync: %v %v", err, kerr.ErrorForCode(sresp.ErrorCode))
	}
	var asg kmsg.ConsumerMemberAssignment
	if err := asg.ReadFrom(sresp.MemberAssignment); err != nil || len(asg.Topics) != 1 || len(asg.Topics[0].Partitions) != 2 {
		t.Fatalf("raw member's assignment %+v: %v", asg, err)
	}
	r.waitFor(ctx, "c down to 2 partitions", func() bool { return len(r.assignment(c)[0]) == 2 })
	joinedAt := time.Now()

	// No heartbeat: after 2s the coordinator evicts it and c gets all 4.
	r.waitFor(ctx, "c back to 4 partitions", func() bool { return len(r.assignment(c)[0]) == 4 })
	if d := time.Since(joinedAt); d < 1500*time.Millisecond {
		t.Fatalf("evicted after %v, before the 2s session timeout", d)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "evict-group"
	hb.MemberID = jr.MemberID
	hb.Generation = jr.Generation
	hresp, err := hb.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(hresp.ErrorCode); err != kerr.UnknownMemberID {
		t.Fatalf("evicted member's heartbeat: %v, want UNKNOWN_MEMBER_ID", err)
	}
}

// Committed offsets survive a restart of the node: they are records of
// __consumer_offsets, loaded again, and a consumer of the group resumes
// where the last one committed.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, groupID, total = "persist", "persist-group", 300
	start := func() *samsa.Node {
		n, err := samsa.Start(ctx, samsa.Config{Dir: dir, Properties: groupProps})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	admin := newClient(t, n)
	createTopic(t, admin, topic, 3, nil)
	produceN(t, admin, topic, total)

	r := &groupRun{t: t, topic: topic, seen: map[tpo]string{}, changed: make(chan struct{})}
	c := r.newMember(n, "first", groupID, kgo.CooperativeStickyBalancer())
	c.consume(ctx, func() bool { return r.count() >= total/2 }, nil)
	c.cl.Close()
	first := r.count()
	committed, err := kadm.NewClient(admin).FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(first) {
		t.Fatalf("committed offsets sum to %d, consumed %d", sum, first)
	}
	admin.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = start()
	defer n.Close()
	admin = newClient(t, n)
	var again kadm.OffsetResponses
	for { // the partition of the group loads in the background
		again, err = kadm.NewClient(admin).FetchOffsets(ctx, groupID)
		if err == nil || !kerr.IsRetriable(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	committed.Each(func(o kadm.OffsetResponse) {
		got, ok := again.Lookup(o.Topic, o.Partition)
		if !ok || got.At != o.At {
			t.Errorf("%s/%d: committed %d before the restart, %d after", o.Topic, o.Partition, o.At, got.At)
		}
	})
	c2 := r.newMember(n, "second", groupID, kgo.CooperativeStickyBalancer())
	c2.consume(ctx, func() bool { return r.count() >= total }, nil)
	if r.dups != 0 || r.count() != total {
		t.Fatalf("consumed %d records (%d twice), want %d", r.count(), r.dups, total)
	}
	c2.cl.Close()
}

// A group whose committed offset is past the log end, or below the log
// start, gets OFFSET_OUT_OF_RANGE on fetch and resets by
// auto.offset.reset.
func TestGroupCommittedOffsetOutOfRange(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	const topic = "oor"
	admin := newClient(t, n)
	createTopic(t, admin, topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte{byte(i)}})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(admin)
	// Partition 1 starts at 5 after DeleteRecords.
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5})
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	// Committed: past the end on partition 0, below the start on 1.
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 50, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 2, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "oor-group", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	r := &groupRun{t: t, topic: topic, seen: map[tpo]string{}, changed: make(chan struct{})}
	c := r.newMember(n, "c", "oor-group", kgo.RangeBalancer())
	c.consume(ctx, func() bool { return r.count() >= 15 }, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.seen {
		if k.partition == 1 && k.offset < 5 {
			t.Errorf("consumed %d/%d below the log start", k.partition, k.offset)
		}
	}
	if len(r.seen) != 15 {
		t.Fatalf("consumed %d records, want 10 of partition 0 from its start and 5 of partition 1 from its log start", len(r.seen))
	}
}

// A deleted topic's committed offsets go with it (Kafka's
// onPartitionsDeleted), also across a restart: a topic created again
// under the same name is read from its start. OffsetCommit and
// OffsetFetch v10 name topics by id; an id not served gets
// UNKNOWN_TOPIC_ID.
func TestGroupOffsetsOfDeletedTopic(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, groupID = "recreated", "deleted-topic-group"
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir, Properties: groupProps})
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, n)
	adm := kadm.NewClient(admin)
	createTopic(t, admin, topic, 2, nil)
	createTopic(t, admin, "other", 1, nil)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := details[topic].ID

	// v10: commit by topic id; an unknown id fails alone.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 10
	commit.Group = groupID
	commit.Generation = -1
	unknownID := [16]byte{1, 2, 3}
	for _, tid := range [][16]byte{id, unknownID} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.TopicID = tid
		for p := range int32(2) {
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = p, 10+int64(p)
			ct.Partitions = append(ct.Partitions, cp)
		}
		commit.Topics = append(commit.Topics, ct)
	}
	cresp, err := commit.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range cresp.Topics {
		want := [][16]byte{id, unknownID}[i]
		wantCode := [...]int16{0, kerr.UnknownTopicID.Code}[i]
		if rt.TopicID != want || len(rt.Partitions) != 2 {
			t.Fatalf("commit v10 topic %d: %+v", i, rt)
		}
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != wantCode {
				t.Fatalf("commit v10 topic %d partition %d: %v", i, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	if _, err := adm.CommitOffsets(ctx, groupID, kadm.OffsetsFromRecords(kgo.Record{Topic: "other", Partition: 0, Offset: 4})); err != nil {
		t.Fatal(err)
	}
	fetch := func(tids ...[16]byte) map[[16]byte]map[int32]kmsg.OffsetFetchResponseGroupTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 10
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = groupID
		for _, tid := range tids {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{TopicID: tid, Partitions: []int32{0, 1}})
		}
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		out := map[[16]byte]map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
		for _, rt := range resp.Groups[0].Topics {
			out[rt.TopicID] = map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
			for _, rp := range rt.Partitions {
				out[rt.TopicID][rp.Partition] = rp
			}
		}
		return out
	}
	got := fetch(id, unknownID)
	if got[id][0].Offset != 10 || got[id][1].Offset != 11 || got[unknownID][0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch v10: %+v", got)
	}
	if all := fetch(); len(all) != 2 || all[id][1].Offset != 11 {
		t.Fatalf("fetch v10 of all offsets: %+v", all)
	}

	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	createTopic(t, admin, topic, 2, nil)
	check := func(when string) {
		t.Helper()
		for {
			offs, err := adm.FetchOffsets(ctx, groupID)
			if err == nil {
				if o, ok := offs.Lookup(topic, 0); ok && o.At >= 0 {
					t.Fatalf("%s: the deleted topic's offset %d applies to the new topic", when, o.At)
				}
				if o, ok := offs.Lookup("other", 0); !ok || o.At != 5 { // the record after offset 4
					t.Fatalf("%s: the other topic's offset is %+v", when, o)
				}
				return
			}
			if !kerr.IsRetriable(err) || ctx.Err() != nil {
				t.Fatalf("%s: %v", when, err)
			}
		}
	}
	check("after delete")
	admin.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = samsa.Start(ctx, samsa.Config{Dir: dir, Properties: groupProps})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	admin = newClient(t, n)
	adm = kadm.NewClient(admin)
	check("after restart")
}
