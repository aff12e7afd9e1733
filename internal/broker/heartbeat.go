package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// Heartbeat keeps a group member's session (session.timeout.ms) and tells
// it when to rejoin (REBALANCE_IN_PROGRESS).
func init() { registerGroupAPI(kmsg.Heartbeat, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.Heartbeat(ctx, kreq.(*kmsg.HeartbeatRequest)), nil
}
