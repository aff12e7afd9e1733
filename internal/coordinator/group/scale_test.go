package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinMembers joins n members to one consumer group, each with one
// ConsumerGroupHeartbeat v1 of epoch 0 subscribing to topic "t" (or to
// regex when set), and returns the slowest heartbeat.
func joinMembers(tb testing.TB, c *Coordinator, n int, regex string) time.Duration {
	tb.Helper()
	var worst time.Duration
	for i := range n {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = testGroup
		req.MemberID = fmt.Sprintf("member-%06d", i)
		req.RebalanceTimeoutMillis = testRebal
		if regex != "" {
			req.SubscribedTopicRegex = &regex
		} else {
			req.SubscribedTopicNames = []string{"t"}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		start := time.Now()
		r := c.ConsumerGroupHeartbeat(context.Background(), Client{ID: "bench", Host: "/127.0.0.1"}, req)
		worst = max(worst, time.Since(start))
		if r.ErrorCode != 0 {
			tb.Fatalf("join %d: error %d", i, r.ErrorCode)
		}
	}
	return worst
}

// scaleCoordinator is a Coordinator over a memStore with one
// __consumer_offsets partition and the given topics.
func scaleCoordinator(tb testing.TB, topics Topics) *Coordinator {
	tb.Helper()
	c := New(Config{OffsetsTopicNumPartitions: 1, ConsumerSessionTimeout: 45 * time.Second}, newMemStore(), nil)
	c.SetTopics(topics)
	if err := c.LoadPartition(context.Background(), 0); err != nil {
		tb.Fatal(err)
	}
	return c
}

// scaleTopics is topic "t" of 1,000 partitions beside 1,000 topics of
// one partition ("other-i") that regex members must skip.
func scaleTopics() *fakeTopics {
	ps := map[string]int32{"t": 1000}
	for i := range 1000 {
		ps[fmt.Sprintf("other-%04d", i)] = 1
	}
	return newFakeTopics(ps)
}

// BenchmarkConsumerGroupJoin joins N members (1,000 and 4,000) to one
// consumer group, by topic name and by regex; worst-ms is the slowest
// heartbeat of the run.
func BenchmarkConsumerGroupJoin(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		for _, regex := range []string{"", "t"} {
			name := fmt.Sprintf("members=%d/names", n)
			if regex != "" {
				name = fmt.Sprintf("members=%d/regex", n)
			}
			b.Run(name, func(b *testing.B) {
				var worst time.Duration
				for b.Loop() {
					b.StopTimer()
					c := scaleCoordinator(b, scaleTopics())
					b.StartTimer()
					worst = max(worst, joinMembers(b, c, n, regex))
					b.StopTimer()
					c.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
			})
		}
	}
}
