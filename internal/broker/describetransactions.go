package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DescribeTransactions: v0
//
// Version notes:
//   - v0: the lowest version served

// DescribeTransactions v0 (KIP-664): the state of transactional ids whose
// coordinator this broker is (clients send it to the coordinator).
func init() { registerTxnAPI(kmsg.DescribeTransactions, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.txns.coord.DescribeTransactions(ctx, kreq.(*kmsg.DescribeTransactionsRequest)), nil
}
