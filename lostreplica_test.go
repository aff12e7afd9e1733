package samsa_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// breakPartitionDir replaces the directory of partition tp of the node
// whose log dir is nodeDir with a regular file: its log can be neither
// loaded nor created.
func breakPartitionDir(t *testing.T, nodeDir, tp string) {
	t.Helper()
	dir := filepath.Join(nodeDir, tp)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("partition dir: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// partitionMetadata asks broker id of cl for partition 0..n of topic.
func partitionMetadata(ctx context.Context, cl *kgo.Client, id int32, topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("%d topics", len(resp.Topics))
	}
	ps := resp.Topics[0].Partitions
	slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	return ps, nil
}

// produceAndConsume writes n records to partition p of topic with acks=all
// through a new client of addrs and reads them back; any error fails.
func produceAndConsume(t *testing.T, addrs []string, topic string, p int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lo := kadmEnd(t, ctx, cl, topic, p)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(lo)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s-%d from offset %d", got, n, topic, p, lo)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			t.Fatalf("consume %s-%d: %v", topic, p, err)
		})
		got += fs.NumRecords()
	}
}

// kadmEnd is the log end offset of partition p of topic.
func kadmEnd(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var end int64
	waitFor(t, 20*time.Second, "the end offset of "+topic, func() bool {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			return false
		}
		end = resp.Topics[0].Partitions[0].Offset
		return true
	})
	return end
}

// TestLostReplicaMovesLeadership: the leader of a partition restarts (no
// controlled shutdown: a clean restart keeps its leaderships, KIP-966)
// with that partition's directory replaced by a regular file. It reports
// the replica lost (AssignReplicasToDirs to DirectoryId.LOST, KIP-858):
// leadership moves to another in-sync replica and the ISR drops it, so
// acks=all produces and consumes go on, instead of KAFKA_STORAGE_ERROR
// until clients time out. Once the file is gone and the broker restarts,
// it rejoins the ISR through AlterPartition.
func TestLostReplicaMovesLeadership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "lost"
	dir := t.TempDir()
	c, cl, _ := startReplicatedTopic(t, ctx, topic, 2, nil, samsa.ClusterConfig{Dir: dir, HTTPListeners: true, Properties: map[string]string{
		// A session far longer than the test: leadership must move
		// because the broker reported the replica, not because its
		// session expired.
		"broker.session.timeout.ms": "60000",
	}})
	waitFor(t, 30*time.Second, "full ISR", func() bool {
		ps, err := partitionMetadata(ctx, cl, c.Brokers()[0], topic)
		return err == nil && len(ps) == 2 && len(ps[0].ISR) == 3 && len(ps[1].ISR) == 3 && ps[0].Leader >= 0
	})
	produceAndConsume(t, c.Addrs(), topic, 0, 10)
	ps, err := partitionMetadata(ctx, cl, c.Brokers()[0], topic)
	if err != nil {
		t.Fatal(err)
	}
	victim := ps[0].Leader
	survivor := victim%3 + 1

	if err := samsa.StopWithoutControlledShutdown(c, victim); err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(int(victim)))
	breakPartitionDir(t, nodeDir, topic+"-0")
	if err := c.StartNode(ctx, victim); err != nil {
		t.Fatalf("node %d did not start with an unhostable partition: %v", victim, err)
	}
	var last []kmsg.MetadataResponseTopicPartition
	out := func() bool {
		ps, err := partitionMetadata(ctx, cl, survivor, topic)
		if err != nil || len(ps) != 2 {
			return false
		}
		last = ps
		p := ps[0]
		return p.ErrorCode == 0 && p.Leader >= 0 && p.Leader != victim && !slices.Contains(p.ISR, victim) && len(p.ISR) == 2 &&
			slices.Equal(p.OfflineReplicas, []int32{victim})
	}
	testutilWait(t, 20*time.Second, func() string {
		return fmt.Sprintf("node %d out of the leadership and ISR of %s-0, listed offline (last: %+v)", victim, topic, last)
	}, out)
	// The other partition is untouched.
	if p := last[1]; len(p.ISR) != 3 || len(p.OfflineReplicas) != 0 {
		t.Fatalf("%s-1: ISR %v, offline %v; want the full ISR", topic, p.ISR, p.OfflineReplicas)
	}
	produceAndConsume(t, c.Addrs(), topic, 0, 10)
	produceAndConsume(t, c.Addrs(), topic, 1, 10)
	if v := scrapeGauge(t, c.HTTPAddr(victim), "kafka_server_replicamanager_offlinereplicacount"); v != "1" {
		t.Fatalf("OfflineReplicaCount of node %d: %q, want 1", victim, v)
	}

	// The operator fixes the disk; the broker restarts, reports the
	// replica hosted, follows and rejoins the ISR.
	if err := c.StopNode(victim); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(nodeDir, topic+"-0")); err != nil {
		t.Fatal(err)
	}
	if err := c.StartNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	testutilWait(t, 30*time.Second, func() string {
		return fmt.Sprintf("node %d back in the ISR of %s-0 (last: %+v)", victim, topic, last)
	}, func() bool {
		ps, err := partitionMetadata(ctx, cl, survivor, topic)
		if err != nil || len(ps) != 2 {
			return false
		}
		last = ps
		return ps[0].Leader >= 0 && len(ps[0].ISR) == 3 && len(ps[0].OfflineReplicas) == 0
	})
	if v := scrapeGauge(t, c.HTTPAddr(victim), "kafka_server_replicamanager_offlinereplicacount"); v != "0" {
		t.Fatalf("OfflineReplicaCount of node %d after the fix: %q, want 0", victim, v)
	}
	produceAndConsume(t, c.Addrs(), topic, 0, 10)
}

// TestLostReplicaSingleReplica: a partition of replication factor 1 whose
// only replica cannot be hosted has no leader (leader -1,
// LEADER_NOT_AVAILABLE, as Kafka shows an offline partition) and counts in
// OfflinePartitionsCount, while the other partitions of its topic and the
// other topics are served; once fixed and restarted, the broker leads it
// again.
func TestLostReplicaSingleReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, dir, id, cl := startSingleNode(t, ctx)
	createTopicRF(t, ctx, cl, "solo", 2, 1)
	createTopicRF(t, ctx, cl, "other", 1, 1)
	produceAndConsume(t, c.Addrs(), "solo", 0, 5)

	if err := c.StopNode(id); err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(int(id)))
	breakPartitionDir(t, nodeDir, "solo-0")
	if err := c.StartNode(ctx, id); err != nil {
		t.Fatalf("node did not start with an unhostable partition: %v", err)
	}
	var last []kmsg.MetadataResponseTopicPartition
	testutilWait(t, 20*time.Second, func() string { return fmt.Sprintf("solo-0 offline (last: %+v)", last) }, func() bool {
		ps, err := partitionMetadata(ctx, cl, id, "solo")
		if err != nil || len(ps) != 2 {
			return false
		}
		last = ps
		return ps[0].Leader == -1 && ps[0].ErrorCode == kerr.LeaderNotAvailable.Code && slices.Equal(ps[0].OfflineReplicas, []int32{id}) &&
			ps[1].Leader == id && ps[1].ErrorCode == 0
	})
	if v := scrapeGauge(t, c.HTTPAddr(id), "kafka_controller_kafkacontroller_offlinepartitionscount"); v != "1" {
		t.Fatalf("OfflinePartitionsCount: %q, want 1", v)
	}
	produceAndConsume(t, c.Addrs(), "solo", 1, 5)
	produceAndConsume(t, c.Addrs(), "other", 0, 5)

	if err := c.StopNode(id); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(nodeDir, "solo-0")); err != nil {
		t.Fatal(err)
	}
	if err := c.StartNode(ctx, id); err != nil {
		t.Fatal(err)
	}
	testutilWait(t, 20*time.Second, func() string { return fmt.Sprintf("solo-0 led again (last: %+v)", last) }, func() bool {
		ps, err := partitionMetadata(ctx, cl, id, "solo")
		if err != nil || len(ps) != 2 {
			return false
		}
		last = ps
		return ps[0].Leader == id && ps[0].ErrorCode == 0 && len(ps[0].OfflineReplicas) == 0
	})
	if v := scrapeGauge(t, c.HTTPAddr(id), "kafka_controller_kafkacontroller_offlinepartitionscount"); v != "0" {
		t.Fatalf("OfflinePartitionsCount after the fix: %q, want 0", v)
	}
	produceAndConsume(t, c.Addrs(), "solo", 0, 5)
}

// startSingleNode starts a cluster of one node with an HTTP listener in a
// directory of its own, and a client of it; it returns the cluster, that
// directory, the node's id and the client, closed at the end of t.
func startSingleNode(t *testing.T, ctx context.Context) (*samsa.Cluster, string, int32, *kgo.Client) {
	t.Helper()
	dir := t.TempDir()
	c, cl := startClusterClient(t, ctx, samsa.ClusterConfig{Nodes: 1, Dir: dir, HTTPListeners: true})
	return c, dir, c.Brokers()[0], cl
}

// createTopicRF creates topic with partitions partitions of replication
// factor rf.
func createTopicRF(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
}

// testutilWait is waitFor that logs what() when it fails: the last state
// seen.
func testutilWait(t *testing.T, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("while waiting for %s", what())
		}
	}()
	waitFor(t, d, "the condition", cond)
}

// TestLostReplicasOneReport: the partitions a node finds it cannot host
// at start are reported in one AssignReplicasToDirs, however many (Kafka's
// AssignmentsManager batches them too): the cost follows the failures,
// not the partitions.
func TestLostReplicasOneReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, dir, id, cl := startSingleNode(t, ctx)
	const partitions, broken = 200, 50
	createTopicRF(t, ctx, cl, "many", partitions, 1)
	nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(int(id)))
	waitFor(t, 20*time.Second, "the logs of every partition", func() bool {
		for p := range partitions {
			if _, err := os.Stat(filepath.Join(nodeDir, "many-"+strconv.Itoa(p))); err != nil {
				return false
			}
		}
		return true
	})
	if err := c.StopNode(id); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < partitions; p += partitions / broken {
		breakPartitionDir(t, nodeDir, "many-"+strconv.Itoa(p))
	}
	if err := c.StartNode(ctx, id); err != nil {
		t.Fatal(err)
	}
	var offline, led int
	testutilWait(t, 20*time.Second, func() string { return fmt.Sprintf("%d offline, %d led", offline, led) }, func() bool {
		ps, err := partitionMetadata(ctx, cl, id, "many")
		if err != nil {
			return false
		}
		offline, led = 0, 0
		for _, p := range ps {
			switch {
			case p.Leader == -1 && p.Partition%(partitions/broken) == 0:
				offline++
			case p.Leader == id && p.Partition%(partitions/broken) != 0:
				led++
			}
		}
		return offline == broken && led == partitions-broken
	})
	if n := samsa.DirReportsSent(c.Node(id)); n != 1 {
		t.Fatalf("%d AssignReplicasToDirs sent for %d lost replicas, want 1", n, broken)
	}
	if v := scrapeGauge(t, c.HTTPAddr(id), "kafka_server_replicamanager_offlinereplicacount"); v != strconv.Itoa(broken) {
		t.Fatalf("OfflineReplicaCount: %q, want %d", v, broken)
	}
}
