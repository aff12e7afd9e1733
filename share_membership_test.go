package samsa_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareHeartbeat sends a ShareGroupHeartbeat to broker node (-1: any),
// retrying while the coordinator moves or loads, and returns the answer.
func shareHeartbeat(ctx context.Context, t *testing.T, cl *kgo.Client, node int32, group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	var resp *kmsg.ShareGroupHeartbeatResponse
	waitFor(t, 30*time.Second, "a ShareGroupHeartbeat answer", func() bool {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
		var err error
		if node >= 0 {
			resp, err = req.RequestWith(ctx, cl.Broker(int(node)))
		} else {
			resp, err = req.RequestWith(ctx, cl)
		}
		return err == nil && !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode))
	})
	return resp
}

// describeShare describes group at its coordinator, retrying while it
// moves or loads.
func describeShare(ctx context.Context, t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	var g kmsg.ShareGroupDescribeResponseGroup
	waitFor(t, 30*time.Second, "a ShareGroupDescribe answer", func() bool {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 {
			return false
		}
		g = resp.Groups[0]
		return !kerr.IsRetriable(kerr.ErrorForCode(g.ErrorCode))
	})
	return g
}

// listedGroups returns the groups ListGroups v5 lists, by id, with
// their type.
func listedGroups(ctx context.Context, t *testing.T, cl *kgo.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range []int{1, 2, 3} {
		req := kmsg.NewPtrListGroupsRequest()
		resp, err := req.RequestWith(ctx, cl.Broker(id))
		if err != nil {
			continue // fewer nodes
		}
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupType
		}
	}
	return out
}

// initializedPartitions returns the partitions DescribeShareGroupOffsets
// lists for group when asked for all topics.
func initializedPartitions(ctx context.Context, t *testing.T, cl *kgo.Client, group string) map[string][]int32 {
	t.Helper()
	out := map[string][]int32{}
	waitFor(t, 30*time.Second, "a DescribeShareGroupOffsets answer", func() bool {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = group
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || kerr.IsRetriable(kerr.ErrorForCode(resp.Groups[0].ErrorCode)) {
			return false
		}
		if code := resp.Groups[0].ErrorCode; code != 0 {
			t.Fatalf("DescribeShareGroupOffsets: %v", kerr.ErrorForCode(code))
		}
		for _, rt := range resp.Groups[0].Topics {
			for _, p := range rt.Partitions {
				out[rt.Topic] = append(out[rt.Topic], p.Partition)
			}
		}
		return true
	})
	return out
}

// TestShareGroupMembershipRestart, 1 node: share group membership is in
// __consumer_offsets (Kafka's ShareGroup* records): after a restart the
// members carry on with their epochs (no UNKNOWN_MEMBER_ID, no new
// epoch), the group epoch continues, an empty share group is still listed
// (ListGroups, type share) with the partitions it initialized
// (DescribeShareGroupOffsets of all topics), an OffsetCommit to its id
// creates no classic group beside it (GROUP_ID_NOT_FOUND), and a deleted
// share group stays deleted.
func TestShareGroupMembershipRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupProps)
	admin := newClient(t, n)
	const topic, group = "jobs", "workers"
	createTopic(t, admin, topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	if r := shareHeartbeat(ctx, t, admin, -1, group, "m1", 0, []string{topic}); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("m1 joins: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "m2", 0, []string{topic}); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m2 joins: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "m1", 1, nil); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m1 heartbeats: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "m2", -1, nil); r.ErrorCode != 0 {
		t.Fatalf("m2 leaves: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	restart := func() {
		t.Helper()
		admin.Close()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = startNode(t, dir, groupProps)
		admin = newClient(t, n)
	}
	restart()
	d := describeShare(ctx, t, admin, group)
	if d.ErrorCode != 0 || d.GroupEpoch != 3 || len(d.Members) != 1 || d.Members[0].MemberID != "m1" || d.Members[0].MemberEpoch != 2 {
		t.Fatalf("after a restart: %v, group epoch %d, members %+v; want epoch 3 and m1 at epoch 2", kerr.ErrorForCode(d.ErrorCode), d.GroupEpoch, d.Members)
	}
	r := shareHeartbeat(ctx, t, admin, -1, group, "m1", 2, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != 3 || r.Assignment == nil {
		t.Fatalf("m1 heartbeats with its epoch after a restart: %v epoch %d; want epoch 3 with its assignment", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "m1", 3, nil); r.ErrorCode != 0 {
		t.Fatalf("m1 heartbeats: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "m1", -1, nil); r.ErrorCode != 0 {
		t.Fatalf("m1 leaves: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	restart()
	if d := describeShare(ctx, t, admin, group); d.ErrorCode != 0 || d.GroupState != "Empty" || d.GroupEpoch != 4 {
		t.Fatalf("empty group after a restart: %v state %s epoch %d", kerr.ErrorForCode(d.ErrorCode), d.GroupState, d.GroupEpoch)
	}
	if typ := listedGroups(ctx, t, admin)[group]; typ != "share" {
		t.Errorf("ListGroups after a restart: %s is %q, want share", group, typ)
	}
	if got := initializedPartitions(ctx, t, admin, group)[topic]; len(got) != 2 {
		t.Errorf("DescribeShareGroupOffsets of all topics of the empty group: %v, want both partitions of %s", got, topic)
	}

	// No classic group beside the share group.
	resps, err := kadm.NewClient(admin).CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0}))
	if err != nil {
		t.Fatal(err)
	}
	if err := resps.Error(); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("OffsetCommit to a share group's id: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if typ := listedGroups(ctx, t, admin)[group]; typ != "share" {
		t.Errorf("ListGroups after an OffsetCommit to the share group's id: %q, want share", typ)
	}

	dreq := kmsg.NewPtrDeleteGroupsRequest()
	dreq.Groups = []string{group}
	dresp, err := dreq.RequestWith(ctx, admin)
	if err != nil || dresp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %v %v", err, kerr.ErrorForCode(dresp.Groups[0].ErrorCode))
	}
	restart()
	if d := describeShare(ctx, t, admin, group); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("deleted group after a restart: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode))
	}
	if typ, ok := listedGroups(ctx, t, admin)[group]; ok {
		t.Errorf("deleted group listed after a restart as %q", typ)
	}
}

// TestClusterShareGroupCoordinatorFailover, 3 nodes: the coordinator of a
// share group is stopped; the new one loads the group from
// __consumer_offsets and its member heartbeats on with its epoch, as in
// Kafka (members were rejoining with epoch 0 before); the group, empty,
// is still listed.
func TestClusterShareGroupCoordinatorFailover(t *testing.T) {
	const topic, group = "jobs", "workers"
	c, cl := startShareCluster(t, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	coord := groupCoordinator(ctx, t, cl, group)
	r := shareHeartbeat(ctx, t, cl, coord, group, "m1", 0, []string{topic})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("m1 joins at %d: %v epoch %d", coord, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, cl, coord, group, "m2", 0, []string{topic}); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m2 joins: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if err := c.StopNode(coord); err != nil {
		t.Fatal(err)
	}
	var next int32
	waitFor(t, 30*time.Second, "a new coordinator", func() bool {
		next = groupCoordinator(ctx, t, cl, group)
		return next != coord
	})
	r = shareHeartbeat(ctx, t, cl, next, group, "m1", 1, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m1 heartbeats with epoch 1 at the new coordinator %d: %v epoch %d; want epoch 2", next, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := shareHeartbeat(ctx, t, cl, next, group, "m2", 2, nil); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m2 heartbeats with epoch 2 at the new coordinator: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	for _, m := range []string{"m1", "m2"} {
		if r := shareHeartbeat(ctx, t, cl, next, group, m, -1, nil); r.ErrorCode != 0 {
			t.Fatalf("%s leaves: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if d := describeShare(ctx, t, cl, group); d.ErrorCode != 0 || d.GroupState != "Empty" || d.GroupEpoch != 4 {
		t.Fatalf("after the members left: %v state %s epoch %d", kerr.ErrorForCode(d.ErrorCode), d.GroupState, d.GroupEpoch)
	}
	if err := c.StartNode(ctx, coord); err != nil {
		t.Fatal(err)
	}
	if typ := listedGroups(ctx, t, cl)[group]; typ != "share" {
		t.Errorf("ListGroups: %s is %q, want share", group, typ)
	}
}

// TestShareMemberIDs: ShareGroupHeartbeat and ShareFetch take the same
// member ids, as Kafka 4.2 does (any non-empty string; a member id of 60
// characters was joined by the heartbeat and refused by ShareFetch with
// INVALID_REQUEST), and the heartbeat refuses what Kafka's
// throwIfShareGroupHeartbeatRequestIsInvalid refuses.
func TestShareMemberIDs(t *testing.T) {
	const topic, group, total = "jobs", "workers", 10
	n, admin := startShareNode(t, topic, 1, group, total)
	long := strings.Repeat("member-", 10)
	if got := newRawShareMember(t, n, group, long, topic).fetch(t, 10*time.Second); got != total {
		t.Fatalf("ShareFetch of a member id of %d characters: %d records, want %d", len(long), got, total)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	empty := ""
	for _, c := range []struct {
		name string
		set  func(*kmsg.ShareGroupHeartbeatRequest)
	}{
		{"no member id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberID = "" }},
		{"no group id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.GroupID = "" }},
		{"an empty rack id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.RackID = &empty }},
		{"an empty subscription on join", func(r *kmsg.ShareGroupHeartbeatRequest) { r.SubscribedTopicNames = []string{} }},
		{"epoch -2", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberEpoch = -2 }},
	} {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.SubscribedTopicNames = group, "m2", []string{topic}
		c.set(req)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("a heartbeat with %s: %v, want INVALID_REQUEST", c.name, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

// TestShareGroupIDRace: OffsetCommits with generation -1 (each creates a
// simple group when none holds the id) sent from another connection while
// an AlterShareGroupOffsets creates share group X, which writes the state
// of 10 partitions before it creates the group: either X becomes a share
// group and every commit gets GROUP_ID_NOT_FOUND, or a commit came first
// and the Alter gets GROUP_ID_NOT_FOUND; never both, and ListGroups lists
// X once. (The Alter checked the id, wrote, then created the share group:
// a commit in between made a simple group beside it. A ShareGroupHeartbeat
// had the same gap, narrower.)
func TestShareGroupIDRace(t *testing.T) {
	const topic, partitions = "jobs", 10
	n := startNode(t, t.TempDir(), groupProps)
	// The Alter writes 10 states, which may take longer than kgo's
	// default read timeout of 10 s on a loaded machine.
	admin, committer := newClient(t, n, kgo.RequestTimeoutOverhead(3*time.Minute)), newClient(t, n)
	createTopic(t, admin, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	td, err := kadm.NewClient(admin).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, td[topic].Err)
	}
	topicID := td[topic].ID
	// retry sends until the answer's error code is not retriable.
	retry := func(send func() (int16, error)) (int16, error) {
		for {
			code, err := send()
			if err != nil || !kerr.IsRetriable(kerr.ErrorForCode(code)) || ctx.Err() != nil {
				return code, err
			}
		}
	}
	for i := range 2 {
		group := fmt.Sprintf("g%d", i)
		var alterCode int16
		var alterErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			alterCode, alterErr = retry(func() (int16, error) {
				req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				req.GroupID = group
				rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
				rt.Topic = topic
				for p := range int32(partitions) {
					rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, admin)
				if err != nil {
					return 0, err
				}
				return resp.ErrorCode, nil
			})
		}()
		committed := false
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			code, err := retry(func() (int16, error) {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group, req.Generation = group, -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic, rt.TopicID = topic, topicID // v10+ names topics by id
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset = 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, committer)
				if err != nil {
					return 0, err
				}
				return resp.Topics[0].Partitions[0].ErrorCode, nil
			})
			switch {
			case err != nil:
				<-done
				t.Fatalf("%s: OffsetCommit: %v; AlterShareGroupOffsets: %v %v", group, err, kerr.ErrorForCode(alterCode), alterErr)
			case code == 0:
				committed = true
			case code != kerr.GroupIDNotFound.Code:
				t.Fatalf("%s: OffsetCommit: %v", group, kerr.ErrorForCode(code))
			}
		}
		switch {
		case alterErr != nil:
			t.Fatal(alterErr)
		case alterCode == 0 && committed:
			t.Errorf("%s: AlterShareGroupOffsets created a share group and an OffsetCommit a simple group beside it", group)
		case alterCode != 0 && (alterCode != kerr.GroupIDNotFound.Code || !committed):
			t.Errorf("%s: AlterShareGroupOffsets: %v (a commit succeeded: %v)", group, kerr.ErrorForCode(alterCode), committed)
		}
	}
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, g := range resp.Groups {
		if seen[g.Group]++; seen[g.Group] == 2 {
			t.Errorf("ListGroups lists %s twice", g.Group)
		}
	}
}

// TestShareOversizedMember: a heartbeat whose member's records cannot be
// written (a member id of 1 MB, past __consumer_offsets' message.max.bytes:
// MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR as Kafka's
// GroupCoordinatorService does) does not keep that member: the group's
// other members heartbeat on and a new member joins, and the oversized one
// is unknown after. Before, the member stayed in memory, the group was
// dirty and every later write rewrote it: every heartbeat of every member
// failed with UNKNOWN_SERVER_ERROR for good.
func TestShareOversizedMember(t *testing.T) {
	const topic, group = "jobs", "workers"
	_, admin := startShareNode(t, topic, 1, group, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r := shareHeartbeat(ctx, t, admin, -1, group, "member-a", 0, []string{topic}); r.ErrorCode != 0 {
		t.Fatalf("join of member-a: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	huge := strings.Repeat("m", 1<<20)
	for _, c := range []struct {
		name   string
		member string
		rack   string
		topics []string
	}{
		{"a member id of 1 MiB", huge, "", []string{topic}},
		{"a rack id of 1 MiB", "member-r", huge, []string{topic}},
	} {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.SubscribedTopicNames = group, c.member, c.topics
		if c.rack != "" {
			req.RackID = &c.rack
		}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnknownServerError.Code {
			t.Fatalf("a join with %s: %v, want UNKNOWN_SERVER_ERROR", c.name, kerr.ErrorForCode(resp.ErrorCode))
		}
		a := shareHeartbeat(ctx, t, admin, -1, group, "member-a", 0, []string{topic})
		if a.ErrorCode != 0 {
			t.Fatalf("after a join with %s, member-a's heartbeat: %v", c.name, kerr.ErrorForCode(a.ErrorCode))
		}
		again := shareHeartbeat(ctx, t, admin, -1, group, c.member, 1, nil)
		if again.ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("after a join with %s, its member's heartbeat: %v, want UNKNOWN_MEMBER_ID", c.name, kerr.ErrorForCode(again.ErrorCode))
		}
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "member-b", 0, []string{topic}); r.ErrorCode != 0 {
		t.Fatalf("join of member-b: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if ms := describeShare(ctx, t, admin, group).Members; len(ms) != 2 {
		t.Fatalf("%d members described, want member-a and member-b", len(ms))
	}
}

// TestShareLeaveUnknownMember: a ShareGroupHeartbeat with epoch -1 from a
// member the group does not have gets UNKNOWN_MEMBER_ID, as from Kafka's
// shareGroupLeave, whether or not the group exists (it answered success
// with epoch -1 when the group existed); a member's own leave succeeds.
func TestShareLeaveUnknownMember(t *testing.T) {
	const topic, group = "jobs", "workers"
	_, admin := startShareNode(t, topic, 1, group, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r := shareHeartbeat(ctx, t, admin, -1, "absent", "member-x", -1, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave of a group that does not exist: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "member-a", 0, []string{topic}); r.ErrorCode != 0 {
		t.Fatalf("join of member-a: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "member-x", -1, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave of an unknown member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(ctx, t, admin, -1, group, "member-a", -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave of member-a: %v, epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
}
