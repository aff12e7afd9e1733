package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// EndTxn: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: PRODUCER_FENCED may be returned for a fenced producer (KIP-588)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v4: TRANSACTION_ABORTABLE may be returned (KIP-890); never returned here
//   - v5: ProducerID (response), ProducerEpoch (response): transaction
//     version 2 (KIP-890 part 2), every commit or abort bumps the epoch

// EndTxn v0-v5: answered once PrepareCommit or PrepareAbort is written to
// __transaction_state; the coordinator then writes the markers. v5 bumps
// the producer epoch and returns the producer id and epoch to go on with
// (see txn.Coordinator.EndTxn); clients send it when the cluster's
// transaction.version is 2.
func init() { registerTxnAPI(kmsg.EndTxn, handleEndTxn) }

func handleEndTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := b.txns.coord.EndTxn(ctx, req)
	resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 2)
	return resp, nil
}
