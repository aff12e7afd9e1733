package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetFetch: v0-9
//
// Version notes:
//   - v0: the lowest version served
//   - v1: offsets come from __consumer_offsets, not ZooKeeper
//   - v2: ErrorCode (response)
//   - v3: ThrottleMillis (response)
//   - v4: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v5: LeaderEpoch (response TopicPartition)
//   - v6: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v7: RequireStable (request)
//   - v8: Topic (request GroupTopic), drops Group (request), drops Topics
//     (request), Groups (request), Topic (response GroupTopic), drops Topics
//     (response), drops ErrorCode (response), Groups (response)
//   - v9: MemberID (request Group), MemberEpoch (request Group)

// OffsetFetch, of several groups from v8: committed offsets, -1 where none.
func init() { registerGroupAPI(kmsg.OffsetFetch, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.OffsetFetch(ctx, kreq.(*kmsg.OffsetFetchRequest)), nil
}
