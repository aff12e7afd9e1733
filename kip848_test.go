package samsa_test

import (
	"context"
	"log/slog"
	"strings"
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

// Consumer groups of the KIP-848 protocol (ConsumerGroupHeartbeat),
// through franz-go consumers that opt in with kgo.ServerSideBalancer.

// kip848Props lets consumer group members heartbeat fast and expire
// quickly, for the tests.
func kip848Props() map[string]string {
	p := map[string]string{
		"group.consumer.min.session.timeout.ms":    "1000",
		"group.consumer.session.timeout.ms":        "3000",
		"group.consumer.min.heartbeat.interval.ms": "100",
		"group.consumer.heartbeat.interval.ms":     "200",
	}
	for k, v := range groupProps {
		p[k] = v
	}
	return p
}

// rawConsumer is a member driven by hand: it joins by ConsumerGroupHeartbeat
// and then goes silent, as a consumer that crashed.
func rawConsumerJoin(ctx context.Context, t *testing.T, cl *kgo.Client, groupID, topic string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = groupID
	req.MemberID = "crashing-member-0000000"
	req.RebalanceTimeoutMillis = 10000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if kerr.IsRetriable(err) && ctx.Err() == nil {
				continue
			}
			t.Fatalf("raw join: %v", err)
		}
		return resp
	}
}

// runKIP848 has franz-go consumers of one KIP-848 group consume topic
// (partitions partitions, total records): c1 alone, then a member that
// crashes holding partitions (they come back after the session timeout),
// then c2 and c3 join, c3 leaves; every record is consumed once and the
// committed offsets reach the end of every partition.
//
// failover, if set, runs while the three members share the partitions
// (the cluster test stops and restarts the group's coordinator there).
func runKIP848(t *testing.T, seeds []string, admin *kgo.Client, topic string, partitions int32, total int, failover func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const groupID = "kip848-group"
	r := &groupRun{t: t, topic: topic, want: total, seen: map[tpo]string{}, changed: make(chan struct{})}
	var wg sync.WaitGroup
	stops := map[*member]func(){}
	start := func(name string) *member {
		m, stop := r.startMember(ctx, &wg, seeds, name, groupID, r.done, kgo.ServerSideBalancer())
		// stop ends the member's polling, then it leaves the group.
		stops[m] = func() {
			stop()
			m.cl.Close()
		}
		return m
	}
	c1 := start("c1")
	r.waitFor(ctx, "c1 has every partition", func() bool { return len(r.assignment(c1)[0]) == int(partitions) })

	// A member joins and crashes: c1 revokes what it is given, and gets
	// it back once the crashed member's session expires.
	raw := rawConsumerJoin(ctx, t, admin, groupID, topic)
	if raw.MemberEpoch <= 0 {
		t.Fatalf("raw member epoch %d", raw.MemberEpoch)
	}
	r.waitFor(ctx, "c1 revokes for the crashing member", func() bool { return len(r.assignment(c1)[0]) < int(partitions) })
	r.waitFor(ctx, "c1 gets the crashed member's partitions back", func() bool { return len(r.assignment(c1)[0]) == int(partitions) })

	c2, c3 := start("c2"), start("c3")
	r.waitFor(ctx, "three members share the partitions", func() bool { return disjointCover(r.assignment(c1, c2, c3), partitions) })
	d, err := kadm.NewClient(admin).DescribeConsumerGroups(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if g := d[groupID]; g.Err != nil || len(g.Members) != 3 {
		t.Fatalf("ConsumerGroupDescribe: %+v", g)
	}
	if failover != nil {
		failover(ctx)
		r.waitFor(ctx, "three members share the partitions after the failover", func() bool { return disjointCover(r.assignment(c1, c2, c3), partitions) })
	}
	stops[c3]()
	r.waitFor(ctx, "c1 and c2 share the partitions", func() bool { return disjointCover(r.assignment(c1, c2), partitions) })
	r.waitFor(ctx, "every record consumed", r.done)
	for _, c := range []*member{c1, c2} {
		if err := c.cl.CommitMarkedOffsets(ctx); err != nil {
			t.Errorf("%s: final commit: %v", c.name, err)
		}
		stops[c]()
	}
	wg.Wait()
	if r.dups != 0 || r.count() != total {
		t.Fatalf("consumed %d records (%d twice), want %d", r.count(), r.dups, total)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	offs, err := kadm.NewClient(admin).FetchOffsets(fctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(total) {
		t.Fatalf("committed offsets sum to %d, want %d", sum, total)
	}
}

func TestGroupKIP848Consumers(t *testing.T) {
	n := startNode(t, t.TempDir(), kip848Props())
	admin := newClient(t, n)
	const topic, partitions, total = "kip848", 6, 3000
	createTopic(t, admin, topic, partitions, nil)
	produceN(t, admin, topic, total)
	runKIP848(t, []string{n.Addr()}, admin, topic, partitions, total, nil)
}

// The same on 3 nodes, with the group's coordinator stopped and started
// again while the group is stable: the next leader of its
// __consumer_offsets partition reloads the group (epochs, members,
// assignments) and the members go on without losing partitions.
func TestClusterKIP848Consumers(t *testing.T) {
	props := kip848Props()
	for k, v := range map[string]string{"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000",
		"replica.lag.time.max.ms": "3000", "offsets.topic.num.partitions": "3"} {
		props[k] = v
	}
	c := startCluster(t, 3, props)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	const topic, partitions, total = "kip848c", 6, 3000
	if resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	produceN(t, admin, topic, total)
	runKIP848(t, c.Addrs(), admin, topic, partitions, total, func(ctx context.Context) {
		// The new coordinator restarts the members' sessions when it
		// loads the group, as Kafka's does; a member that reaches it
		// only after a session timeout is fenced and loses its
		// partitions. Reaching it takes the client's retry backoffs
		// (up to 2.5 s) after the old one went: more than the 3 s
		// session on a loaded machine ("c1 lost partitions"). The
		// crashed member's expiry is behind us: the group's session
		// (KIP-848 group config) becomes 20 s, on every node.
		if code, msg := alterGroupConfig(t, admin, "kip848-group", set("consumer.session.timeout.ms", "20000")); code != 0 {
			t.Fatalf("alter group config: %v %s", kerr.ErrorForCode(code), msg)
		}
		for _, id := range []int{1, 2, 3} {
			waitFor(t, 30*time.Second, "the group's session timeout on every node", func() bool {
				cfg, err := tryDescribeGroupConfig(admin.Broker(id), "kip848-group")
				return err == nil && orNull(cfg["consumer.session.timeout.ms"].Value) == "20000"
			})
		}
		coord := adm.FindGroupCoordinators(ctx, "kip848-group")["kip848-group"]
		if coord.Err != nil {
			t.Fatalf("FindCoordinator: %v", coord.Err)
		}
		node := coord.NodeID
		if err := c.StopNode(node); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "another coordinator", func() bool {
			cs := adm.FindGroupCoordinators(ctx, "kip848-group")["kip848-group"]
			return cs.Err == nil && cs.NodeID != node
		})
		if err := c.StartNode(ctx, node); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConsumerGroupRegexBounded: a ConsumerGroupHeartbeat subscribing a
// regex longer than 4096 bytes gets INVALID_REGULAR_EXPRESSION at once
// (beyond Kafka: before, a 600 KB pattern was compiled and matched on the
// group coordinator's goroutine for 15 s, every group of the node waiting),
// one of 4096 bytes joins.
func TestConsumerGroupRegexBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), kip848Props())
	cl := newClient(t, n)
	createTopic(t, cl, "aaaa", 1, nil)
	for _, c := range []struct {
		regex string
		code  int16
	}{
		{strings.Repeat("(a|b)*", 20_000), kerr.InvalidRegularExpression.Code},
		{"a*" + strings.Repeat("a?", 2047), 0},
	} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.RebalanceTimeoutMillis = "regex", "member-0000000000000000", 10_000
		req.SubscribedTopicRegex = &c.regex
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		waitFor(t, 30*time.Second, "a ConsumerGroupHeartbeat answer", func() bool {
			var err error
			resp, err = req.RequestWith(ctx, cl)
			return err == nil && !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode))
		})
		if resp.ErrorCode != c.code {
			t.Fatalf("a join with a regex of %d bytes: %v, want %v", len(c.regex), kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(c.code))
		}
	}
}

// TestGroupLogsClipClientStrings: the member and group ids a client chose
// are clipped in the coordinator's log lines (clip.String, 256 bytes and
// a marker): a member joining with a 100 KB member id and a 20 KB group
// id logs "consumer group member joined" in a line under 4 KB, not one of
// 120 KB. (franz-go refuses client ids past 256 bytes, so the client id,
// clipped the same way, is not tried here.)
func TestGroupLogsClipClientStrings(t *testing.T) {
	logs := new(testutil.SyncBuffer)
	n := startConfig(t, samsa.Config{Dir: t.TempDir(), Properties: kip848Props(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, n)
	createTopic(t, cl, "clip", 1, nil)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = strings.Repeat("g", 20_000), strings.Repeat("m", 100_000), 10_000
	req.SubscribedTopicNames = []string{"clip"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	waitFor(t, 30*time.Second, "a ConsumerGroupHeartbeat answer", func() bool {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode != 0 && !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return err == nil && resp.ErrorCode == 0
	})
	joined := false
	for line := range strings.Lines(logs.String()) {
		if len(line) > 4<<10 {
			t.Fatalf("a log line of %d bytes: %.200s...", len(line), line)
		}
		joined = joined || strings.Contains(line, "consumer group member joined")
	}
	if !joined {
		t.Fatal("no line logged the member joining")
	}
}
