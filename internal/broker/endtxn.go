package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// EndTxn v0-v3: answered once PrepareCommit or PrepareAbort is written to
// __transaction_state; the coordinator then writes the markers.
func init() { registerTxnAPI(kmsg.EndTxn, handleEndTxn) }

func handleEndTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := b.txns.coord.EndTxn(ctx, req)
	resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 2)
	return resp, nil
}
