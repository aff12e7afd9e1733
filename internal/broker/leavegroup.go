package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// LeaveGroup: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: drops MemberID (request), Members (request), Members (response)
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v5: Reason (request Member)

// LeaveGroup, batched by member id or group.instance.id from v3 (KIP-345).
func init() { registerGroupAPI(kmsg.LeaveGroup, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.LeaveGroup(ctx, kreq.(*kmsg.LeaveGroupRequest)), nil
}
