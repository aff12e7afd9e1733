package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa"
)

// listOffset sends one ListOffsets (latest, read_uncommitted) for lag-0 to
// broker id with replicaID at version (or the highest the client allows), and returns the partition's
// offset and error code.
func listOffset(t *testing.T, ctx context.Context, cl *kgo.Client, id, replicaID int32, version int16) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = replicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lag"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatalf("ListOffsets to %d: %v", id, err)
	}
	p := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestListOffsetsAfterLeaderChange: a leader elected with a high-watermark
// below the log end offset it had at election answers a consumer's
// ListOffsets latest with OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE
// before) until its high-watermark reaches that offset (KIP-207), where
// Samsa served the lower high-watermark with NONE; a follower answers a
// consumer NOT_LEADER_OR_FOLLOWER, where it served its own lagging
// high-watermark; a debugging replica id (-2) reads any replica's log end.
// OffsetForLeaderEpoch answers a consumer the old epoch's end, not the
// lagging high-watermark.
// Replicas [1,2,3]; node 3's fetches are throttled to 1 KB/s, so the
// high-watermark trails node 2's log end when node 1 stops.
func TestListOffsetsAfterLeaderChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(),
		Properties:     map[string]string{"broker.heartbeat.interval.ms": "500", "replica.lag.time.max.ms": "120000"},
		NodeProperties: map[int32]map[string]string{3: {"follower.replication.throttled.rate": "1000"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createAssigned(t, ctx, cl, "lag", []int32{1, 2, 3}, map[string]string{"follower.replication.throttled.replicas": "*"})
	waitFor(t, 20*time.Second, "leader 1", func() bool { return describe(t, adm, "lag").Partitions[0].Leader == 1 })
	const n = 200
	value := make([]byte, 1000)
	for range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lag", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "node 2 to replicate every record", func() bool {
		off, code := listOffset(t, ctx, cl, 2, -2, 7)
		return code == 0 && off == n
	})
	if off, code := listOffset(t, ctx, cl, 1, -1, 7); code != 0 || off >= n {
		t.Fatalf("high-watermark on leader 1: %d (error %d), want < %d (node 3 throttled)", off, code, n)
	}
	if _, code := listOffset(t, ctx, cl, 2, -1, 7); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower 2 answered a consumer's ListOffsets with error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}

	oldEpoch := describe(t, adm, "lag").Partitions[0].LeaderEpoch
	if err := c.StopNode(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "leader 2", func() bool {
		_, code := listOffset(t, ctx, cl, 2, -1, 7)
		return code != kerr.NotLeaderForPartition.Code
	})
	if off, code := listOffset(t, ctx, cl, 2, -1, 7); code != kerr.OffsetNotAvailable.Code {
		t.Fatalf("new leader's ListOffsets v7: offset %d error %d, want OFFSET_NOT_AVAILABLE", off, code)
	}
	// Clients set the highest version both sides support: v4 is Kafka
	// 2.1's.
	old, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V2_1_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, code := listOffset(t, ctx, old, 2, -1, 4); code != kerr.LeaderNotAvailable.Code {
		t.Fatalf("new leader's ListOffsets v4: error %d, want LEADER_NOT_AVAILABLE", code)
	}
	if off, code := listOffset(t, ctx, cl, 2, -2, 7); code != 0 || off != n {
		t.Fatalf("debug ListOffsets on the new leader: %d (error %d), want its log end %d", off, code, n)
	}
	if _, code := listOffset(t, ctx, cl, 3, -1, 7); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower 3 answered a consumer's ListOffsets with error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}

	// A consumer that read up to n in the old epoch asks where it ended:
	// at n, not at the new leader's lagging high-watermark (which would
	// read as a truncation and make it poll records again).
	oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oreq.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "lag"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = -1, oldEpoch
	ot.Partitions = append(ot.Partitions, op)
	oreq.Topics = append(oreq.Topics, ot)
	kresp, err := cl.Broker(2).Request(ctx, oreq)
	if err != nil {
		t.Fatal(err)
	}
	if p := kresp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset != n {
		t.Fatalf("OffsetForLeaderEpoch(%d) on the new leader: end offset %d (error %d), want %d", oldEpoch, p.EndOffset, p.ErrorCode, n)
	}

	// Lift node 3's throttle: the high-watermark catches up and is served.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: kmsg.StringPtr("100000000")}}, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the new leader's high-watermark", func() bool {
		off, code := listOffset(t, ctx, cl, 2, -1, 7)
		return code == 0 && off == n
	})
}
