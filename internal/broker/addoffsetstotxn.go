package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// AddOffsetsToTxn v0-v3: the transaction coordinator adds the group's
// partition of __consumer_offsets to the transaction, so that the
// TxnOffsetCommit that follows ends with it.
func init() { registerTxnAPI(kmsg.AddOffsetsToTxn, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := b.txns.coord.AddOffsetsToTxn(ctx, req)
	resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 2)
	return resp, nil
}
