package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// SyncGroup: the leader's assignment is written to __consumer_offsets, then
// relayed to every member (empty bytes to those it left out).
func init() { registerGroupAPI(kmsg.SyncGroup, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.SyncGroup(ctx, kreq.(*kmsg.SyncGroupRequest)), nil
}
