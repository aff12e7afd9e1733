package samsa_test

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// startRackCluster starts three nodes in racks rack-1..rack-3 with Kafka's
// RackAwareReplicaSelector, fencing a silent broker after 6 s (not less:
// a loaded machine must not fence live brokers, which leave the ISR and
// lose their consumers), creates
// topic (one partition on all three) and produces records to it with
// acks=all. It returns the cluster, the producer, the partition's leader
// and a follower.
func startRackCluster(t *testing.T, topic string, records int) (c *samsa.Cluster, pcl *kgo.Client, leader, follower int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodeProps := map[int32]map[string]string{}
	for id := int32(1); id <= 3; id++ {
		nodeProps[id] = map[string]string{"broker.rack": "rack-" + strconv.Itoa(int(id))}
	}
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(), NodeProperties: nodeProps, Properties: map[string]string{
		"replica.selector.class":           "org.apache.kafka.common.replica.RackAwareReplicaSelector",
		"broker.session.timeout.ms":        "6000",
		"broker.heartbeat.interval.ms":     "250",
		"offsets.topic.replication.factor": "3",
	}})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_, adm := clusterClients(t, c)
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	td := describe(t, adm, topic)
	p := td.Partitions[0]
	waitFor(t, 20*time.Second, "a full ISR", func() bool {
		td := describe(t, adm, topic)
		p = td.Partitions[0]
		return len(p.ISR) == 3 && p.Leader >= 0
	})
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if b.Rack == nil || *b.Rack != "rack-"+strconv.Itoa(int(b.NodeID)) {
			t.Errorf("Metadata: broker %d rack %v", b.NodeID, b.Rack)
		}
	}
	pcl, err = kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pcl.Close)
	produceN(t, pcl, topic, records)
	waitFor(t, 20*time.Second, "a full ISR after producing", func() bool {
		return len(describe(t, adm, topic).Partitions[0].ISR) == 3
	})
	for _, r := range p.Replicas {
		if r != p.Leader {
			return c, pcl, p.Leader, r
		}
	}
	t.Fatal("no follower")
	return nil, nil, 0, 0
}

// bytesOut returns each node's bytes served to consumers.
func bytesOut(c *samsa.Cluster) map[int32]int64 {
	out := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		if n := c.Node(id); n != nil {
			out[id] = samsa.ConsumerBytesOut(n)
		}
	}
	return out
}

// TestFetchFromFollower is KIP-392 with franz-go: a consumer with a rack
// (kgo.Rack) reads from the in-sync follower in its rack, not from the
// leader, and back from the leader once that follower has left the ISR.
func TestFetchFromFollower(t *testing.T) {
	const topic = "racks"
	c, pcl, leader, follower := startRackCluster(t, topic, 200)
	before := bytesOut(c)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.Rack("rack-"+strconv.Itoa(int(follower))),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecheckPreferredReplicaInterval(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	consume := func(want int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for got := 0; got < want; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, want)
			}
			got += fs.NumRecords()
		}
	}
	consume(200)
	after := bytesOut(c)
	if d := after[follower] - before[follower]; d <= 0 {
		t.Errorf("follower %d (the consumer's rack) served %d bytes, want the 200 records", follower, d)
	}
	for id := int32(1); id <= 3; id++ {
		if id != follower && after[id] != before[id] {
			t.Errorf("node %d (leader %d) served %d bytes to the consumer, want none", id, leader, after[id]-before[id])
		}
	}

	// The follower stops: once fenced it leaves the ISR, and the leader
	// keeps the consumer when it checks back (RecheckPreferredReplicaInterval).
	if err := c.StopNode(follower); err != nil {
		t.Fatal(err)
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	waitFor(t, 30*time.Second, "the follower out of the ISR", func() bool {
		p := describe(t, adm, topic).Partitions[0]
		return !slices.Contains(p.ISR, follower)
	})
	before = bytesOut(c)
	produceN(t, pcl, topic, 200)
	consume(200)
	after = bytesOut(c)
	if d := after[leader] - before[leader]; d <= 0 {
		t.Errorf("leader %d served %d bytes after the follower left, want the 200 records", leader, d)
	}
}

// TestFetchFromFollowerLibrdkafka is KIP-392 with librdkafka
// (confluent-kafka's client.rack): its consumer reads from the follower in
// its rack.
func TestFetchFromFollowerLibrdkafka(t *testing.T) {
	if !havePythonKafka(t) {
		t.Skip("no confluent-kafka")
	}
	const topic = "racks-rdkafka"
	c, _, leader, follower := startRackCluster(t, topic, 200)
	before := bytesOut(c)
	script := `
import sys
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 'rack-test', 'client.rack': sys.argv[3],
              'enable.auto.commit': False})
c.assign([TopicPartition(sys.argv[2], 0, OFFSET_BEGINNING)])
n = 0
while n < 200:
    m = c.poll(20)
    if m is None:
        sys.exit('timed out after %d records' % n)
    if m.error():
        continue
    n += 1
c.close()
`
	out, stderr, err := stdoutOnly(exec.Command(python3, "-c", script, c.Addrs()[0], topic, "rack-"+strconv.Itoa(int(follower))))
	if err != nil {
		t.Fatalf("librdkafka consumer: %v\n%s\nstderr:\n%s", err, out, stderr)
	}
	after := bytesOut(c)
	if d := after[follower] - before[follower]; d <= 0 {
		t.Errorf("follower %d (the consumer's rack) served %d bytes, want the 200 records", follower, d)
	}
	if d := after[leader] - before[leader]; d != 0 {
		t.Errorf("leader %d served %d bytes, want none", leader, d)
	}
}

// TestFollowerFetchRules sends raw Fetch requests to a follower and to the
// leader, checking Kafka's rules (ReplicaManager.readFromLog,
// Partition.fetchRecords): a follower serves consumers' Fetch v11+ up to
// its high-watermark and answers older versions and replicas'
// fetches with NOT_LEADER_OR_FOLLOWER, a stale leader epoch with
// FENCED_LEADER_EPOCH and an offset past its log with
// OFFSET_OUT_OF_RANGE; the leader answers a consumer in the follower's
// rack with preferred_read_replica and no records.
func TestFollowerFetchRules(t *testing.T) {
	const topic = "rules"
	c, cl, leader, follower := startRackCluster(t, topic, 10)
	adm := kadm.NewClient(cl)
	p := describe(t, adm, topic).Partitions[0]
	conns := map[int32]net.Conn{}
	corr := int32(0)
	isolation := int8(0)
	fetch := func(broker int32, version int16, replica int32, rack string, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.IsolationLevel = isolation
		req.ReplicaID, req.MaxBytes, req.Rack = replica, 1<<20, rack
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, offset, 1<<20, epoch
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// Raw, at the version given (a client would pick its own).
		if conns[broker] == nil {
			conns[broker] = dial(t, c.Node(broker).Addr())
		}
		corr++
		resp := roundTrip(t, conns[broker], req, corr).(*kmsg.FetchResponse)
		return resp.Topics[0].Partitions[0]
	}
	// The follower has the records once its HW reached 10.
	waitFor(t, 10*time.Second, "the follower's high-watermark", func() bool {
		return fetch(follower, 11, -1, "", 0, -1).HighWatermark == 10
	})
	rack := "rack-" + strconv.Itoa(int(follower))
	for _, tc := range []struct {
		name    string
		broker  int32
		version int16
		replica int32
		rack    string
		offset  int64
		epoch   int32
		code    int16
		records bool
		prefer  int32
	}{
		{"consumer v11 from the follower", follower, 11, -1, rack, 0, p.LeaderEpoch, 0, true, -1},
		{"consumer v12 at the follower's log end", follower, 12, -1, "", 10, -1, 0, false, -1},
		{"consumer v10 from the follower", follower, 10, -1, "", 0, -1, kerr.NotLeaderForPartition.Code, false, -1},
		{"replica fetch from the follower", follower, 12, leader, "", 0, -1, kerr.NotLeaderForPartition.Code, false, -1},
		{"newer leader epoch", follower, 12, -1, "", 0, p.LeaderEpoch + 1, kerr.UnknownLeaderEpoch.Code, false, -1},
		{"past the follower's log", follower, 12, -1, "", 11, -1, kerr.OffsetOutOfRange.Code, false, -1},
		{"leader, consumer in the follower's rack", leader, 11, -1, rack, 0, -1, 0, false, follower},
		{"leader, consumer in no rack", leader, 11, -1, "", 0, -1, 0, true, -1},
		{"leader, consumer v10 with no rack field", leader, 10, -1, "", 0, -1, 0, true, -1},
	} {
		if tc.name == "newer leader epoch" && p.LeaderEpoch > 0 {
			// FENCED_LEADER_EPOCH for an older one.
			if got := fetch(tc.broker, 12, -1, "", 0, p.LeaderEpoch-1); got.ErrorCode != kerr.FencedLeaderEpoch.Code {
				t.Errorf("older leader epoch: %v", kerr.ErrorForCode(got.ErrorCode))
			}
		}
		got := fetch(tc.broker, tc.version, tc.replica, tc.rack, tc.offset, tc.epoch)
		if got.ErrorCode != tc.code || (len(got.RecordBatches) > 0) != tc.records || got.PreferredReadReplica != tc.prefer {
			t.Errorf("%s: %v, %d bytes, preferred %d; want %v, records %v, preferred %d", tc.name,
				kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches), got.PreferredReadReplica, kerr.ErrorForCode(tc.code), tc.records, tc.prefer)
		}
	}

	// read_committed on the follower: up to the last stable offset it
	// knows, which an open transaction holds back.
	tcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("rack-tx"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tcl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	isolation = 1
	waitFor(t, 10*time.Second, "the open transaction on the follower", func() bool {
		return fetch(follower, 12, -1, "", 0, -1).HighWatermark == 11
	})
	if got := fetch(follower, 12, -1, "", 10, -1); got.LastStableOffset != 10 || len(got.RecordBatches) != 0 {
		t.Errorf("read_committed past an open transaction on the follower: LSO %d, %d bytes; want 10, none", got.LastStableOffset, len(got.RecordBatches))
	}
	if err := tcl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the commit on the follower", func() bool {
		got := fetch(follower, 12, -1, "", 10, -1)
		return got.LastStableOffset == 12 && len(got.RecordBatches) > 0
	})
}
