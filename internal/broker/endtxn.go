package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// EndTxn: v0-3
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: PRODUCER_FENCED may be returned for a fenced producer (KIP-588)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)

// EndTxn v0-v3: answered once PrepareCommit or PrepareAbort is written to
// __transaction_state; the coordinator then writes the markers.
func init() { registerTxnAPI(kmsg.EndTxn, handleEndTxn) }

func handleEndTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := b.txns.coord.EndTxn(ctx, req)
	resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 2)
	return resp, nil
}
