package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// allGroupOperations is the authorized-operations bitfield of a group with
// every operation allowed (no ACLs yet): READ, DELETE, DESCRIBE.
const allGroupOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups: v0-6
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: IncludeAuthorizedOperations (request), AuthorizedOperations
//     (response Group)
//   - v4: InstanceID (response GroupMember)
//   - v5: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v6: ErrorMessage (response Group); GROUP_ID_NOT_FOUND for unknown
//     groups and KIP-848 consumer groups (KIP-1043)

// DescribeGroups: state, protocol and members (their metadata and
// assignment for Stable groups) of groups this broker coordinates.
func init() { registerGroupAPI(kmsg.DescribeGroups, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := b.groups.coord.DescribeGroups(ctx, req)
	b.markShareGroupsInDescribeGroups(resp)
	if req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			setGroupOperations(&resp.Groups[i].AuthorizedOperations, resp.Groups[i].ErrorCode)
		}
	}
	return resp, nil
}

// setGroupOperations sets the authorized operations of a group described
// without error (DescribeGroups v3+, ConsumerGroupDescribe).
func setGroupOperations(ops *int32, errorCode int16) {
	if errorCode == 0 {
		*ops = allGroupOperations
	}
}
