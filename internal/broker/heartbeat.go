package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// Heartbeat: v0-4
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: InstanceID (request)
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)

// Heartbeat keeps a group member's session (session.timeout.ms) and tells
// it when to rejoin (REBALANCE_IN_PROGRESS).
func init() { registerGroupAPI(kmsg.Heartbeat, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.Heartbeat(ctx, kreq.(*kmsg.HeartbeatRequest)), nil
}
