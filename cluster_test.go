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
	"github.com/samsahq/samsa/internal/testutil"
)

func startCluster(t *testing.T, nodes int, props map[string]string) *samsa.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: nodes, Dir: t.TempDir(), Properties: props})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterClients returns a client seeded with every node of c, with opts,
// and its admin client; the client is closed when the test ends (before
// the cluster, which startCluster registered first).
func clusterClients(t *testing.T, c *samsa.Cluster, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// produceTagged produces n records to topic through cl, keyed 0 to n-1
// and valued tag-0 to tag-(n-1), and adds the values to produced; it fails
// the test on a record not acknowledged.
func produceTagged(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int, tag string, produced map[string]bool) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("produce %s: %v", tag, r.Err)
		}
		produced[string(r.Record.Value)] = true
	}
}

// readEachOnce reads topic from its start through a new client of c until
// it has seen every value of produced, and fails the test when ctx ends
// first or a value was read more than once.
func readEachOnce(t *testing.T, ctx context.Context, c *samsa.Cluster, topic string, produced map[string]bool) {
	t.Helper()
	cons, _ := clusterClients(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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

// createAssigned creates topic with one partition on replicas (the first
// is the preferred leader) and the topic configs.
func createAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, replicas []int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
}

// waitFor is testutil.WaitFor.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, d, what, cond)
}

func describe(t *testing.T, adm *kadm.Client, topic string) kadm.TopicDetail {
	t.Helper()
	// Right after creation a topic may show no partitions yet
	// (LEADER_NOT_AVAILABLE while its node applies the metadata).
	var td kadm.TopicDetail
	waitFor(t, 20*time.Second, "partitions of "+topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		td = tds[topic]
		return len(td.Partitions) > 0
	})
	return td
}

// TestClusterReplication: 3 nodes, RF 3, min.insync.replicas 2, acks=all.
// Every acknowledged record is read back after the leader of each
// partition in turn is stopped and started again, and the restarted
// broker rejoins the ISR.
func TestClusterReplication(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "rep")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	waitFor(t, 20*time.Second, "full ISRs", func() bool {
		td := describe(t, adm, "rep")
		for _, p := range td.Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return false
			}
		}
		return len(td.Partitions) == 3
	})

	produced := map[string]bool{}
	produce := func(n int, tag string) { produceTagged(t, ctx, cl, "rep", n, tag, produced) }
	produce(2000, "before")

	for p := int32(0); p < 3; p++ {
		leader := describe(t, adm, "rep").Partitions[p].Leader
		if err := c.StopNode(leader); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "a new leader", func() bool {
			l := describe(t, adm, "rep").Partitions[p].Leader
			return l >= 0 && l != leader
		})
		produce(1000, fmt.Sprintf("without-%d", leader))
		if err := c.StartNode(ctx, leader); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("node %d back in every ISR", leader), func() bool {
			for _, pd := range describe(t, adm, "rep").Partitions {
				if !slices.Contains(pd.ISR, leader) {
					return false
				}
			}
			return true
		})
	}

	readEachOnce(t, ctx, c, "rep", produced)
}

// TestPreferredLeaderElection: after a leader's broker restarts, the
// partition is led by another replica; ElectLeaders (preferred) moves it
// back (auto rebalance off), and with auto.leader.rebalance.enable the
// controller does it on its own.
func TestPreferredLeaderElection(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			c := startCluster(t, 3, map[string]string{"broker.heartbeat.interval.ms": "500",
				"auto.leader.rebalance.enable": fmt.Sprint(auto), "leader.imbalance.check.interval.seconds": "1"})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, adm := clusterClients(t, c)
			if _, err := adm.CreateTopic(ctx, 1, 3, nil, "pref"); err != nil {
				t.Fatal(err)
			}
			var pref int32
			waitFor(t, 20*time.Second, "full ISR", func() bool {
				p := describe(t, adm, "pref").Partitions[0]
				pref = p.Replicas[0]
				return len(p.ISR) == 3 && p.Leader == pref
			})
			if err := c.StopNode(pref); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "another leader", func() bool {
				l := describe(t, adm, "pref").Partitions[0].Leader
				return l >= 0 && l != pref
			})
			if err := c.StartNode(ctx, pref); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "the preferred replica back in the ISR", func() bool {
				return slices.Contains(describe(t, adm, "pref").Partitions[0].ISR, pref)
			})
			if !auto {
				if l := describe(t, adm, "pref").Partitions[0].Leader; l == pref {
					t.Fatalf("leadership moved back without an election")
				}
				res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"pref": {0: {}}})
				if err != nil || res["pref"][0].Err != nil {
					t.Fatalf("ElectLeaders: %v %+v", err, res)
				}
				res, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"pref": {0: {}}})
				if !kerrIs(res["pref"][0].Err, kerr.ElectionNotNeeded) {
					t.Fatalf("second election: %v, want ELECTION_NOT_NEEDED", res["pref"][0].Err)
				}
			}
			waitFor(t, 30*time.Second, "the preferred leader back", func() bool {
				return describe(t, adm, "pref").Partitions[0].Leader == pref
			})
		})
	}
}

// TestReassignPartition moves a partition from broker 1 to brokers 2 and 3
// while it holds data; the data follows, broker 1 drops its copy.
func TestReassignPartition(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.heartbeat.interval.ms": "500"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createAssigned(t, ctx, cl, "move", []int32{1}, nil)
	waitFor(t, 20*time.Second, "leader 1", func() bool { return describe(t, adm, "move").Partitions[0].Leader == 1 })
	var recs []*kgo.Record
	for i := 0; i < 1000; i++ {
		recs = append(recs, &kgo.Record{Topic: "move", Partition: 0, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	art := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	art.Topic = "move"
	arp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	arp.Partition, arp.Replicas = 0, []int32{2, 3}
	art.Partitions = append(art.Partitions, arp)
	ar.Topics = append(ar.Topics, art)
	resp, err := ar.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reassign: %v %+v", err, resp)
	}
	waitFor(t, 60*time.Second, "the reassignment to finish", func() bool {
		p := describe(t, adm, "move").Partitions[0]
		lr, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
		return err == nil && len(lr.Topics) == 0 && slices.Equal(p.Replicas, []int32{2, 3}) && (p.Leader == 2 || p.Leader == 3)
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("move"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < 1000 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 1000 after the move", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(r.Offset) {
				t.Fatalf("offset %d holds %q", r.Offset, r.Value)
			}
			got++
		})
	}
	// Asking for the replicas the partition has is a no-op that succeeds.
	resp, err = ar.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reassign to the current replicas: %v %+v", err, resp)
	}
	// Cancelling when nothing is in progress is an error.
	cancelReq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	ct := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	ct.Topic = "move"
	cp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	cp.Partition = 0
	ct.Partitions = append(ct.Partitions, cp)
	cancelReq.Topics = append(cancelReq.Topics, ct)
	cresp, err := cancelReq.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("cancel without reassignment: %v %+v", err, cresp)
	}
}

// TestThrottledReassignment: with follower.replication.throttled.rate set
// and the topic's replicas throttled, a reassignment still completes and
// the new replica holds every record.
func TestThrottledReassignment(t *testing.T) {
	c := startCluster(t, 2, map[string]string{"broker.heartbeat.interval.ms": "500",
		"follower.replication.throttled.rate": "2000000", "leader.replication.throttled.rate": "2000000"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"leader.replication.throttled.replicas": kmsg.StringPtr("*"), "follower.replication.throttled.replicas": kmsg.StringPtr("*")}, "slow"); err != nil {
		t.Fatal(err)
	}
	var from int32
	waitFor(t, 20*time.Second, "a leader", func() bool { from = describe(t, adm, "slow").Partitions[0].Leader; return from > 0 })
	value := make([]byte, 1000)
	var recs []*kgo.Record
	for i := 0; i < 3000; i++ {
		recs = append(recs, &kgo.Record{Topic: "slow", Value: value})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	to := 3 - from
	res, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"slow": {0: {to}}})
	if err != nil || res["slow"][0].Err != nil {
		t.Fatalf("reassign: %v %+v", err, res)
	}
	waitFor(t, 60*time.Second, "the throttled reassignment to finish", func() bool {
		p := describe(t, adm, "slow").Partitions[0]
		return slices.Equal(p.Replicas, []int32{to}) && p.Leader == to
	})
	end, err := adm.ListEndOffsets(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("slow", 0); o.Offset != 3000 {
		t.Fatalf("end offset on the new replica: %d", o.Offset)
	}
}

// TestClusterConsumerGroup: a consumer group on a 3-node cluster commits
// offsets (to a replicated __consumer_offsets whatever node coordinates)
// and a new member resumes from them.
func TestClusterConsumerGroup(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "6"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c)
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "cg"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: "cg", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume := func(want int) int {
		g, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("cg"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		got := 0
		for got < want {
			fs := g.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, want)
			}
			got += fs.NumRecords()
		}
		if err := g.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		return got
	}
	consume(300)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cg", Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lags, err := adm.Lag(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if total := lags["g1"].Lag.Total(); total != 1 {
		t.Fatalf("lag after commit: %d, want 1", total)
	}
}

// TestFollowerFollowsLogStart: DeleteRecords on the leader moves the log
// start offset of the followers too, so that a new leader keeps it.
func TestFollowerFollowsLogStart(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.heartbeat.interval.ms": "500"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "ls"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "full ISR", func() bool { return len(describe(t, adm, "ls").Partitions[0].ISR) == 3 })
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: "ls", Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset("ls", 0, 60, -1)
	if res, err := adm.DeleteRecords(ctx, offs); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, res.Error())
	}
	leader := describe(t, adm, "ls").Partitions[0].Leader
	// Produce once more with acks=all (kgo's default): the answer comes
	// once every follower fetched the record, in a response that also
	// carried the new log start, and asked for more.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ls", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := c.StopNode(leader); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a new leader", func() bool {
		l := describe(t, adm, "ls").Partitions[0].Leader
		return l >= 0 && l != leader
	})
	start, err := adm.ListStartOffsets(ctx, "ls")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("ls", 0); o.Offset != 60 {
		t.Fatalf("log start on the new leader: %d, want 60", o.Offset)
	}
}

// brokerIDs asks a broker for the cluster's brokers with a Metadata request
// of no topics and returns their ids, increasing. It does not use kadm's
// BrokerMetadata, which answers from kgo's metadata cache: a cluster's first
// answer (from a node that had not yet seen the others register) would be
// kept for minutes.
func brokerIDs(ctx context.Context, cl *kgo.Client) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ids := make([]int32, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// TestRecreateTopicWhileLogsCreated deletes a topic of many partitions
// right after creating it, while the brokers' creators are still making
// its logs (replica.Manager.ApplyBatch hosts new partitions once their
// logs exist), creates it again under the same name and uses it: every
// record produced is read back once, and each node ends with exactly the
// new topic's logs.
func TestRecreateTopicWhileLogsCreated(t *testing.T) {
	const parts = 200
	c := startCluster(t, 3, nil)
	cl, adm := clusterClients(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 2 {
		if _, err := adm.CreateTopic(ctx, parts, 3, nil, "re"); err != nil {
			t.Fatalf("create %d: %v", round, err)
		}
		if round == 1 {
			break
		}
		if r, err := adm.DeleteTopic(ctx, "re"); err != nil || r.Err != nil {
			t.Fatalf("delete: %v %v", err, r.Err)
		}
	}
	produced := map[string]bool{}
	produceTagged(t, ctx, cl, "re", 2*parts, "new", produced)
	readEachOnce(t, ctx, c, "re", produced)
	waitFor(t, time.Minute, "the new topic's logs, and only them, on every node", func() bool {
		all, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil || len(all) != 3 {
			return false
		}
		for _, dirs := range all {
			n := 0
			dirs.EachPartition(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == "re" {
					n++
				}
			})
			if n != parts {
				return false
			}
		}
		return true
	})
}
