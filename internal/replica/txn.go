package replica

import (
	"fmt"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// This file is the partition's side of transactions (KIP-98): transaction
// markers written for the transaction coordinator, the verification of a
// producer's first transactional write with the coordinator (KIP-890 part
// 1), and reads for read_committed consumers.

// TxnVerification is the guard of a producer whose first transactional
// batch to this partition is being verified with its transaction
// coordinator (Kafka's VerificationGuard): Append accepts that batch only
// with the guard still current, so that a marker written meanwhile (the
// transaction aborted, say by its timeout) makes a late batch fail instead
// of opening a transaction nobody will end.
type TxnVerification struct {
	producerID int64
	epoch      int16
}

// StartTxnVerification returns the guard for a transactional batch of
// producerID at epoch, or nil when the producer's transaction is already
// open in this partition (the batch needs no verification). Concurrent
// produces of one producer share a guard. The caller asks the transaction
// coordinator whether the partition is in the producer's transaction
// (AddPartitionsToTxn v4+ with verify_only) and passes the guard to Append
// if it is.
func (p *Partition) StartTxnVerification(producerID int64, epoch int16) *TxnVerification {
	p.mu.Lock()
	defer p.mu.Unlock()
	if info, ok := p.log.Producer(producerID); ok && info.CurrentTxnStartOffset >= 0 && info.ProducerEpoch == epoch {
		return nil
	}
	if v := p.verifications[producerID]; v != nil && v.epoch == epoch {
		return v
	}
	if p.verifications == nil {
		p.verifications = map[int64]*TxnVerification{}
	}
	v := &TxnVerification{producerID: producerID, epoch: epoch}
	p.verifications[producerID] = v
	return v
}

// checkVerificationLocked rejects a transactional batch that would start
// its producer's transaction here without the producer's current guard.
// known is the header of batches when the caller parsed it. Requires mu.
func (p *Partition) checkVerificationLocked(batches []byte, known *record.Header, verified *TxnVerification) error {
	var h record.Header
	if known != nil {
		h = *known
	} else {
		var err error
		if h, err = record.ParseHeader(batches); err != nil {
			return nil
		}
	}
	if h.ProducerID < 0 || !h.IsTransactional() || h.IsControl() {
		return nil
	}
	if info, ok := p.log.Producer(h.ProducerID); ok && info.CurrentTxnStartOffset >= 0 {
		return nil // the transaction is open here: epochs are checked by the log
	}
	if verified == nil || p.verifications[h.ProducerID] != verified || verified.epoch != h.ProducerEpoch {
		return fmt.Errorf("%w: producer %d epoch %d: partition %s-%d not verified in its transaction", storage.ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch, p.Topic, p.Partition)
	}
	return nil
}

// clearVerificationLocked drops a guard once used. Requires mu.
func (p *Partition) clearVerificationLocked(v *TxnVerification) {
	if p.verifications[v.producerID] == v {
		delete(p.verifications, v.producerID)
	}
}

// AppendTxnMarker writes a COMMIT or ABORT marker for producerID at epoch
// from the transaction coordinator of coordinatorEpoch (WriteTxnMarkers),
// once: when the producer has no transaction open here and its epoch is
// already at least epoch, the marker was written before (a retry) or there
// is nothing to end, and written is false. Errors: ErrNotLeader,
// storage.ErrInvalidProducerEpoch (a newer epoch wrote here),
// storage.ErrCoordinatorFenced (a newer coordinator wrote a marker), I/O
// errors. Verification guards of the producer are dropped.
func (p *Partition) AppendTxnMarker(producerID int64, epoch int16, coordinatorEpoch int32, commit bool, nowMillis int64) (res storage.AppendResult, written bool, err error) {
	batch, err := record.BuildEndTxnMarker(producerID, epoch, coordinatorEpoch, commit, nowMillis)
	if err != nil {
		return res, false, err
	}
	p.mu.Lock()
	if !p.leader.Load() {
		p.mu.Unlock()
		return res, false, ErrNotLeader
	}
	delete(p.verifications, producerID)
	if info, ok := p.log.Producer(producerID); ok && info.CurrentTxnStartOffset < 0 && epoch <= info.ProducerEpoch && coordinatorEpoch >= info.CoordinatorEpoch {
		p.mu.Unlock()
		return res, false, nil
	}
	res, err = p.log.AppendWith(batch, p.leaderEpoch.Load(), storage.OriginCoordinator)
	if err == nil {
		p.purg.appended(p.log.LogEndOffset(), int64(len(batch)))
		p.maybeAdvanceHWLocked()
	}
	p.mu.Unlock()
	if err != nil {
		return res, false, err
	}
	p.purg.wakeFetches() // the last stable offset moved
	return res, true, nil
}

// ReadSliceCommitted is ReadSlice for a read_committed consumer (Fetch v4+,
// KIP-98): it reads below the last stable offset and lists the aborted
// transactions overlapping [offset, last stable offset), which the
// consumer drops.
func (p *Partition) ReadSliceCommitted(offset int64, maxBytes int32, minOne bool) (storage.FileSlice, ReadResult, error) {
	hw := p.hw.Load()
	lso := p.lsoAt(hw)
	res := ReadResult{HighWatermark: hw, LastStableOffset: lso}
	fs, r, err := p.log.ReadSlice(offset, maxBytes, lso, minOne)
	res.LogStartOffset = r.LogStartOffset
	if err != nil {
		res.LogStartOffset = p.log.LogStartOffset()
		return fs, res, err
	}
	if fs.Length > 0 {
		res.AbortedTransactions, err = p.log.AbortedTransactions(offset, lso)
		if err != nil {
			fs.Release()
			return storage.FileSlice{Release: func() {}}, res, err
		}
	}
	return fs, res, nil
}

// AppendInternalTxn is AppendInternal for a transactional batch the broker
// writes for a producer (TxnOffsetCommit's offsets): like a client's
// transactional produce, a batch that would start the producer's
// transaction here needs verified, the guard of StartTxnVerification taken
// before the coordinator confirmed the partition is in the transaction;
// otherwise, and when a marker ended the transaction meanwhile, it gets
// storage.ErrInvalidTxnState and nothing is written.
func (p *Partition) AppendInternalTxn(batches []byte, verified *TxnVerification) (storage.AppendResult, error) {
	if !p.leader.Load() {
		return storage.AppendResult{}, ErrNotLeader
	}
	if verified == nil {
		verified = &TxnVerification{producerID: -1} // never current: only an open transaction passes
	}
	return p.appendAsLeader(batches, nil, storage.OriginCoordinator, verified)
}
