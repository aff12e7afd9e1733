package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ListGroups: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v4: StatesFilter (request), GroupState (response Group)
//   - v5: TypesFilter (request), GroupType (response Group)

// ListGroups: the groups this broker coordinates, filtered by state (v4+)
// and type (v5+).
func init() { registerGroupAPI(kmsg.ListGroups, handleListGroups) }

func handleListGroups(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := b.groups.coord.ListGroups(ctx, req)
	return b.listShareGroups(req, resp), nil
}
