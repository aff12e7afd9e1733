package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// LeaveGroup, batched by member id or group.instance.id from v3 (KIP-345).
func init() { registerGroupAPI(kmsg.LeaveGroup, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.LeaveGroup(ctx, kreq.(*kmsg.LeaveGroupRequest)), nil
}
