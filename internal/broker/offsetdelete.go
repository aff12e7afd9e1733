package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetDelete: v0
//
// Version notes:
//   - v0: the lowest version served

// OffsetDelete (KIP-496): committed offsets of topics the group does not
// consume are deleted.
func init() { registerGroupAPI(kmsg.OffsetDelete, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.OffsetDelete(ctx, kreq.(*kmsg.OffsetDeleteRequest)), nil
}
