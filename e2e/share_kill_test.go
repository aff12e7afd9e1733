package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestShareGroupKillLeader: a 3-node cluster of real processes; a share
// consumer accepts records (acknowledgements confirmed by the broker) and
// holds others acquired, then the share-partition's leader is killed with
// SIGKILL. A second consumer finishes the queue: every record is delivered,
// none accepted before the kill is delivered again.
func TestShareGroupKillLeader(t *testing.T) {
	const topic, group, total = "jobs", "workers", 300
	c, cl := startKillCluster(t, topic, 1,
		"replica.lag.time.max.ms=2000",
		"default.replication.factor=3",
		"group.share.min.record.lock.duration.ms=1000",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000"} {
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Value, cf.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		rr.Configs = append(rr.Configs, cf)
	}
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatal(err, resp)
	}
	// The configs reach every broker through the metadata log; the share-
	// partition reads the reset policy when it starts, on the leader.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	dreq.Resources = append(dreq.Resources, dr)
	for _, id := range c.Brokers() {
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("the group configs on node %d", id), func() bool {
			resp, err := dreq.RequestWith(ctx, cl.Broker(int(id)))
			return err == nil && len(resp.Resources) == 1 && len(resp.Resources[0].Configs) > 0 && describedAll(resp.Resources[0].Configs)
		})
	}
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	confirmed := map[string]bool{} // records whose Accept the broker confirmed
	ackErrs := 0
	cb := kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
		if rs.Error() != nil {
			mu.Lock()
			ackErrs++
			mu.Unlock()
		}
	})
	a, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(20), kgo.ShareMaxRecordsStrict(), kgo.FetchMaxWait(500*time.Millisecond), cb)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for accepted < 100 {
		fs := a.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("consumer A timed out")
		}
		var keys []string
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			keys = append(keys, string(r.Key))
			accepted++
		}
		if err := a.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if ackErrs > 0 {
			t.Fatalf("acks failed before the kill")
		}
		for _, k := range keys {
			confirmed[k] = true
		}
		mu.Unlock()
	}
	held := a.PollFetches(ctx).Records() // acquired, never acknowledged
	t.Logf("A accepted %d, holds %d", accepted, len(held))

	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := td[topic].Partitions[0].Leader
	c.Node(leader).Kill()
	t.Logf("killed node %d", leader)

	mu.Lock()
	before := len(confirmed)
	mu.Unlock()
	b, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Close()
	after := map[string]int{}
	redelivered := 0
	for {
		mu.Lock()
		n := len(confirmed)
		for k := range after {
			if !confirmed[k] {
				n++
			}
		}
		mu.Unlock()
		if n >= total {
			break
		}
		fs := b.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer B timed out: %d of %d confirmed before, %d after", before, total, len(after))
		}
		for _, r := range fs.Records() {
			k := string(r.Key)
			after[k]++
			if r.DeliveryCount() > 1 {
				redelivered++
			}
			mu.Lock()
			if confirmed[k] {
				t.Errorf("record %s (delivery %d) accepted before the kill delivered again", k, r.DeliveryCount())
			}
			mu.Unlock()
			r.Ack(kgo.AckAccept)
		}
	}
	t.Logf("%d confirmed before the kill, %d delivered after (%d redeliveries)", before, len(after), redelivered)
}

// describedAll reports whether both group configs the test sets are
// described with their values.
// startKillCluster starts a 3-node cluster of real processes whose
// brokers are fenced 3 s after they stop heartbeating (every 300 ms) and
// whose __consumer_offsets has 3 replicas, 2 in sync at least, with more
// overrides; it creates topic (partitions, 3 replicas) and returns a
// client of the cluster, closed at the end of the test.
func startKillCluster(t *testing.T, topic string, partitions int32, overrides ...string) (*proctest.Cluster, *kgo.Client) {
	t.Helper()
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3, Overrides: append([]string{
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=300",
		"offsets.topic.replication.factor=3",
		"min.insync.replicas=2",
	}, overrides...)})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	return c, cl
}

func describedAll(cs []kmsg.DescribeConfigsResponseResourceConfig) bool {
	n := 0
	for _, c := range cs {
		if c.Value != nil && (c.Name == "share.auto.offset.reset" && *c.Value == "earliest" || c.Name == "share.record.lock.duration.ms" && *c.Value == "2000") {
			n++
		}
	}
	return n == 2
}
