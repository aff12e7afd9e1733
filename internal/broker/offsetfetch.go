package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetFetch, of several groups from v8: committed offsets, -1 where none.
func init() { registerGroupAPI(kmsg.OffsetFetch, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.OffsetFetch(ctx, kreq.(*kmsg.OffsetFetchRequest)), nil
}
