package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups are kept by the share coordinator, classic and consumer
// groups by the group coordinator; Kafka keeps all of them in one, and
// answers a describe of a group of another type with GROUP_ID_NOT_FOUND
// and a message naming the type asked for. These complete the answers of
// one coordinator with what the other knows.

// notOfType returns Kafka's message for a group that exists under another
// type than the one asked for ("classic", "consumer", "share").
func notOfType(id, typ string) *string {
	msg := "Group " + id + " is not a " + typ + " group."
	return &msg
}

// markShareGroupsInDescribeGroups sets the message of the share groups
// in a DescribeGroups v6+ response (GROUP_ID_NOT_FOUND: "Group X is not
// a classic group."); before v6 they stay Dead without error, as unknown
// groups.
func (b *Broker) markShareGroupsInDescribeGroups(resp *kmsg.DescribeGroupsResponse) {
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == kerr.GroupIDNotFound.Code && b.share.coord.IsShareGroup(g.Group) {
			g.ErrorMessage = notOfType(g.Group, "classic")
		}
	}
}

// markShareGroupsInConsumerGroupDescribe sets the message of the share
// groups in a ConsumerGroupDescribe response (GROUP_ID_NOT_FOUND: "Group
// X is not a consumer group.").
func (b *Broker) markShareGroupsInConsumerGroupDescribe(resp *kmsg.ConsumerGroupDescribeResponse) {
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == kerr.GroupIDNotFound.Code && b.share.coord.IsShareGroup(g.Group) {
			g.ErrorMessage = notOfType(g.Group, "consumer")
		}
	}
}

// describeShareGroup answers one group of ShareGroupDescribe:
// NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE) on a broker that is not
// the group's coordinator, GROUP_ID_NOT_FOUND with "Group X is not a
// share group." when a classic or consumer group holds the id, "Group X
// not found." when no group does.
func (b *Broker) describeShareGroup(ctx context.Context, id string) kmsg.ShareGroupDescribeResponseGroup {
	if err := b.shareCoordinatorError(id); err != nil {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.ErrorCode = id, err.Code
		return g
	}
	g := b.share.coord.Describe(id)
	if g.ErrorCode == kerr.GroupIDNotFound.Code {
		if typ, err := b.otherGroupType(ctx, id); err != nil {
			g.ErrorCode, g.ErrorMessage = err.Code, nil
		} else if typ != "" {
			g.ErrorMessage = notOfType(id, "share")
		}
	}
	return g
}
