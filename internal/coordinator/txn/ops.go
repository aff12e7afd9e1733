package txn

import (
	"context"
	"github.com/samsahq/samsa/internal/clip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the state machine: the transitions of a transactional id
// for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, the
// abort of timed-out transactions and the expiration of idle ids, after
// Kafka's TransactionCoordinator and TransactionMetadata. Every transition
// is written to __transaction_state before it takes effect and before the
// request is answered.

// pidResult is the outcome of InitProducerId or EndTxn on the run
// goroutine: a code, and the producer id and epoch the producer goes on
// with (-1 with an error; for EndTxn v5 the bumped epoch, or a new
// producer id at epoch 0 when the epoch is exhausted).
type pidResult struct {
	code     int16
	pid      int64
	epoch    int16
	needsPID bool // a new producer id is needed: allocate one and call again
}

// initProducerID handles InitProducerId for a transactional id (run
// goroutine). newPID is a fresh producer id, or -1 when none was allocated;
// expectedPID/expectedEpoch are the request's (KIP-360, -1 when absent).
func (c *Coordinator) initProducerID(id string, timeoutMs int32, expectedPID int64, expectedEpoch int16, newPID int64, reply func(pidResult)) {
	fail := func(code int16) { reply(pidResult{code: code, pid: noProducerID, epoch: noProducerEpoch}) }
	part, code := c.partitionOf(id)
	if code != 0 {
		fail(code)
		return
	}
	now := time.Now().UnixMilli()
	m := part.txns[id]
	if m == nil {
		if newPID < 0 {
			reply(pidResult{needsPID: true})
			return
		}
		m = &txnMeta{id: id, snapshot: snapshot{producerID: newPID, lastProducerID: noProducerID, epoch: noProducerEpoch,
			lastEpoch: noProducerEpoch, timeoutMs: timeoutMs, state: stateEmpty, startMs: -1, updateMs: now, nextProducerID: noProducerID}}
		part.txns[id] = m
		newPID = -1
	}
	if m.pending || m.markers {
		fail(kerr.ConcurrentTransactions.Code)
		return
	}
	expected := expectedPID >= 0
	if expected && !(m.epoch == noProducerEpoch || expectedPID == m.producerID ||
		(expectedPID == m.lastProducerID && expectedEpoch >= maxProducerEpoch)) {
		fail(kerr.ProducerFenced.Code)
		return
	}
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		fail(kerr.ConcurrentTransactions.Code)
		return
	case stateOngoing:
		// Fence the previous instance: abort its transaction with a bumped
		// epoch, which is never returned; the client retries and gets the
		// epoch bumped once more (Kafka's PrepareEpochFence).
		c.abort(part, m, true, func(code int16) {
			if code == 0 {
				code = kerr.ConcurrentTransactions.Code
			}
			fail(code)
		})
		return
	}
	next := m.snapshot
	next.timeoutMs = timeoutMs
	next.state = stateEmpty
	next.partitions = nil
	next.startMs = -1
	next.updateMs = now
	switch {
	case m.epochExhausted() && (!expected || expectedEpoch == m.epoch):
		if newPID < 0 {
			reply(pidResult{needsPID: true})
			return
		}
		next.lastProducerID, next.producerID = m.producerID, newPID
		next.epoch = 0
		next.lastEpoch = noProducerEpoch
		if expected {
			next.lastEpoch = m.epoch
		}
	case !expected:
		next.epoch, next.lastEpoch = m.epoch+1, noProducerEpoch
	case m.epoch == noProducerEpoch || expectedEpoch == m.epoch:
		next.epoch, next.lastEpoch = m.epoch+1, m.epoch
	case expectedEpoch == m.lastEpoch:
		// A retry of a bump whose answer was lost: the same epoch again.
	default:
		fail(kerr.ProducerFenced.Code)
		return
	}
	c.write(part, m, &next, func(err error) {
		if code := appendErrorCode(err); code != 0 {
			fail(code)
			return
		}
		part.log.Info("initialized transactional id", "transactional_id", clip.String(id), "producer_id", m.producerID, "producer_epoch", m.epoch)
		reply(pidResult{pid: m.producerID, epoch: m.epoch})
	})
}

// checkProducer validates a request's producer id and epoch against m, as
// AddPartitionsToTxn and EndTxn do.
func checkProducer(m *txnMeta, pid int64, epoch int16) int16 {
	switch {
	case m == nil || m.producerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		return kerr.ProducerFenced.Code
	case m.pending || m.markers:
		return kerr.ConcurrentTransactions.Code
	case isPrepare(m.state):
		return kerr.ConcurrentTransactions.Code
	}
	return 0
}

// addPartitions adds tps to the open transaction of id (AddPartitionsToTxn,
// AddOffsetsToTxn; run goroutine). With verifyOnly it only reports, per
// partition, whether it is in the transaction (INVALID_TXN_STATE when not),
// for a partition leader's check of a transactional produce (KIP-890).
// reply gets a top-level code, or per-partition codes when it is zero.
//
// implicit marks adds a partition leader makes for a Produce v12+ or
// TxnOffsetCommit v5+ (KIP-890 part 2): the transaction then runs under
// transaction version 2.
func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, verifyOnly, implicit bool, reply func(int16, map[TopicPartition]int16)) {
	part, code := c.partitionOf(id)
	if code != 0 {
		reply(code, nil)
		return
	}
	m := part.txns[id]
	if code := checkProducer(m, pid, epoch); code != 0 {
		reply(code, nil)
		return
	}
	if verifyOnly {
		out := make(map[TopicPartition]int16, len(tps))
		set := m.partitionSet()
		for _, tp := range tps {
			if _, ok := set[tp]; !ok || m.state != stateOngoing {
				out[tp] = kerr.InvalidTxnState.Code
			} else {
				out[tp] = 0
			}
		}
		reply(0, out)
		return
	}
	if m.state == stateOngoing && m.hasAll(tps) && (!implicit || m.tv2) {
		reply(0, nil)
		return
	}
	now := time.Now().UnixMilli()
	next := m.snapshot
	if m.state != stateOngoing {
		next.startMs = now
	}
	if implicit {
		next.tv2 = true
	}
	next.state = stateOngoing
	next.partitions = m.withPartitions(tps)
	next.updateMs = now
	c.write(part, m, &next, func(err error) { reply(appendErrorCode(err), nil) })
}

// endTxn handles EndTxn (run goroutine): it writes PrepareCommit or
// PrepareAbort, answers, then writes the markers and completes. tv2 is
// set for EndTxn v5+ (transaction version 2, KIP-890 part 2); newPID is a
// fresh producer id for a tv2 bump that exhausts the epoch, -1 when none
// was allocated.
func (c *Coordinator) endTxn(id string, pid int64, epoch int16, commit, tv2 bool, newPID int64, reply func(pidResult)) {
	fail := func(code int16) { reply(pidResult{code: code, pid: noProducerID, epoch: noProducerEpoch}) }
	part, code := c.partitionOf(id)
	if code != 0 {
		fail(code)
		return
	}
	m := part.txns[id]
	if tv2 {
		c.endTxnV2(part, m, pid, epoch, commit, newPID, reply)
		return
	}
	switch {
	case m == nil || m.producerID != pid:
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	case m.epoch != epoch:
		fail(kerr.ProducerFenced.Code)
		return
	case m.pending:
		fail(kerr.ConcurrentTransactions.Code)
		return
	}
	ok := func() { reply(pidResult{pid: m.producerID, epoch: m.epoch}) }
	switch m.state {
	case stateOngoing:
		c.prepare(part, m, commit, false, false, false, noProducerID, func(code int16) {
			if code != 0 {
				fail(code)
				return
			}
			ok()
		})
	case stateCompleteCommit, statePrepareCommit:
		switch {
		case !commit:
			fail(kerr.InvalidTxnState.Code)
		case m.state == stateCompleteCommit:
			ok() // a retry
		default:
			fail(kerr.ConcurrentTransactions.Code)
		}
	case stateCompleteAbort, statePrepareAbort:
		switch {
		case commit:
			fail(kerr.InvalidTxnState.Code)
		case m.state == stateCompleteAbort:
			ok()
		default:
			fail(kerr.ConcurrentTransactions.Code)
		}
	default:
		fail(kerr.InvalidTxnState.Code)
	}
}

// endTxnV2 is EndTxn v5+ (transaction version 2, KIP-890 part 2), after
// Kafka's TransactionCoordinator.endTransaction: every commit or abort
// bumps the producer epoch, so the request of a retry carries the epoch
// before the bump (or the last epoch of the previous producer id after a
// rotation), and any other epoch is fenced. A retry of an EndTxn already
// completed gets NONE with the current producer id and epoch; the same
// epoch on a completed or empty transaction is the next transaction: an
// abort of it (nothing added) bumps the epoch again, a commit is
// INVALID_TXN_STATE.
func (c *Coordinator) endTxnV2(part *partition, m *txnMeta, pid int64, epoch int16, commit bool, newPID int64, reply func(pidResult)) {
	fail := func(code int16) { reply(pidResult{code: code, pid: noProducerID, epoch: noProducerEpoch}) }
	if m == nil {
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	}
	retryOnOverflow := m.lastProducerID == pid && m.producerID != pid && epoch == maxProducerEpoch && m.epoch == 0
	retryOnBump := m.producerID == pid && int32(m.epoch) == int32(epoch)+1
	var valid bool
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		valid = retryOnBump
	case stateCompleteCommit, stateCompleteAbort:
		valid = retryOnBump || retryOnOverflow || epoch == m.epoch
	default:
		valid = epoch == m.epoch
	}
	switch {
	case m.producerID != pid && !retryOnOverflow:
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	case !valid:
		fail(kerr.ProducerFenced.Code)
		return
	case m.pending:
		fail(kerr.ConcurrentTransactions.Code)
		return
	}
	retry := retryOnBump || retryOnOverflow
	end := func(commit, empty bool) {
		if m.epochExhausted() && newPID < 0 {
			reply(pidResult{needsPID: true})
			return
		}
		if !m.epochExhausted() {
			newPID = noProducerID
		}
		c.prepare(part, m, commit, false, true, empty, newPID, func(code int16) {
			if code != 0 {
				fail(code)
				return
			}
			if m.nextProducerID >= 0 {
				reply(pidResult{pid: m.nextProducerID, epoch: 0})
				return
			}
			reply(pidResult{pid: m.producerID, epoch: m.epoch})
		})
	}
	same := func() { reply(pidResult{pid: m.producerID, epoch: m.epoch}) }
	switch m.state {
	case stateOngoing:
		end(commit, false)
	case stateCompleteCommit:
		switch {
		case commit && retry:
			same()
		case !commit && !retry:
			end(false, true)
		default:
			fail(kerr.InvalidTxnState.Code)
		}
	case stateCompleteAbort:
		switch {
		case !commit && retry:
			same()
		case !commit:
			end(false, true)
		default:
			fail(kerr.InvalidTxnState.Code)
		}
	case statePrepareCommit:
		if commit {
			fail(kerr.ConcurrentTransactions.Code)
		} else {
			fail(kerr.InvalidTxnState.Code)
		}
	case statePrepareAbort:
		if !commit {
			fail(kerr.ConcurrentTransactions.Code)
		} else {
			fail(kerr.InvalidTxnState.Code)
		}
	case stateEmpty:
		if !commit {
			end(false, true)
		} else {
			fail(kerr.InvalidTxnState.Code)
		}
	default:
		fail(kerr.InvalidTxnState.Code)
	}
}

// abort ends m's open transaction with ABORT; with fence it bumps the
// producer epoch first, so the producer's later requests are rejected
// (a new instance's InitProducerId, or the transaction timeout).
func (c *Coordinator) abort(part *partition, m *txnMeta, fence bool, reply func(int16)) {
	c.prepare(part, m, false, fence, m.tv2, false, noProducerID, reply)
}

// prepare writes PrepareCommit or PrepareAbort, calls reply, and starts
// writing the markers. With fence it bumps the producer epoch first (the
// fenced producer never learns it). With bump (transaction version 2) the
// epoch is bumped for the markers and returned to the producer (once more
// after a fence, so that a late EndTxn of the fenced producer is not taken
// for a retry); at an exhausted epoch newPID is the producer id the
// transaction rotates to once complete (no rotation when -1: a fence
// leaves the rotation to the next InitProducerId). empty is an abort of a
// transaction with nothing added (transaction version 2 only): it starts
// now.
func (c *Coordinator) prepare(part *partition, m *txnMeta, commit, fence, bump, empty bool, newPID int64, reply func(int16)) {
	now := time.Now().UnixMilli()
	next := m.snapshot
	next.state = statePrepareAbort
	if commit {
		next.state = statePrepareCommit
	}
	if fence {
		if m.epochExhausted() {
			// The fence cannot bump further; the retry rotates the
			// producer id once the abort completes.
			fence = false
		} else {
			next.epoch, next.lastEpoch = m.epoch+1, noProducerEpoch
		}
	}
	if bump {
		next.tv2 = true
		switch {
		case fence && next.epoch < maxProducerEpoch:
			next.epoch++
		case !fence && m.epoch < maxProducerEpoch+1 && (newPID >= 0 || !m.epochExhausted()):
			next.lastEpoch = m.epoch
			next.epoch = m.epoch + 1
			next.nextProducerID = newPID
		}
	}
	if empty {
		next.partitions = nil
		next.startMs = now
	}
	next.updateMs = now
	c.write(part, m, &next, func(err error) {
		if code := appendErrorCode(err); code != 0 {
			reply(code)
			return
		}
		part.log.Info("ending transaction", "transactional_id", clip.String(m.id), "producer_id", m.producerID, "producer_epoch", m.epoch,
			"commit", commit, "fenced", fence, "epoch_bump", bump, "partitions", len(m.partitions))
		reply(0)
		c.sendMarkers(part, m)
	})
}

// sendMarkers writes the markers of m's prepared transaction on a goroutine
// of its own, retrying the partitions that could not take them, then
// completes the transaction on the run goroutine. It stops when the
// partition is unloaded or the Coordinator closes.
func (c *Coordinator) sendMarkers(part *partition, m *txnMeta) {
	if m.markers {
		return
	}
	m.markers = true
	mk := Marker{TransactionalID: m.id, ProducerID: m.producerID, ProducerEpoch: m.epoch, CoordinatorEpoch: part.epoch,
		Commit: m.state == statePrepareCommit, Partitions: append([]TopicPartition(nil), m.partitions...)}
	state := m.state
	ctx := part.ctx
	c.loop.Go(func() {
		backoff := c.cfg.MarkerRetryBackoff
		for len(mk.Partitions) > 0 {
			retry := c.deps.Markers.WriteMarkers(ctx, mk)
			if ctx.Err() != nil {
				return
			}
			if len(retry) == 0 {
				break
			}
			mk.Partitions = retry
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxMarkerRetryBackoff)
		}
		c.post(func() { c.complete(part, m, state) })
	})
}

// complete writes CompleteCommit or CompleteAbort once the markers of the
// prepared transaction are written, retrying the write after a backoff
// while the partition is still owned.
func (c *Coordinator) complete(part *partition, m *txnMeta, prepared kmsg.TransactionState) {
	if !c.owns(part) || part.txns[m.id] != m || m.state != prepared {
		m.markers = false
		return
	}
	next := m.snapshot
	next.state = stateCompleteAbort
	if m.state == statePrepareCommit {
		next.state = stateCompleteCommit
	}
	next.partitions = nil
	next.updateMs = time.Now().UnixMilli()
	if next.nextProducerID >= 0 {
		// Transaction version 2 at an exhausted epoch: the markers took
		// the last epoch of the old producer id; the producer goes on
		// with the new one (Kafka's prepareComplete).
		next.lastProducerID, next.producerID = m.producerID, m.nextProducerID
		next.lastEpoch, next.epoch = m.lastEpoch, 0
		next.nextProducerID = noProducerID
	}
	c.write(part, m, &next, func(err error) {
		if err == nil {
			m.markers = false
			part.log.Info("transaction completed", "transactional_id", clip.String(m.id), "producer_id", m.producerID,
				"producer_epoch", m.epoch, "state", m.state.String())
			return
		}
		if !c.owns(part) || part.txns[m.id] != m {
			m.markers = false
			return
		}
		part.log.Warn("writing transaction completion failed; retrying", "transactional_id", clip.String(m.id), "err", err)
		c.timers.Schedule(time.Now().Add(c.cfg.MarkerRetryBackoff), func() { c.complete(part, m, prepared) })
	})
}

// scheduleTimeoutCheck arms the periodic abort of timed-out transactions
// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
func (c *Coordinator) scheduleTimeoutCheck() {
	c.timers.Schedule(time.Now().Add(c.cfg.AbortTimedOutInterval), func() {
		c.abortTimedOut(time.Now())
		c.scheduleTimeoutCheck()
	})
}

// abortTimedOut aborts, with an epoch bump that fences the producer, every
// transaction open longer than its timeout.
func (c *Coordinator) abortTimedOut(now time.Time) {
	nowMs := now.UnixMilli()
	for _, part := range c.sortedPartitions() {
		if !part.loaded {
			continue
		}
		for _, m := range part.sortedTxns() {
			if m.state != stateOngoing || m.pending || m.markers || m.startMs+int64(m.timeoutMs) >= nowMs {
				continue
			}
			part.log.Info("aborting timed out transaction", "transactional_id", clip.String(m.id), "producer_id", m.producerID,
				"producer_epoch", m.epoch, "timeout_ms", m.timeoutMs)
			c.abort(part, m, true, func(code int16) {
				if code != 0 {
					part.log.Warn("aborting timed out transaction failed", "transactional_id", clip.String(m.id), "code", code)
				}
			})
		}
	}
}

// scheduleExpirationCheck arms the periodic removal of expired
// transactional ids (transaction.remove.expired.transaction.cleanup.interval.ms).
func (c *Coordinator) scheduleExpirationCheck() {
	c.timers.Schedule(time.Now().Add(c.cfg.RemoveExpiredIDInterval), func() {
		c.expireIDs(time.Now())
		c.scheduleExpirationCheck()
	})
}

// expireIDs writes tombstones for the transactional ids with no open
// transaction not used for transactional.id.expiration.ms.
func (c *Coordinator) expireIDs(now time.Time) {
	limit := now.Add(-c.cfg.TransactionalIDExpiration).UnixMilli()
	for _, part := range c.sortedPartitions() {
		if !part.loaded {
			continue
		}
		for _, m := range part.sortedTxns() {
			switch m.state {
			case stateEmpty, stateCompleteCommit, stateCompleteAbort:
			default:
				continue
			}
			if m.pending || m.markers || m.updateMs > limit {
				continue
			}
			part.log.Info("expiring transactional id", "transactional_id", clip.String(m.id), "producer_id", m.producerID)
			c.write(part, m, nil, func(err error) {
				if err != nil {
					part.log.Warn("expiring transactional id failed", "transactional_id", clip.String(m.id), "err", err)
				}
			})
		}
	}
}

// allocatePID calls Deps.NewProducerID on the caller's goroutine.
func (c *Coordinator) allocatePID(ctx context.Context) (int64, int16) {
	if c.deps.NewProducerID == nil {
		return -1, kerr.CoordinatorNotAvailable.Code
	}
	pid, err := c.deps.NewProducerID(ctx)
	if err != nil {
		c.log.Warn("allocating a producer id failed", "err", err)
		return -1, kerr.CoordinatorNotAvailable.Code
	}
	return pid, 0
}
