package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/txn"
	"github.com/samsahq/samsa/internal/server"
)

// TxnOffsetCommit: v0-5
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: LeaderEpoch (request TopicPartition)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482),
//     Generation (request), MemberID (request), InstanceID (request)
//   - v4: TRANSACTION_ABORTABLE may be returned (KIP-890); never returned here
//   - v5: the group's partition of __consumer_offsets is added to the
//     transaction by the broker (KIP-890 part 2), no AddOffsetsToTxn first

// TxnOffsetCommit v0-v5 (KIP-98, KIP-447 from v3): the group coordinator
// writes the offsets as part of the producer's transaction; they become
// visible when it commits. Partitions of topics that do not exist get
// UNKNOWN_TOPIC_OR_PARTITION. The group's partition of __consumer_offsets
// must be in the producer's open transaction (AddOffsetsToTxn): the
// transaction coordinator is asked first, as a partition leader asks it
// for a transactional produce (KIP-890), so that no offsets are left
// pending without a marker to come; otherwise every partition gets
// INVALID_TXN_STATE (or the coordinator's error). From v5 the coordinator
// is asked to add that partition instead, as for Produce v12.
func init() { registerGroupAPI(kmsg.TxnOffsetCommit, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	im := b.image()
	fail := func(code int16, known bool) *kmsg.TxnOffsetCommitResponse {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				if known && !knownPartition(im, t.Topic, p.Partition) {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if !knownPartition(im, t.Topic, p.Partition) {
				return fail(kerr.OperationNotAttempted.Code, true), nil
			}
		}
	}
	k := verifyKey{offsetsTopic, b.groupOffsetsPartition(req.Group)}
	gk := offsetsGuardKey{k.partition, req.ProducerID}
	if p := b.replicas.Get(offsetsTopic, k.partition); p != nil && p.IsLeader() {
		// The guard the append needs unless the producer's transaction is
		// open in the partition already; a marker written before the
		// append voids it, as for a transactional produce.
		if g := p.StartTxnVerification(req.ProducerID, req.ProducerEpoch); g != nil {
			b.txns.offsetsGuards.Store(gk, g)
		} else {
			b.txns.offsetsGuards.Delete(gk)
		}
	}
	mode := txn.AddVerifyOnly
	if req.Version >= 5 {
		mode = txn.AddImplicit
	}
	codes := b.verifyPartitionsInTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []verifyKey{k}, mode)
	if codes[k] != 0 {
		b.txns.offsetsGuards.Delete(gk)
	}
	switch code := codes[k]; code {
	case 0:
	case kerr.NotEnoughReplicas.Code:
		return fail(kerr.CoordinatorLoadInProgress.Code, false), nil // retriable for TxnOffsetCommit
	case kerr.InvalidProducerEpoch.Code:
		return fail(kerr.ProducerFenced.Code, false), nil
	default:
		return fail(code, false), nil
	}
	return b.groups.coord.TxnOffsetCommit(ctx, req), nil
}
