package samsa_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// groupCoordinator returns the node FindCoordinator names for group.
func groupCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	var id int32 = -1
	waitFor(t, 30*time.Second, "the coordinator of "+group, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return false
		}
		id = resp.Coordinators[0].NodeID
		return true
	})
	return id
}

// joinShareGroup sends a ShareGroupHeartbeat joining group (epoch 0) to
// broker node and returns its error code and message.
func joinShareGroup(ctx context.Context, t *testing.T, cl *kgo.Client, node int32, group, member, topic string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, 0, []string{topic}
	resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
	if err != nil {
		t.Fatalf("ShareGroupHeartbeat to node %d: %v", node, err)
	}
	return resp.ErrorCode, deref(resp.ErrorMessage)
}

// TestShareGroupCoordinator, 3 nodes: a share group's membership is held by
// its coordinator (the leader of its __consumer_offsets partition, as
// FindCoordinator says); the other brokers answer ShareGroupHeartbeat,
// ShareGroupDescribe and DescribeShareGroupOffsets with NOT_COORDINATOR, as
// Kafka does, so that a client finds the coordinator again. Every broker
// answered and kept its own membership before. A share group cannot take
// the id of a classic group (GROUP_ID_NOT_FOUND), nor a classic or
// consumer group that of a share group (INCONSISTENT_GROUP_PROTOCOL,
// GROUP_ID_NOT_FOUND); describing a group as another type than its own is
// GROUP_ID_NOT_FOUND with Kafka's message.
func TestShareGroupCoordinator(t *testing.T) {
	const topic, group, classic = "jobs", "workers", "classic-readers"
	_, cl := startShareCluster(t, topic, 2)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	coord := groupCoordinator(ctx, t, cl, group)
	// The coordinator answers NOT_COORDINATOR (or LOAD_IN_PROGRESS) until
	// its metadata image has it lead the group's partition: clients retry.
	waitFor(t, 10*time.Second, "the join at the coordinator", func() bool {
		code, _ := joinShareGroup(ctx, t, cl, coord, group, "member-"+string(rune('0'+coord)), topic)
		if code != 0 && !kerr.IsRetriable(kerr.ErrorForCode(code)) {
			t.Fatalf("join at the coordinator %d: %v", coord, kerr.ErrorForCode(code))
		}
		return code == 0
	})
	for _, node := range []int32{1, 2, 3} {
		if node == coord {
			continue
		}
		code, msg := joinShareGroup(ctx, t, cl, node, group, "member-"+string(rune('0'+node)), topic)
		if code != kerr.NotCoordinator.Code {
			t.Errorf("join at node %d (coordinator %d): %v %q, want NOT_COORDINATOR", node, coord, kerr.ErrorForCode(code), msg)
		}
	}
	for _, node := range []int32{1, 2, 3} {
		dreq := kmsg.NewPtrShareGroupDescribeRequest()
		dreq.GroupIDs = []string{group}
		dresp, err := dreq.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		g := dresp.Groups[0]
		switch {
		case node == coord && (g.ErrorCode != 0 || len(g.Members) != 1 || g.Members[0].MemberID != "member-"+string(rune('0'+node))):
			t.Errorf("describe at the coordinator %d: %v, members %+v", node, kerr.ErrorForCode(g.ErrorCode), g.Members)
		case node != coord && g.ErrorCode != kerr.NotCoordinator.Code:
			t.Errorf("describe at node %d (coordinator %d): %v, want NOT_COORDINATOR", node, coord, kerr.ErrorForCode(g.ErrorCode))
		}
		oreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		og := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		og.GroupID = group
		oreq.Groups = append(oreq.Groups, og)
		oresp, err := oreq.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		if code := oresp.Groups[0].ErrorCode; node != coord && code != kerr.NotCoordinator.Code || node == coord && code != 0 {
			t.Errorf("offsets at node %d (coordinator %d): %v", node, coord, kerr.ErrorForCode(code))
		}
	}

	// The share group holds its id against classic and consumer groups.
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	jreq.Protocols = append(jreq.Protocols, jp)
	jresp, err := jreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jresp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup of a share group's id: %v, want INCONSISTENT_GROUP_PROTOCOL", kerr.ErrorForCode(jresp.ErrorCode))
	}
	hreq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hreq.Group, hreq.MemberID, hreq.MemberEpoch, hreq.RebalanceTimeoutMillis = group, "kip848-member", 0, 10000
	hreq.SubscribedTopicNames = []string{topic}
	hresp, err := hreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if hresp.ErrorCode != kerr.GroupIDNotFound.Code || deref(hresp.ErrorMessage) != "Group "+group+" is not a consumer group." {
		t.Errorf("ConsumerGroupHeartbeat of a share group's id: %v %q", kerr.ErrorForCode(hresp.ErrorCode), deref(hresp.ErrorMessage))
	}

	// A classic group (offsets committed by a tool) holds its id.
	if _, err := adm.CommitOffsets(ctx, classic, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	code, msg := joinShareGroup(ctx, t, cl, groupCoordinator(ctx, t, cl, classic), classic, "m", topic)
	if code != kerr.GroupIDNotFound.Code || !strings.Contains(msg, "is not a share group") {
		t.Errorf("share join of a classic group: %v %q, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code), msg)
	}

	// Describing a group as another type.
	sreq := kmsg.NewPtrShareGroupDescribeRequest()
	sreq.GroupIDs = []string{classic}
	sresp, err := sreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := sresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || deref(g.ErrorMessage) != "Group "+classic+" is not a share group." {
		t.Errorf("ShareGroupDescribe of a classic group: %v %q", kerr.ErrorForCode(g.ErrorCode), deref(g.ErrorMessage))
	}
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	creq.Groups = []string{group}
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := cresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || deref(g.ErrorMessage) != "Group "+group+" is not a consumer group." {
		t.Errorf("ConsumerGroupDescribe of a share group: %v %q", kerr.ErrorForCode(g.ErrorCode), deref(g.ErrorMessage))
	}
	dgreq := kmsg.NewPtrDescribeGroupsRequest() // v6: kgo sends the highest version both sides know
	dgreq.Groups = []string{group}
	dgresp, err := dgreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := dgresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || deref(g.ErrorMessage) != "Group "+group+" is not a classic group." {
		t.Errorf("DescribeGroups of a share group: %v %q", kerr.ErrorForCode(g.ErrorCode), deref(g.ErrorMessage))
	}
}

// startShareCluster starts 3 nodes and creates topic with partitions
// replicated 3 times, led; it returns the cluster and a client of it,
// closed at the end of the test.
func startShareCluster(t *testing.T, topic string, partitions int32) (*samsa.Cluster, *kgo.Client) {
	t.Helper()
	c := startCluster(t, 3, groupProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "three brokers and the topic's leaders", func() bool {
		if ids, err := brokerIDs(ctx, cl); err != nil || len(ids) != 3 {
			return false
		}
		td := describe(t, adm, topic)
		for _, p := range td.Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return len(td.Partitions) == int(partitions)
	})
	return c, cl
}

// TestClusterShareGroupDeleteStartsAfresh, 3 nodes: the share-partition
// states of a deleted share group, spread over partitions of
// __share_group_state led by different brokers, are all deleted (each
// broker finds the group's keys in its own store), so the group created
// again under the same name reads every record again; its configs stay.
func TestClusterShareGroupDeleteStartsAfresh(t *testing.T) {
	const topic, group, partitions, total = "jobs", "workers", 6, 60
	c, cl := startShareCluster(t, topic, partitions)
	setShareGroupConfigs(t, c.Addrs()[0], group, map[string]string{"share.auto.offset.reset": "earliest"})
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(strconv.Itoa(i))}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	checkDeleteStartsAfresh(t, c.Addrs(), cl, topic, group, total)
}
