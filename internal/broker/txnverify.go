package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsahq/samsa/internal/coordinator/txn"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
)

// verifyKey names a partition of a Produce request.
type verifyKey struct {
	topic     string
	partition int32
}

// verifyTarget is a partition of a Produce request whose batch was
// checked: its partition and the batch's header.
type verifyTarget struct {
	key verifyKey
	p   *replica.Partition
	h   record.Header
}

// verifyTxnProduce is KIP-890 part 1 for a transactional Produce: for each
// partition whose batch would start the producer's transaction there, it
// asks the transaction coordinator whether the partition was added to the
// transaction (AddPartitionsToTxn v4 verify_only, answered locally when
// this broker is the coordinator). It returns the guards to append with
// and, per partition, the error code to answer instead of appending.
// With add (Produce v12+, KIP-890 part 2) it asks the coordinator to add
// the partitions to the transaction instead (AddPartitionsToTxn v5
// without verify_only).
func (b *Broker) verifyTxnProduce(ctx context.Context, transactionalID string, targets []verifyTarget, add bool) (map[verifyKey]*replica.TxnVerification, map[verifyKey]int16) {
	var (
		guards  map[verifyKey]*replica.TxnVerification
		errs    map[verifyKey]int16
		pid     int64 = -1
		epoch   int16
		pending []verifyKey
	)
	for _, t := range targets {
		h := t.h
		if !h.IsTransactional() || h.ProducerID < 0 {
			continue
		}
		g := t.p.StartTxnVerification(h.ProducerID, h.ProducerEpoch)
		if g == nil {
			continue
		}
		k := t.key
		if guards == nil {
			guards, errs = map[verifyKey]*replica.TxnVerification{}, map[verifyKey]int16{}
		}
		if pid >= 0 && (pid != h.ProducerID || epoch != h.ProducerEpoch) {
			errs[k] = kerr.InvalidProducerIDMapping.Code // one producer per request
			continue
		}
		pid, epoch = h.ProducerID, h.ProducerEpoch
		guards[k] = g
		pending = append(pending, k)
	}
	if len(pending) == 0 {
		return guards, errs
	}
	mode := txn.AddVerifyOnly
	if add {
		mode = txn.AddImplicit
	}
	codes := b.verifyPartitionsInTxn(ctx, transactionalID, pid, epoch, pending, mode)
	for _, k := range pending {
		if c := codes[k]; c != 0 {
			errs[k] = c
			delete(guards, k)
		}
	}
	return guards, errs
}
