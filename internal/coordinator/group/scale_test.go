package group

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file measures what a KIP-848 group's size costs the coordinator:
// members join one ConsumerGroupHeartbeat at a time through the
// Coordinator (no network, no client: franz-go consumers are too heavy for
// thousands of members on one machine), then heartbeat until the group is
// Stable. It uses only the Coordinator's API and the package's test
// helpers that main also has, so that the same file runs against main for
// a comparison in one run.

var scaleFlag = flag.Bool("group.scale", false, "run TestConsumerGroupJoinScale (2,000 and 4,000 members; minutes under -race)")

// scaleTopics is topic "t" of 1,000 partitions beside 1,000 topics of one
// partition ("other-i") that the members do not subscribe to; every topic
// has its own id.
func scaleTopics() *fakeTopics {
	ft := &fakeTopics{topics: map[string]topicMeta{"t": {id: topicID{0xff, 0xff}, partitions: 1000}}}
	for i := range 1000 {
		ft.topics[fmt.Sprintf("other-%04d", i)] = topicMeta{id: topicID{byte(i), byte(i >> 8), 1}, partitions: 1}
	}
	return ft
}

// scaleResult is what joinAndReconcile measured.
type scaleResult struct {
	join, worstJoin           time.Duration // all members' first heartbeats; the slowest
	reconcile, worstHeartbeat time.Duration // the rounds until Stable; the slowest heartbeat
	rounds                    int
}

// scaleMember is a member as joinAndReconcile's client sees it.
type scaleMember struct {
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

// joinAndReconcile joins n members to one consumer group of a new
// Coordinator, each with one ConsumerGroupHeartbeat v1 of epoch 0
// subscribing to topic "t" by name (or by regex when set), then has every
// member heartbeat in rounds, reporting what it owns and revoking at once
// what it is told to, until the group is Stable.
func joinAndReconcile(tb testing.TB, n int, regex string) scaleResult {
	tb.Helper()
	c := New(Config{OffsetsTopicNumPartitions: 1, ConsumerSessionTimeout: time.Hour}, newMemStore(), nil)
	defer c.Close()
	c.SetTopics(scaleTopics())
	ctx := context.Background()
	if err := c.LoadPartition(ctx, 0); err != nil {
		tb.Fatal(err)
	}
	heartbeat := func(m *scaleMember) time.Duration {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = testGroup, m.id, m.epoch
		req.RebalanceTimeoutMillis = -1
		req.Topics = m.owned
		if m.epoch == 0 {
			req.RebalanceTimeoutMillis = testRebal
			if regex != "" {
				req.SubscribedTopicRegex = &regex
			} else {
				req.SubscribedTopicNames = []string{"t"}
			}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		start := time.Now()
		r := c.ConsumerGroupHeartbeat(ctx, Client{ID: "scale", Host: "/127.0.0.1"}, req)
		took := time.Since(start)
		if r.ErrorCode != 0 {
			tb.Fatalf("member %s, epoch %d: error %d", m.id, m.epoch, r.ErrorCode)
		}
		m.epoch = r.MemberEpoch
		if r.Assignment != nil {
			m.owned = m.owned[:0]
			for _, t := range r.Assignment.Topics {
				m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
			}
		}
		return took
	}
	var res scaleResult
	ms := make([]*scaleMember, n)
	start := time.Now()
	for i := range ms {
		ms[i] = &scaleMember{id: fmt.Sprintf("member-%06d", i)}
		res.worstJoin = max(res.worstJoin, heartbeat(ms[i]))
	}
	res.join = time.Since(start)
	start = time.Now()
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = 1
		req.Groups = []string{testGroup}
		if d := c.ConsumerGroupDescribe(ctx, req).Groups[0]; d.State == "Stable" {
			if len(d.Members) != n {
				tb.Fatalf("%d members, want %d", len(d.Members), n)
			}
			break
		}
		if res.rounds++; res.rounds > 10 {
			tb.Fatalf("not Stable after %d rounds of heartbeats", res.rounds-1)
		}
		for _, m := range ms {
			res.worstHeartbeat = max(res.worstHeartbeat, heartbeat(m))
		}
	}
	res.reconcile = time.Since(start)
	owned := map[tpKey]string{}
	for _, m := range ms {
		for _, t := range m.owned {
			for _, p := range t.Partitions {
				if o, dup := owned[tpKey{t.TopicID, p}]; dup {
					tb.Fatalf("partition %d owned by %s and %s", p, o, m.id)
				}
				owned[tpKey{t.TopicID, p}] = m.id
			}
		}
	}
	if len(owned) != 1000 {
		tb.Fatalf("%d partitions owned once Stable, want 1000", len(owned))
	}
	return res
}

// TestConsumerGroupJoinScale joins 2,000 and 4,000 members to one
// consumer group by topic name and by regex, then heartbeats them until
// the group is Stable, and logs the time taken and the slowest heartbeat.
// Run with -group.scale:
//
//	go test -run TestConsumerGroupJoinScale -v ./internal/coordinator/group/ -args -group.scale
func TestConsumerGroupJoinScale(t *testing.T) {
	if !*scaleFlag || testing.Short() {
		t.Skip("run with -group.scale")
	}
	for _, n := range []int{2000, 4000} {
		for _, regex := range []string{"", "t"} {
			kind := "names"
			if regex != "" {
				kind = "regex"
			}
			t.Run(fmt.Sprintf("members=%d/%s", n, kind), func(t *testing.T) {
				r := joinAndReconcile(t, n, regex)
				t.Logf("members=%d %s: joined in %v (slowest heartbeat %v), Stable after %d rounds in %v (slowest heartbeat %v)",
					n, kind, r.join.Round(time.Millisecond), r.worstJoin.Round(time.Microsecond),
					r.rounds, r.reconcile.Round(time.Millisecond), r.worstHeartbeat.Round(time.Microsecond))
			})
		}
	}
}

// BenchmarkConsumerGroupJoin is joinAndReconcile with 1,000 members, by
// topic name and by regex: join-ms is the time all joins took, worst-ms
// the slowest heartbeat of the joins.
func BenchmarkConsumerGroupJoin(b *testing.B) {
	for _, regex := range []string{"", "t"} {
		name := "members=1000/names"
		if regex != "" {
			name = "members=1000/regex"
		}
		b.Run(name, func(b *testing.B) {
			var join, worst time.Duration
			for b.Loop() {
				r := joinAndReconcile(b, 1000, regex)
				join += r.join
				worst = max(worst, r.worstJoin)
			}
			b.ReportMetric(float64(join.Milliseconds())/float64(b.N), "join-ms")
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}
