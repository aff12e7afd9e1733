package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/testutil"
)

// TestShareGroupKillCoordinator: a 3-node cluster of real processes; the
// coordinator of a share group (the leader of its __consumer_offsets
// partition) is killed with SIGKILL. The new coordinator loads the group
// from __consumer_offsets: the members heartbeat on with their member
// epochs (no UNKNOWN_MEMBER_ID, no rejoin), the group epoch goes on from
// where it was, and the group, once empty, is still listed as a share
// group.
func TestShareGroupKillCoordinator(t *testing.T) {
	const topic, group = "jobs", "workers"
	c, cl := startKillCluster(t, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	coordinator := func() int32 {
		var id int32 = -1
		testutil.WaitFor(t, 30*time.Second, "the group's coordinator", func() bool {
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
	heartbeat := func(node int32, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		var resp *kmsg.ShareGroupHeartbeatResponse
		testutil.WaitFor(t, 30*time.Second, "a ShareGroupHeartbeat answer", func() bool {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
			var err error
			resp, err = req.RequestWith(ctx, cl.Broker(int(node)))
			return err == nil && !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode))
		})
		return resp
	}

	coord := coordinator()
	for i, m := range []string{"m1", "m2", "m3"} {
		if r := heartbeat(coord, m, 0, []string{topic}); r.ErrorCode != 0 || r.MemberEpoch != int32(i+1) {
			t.Fatalf("%s joins: %v epoch %d", m, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
		}
	}
	c.Node(coord).Kill()
	t.Logf("killed the coordinator, node %d", coord)
	var next int32
	testutil.WaitFor(t, 30*time.Second, "a new coordinator", func() bool {
		next = coordinator()
		return next != coord
	})
	// m1 and m2 were left behind the group epoch (3); m3 holds it.
	for m, epoch := range map[string]int32{"m1": 1, "m2": 2, "m3": 3} {
		r := heartbeat(next, m, epoch, nil)
		if r.ErrorCode != 0 || r.MemberEpoch != 3 {
			t.Errorf("%s heartbeats with epoch %d at the new coordinator %d: %v epoch %d, want epoch 3",
				m, epoch, next, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
		}
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if r := heartbeat(next, m, -1, nil); r.ErrorCode != 0 {
			t.Fatalf("%s leaves: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"share"}
	resp, err := req.RequestWith(ctx, cl.Broker(int(next)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].Group != group || resp.Groups[0].GroupState != "Empty" {
		t.Errorf("share groups listed by the new coordinator: %+v", resp.Groups)
	}
}
