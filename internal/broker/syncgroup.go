package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// SyncGroup: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: InstanceID (request)
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v5: ProtocolType (request), Protocol (request), ProtocolType
//     (response), Protocol (response)

// SyncGroup: the leader's assignment is written to __consumer_offsets, then
// relayed to every member (empty bytes to those it left out).
func init() { registerGroupAPI(kmsg.SyncGroup, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.SyncGroup(ctx, kreq.(*kmsg.SyncGroupRequest)), nil
}
