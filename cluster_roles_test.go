package samsa_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
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

	cl, adm := clusterClients(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))

	// Only brokers are in the cluster's metadata, once unfenced.
	var seenIDs []int32
	defer func() {
		if t.Failed() {
			t.Logf("brokers last seen in the metadata: %v", seenIDs)
		}
	}()
	waitFor(t, 40*time.Second, "every broker in the metadata", func() bool {
		var err error
		if seenIDs, err = brokerIDs(ctx, cl); err != nil {
			t.Fatal(err)
		}
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
	// Every voter and observer has fetched and caught up (Kafka's
	// LastFetchTimestamp and LastCaughtUpTimestamp, DescribeQuorum v1+);
	// the voters reported -1 before.
	waitFor(t, 20*time.Second, "fetch and caught-up times of every replica", func() bool {
		q, err := describeQuorum(ctx, cl)
		if err != nil {
			t.Logf("describe quorum: %v", err)
			return false
		}
		now := time.Now().UnixMilli()
		for _, r := range append(q.CurrentVoters, q.Observers...) {
			if r.LastFetchTimestamp <= 0 || r.LastCaughtUpTimestamp <= 0 || r.LastFetchTimestamp > now+1000 {
				t.Logf("replica %d: last fetch %d, last caught up %d", r.ReplicaID, r.LastFetchTimestamp, r.LastCaughtUpTimestamp)
				return false
			}
		}
		return true
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
	produce := func(n int, tag string) { produceTagged(t, ctx, cl, "roles", n, tag, produced) }
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

	readEachOnce(t, ctx, c, "roles", produced)
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
	before := time.Now().UnixMilli()
	q, err := describeQuorum(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if q.LeaderID != 1 || q.LeaderEpoch != 0 || q.HighWatermark <= 0 || len(q.CurrentVoters) != 1 || q.CurrentVoters[0].LogEndOffset != q.HighWatermark {
		t.Fatalf("DescribeQuorum %+v", q)
	}
	// The leader reports itself fetched and caught up now, as Kafka's.
	if v, after := q.CurrentVoters[0], time.Now().UnixMilli(); v.LastFetchTimestamp < before || v.LastFetchTimestamp > after ||
		v.LastCaughtUpTimestamp != v.LastFetchTimestamp {
		t.Fatalf("leader's last fetch %d, last caught up %d, want both in [%d, %d]", v.LastFetchTimestamp, v.LastCaughtUpTimestamp, before, after)
	}
}

// TestControllerListenerAPIs: a controller listener advertises and serves
// only what Kafka's controllers do (ApiMessageType listener "controller"):
// ApiVersions lists those, a broker API such as Metadata or Produce closes
// the connection (Kafka's SocketServer: "not enabled"), and the admin APIs
// work there as with kafka-metadata-quorum --bootstrap-controller. Broker
// listeners advertise no broker-to-controller API.
func TestControllerListenerAPIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Controllers: 1, Brokers: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer c.Close()
	ctrlAddr, brokerAddr := c.ControllerAddr(1), c.Node(2).Addr()
	request := func(addr string, req kmsg.Request) kmsg.Response {
		t.Helper()
		cl := wire.NewClient(addr, "test", 64<<20)
		defer cl.Close()
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s to %s: %v", kmsg.NameForKey(req.Key()), addr, err)
		}
		return resp
	}
	apiKeys := func(addr string) map[int16]kmsg.ApiVersionsResponseApiKey {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		resp := request(addr, req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions to %s: %v", addr, kerr.ErrorForCode(resp.ErrorCode))
		}
		out := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			out[k.ApiKey] = k
		}
		return out
	}

	ctrlKeys := apiKeys(ctrlAddr)
	var got []string
	for k := range ctrlKeys {
		got = append(got, kmsg.NameForKey(k))
	}
	slices.Sort(got)
	want := []string{"AllocateProducerIDs", "AlterClientQuotas", "AlterConfigs", "AlterPartition", "AlterPartitionAssignments", "AlterUserSCRAMCredentials",
		"ApiVersions", "AssignReplicasToDirs", "BrokerHeartbeat", "BrokerRegistration", "CreateACLs", "CreatePartitions", "CreateTopics",
		"DeleteACLs", "DeleteTopics", "DescribeACLs", "DescribeCluster", "DescribeConfigs", "DescribeQuorum",
		"ElectLeaders", "Fetch", "IncrementalAlterConfigs", "ListPartitionReassignments", "SASLAuthenticate", "SASLHandshake",
		"UpdateFeatures"}
	if !slices.Equal(got, want) {
		t.Errorf("controller listener advertises %v, want %v", got, want)
	}
	brokerKeys := apiKeys(brokerAddr)
	for _, k := range []kmsg.Key{kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AlterPartition, kmsg.AllocateProducerIDs, kmsg.AssignReplicasToDirs} {
		if _, ok := brokerKeys[int16(k)]; ok {
			t.Errorf("broker listener advertises %s", kmsg.NameForKey(int16(k)))
		}
	}
	if p, ok := brokerKeys[int16(kmsg.Produce)]; !ok || p.MinVersion != 0 {
		t.Errorf("broker listener: Produce %+v", p)
	}

	// Broker APIs on the controller listener close the connection.
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFindCoordinatorRequest()} {
		req.SetVersion(req.MaxVersion())
		conn := dial(t, ctrlAddr)
		if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, conn)
	}

	// Admin requests straight to the controller.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "via-controller", 1, 1
	ct.Topics = append(ct.Topics, rt)
	if resp := request(ctrlAddr, ct).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics to the controller: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, "via-controller", []string{"retention.ms"}
	dc.Resources = append(dc.Resources, dr)
	if resp := request(ctrlAddr, dc).(*kmsg.DescribeConfigsResponse); resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("DescribeConfigs to the controller: %+v", resp.Resources[0])
	}

	// DescribeCluster: controllers on the controller listener, brokers on
	// the broker listener; the other endpoint type is refused (KIP-919).
	describe := func(addr string, version int16, endpointType int8) *kmsg.DescribeClusterResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(version)
		req.EndpointType = endpointType
		return request(addr, req).(*kmsg.DescribeClusterResponse)
	}
	host, port, _ := net.SplitHostPort(ctrlAddr)
	if r := describe(ctrlAddr, 1, 2); r.ErrorCode != 0 || r.EndpointType != 2 || r.ControllerID != 1 || len(r.Brokers) != 1 ||
		r.Brokers[0].NodeID != 1 || r.Brokers[0].Host != host || strconv.Itoa(int(r.Brokers[0].Port)) != port {
		t.Errorf("DescribeCluster of the controllers: %+v", r)
	}
	if r := describe(brokerAddr, 1, 1); r.ErrorCode != 0 || r.EndpointType != 1 || len(r.Brokers) != 1 || r.Brokers[0].NodeID != 2 {
		t.Errorf("DescribeCluster of the brokers: %+v", r)
	}
	for _, tc := range []struct {
		addr         string
		version      int16
		endpointType int8
		want         *kerr.Error
	}{
		{ctrlAddr, 1, 1, kerr.MismatchedEndpointType},
		{ctrlAddr, 0, 1, kerr.InvalidRequest},
		{brokerAddr, 1, 2, kerr.MismatchedEndpointType},
		{brokerAddr, 1, 3, kerr.UnsupportedEndpointType},
	} {
		if r := describe(tc.addr, tc.version, tc.endpointType); r.ErrorCode != tc.want.Code {
			t.Errorf("DescribeCluster v%d type %d to %s: %v, want %v", tc.version, tc.endpointType, tc.addr, kerr.ErrorForCode(r.ErrorCode), tc.want)
		}
	}

	// Fetch on the controller listener reads __cluster_metadata only.
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(12)
	f.ReplicaID, f.SessionEpoch = -1, -1
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	f.Topics = []kmsg.FetchRequestTopic{{Topic: "via-controller", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	if r := request(ctrlAddr, f).(*kmsg.FetchResponse); r.ErrorCode != kerr.InvalidRequest.Code || len(r.Topics) != 0 {
		t.Errorf("Fetch of a topic from the controller: %v, %d topics", kerr.ErrorForCode(r.ErrorCode), len(r.Topics))
	}

	// The broker still forwards admin requests to the controller and
	// serves clients.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "via-broker"); err != nil {
		t.Fatalf("CreateTopics through the broker: %v", err)
	}
	for _, topic := range []string{"via-controller", "via-broker"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}
