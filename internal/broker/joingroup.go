package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/server"
)

// JoinGroup: v0-9
//
// Version notes:
//   - v0: the lowest version served
//   - v1: RebalanceTimeoutMillis (request)
//   - v2: ThrottleMillis (response)
//   - v3: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v4: MEMBER_ID_REQUIRED: a new member gets its id and rejoins (KIP-394)
//   - v5: InstanceID (request), InstanceID (response Member)
//   - v6: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v7: ProtocolType (response)
//   - v8: Reason (request)
//   - v9: SkipAssignment (response)

// JoinGroup (KIP-394 member ids from v4, KIP-345 static members from v5,
// KIP-814 from v9): answered by the group coordinator once the join phase
// of the rebalance completes. Member ids start with the client.id of the
// request header.
func init() { registerGroupAPI(kmsg.JoinGroup, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	cl := group.Client{ID: clientIDFrom(ctx), Host: clientHost(c.RemoteAddr)}
	return b.groups.coord.JoinGroup(ctx, cl, kreq.(*kmsg.JoinGroupRequest)), nil
}

// registerGroupAPI registers a group API with the versions the coordinator
// implements.
func registerGroupAPI(key kmsg.Key, h handlerFunc) {
	for _, v := range group.APIVersions {
		if v.Key == int16(key) {
			register(key, v.Min, v.Max, h)
			return
		}
	}
	panic("group coordinator does not implement " + key.Name())
}
