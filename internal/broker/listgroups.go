package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ListGroups: the groups this broker coordinates, filtered by state (v4+)
// and type (v5+).
func init() { registerGroupAPI(kmsg.ListGroups, handleListGroups) }

func handleListGroups(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.ListGroups(ctx, kreq.(*kmsg.ListGroupsRequest)), nil
}
