package replica

import (
	"context"
	"errors"
	"time"

	"github.com/samsahq/samsa/internal/storage"
)

// ApplyItem is one partition of ApplyBatch: Apply's arguments.
type ApplyItem struct {
	TopicPartition
	TopicID [16]byte
	State   State
	Config  LogConfig
	// Now creates a missing log within ApplyBatch instead of on a
	// creator: the coordinators' internal topics, which the broker loads
	// as soon as the image names it their leader.
	Now bool
}

// applyChunk bounds the partitions ApplyBatch applies under one hold of
// the Manager's lock: fetches and produces look partitions up under it.
const applyChunk = 512

// pendingLog is a partition whose log a creator makes: hosted (led or
// followed as item says, the latest state the metadata gave) once its log
// exists.
type pendingLog struct {
	item     ApplyItem
	creating bool // a creator is making the log; Remove leaves it the deletion
	removed  bool // removed while creating: the creator deletes the new log
	// done is closed when the partition leaves the pending set (hosted,
	// offline or removed); made by the first AwaitPending that waits.
	done chan struct{}
}

// left closes pl.done, if a waiter made it: pl is out of the pending set.
// Called with Manager.mu held.
func (pl *pendingLog) left() {
	if pl.done != nil {
		close(pl.done)
	}
}

// ApplyBatch is Apply for each item, in order, taking the Manager's lock
// once per chunk of applyChunk partitions instead of once per partition:
// a metadata commit that moves 10,000 leaderships (a controlled shutdown,
// a fenced broker) took 10,000 turns of the lock, each waiting for the
// fetch handlers holding it for reading, seconds on a loaded machine.
//
// A partition whose log does not exist yet is not created here (unless
// the item says Now): the file system work (a directory, the segment
// files) goes to Options.CreateWorkers creators, and the partition is led
// or followed, at the latest state ApplyBatch gave for it, once its log
// exists; until then Get returns nil and Pending counts it. Requests
// naming it wait for its log (AwaitPending) rather than answer
// NOT_LEADER_OR_FOLLOWER at once: Kafka makes the log while it applies the
// metadata, so its clients never see the window. The metadata listener calls ApplyBatch
// for each commit, and a burst of creations (20 topics of 100 partitions)
// held it for 17-32 s per commit at load 50, during which the next
// commits, and a new quorum leader's activation as the controller, waited.
//
// It returns one error per item, nil when hosted or pending; a log that
// cannot be opened or created makes its partition offline (Offline), here
// or on the creator. Safe for concurrent use.
func (m *Manager) ApplyBatch(items []ApplyItem) []error {
	errs := make([]error, len(items))
	queued := false
	for lo := 0; lo < len(items); lo += applyChunk {
		hi := min(lo+applyChunk, len(items))
		m.mu.Lock()
		for i := lo; i < hi; i++ {
			it := &items[i]
			if !it.Now && m.deferLocked(it) {
				queued = true
				continue
			}
			_, errs[i] = m.applyLocked(it.TopicPartition, it.TopicID, it.State, it.Config)
		}
		queued = queued || len(m.epochQ) > 0
		m.mu.Unlock()
	}
	if queued {
		m.signalCreators()
	}
	var offline []OfflineReplica
	for i, err := range errs {
		if err != nil {
			offline = append(offline, OfflineReplica{items[i].TopicPartition, items[i].TopicID})
		}
	}
	m.notifyOffline(offline)
	return errs
}

// deferLocked reports whether it waits for a creator: its partition is
// pending already (the state is updated to it), or neither hosted nor
// with a log on disk, loaded or offline, of its topic id (it is queued; a
// log known to be of another topic id is replaced by the creator, see
// storage.Manager.CreateTopic).
func (m *Manager) deferLocked(it *ApplyItem) bool {
	if pl := m.pending[it.TopicPartition]; pl != nil {
		pl.item = *it
		pl.removed = false // re-created while its log was being made: the new, empty log serves
		return true
	}
	stp := storage.TopicPartition{Topic: it.Topic, Partition: it.Partition}
	if m.parts[it.TopicPartition] != nil {
		return false
	}
	if l := m.logs.Get(stp); l != nil && !otherTopic(l, it.TopicID) {
		return false
	}
	if m.logs.Offline(stp) != nil {
		// Its log failed to load at start: applied now, so that clients
		// get KAFKA_STORAGE_ERROR at once rather than
		// NOT_LEADER_OR_FOLLOWER until a creator reaches it.
		return false
	}
	m.pending[it.TopicPartition] = &pendingLog{item: *it}
	m.createQ = append(m.createQ, it.TopicPartition)
	return true
}

// Pending is the number of partitions ApplyBatch gave to the creators
// whose logs do not exist yet. Safe for concurrent use.
func (m *Manager) Pending() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pending)
}

// AwaitPending makes the logs of the partitions among tps that are pending
// exist before deadline where it can, so that a request naming a
// partition this broker was just given is served instead of answered
// NOT_LEADER_OR_FOLLOWER: clients back off on that answer and look the
// metadata up again (franz-go 250 ms doubling to 1 s and more, the Java
// client retry.backoff.ms), which kept the first records produced to a
// new topic of 1,000 partitions waiting seconds after its logs were made.
//
// It creates on the calling goroutine, in the order of tps, the logs no
// creator has taken yet (a creation begun finishes past deadline), then
// waits for those a creator is making. It returns how many of tps were
// pending when it looked, once none is or at deadline, when ctx is done or
// when the Manager closes; the caller then looks the partitions up again
// (Get), and those still missing get the answer they had before.
// O(len(tps)) under the Manager's lock. Safe for concurrent use.
func (m *Manager) AwaitPending(ctx context.Context, tps []TopicPartition, deadline time.Time) int {
	n := 0
	for _, tp := range tps {
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		m.mu.Lock()
		pl := m.pending[tp]
		if pl == nil {
			m.mu.Unlock()
			continue
		}
		n++
		if pl.creating || !m.claimLocked(pl) {
			m.mu.Unlock()
			continue
		}
		id, cfg := pl.item.TopicID, pl.item.Config
		m.mu.Unlock()
		m.create(tp, id, cfg)
		m.wg.Done()
		m.flushFailed()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, tp := range tps {
		m.mu.Lock()
		pl := m.pending[tp]
		if pl == nil {
			m.mu.Unlock()
			continue
		}
		if pl.done == nil {
			pl.done = make(chan struct{})
		}
		done := pl.done
		m.mu.Unlock()
		select {
		case <-done:
		case <-timer.C:
			return n
		case <-ctx.Done():
			return n
		case <-m.ctx.Done():
			return n
		}
	}
	return n
}

// claimLocked marks pl created by the caller, counted in m.wg so that
// Close waits for it; false once Close has begun.
func (m *Manager) claimLocked(pl *pendingLog) bool {
	m.goMu.Lock()
	defer m.goMu.Unlock()
	if m.closing {
		return false
	}
	m.wg.Add(1)
	pl.creating = true
	m.inCreate++
	return true
}

// signalCreators wakes a creator without blocking.
func (m *Manager) signalCreators() {
	select {
	case m.createSig <- struct{}{}:
	default:
	}
}

// creator creates the logs of pending partitions, and writes the
// leader-epoch-checkpoint of partitions led at a new epoch (epochQ), until
// Close.
func (m *Manager) creator() {
	for {
		if tp, id, cfg, ok := m.nextPending(); ok {
			m.create(tp, id, cfg)
			m.flushFailed()
			continue
		}
		m.flushFailed()
		if p := m.nextEpochs(); p != nil {
			m.writeEpochs(p)
			continue
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.createSig:
		}
	}
}

// nextEpochs takes the next partition of epochQ, nil when none (or
// closing).
func (m *Manager) nextEpochs() *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.epochQ) == 0 || m.ctx.Err() != nil {
		return nil
	}
	p := m.epochQ[0]
	m.epochQ[0] = nil
	m.epochQ = m.epochQ[1:]
	if len(m.epochQ) == 0 {
		m.epochQ = nil // let the backing array go
	} else {
		m.signalCreators() // another creator takes the next one
	}
	return p
}

// writeEpochs writes the leader-epoch-checkpoint of p's log if its
// history has an epoch the file lacks (storage.Log.WriteEpochs): a
// partition just led at a new epoch, so that its first Produce only
// appends, as Kafka writes the epoch when the partition becomes leader
// (Partition.makeLeader), not on the produce path. A failure is logged;
// the log's next append writes the file before its batches. It then calls
// the epochsWritten hook, if set.
func (m *Manager) writeEpochs(p *Partition) {
	if err := p.log.WriteEpochs(); err != nil && !errors.Is(err, storage.ErrClosed) {
		m.logger.Warn("writing leader-epoch-checkpoint failed: the next append writes it", "topic", p.Topic, "partition", p.Partition, "err", err)
	}
	if m.epochsWritten != nil {
		m.epochsWritten(p)
	}
}

// nextPending takes the next partition of the queue whose log is still
// wanted and marks it creating.
func (m *Manager) nextPending() (TopicPartition, [16]byte, LogConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.createQ) > 0 && m.ctx.Err() == nil {
		tp := m.createQ[0]
		m.createQ[0] = TopicPartition{}
		m.createQ = m.createQ[1:]
		if len(m.createQ) == 0 {
			m.createQ = nil // let the backing array go
		} else {
			m.signalCreators() // another creator takes the next one
		}
		pl := m.pending[tp]
		if pl == nil || pl.creating {
			continue // removed before its turn, or queued twice
		}
		pl.creating = true
		m.inCreate++
		return tp, pl.item.TopicID, pl.item.Config, true
	}
	return TopicPartition{}, [16]byte{}, LogConfig{}, false
}

// create makes tp's log, of topic id, and hosts the partition at its latest pending
// state, or deletes the log when the partition was removed meanwhile.
func (m *Manager) create(tp TopicPartition, id [16]byte, cfg LogConfig) {
	stp := storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	_, err := m.logs.CreateTopic(stp, id, cfg.Storage)
	m.mu.Lock()
	m.inCreate--
	pl := m.pending[tp]
	delete(m.pending, tp)
	if pl != nil {
		// Waiters wake once the partition is hosted (or not): pl is
		// out of the pending set, so no one makes pl.done any more.
		defer pl.left()
	}
	switch {
	case pl == nil:
		m.mu.Unlock()
		return
	case pl.removed:
		m.mu.Unlock()
		if err == nil {
			if err := m.logs.Delete(stp); err != nil && !errors.Is(err, storage.ErrClosed) {
				m.logger.Error("deleting partition failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
		return
	case m.ctx.Err() != nil:
		// Closing: the log is on disk and is opened at the next start.
		m.mu.Unlock()
		return
	}
	var p *Partition
	epochDue := false
	if err == nil {
		it := &pl.item
		p, epochDue, err = m.hostLocked(tp, it.TopicID, it.State, it.Config)
	} else {
		m.offline[tp] = err
	}
	if err != nil {
		// Reported with the others of its burst (flushFailed).
		if len(m.failed) == 0 {
			m.failedSince = time.Now()
		}
		m.failed = append(m.failed, OfflineReplica{tp, id})
	}
	m.mu.Unlock()
	if err != nil {
		m.logger.Error("hosting partition failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
	}
	if epochDue {
		// Here, while the log's files are fresh in the page cache and
		// before the first Produce, which then only appends.
		m.writeEpochs(p)
	}
}
