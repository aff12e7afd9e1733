package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ListTransactions: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: DurationFilterMillis (request)
//   - v2: TransactionalIDPattern (request)

// ListTransactions v0-v2 (KIP-664): the transactional ids this broker
// coordinates (clients ask every broker and merge).
func init() { registerTxnAPI(kmsg.ListTransactions, handleListTransactions) }

func handleListTransactions(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.txns.coord.ListTransactions(ctx, kreq.(*kmsg.ListTransactionsRequest)), nil
}
