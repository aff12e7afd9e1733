package samsa_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/wire"
)

// describeQuorum asks the cluster (any broker, which forwards it) for the
// metadata quorum.
func describeQuorum(ctx context.Context, cl *kgo.Client) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("malformed DescribeQuorum response %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p, kerr.ErrorForCode(p.ErrorCode)
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	slices.Sort(out)
	return out
}

// TestClusterSeparateRoles: 3 controllers and 3 brokers. Brokers follow the
// metadata quorum as observers; an RF 3 topic takes acks=all writes; when
// the active controller stops another takes over and topics can still be
// created; when a broker stops, leadership moves off it; every acknowledged
// record is read back once.
func TestClusterSeparateRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{
		Controllers: 3,
		Brokers:     3,
		Dir:         t.TempDir(),
		// Sessions long enough that a -race run on a loaded machine does
		// not fence brokers that are merely slow.
		Properties: map[string]string{"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500"},
	})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer c.Close()
	if got := c.Controllers(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("controllers %v", got)
	}
	brokers := c.Brokers()
	if !slices.Equal(brokers, []int32{4, 5, 6}) || len(c.Addrs()) != 3 {
		t.Fatalf("brokers %v, addresses %v", brokers, c.Addrs())
	}
	if addr := c.Node(1).Addr(); addr != "" {
		t.Fatalf("controller-only node has a broker address %q", addr)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// Only brokers are in the cluster's metadata, once unfenced.
	var seenIDs []int32
	defer func() {
		if t.Failed() {
			t.Logf("brokers last seen in the metadata: %v", seenIDs)
		}
	}()
	waitFor(t, 40*time.Second, "every broker in the metadata", func() bool {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seenIDs = md.Brokers.NodeIDs()
		slices.Sort(seenIDs)
		return slices.Equal(seenIDs, brokers)
	})

	// DescribeQuorum through a broker: controllers vote, brokers observe.
	active := c.ActiveController()
	waitFor(t, 20*time.Second, "the brokers as observers in DescribeQuorum", func() bool {
		q, err := describeQuorum(ctx, cl)
		if err != nil {
			t.Logf("describe quorum: %v", err)
			return false
		}
		active = c.ActiveController()
		return q.LeaderID == active && q.HighWatermark > 0 &&
			slices.Equal(replicaIDs(q.CurrentVoters), []int32{1, 2, 3}) && slices.Equal(replicaIDs(q.Observers), brokers)
	})

	checkControllerListeners(t, ctx, c, active)

	resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "roles")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	waitFor(t, 20*time.Second, "full ISRs", func() bool {
		td := describe(t, adm, "roles")
		for _, p := range td.Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 || !slices.Contains(brokers, p.Leader) {
				return false
			}
		}
		return len(td.Partitions) == 3
	})

	produced := map[string]bool{}
	produce := func(n int, tag string) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "roles", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
		}
		for _, r := range cl.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("produce %s: %v", tag, r.Err)
			}
			produced[string(r.Record.Value)] = true
		}
	}
	produce(1000, "before")

	// The active controller stops: another takes over, topics can still
	// be created, and the brokers follow the new leader.
	if active < 0 {
		t.Fatal("no active controller")
	}
	start := time.Now()
	if err := c.StopNode(active); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a new active controller", func() bool {
		a := c.ActiveController()
		return a >= 0 && a != active
	})
	t.Logf("controller %d took over from %d in %v", c.ActiveController(), active, time.Since(start))
	waitFor(t, 30*time.Second, "CreateTopics after the failover", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		resp, err := adm.CreateTopic(cctx, 1, 3, nil, "after-failover")
		if err == nil && (resp.Err == nil || resp.Err == kerr.TopicAlreadyExists) {
			return true
		}
		t.Logf("create after failover: %v %v", err, resp.Err)
		return false
	})
	waitFor(t, 20*time.Second, "the new topic on every broker", func() bool {
		td := describe(t, adm, "after-failover")
		return len(td.Partitions) == 1 && len(td.Partitions[0].ISR) == 3
	})
	produce(500, "after-controller-failover")
	if err := c.StartNode(ctx, active); err != nil {
		t.Fatal(err)
	}

	// A broker stops: leadership of its partitions moves to the others.
	victim := describe(t, adm, "roles").Partitions[0].Leader
	if err := c.StopNode(victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("leadership off broker %d", victim), func() bool {
		for _, p := range describe(t, adm, "roles").Partitions {
			if p.Leader < 0 || p.Leader == victim {
				return false
			}
		}
		return true
	})
	produce(500, fmt.Sprintf("without-%d", victim))
	if err := c.StartNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d back in every ISR", victim), func() bool {
		for _, p := range describe(t, adm, "roles").Partitions {
			if !slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("roles"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]int{}
	for len(seen) < len(produced) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d", len(seen), len(produced))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v := range produced {
		if seen[v] != 1 {
			t.Fatalf("record %s read %d times", v, seen[v])
		}
	}
}

// checkControllerListeners asks each controller listener directly, as
// kafka-metadata-quorum --bootstrap-controller and observers do: the
// leader describes the quorum and serves __cluster_metadata; the others
// answer NOT_LEADER_OR_FOLLOWER naming it.
func checkControllerListeners(t *testing.T, ctx context.Context, c *samsa.Cluster, active int32) {
	t.Helper()
	for _, id := range c.Controllers() {
		cl := wire.NewClient(c.ControllerAddr(id), "test", 64<<20)
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.SetVersion(2)
		req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
		kresp, err := cl.Request(ctx, req)
		if err != nil {
			cl.Close()
			t.Fatalf("DescribeQuorum to controller %d: %v", id, err)
		}
		p := kresp.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]
		nodes := kresp.(*kmsg.DescribeQuorumResponse).Nodes
		if id == active {
			if p.ErrorCode != 0 || p.LeaderID != active || len(p.CurrentVoters) != 3 || len(nodes) != 3 || nodes[0].Listeners[0].Name != "CONTROLLER" {
				t.Fatalf("leader %d: DescribeQuorum %+v, nodes %+v", id, p, nodes)
			}
		} else if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.LeaderID != active {
			t.Fatalf("controller %d: DescribeQuorum %v naming leader %d, want NOT_LEADER_OR_FOLLOWER naming %d", id, kerr.ErrorForCode(p.ErrorCode), p.LeaderID, active)
		}

		freq := kmsg.NewPtrFetchRequest()
		freq.SetVersion(12)
		freq.ReplicaID = -1
		freq.SessionEpoch = -1
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		freq.Topics = []kmsg.FetchRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.FetchRequestTopicPartition{rp}}}
		kresp, err = cl.Request(ctx, freq)
		cl.Close()
		if err != nil {
			t.Fatalf("Fetch from controller %d: %v", id, err)
		}
		fp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if id == active && (fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 || fp.HighWatermark <= 0) {
			t.Fatalf("leader %d: metadata fetch %v, %d bytes, high-watermark %d", id, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches), fp.HighWatermark)
		}
		if id != active && (fp.ErrorCode != kerr.NotLeaderForPartition.Code || fp.CurrentLeader.LeaderID != active) {
			t.Fatalf("controller %d: metadata fetch %v naming %d, want NOT_LEADER_OR_FOLLOWER naming %d", id, kerr.ErrorForCode(fp.ErrorCode), fp.CurrentLeader.LeaderID, active)
		}
	}
}

// TestDescribeQuorumSingleNode: a single node (no controller.quorum.voters)
// describes its one-voter quorum.
func TestDescribeQuorumSingleNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	q, err := describeQuorum(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if q.LeaderID != 1 || q.LeaderEpoch != 0 || q.HighWatermark <= 0 || len(q.CurrentVoters) != 1 || q.CurrentVoters[0].LogEndOffset != q.HighWatermark {
		t.Fatalf("DescribeQuorum %+v", q)
	}
}
