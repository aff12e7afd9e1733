package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ShareGroupDescribe: v1
//
// Version notes (v0 was Kafka 4.0's early access, removed in 4.1; not served):
//   - v1: the version Kafka 4.1+ serves (KIP-932)

// ShareGroupDescribe (KIP-932): the members of share groups, their
// subscriptions and assignments; GROUP_ID_NOT_FOUND for an unknown group
// or one of another type ("Group X is not a share group."),
// NOT_COORDINATOR on a broker that is not the group's coordinator.
func init() { register(kmsg.ShareGroupDescribe, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		resp.Groups = append(resp.Groups, b.describeShareGroup(ctx, id))
	}
	return resp, nil
}
