package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ConsumerGroupDescribe: v0-1
//
// Version notes:
//   - v0: the lowest version served (KIP-848)
//   - v1: MemberType (response GroupMember)

// ConsumerGroupDescribe (KIP-848): state, epochs, assignor and members of
// consumer groups, with each member's current and target assignment;
// classic and share groups get GROUP_ID_NOT_FOUND ("Group X is not a
// consumer group.").
func init() { registerGroupAPI(kmsg.ConsumerGroupDescribe, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := b.groups.coord.ConsumerGroupDescribe(ctx, req)
	b.markShareGroupsInConsumerGroupDescribe(resp)
	if req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			setGroupOperations(&resp.Groups[i].AuthorizedOperations, resp.Groups[i].ErrorCode)
		}
	}
	return resp, nil
}
