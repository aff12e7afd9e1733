package broker

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/server"
)

// ShareGroupHeartbeat: v1
//
// Version notes (v0 was Kafka 4.0's early access, removed in 4.1; not served):
//   - v1: the member id is the client's (KIP-932 as released in 4.1)

// ShareGroupHeartbeat (KIP-932): joins, keeps or leaves a member of a share
// group; every member is assigned every partition of the topics it
// subscribes to (Kafka's SimpleAssignor for a homogeneous group).
// NOT_COORDINATOR on a broker that does not lead the group's partition of
// __consumer_offsets; GROUP_ID_NOT_FOUND when a classic or consumer group
// holds the id.
func init() { register(kmsg.ShareGroupHeartbeat, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	var isOther func(string) bool
	if req.GroupID != "" {
		err := b.shareCoordinatorError(req.GroupID)
		if err == nil && req.MemberEpoch == 0 && !b.share.coord.IsShareGroup(req.GroupID) {
			// Claimed until the heartbeat is answered: the group
			// coordinator creates no classic or consumer group under
			// the id meanwhile (an OffsetCommit could, between the
			// check below and the share group's creation).
			release := b.share.coord.Claim(req.GroupID)
			defer release()
			var typ string
			if typ, err = b.otherGroupType(ctx, req.GroupID); typ != "" {
				isOther = func(string) bool { return true }
			}
		}
		if err != nil {
			resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			resp.ErrorCode = err.Code
			return resp, nil
		}
	}
	cl := share.Client{ID: clientIDFrom(ctx), Host: clientHost(c.RemoteAddr)}
	return b.share.coord.Heartbeat(ctx, req, cl, isOther), nil
}

// shareCoordinatorError checks that this broker is the coordinator of
// share group id, the leader of its partition of __consumer_offsets in
// the metadata image (FindCoordinator's answer for the group), as Kafka
// routes share groups to their group coordinator: NOT_COORDINATOR when
// another broker leads it, COORDINATOR_NOT_AVAILABLE when the topic or
// the partition's leader is missing; nil when this broker is the one.
func (b *Broker) shareCoordinatorError(id string) *kerr.Error {
	t := b.image().Topic(offsetsTopic)
	p := b.groups.coord.Partition(id)
	switch {
	case t == nil || int(p) >= len(t.Partitions) || t.Partitions[p].Leader < 0:
		return kerr.CoordinatorNotAvailable
	case t.Partitions[p].Leader != b.node.NodeID:
		return kerr.NotCoordinator
	}
	return nil
}

// otherGroupType returns the type of the classic or consumer group the
// group coordinator holds under id ("" when none; a share group cannot
// share its id), or the coordinator's error (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE). One lookup of
// the group, whatever the number of groups.
func (b *Broker) otherGroupType(ctx context.Context, id string) (string, *kerr.Error) {
	typ, code := b.groups.coord.GroupType(ctx, id)
	if code != 0 {
		var ke *kerr.Error
		if !errors.As(kerr.ErrorForCode(code), &ke) {
			return "", kerr.UnknownServerError
		}
		return "", ke
	}
	return typ, nil
}

// unloadShareGroups forgets the share groups of partition p of
// __consumer_offsets, which this broker no longer leads: the new
// coordinator loads them from the partition, and their members go on
// there with their epochs (NOT_COORDINATOR here from now on).
func (b *Broker) unloadShareGroups(p int32) {
	if b.share == nil {
		return
	}
	b.share.coord.UnloadPartition(p)
}

// shareJournal writes the share coordinator's records to the group's
// partition of __consumer_offsets, through the group coordinator's writer
// of that partition.
type shareJournal struct{ b *Broker }

func (j shareJournal) Partition(id string) int32 { return j.b.groups.coord.Partition(id) }

func (j shareJournal) Append(id string, recs []group.Record, done func(error)) {
	j.b.groups.coord.AppendShare(id, recs, done)
}

// MaxBatchBytes is max.message.bytes of the group's partition of
// __consumer_offsets when this broker hosts it, else 0 (no limit known).
func (j shareJournal) MaxBatchBytes(id string) int {
	if rp := j.b.replicas.Get(offsetsTopic, j.Partition(id)); rp != nil {
		return int(rp.Config().MaxMessageBytes)
	}
	return 0
}

// listShareGroups adds the share groups to a ListGroups response, filtered
// by the request's states (v4+) and types (v5+: "share").
func (b *Broker) listShareGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) *kmsg.ListGroupsResponse {
	if resp.ErrorCode != 0 {
		return resp
	}
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "share") }) {
		return resp
	}
	for _, l := range b.share.coord.List() {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, l.State) }) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, "share", l.State, "share"
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// splitShareGroupDeletes takes the share groups out of a DeleteGroups
// request, deletes them with their share-partition state (NON_EMPTY_GROUP
// with members), and returns the rest of the request and their results.
func (b *Broker) splitShareGroupDeletes(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsRequest, []kmsg.DeleteGroupsResponseGroup) {
	out := *req
	out.Groups = nil
	var done []kmsg.DeleteGroupsResponseGroup
	for _, id := range req.Groups {
		if !b.share.coord.IsShareGroup(id) {
			out.Groups = append(out.Groups, id)
			continue
		}
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		err := b.share.coord.Delete(ctx, id)
		if err == nil {
			if err = b.deleteShareGroupState(ctx, id, nil); err != nil {
				_ = b.share.coord.EnsureGroup(ctx, id, nil) // so that a retry finds it
			}
		}
		g.ErrorCode = errCode(err)
		done = append(done, g)
	}
	return &out, done
}
