package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DeleteGroups: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)

// DeleteGroups: empty groups are deleted with their offsets (tombstones in
// __consumer_offsets); others get NON_EMPTY_GROUP.
func init() { registerGroupAPI(kmsg.DeleteGroups, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req, shared := b.splitShareGroupDeletes(ctx, kreq.(*kmsg.DeleteGroupsRequest))
	resp := b.groups.coord.DeleteGroups(ctx, req)
	resp.Groups = append(resp.Groups, shared...)
	return resp, nil
}
