package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DeleteGroups: empty groups are deleted with their offsets (tombstones in
// __consumer_offsets); others get NON_EMPTY_GROUP.
func init() { registerGroupAPI(kmsg.DeleteGroups, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.groups.coord.DeleteGroups(ctx, kreq.(*kmsg.DeleteGroupsRequest)), nil
}
