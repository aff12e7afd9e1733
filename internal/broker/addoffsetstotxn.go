package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// AddOffsetsToTxn: v0-4
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: PRODUCER_FENCED may be returned for a fenced producer (KIP-588)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v4: TRANSACTION_ABORTABLE may be returned (KIP-890); never returned here

// AddOffsetsToTxn v0-v4: the transaction coordinator adds the group's
// partition of __consumer_offsets to the transaction, so that the
// TxnOffsetCommit that follows ends with it.
func init() { registerTxnAPI(kmsg.AddOffsetsToTxn, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := b.txns.coord.AddOffsetsToTxn(ctx, req)
	resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 2)
	return resp, nil
}
