package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

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
func init() { register(kmsg.ShareGroupHeartbeat, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	var other func(string) bool
	if req.MemberEpoch == 0 && !b.share.coord.IsShareGroup(req.GroupID) {
		other = func(id string) bool { return b.isConsumerGroup(ctx, id) }
	}
	cl := share.Client{ID: clientIDFrom(ctx), Host: clientHost(c.RemoteAddr)}
	return b.share.coord.Heartbeat(req, cl, other), nil
}

// isConsumerGroup reports whether the group coordinator holds a classic or
// consumer group under id (a share group cannot share its id).
func (b *Broker) isConsumerGroup(ctx context.Context, id string) bool {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	resp := b.groups.coord.ListGroups(ctx, req)
	return slices.ContainsFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == id })
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
		err := b.share.coord.Delete(id)
		if err == nil {
			if err = b.deleteShareGroupState(ctx, id, nil); err != nil {
				b.share.coord.EnsureGroup(id) // so that a retry finds it
			}
		}
		g.ErrorCode = errCode(err)
		done = append(done, g)
	}
	return &out, done
}
