package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// InitProducerID: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v3: ProducerID (request), ProducerEpoch (request)
//   - v4: PRODUCER_FENCED may be returned for a fenced producer (KIP-588)
//   - v5: TRANSACTION_ABORTABLE may be returned (KIP-890); never returned here

// InitProducerId v0-v5. Idempotent producers (no transactional id) get a
// fresh producer id with epoch 0, from blocks the controller reserves in
// the metadata log so that no id is reused after a restart (KIP-730).
// Transactional ids are answered by the transaction coordinator (epoch
// bump and fencing, see txn.Coordinator.InitProducerID).
func init() { register(kmsg.InitProducerID, 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp := b.txns.coord.InitProducerID(ctx, req)
		resp.ErrorCode = fencedForVersion(resp.ErrorCode, req.Version, 4)
		return resp, nil
	}
	id, err := b.nextProducerID(ctx)
	if err != nil {
		b.logger.Error("allocating producer ids failed", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// nextProducerID hands out the next id, reserving a new block when the
// current one is used up.
func (b *Broker) nextProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidNext >= b.pidEnd {
		first, n, err := b.allocateProducerIDs(ctx)
		if err != nil {
			return 0, err
		}
		b.pidNext, b.pidEnd = first, first+int64(n)
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}
