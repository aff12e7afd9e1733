package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/txn"
	"github.com/samsahq/samsa/internal/server"
)

// AddPartitionsToTxn: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: PRODUCER_FENCED may be returned for a fenced producer (KIP-588)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v4: drops TransactionalID (request), drops ProducerID (request), drops
//     ProducerEpoch (request), drops Topics (request), Transactions
//     (request), ErrorCode (response), Transactions (response), drops Topics
//     (response)
//   - v5: TRANSACTION_ABORTABLE may be returned (KIP-890); never returned here

// AddPartitionsToTxn v0-v5, answered by the transaction coordinator once
// the partitions are written to __transaction_state. As Kafka's KafkaApis,
// a request naming a partition that does not exist adds nothing: those get
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED. v4+
// is broker to broker (KIP-890): several transactions, and verify_only
// checks of partition leaders; without verify_only a leader adds the
// partitions of a Produce v12+ or TxnOffsetCommit v5+ (KIP-890 part 2),
// and the transaction runs under transaction version 2.
func init() { registerTxnAPI(kmsg.AddPartitionsToTxn, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	im := b.image()
	if req.Version <= 3 {
		var unknown bool
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				unknown = unknown || !knownPartition(im, t.Topic, p)
			}
		}
		if !unknown {
			resp := b.txns.coord.AddPartitionsToTxn(ctx, req)
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					p := &resp.Topics[i].Partitions[j]
					p.ErrorCode = fencedForVersion(p.ErrorCode, req.Version, 2)
				}
			}
			return resp, nil
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.OperationNotAttempted.Code
				if !knownPartition(im, t.Topic, p) {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, tx := range req.Transactions {
		var tps []txn.TopicPartition
		unknown := false
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
				unknown = unknown || !knownPartition(im, t.Topic, p)
			}
		}
		var code int16
		var per map[txn.TopicPartition]int16
		if !unknown {
			mode := txn.AddImplicit // from a partition leader for Produce v12+ (KIP-890 part 2)
			if tx.VerifyOnly {
				mode = txn.AddVerifyOnly
			}
			code, per = b.txns.coord.AddPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tps, mode)
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = t.Topic
			for _, p := range t.Partitions {
				tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				tp.Partition = p
				switch {
				case unknown && !knownPartition(im, t.Topic, p):
					tp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case unknown:
					tp.ErrorCode = kerr.OperationNotAttempted.Code
				case code != 0:
					tp.ErrorCode = code
				default:
					tp.ErrorCode = per[txn.TopicPartition{Topic: t.Topic, Partition: p}]
				}
				tt.Partitions = append(tt.Partitions, tp)
			}
			rt.Topics = append(rt.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp, nil
}
