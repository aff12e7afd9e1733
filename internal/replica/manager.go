package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// Controller is the part of the active controller a partition leader talks
// to: AlterPartition (KIP-497) to shrink or expand the ISR.
type Controller interface {
	// AlterPartition asks to set the ISR of a partition this broker leads at
	// leaderEpoch/partitionEpoch; it returns the ISR and partition epoch the
	// controller committed.
	AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) (newISR []int32, newPartitionEpoch int32, err error)
}

// Options configure a Manager.
type Options struct {
	// NodeID is this broker's id.
	NodeID int32
	// Dial opens connections to leaders on the inter-broker listener (TLS
	// and SASL when it is secured); nil dials plain TCP.
	Dial wire.DialFunc
	// ReplicaLagTime is replica.lag.time.max.ms: a follower that has not
	// caught up for this long leaves the ISR (default 30 s).
	ReplicaLagTime time.Duration
	// Controller receives AlterPartition; nil on a single node that never
	// has followers.
	Controller Controller
	// Eligible reports whether a caught-up follower may join an ISR now:
	// its broker is registered and not fenced (KIP-841; the controller
	// refuses others with INELIGIBLE_REPLICA). Nil: every follower.
	Eligible func(broker int32) bool
	// LeaderAddr resolves a broker id to the address followers fetch from.
	LeaderAddr func(id int32) (string, bool)
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms: how often the
	// high-watermarks are written to each log dir's
	// replication-offset-checkpoint (Checkpoint); zero or negative means
	// 5 s. Close writes it once more.
	HighWatermarkCheckpointInterval time.Duration
	// FetchMaxBytes bounds a follower fetch response (replica.fetch.response.max.bytes).
	FetchMaxBytes int32
	// LeaderThrottle and FollowerThrottle bound the replication traffic of
	// throttled replicas (leader.replication.throttled.rate,
	// follower.replication.throttled.rate); nil means unlimited.
	LeaderThrottle, FollowerThrottle *Throttle
	// Topics, when set, gives each hosted partition its topic's traffic
	// counters (Partition.Stats).
	Topics *metrics.Topics
	// CreateWorkers is how many goroutines create the logs of partitions
	// ApplyBatch assigns to this broker (num.recovery.threads.per.data.dir
	// times the log dirs, as Kafka sizes its log loading); zero or
	// negative means 2.
	CreateWorkers int
	// OnOffline, when set, is told of the partitions whose log could not
	// be opened or created (Offline) as they fail, those of one ApplyBatch
	// in one call, outside the Manager's lock; it must not block. The
	// broker reports them to the controller (AssignReplicasToDirs to
	// DirectoryId.LOST, KIP-858).
	OnOffline func([]OfflineReplica)
	Logger    *slog.Logger // nil discards
}

// OfflineReplica is a partition whose log this broker could not open or
// create, with its topic id (Options.OnOffline).
type OfflineReplica struct {
	TopicPartition
	TopicID [16]byte
}

// failedLinger and failedBatch bound how long and how many failed
// creations wait for the rest of their burst (flushFailed).
const (
	failedLinger = time.Second
	failedBatch  = 1000
)

// flushFailed hands the creations that failed to Options.OnOffline once
// none is queued or under way, or once the first waited failedLinger or
// failedBatch are waiting: the failures of a burst of creations (the logs
// of a new topic, those missing at start) go together, one report to the
// controller rather than one per partition, and a long burst (100,000
// logs) does not hold them to its end.
func (m *Manager) flushFailed() {
	m.mu.Lock()
	var failed []OfflineReplica
	if len(m.failed) > 0 && (len(m.createQ) == 0 && m.inCreate == 0 || len(m.failed) >= failedBatch || time.Since(m.failedSince) >= failedLinger) {
		failed, m.failed = m.failed, nil
	}
	m.mu.Unlock()
	m.notifyOffline(failed)
}

// notifyOffline hands offline to Options.OnOffline, if any.
func (m *Manager) notifyOffline(offline []OfflineReplica) {
	if len(offline) > 0 && m.opts.OnOffline != nil {
		m.opts.OnOffline(offline)
	}
}

// Manager owns the hosted partitions, the follower fetchers and the ISR
// checks. Safe for concurrent use.
type Manager struct {
	logs   *storage.Manager
	opts   Options
	logger *slog.Logger

	mu            sync.RWMutex // guards parts, offline, pending, createQ, epochQ, fetchers and hwCheckpoints
	parts         map[TopicPartition]*Partition
	offline       map[TopicPartition]error                    // partitions whose log could not be opened, with why
	failed        []OfflineReplica                            // creations that failed, for OnOffline once no creation is left (flushFailed)
	failedSince   time.Time                                   // when the first of failed failed
	inCreate      int                                         // creations under way (nextPending, claimLocked to create)
	pending       map[TopicPartition]*pendingLog              // assigned, waiting for a creator to make the log (applybatch.go)
	createQ       []TopicPartition                            // pending partitions in the order assigned; may name one twice or a removed one
	createSig     chan struct{}                               // wakes a creator (capacity 1)
	epochQ        []*Partition                                // led at a new epoch: the creators write their leader-epoch-checkpoint (applybatch.go)
	fetchers      map[int32]*fetcher                          // by leader id
	hwCheckpoints map[string]map[storage.TopicPartition]int64 // by log dir, read once
	// hwMoved: a high-watermark moved, or a partition went, since the
	// last replication-offset-checkpoint written (checkpoint.go).
	hwMoved atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	goMu    sync.Mutex // guards closing and wg.Add; a leaf lock (taken inside mu)
	closing bool       // Close started: spawn starts nothing

	// ISRShrinks and ISRExpands count the ISR changes of led partitions
	// the controller committed (Kafka's IsrShrinksPerSec, IsrExpandsPerSec).
	ISRShrinks, ISRExpands atomic.Int64

	fetchPartitionsSent atomic.Int64 // see FetchPartitionsSent

	// epochsWritten, when set, is called once writeEpochs has written
	// p's leader-epoch-checkpoint, or failed to, on the goroutine that
	// wrote it: a test's signal, set after NewManager and before the
	// first Apply or ApplyBatch. Nil otherwise; the produce path never
	// reads it.
	epochsWritten func(p *Partition)
}

// FetchPartitionsSent is how many partitions this broker's follower
// fetches have named since it started: every partition in a full fetch,
// only the changed ones in an incremental fetch (KIP-227). Safe for
// concurrent use.
func (m *Manager) FetchPartitionsSent() int64 { return m.fetchPartitionsSent.Load() }

// spawn runs fn on a goroutine that Close waits for, unless Close has
// started (metadata images keep arriving while a node stops); it reports
// whether fn was started.
func (m *Manager) spawn(fn func()) bool {
	m.goMu.Lock()
	defer m.goMu.Unlock()
	if m.closing {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
	return true
}

// NewManager returns a Manager over the log manager's logs and starts its
// ISR checker. Close stops it.
func NewManager(logs *storage.Manager, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReplicaLagTime <= 0 {
		opts.ReplicaLagTime = 30 * time.Second
	}
	if opts.FetchMaxBytes <= 0 {
		opts.FetchMaxBytes = 10 << 20
	}
	if opts.HighWatermarkCheckpointInterval <= 0 {
		opts.HighWatermarkCheckpointInterval = 5 * time.Second
	}
	if opts.CreateWorkers <= 0 {
		opts.CreateWorkers = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{logs: logs, opts: opts, logger: opts.Logger, parts: map[TopicPartition]*Partition{}, offline: map[TopicPartition]error{}, pending: map[TopicPartition]*pendingLog{}, createSig: make(chan struct{}, 1), fetchers: map[int32]*fetcher{}, hwCheckpoints: map[string]map[storage.TopicPartition]int64{}, ctx: ctx, cancel: cancel}
	m.hwMoved.Store(true) // the first checkpoint drops what the hosted partitions no longer include
	m.spawn(m.isrChecker)
	m.spawn(m.hwCheckpointer)
	for range opts.CreateWorkers {
		m.spawn(m.creator)
	}
	return m
}

// Close stops the fetchers, the ISR checker, the checkpointer and the
// log creators (a creation under way finishes; the partitions still
// pending are abandoned: their logs are created when the next process
// applies the metadata) and writes the high-watermark checkpoint.
func (m *Manager) Close() {
	m.goMu.Lock()
	m.closing = true
	m.goMu.Unlock()
	m.cancel()
	m.mu.Lock()
	for _, f := range m.fetchers {
		f.stop()
	}
	m.fetchers = map[int32]*fetcher{}
	m.mu.Unlock()
	m.wg.Wait()
	if err := m.Checkpoint(); err != nil {
		m.logger.Warn("writing replication-offset-checkpoint failed", "err", err)
	}
}

// Get returns the hosted partition or nil.
func (m *Manager) Get(topic string, partition int32) *Partition {
	m.mu.RLock()
	p := m.parts[TopicPartition{topic, partition}]
	m.mu.RUnlock()
	return p
}

// open returns the hosted partition tp, opening or creating its log.
func (m *Manager) openLocked(tp TopicPartition, topicID [16]byte, cfg LogConfig) (*Partition, error) {
	if p := m.parts[tp]; p != nil {
		if *p.Config() != cfg {
			// Most applies (a leadership move, an ISR change) carry the
			// config the partition has: the log's SetConfig (its lock,
			// the roll schedule) for each of them was a third of a
			// surviving broker's apply of a controlled shutdown's
			// 2,000 moves (BenchmarkApplyLeaderMovesHosted).
			p.SetConfig(cfg)
		}
		return p, nil
	}
	stp := storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	log := m.logs.Get(stp)
	if log != nil && otherTopic(log, topicID) {
		log = nil // the log of a deleted topic of the same name: CreateTopic replaces it
	}
	if log == nil {
		var err error
		if log, err = m.logs.CreateTopic(stp, topicID, cfg.Storage); err != nil {
			return nil, err
		}
	} else {
		log.SetConfig(cfg.Storage)
	}
	p := newPartition(tp, topicID, m.opts.NodeID, log, cfg)
	p.Stats = m.opts.Topics.Acquire(tp.Topic)
	p.hwMoved = &m.hwMoved
	p.setHW(min(m.checkpointedHWLocked(log, tp), log.LogEndOffset()))
	m.parts[tp] = p
	return p, nil
}

// otherTopic reports whether log is known, without I/O, to belong to a
// topic other than topicID (its partition.metadata; a log loaded at
// start from its files, not from the log manifest, has not read it: the
// broker's stray check does, see storage.Log.KnownTopicID).
func otherTopic(log *storage.Log, topicID [16]byte) bool {
	had, ok := log.KnownTopicID()
	return ok && topicID != ([16]byte{}) && had != topicID
}

// Apply makes this broker lead or follow tp as st says, opening the log
// when needed. A follower fetches from st.Leader; a partition without a
// leader (-1) is hosted as a follower that fetches nothing.
func (m *Manager) Apply(tp TopicPartition, topicID [16]byte, st State, cfg LogConfig) (*Partition, error) {
	m.mu.Lock()
	p, err := m.applyLocked(tp, topicID, st, cfg)
	queued := len(m.epochQ) > 0
	m.mu.Unlock()
	if queued {
		m.signalCreators()
	}
	if err != nil {
		m.notifyOffline([]OfflineReplica{{tp, topicID}})
	}
	return p, err
}

// applyLocked is hostLocked, handing the leader-epoch-checkpoint of a
// new leader epoch to the creators (queueEpochsLocked); the caller
// signals them.
func (m *Manager) applyLocked(tp TopicPartition, topicID [16]byte, st State, cfg LogConfig) (*Partition, error) {
	p, epochDue, err := m.hostLocked(tp, topicID, st, cfg)
	if epochDue {
		m.epochQ = append(m.epochQ, p)
	}
	return p, err
}

// hostLocked is Apply under mu; epochDue reports that this broker became
// the partition's leader at an epoch its log's history did not have, whose
// leader-epoch-checkpoint is the caller's to write, outside mu.
func (m *Manager) hostLocked(tp TopicPartition, topicID [16]byte, st State, cfg LogConfig) (p *Partition, epochDue bool, err error) {
	p, err = m.openLocked(tp, topicID, cfg)
	if err != nil {
		// Clients asking for it get KAFKA_STORAGE_ERROR at once.
		m.offline[tp] = err
		return nil, false, err
	}
	delete(m.offline, tp)
	if st.Leader == m.opts.NodeID {
		m.removeFromFetchersLocked(p)
		return p, p.makeLeader(st, time.Now()), nil
	}
	prevLeader := p.Leader()
	p.makeFollower(st)
	if prevLeader != st.Leader {
		m.removeFromFetchersLocked(p)
	}
	if st.Leader >= 0 {
		m.fetcherLocked(st.Leader).add(p)
	}
	return p, false, nil
}

func (m *Manager) removeFromFetchersLocked(p *Partition) {
	for id, f := range m.fetchers {
		if f.remove(p) == 0 {
			f.stop()
			delete(m.fetchers, id)
		}
	}
}

func (m *Manager) fetcherLocked(leader int32) *fetcher {
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
	}
	return f
}

// Remove stops hosting tp and deletes its log (topic deletion, or a
// replica moved away). A partition whose log a creator has not made yet
// is dropped from the queue, or its log deleted by the creator once made.
// Errors: storage.Manager.Delete's.
func (m *Manager) Remove(tp TopicPartition) error {
	return m.RemoveBatch([]TopicPartition{tp})[0]
}

// RemoveBatch is Remove for each of tps, as the metadata listener does for
// the partitions of deleted topics: the partitions stop being served at
// once, applyChunk of them under one hold of the Manager's lock, and their
// logs are deleted together (storage.Manager.DeleteBatch: one fsync per
// log dir, not one per partition; the files are removed in the
// background). It returns one error per tp, nil when removed or not
// hosted. Safe for concurrent use.
func (m *Manager) RemoveBatch(tps []TopicPartition) []error {
	var del []storage.TopicPartition
	var idx []int // the index in tps of each of del
	var woken []*Partition
	for lo := 0; lo < len(tps); lo += applyChunk {
		m.mu.Lock()
		for i := lo; i < min(lo+applyChunk, len(tps)); i++ {
			tp := tps[i]
			p, hosted := m.removeLocked(tp)
			if p != nil {
				woken = append(woken, p)
			}
			if hosted {
				del = append(del, storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
				idx = append(idx, i)
			}
		}
		m.mu.Unlock()
	}
	for _, p := range woken {
		p.purg.wakeAll() // wake fetches and produces so they see the partition gone
	}
	errs := make([]error, len(tps))
	for j, err := range m.logs.DeleteBatch(del) {
		errs[idx[j]] = err
	}
	return errs
}

// removeLocked stops hosting tp and returns its partition, if hosted, and
// whether its log is the caller's to delete (false when a creator has not
// made it yet: dropped from the queue, or deleted by the creator).
func (m *Manager) removeLocked(tp TopicPartition) (*Partition, bool) {
	if pl := m.pending[tp]; pl != nil {
		delete(m.offline, tp)
		if pl.creating {
			pl.removed = true
		} else {
			delete(m.pending, tp)
			pl.left()
		}
		return nil, false
	}
	p := m.parts[tp]
	delete(m.parts, tp)
	delete(m.offline, tp)
	// The checkpoint may still name it (hosted, or a log loaded at start
	// and never hosted).
	m.hwMoved.Store(true)
	if p != nil {
		m.removeFromFetchersLocked(p)
		p.leader.Store(false)
		m.opts.Topics.Release(p.Stats)
	}
	return p, true
}

// Offline returns why this broker, a replica of tp, could not open its
// log (the metadata assigned it, but the log failed to load or be
// created: a corrupt log, a full disk, no descriptor left), or nil. Such a
// partition is not hosted (Get returns nil); requests for it get
// KAFKA_STORAGE_ERROR.
func (m *Manager) Offline(topic string, partition int32) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.offline[TopicPartition{topic, partition}]
}

// OfflineCount is the number of partitions Offline reports.
func (m *Manager) OfflineCount() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.offline)
}

// Partitions returns the hosted partitions.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// LeaderThrottled reports whether serving follower replica of p is over
// leader.replication.throttled.rate now (the fetch then returns no
// records for p); Sent counts what was served.
func (m *Manager) LeaderThrottled(p *Partition, replica int32) bool {
	return p.Config().LeaderThrottled.Has(p.Partition, replica) && m.opts.LeaderThrottle.Exceeded(time.Now())
}

// LeaderSent counts n bytes of records served to follower replica of p.
func (m *Manager) LeaderSent(p *Partition, replica int32, n int64) {
	if p.Config().LeaderThrottled.Has(p.Partition, replica) {
		m.opts.LeaderThrottle.Record(n, time.Now())
	}
}

// FollowerFetched is called by the Fetch handler after serving a follower:
// it records the follower's progress (fetch offset and log start offset,
// -1 when unknown) and asks the controller to add it to the ISR once it
// caught up. w is the follower's fetch session (KIP-227) when the fetch
// has one, else nil. settled reports that p need not be read for this
// follower again until it changes (see SessionWatch): the follower is in
// the ISR and at the log end offset.
func (m *Manager) FollowerFetched(p *Partition, replica int32, fetchOffset, logStartOffset int64, w *SessionWatch) (settled bool) {
	isr, settled := p.updateFollower(replica, fetchOffset, logStartOffset, time.Now(), w)
	if isr != nil {
		if m.opts.Eligible != nil && !m.opts.Eligible(replica) {
			// A fenced broker still fetching (in controlled shutdown, or
			// registering): asking would only be refused. Asked again
			// on a later fetch.
			_, gen := p.isrState()
			p.isrCancel(gen)
			return false
		}
		m.alterISR(p, isr)
	}
	return settled
}

// alterISR sends AlterPartition in the background; the partition allows one
// change in flight. The broker batches the requests of its partitions. A
// refusal is logged once per run of failures (then at debug level): after
// a whole cluster restarts, leaders ask with epochs the controller has
// moved past until their metadata catches up, and each partition backs
// off and asks again with the new epochs.
func (m *Manager) alterISR(p *Partition, isr []int32) {
	epoch := p.LeaderEpoch()
	pepoch, gen := p.isrState()
	if m.opts.Controller == nil {
		p.isrUpdated(gen, nil, 0, false)
		return
	}
	before := len(p.ISR())
	started := m.spawn(func() {
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()
		got, gotEpoch, err := m.opts.Controller.AlterPartition(ctx, p.TopicID, p.Partition, epoch, pepoch, isr)
		if err != nil {
			stale, failures := p.isrUpdated(gen, nil, 0, false)
			level := slog.LevelWarn
			if stale || failures > 1 || m.ctx.Err() != nil {
				level = slog.LevelDebug
			}
			m.logger.Log(ctx, level, "AlterPartition failed", "topic", p.Topic, "partition", p.Partition, "isr", isr, "err", err, "failures", failures, "stale", stale)
			return
		}
		// The controller committed this broker's change: counted even
		// when the metadata carrying it arrived first (stale), as it
		// often does once the controller batches its writes.
		switch {
		case len(got) < before:
			m.ISRShrinks.Add(1)
		case len(got) > before:
			m.ISRExpands.Add(1)
		}
		if stale, _ := p.isrUpdated(gen, got, gotEpoch, true); stale {
			return // the metadata already shows the change, or a newer one
		}
		m.logger.Info("ISR changed", "topic", p.Topic, "partition", p.Partition, "isr", got, "partition_epoch", gotEpoch)
	})
	if !started {
		p.isrUpdated(gen, nil, 0, false)
	}
}

// isrChecker shrinks the ISR of led partitions whose followers lag more
// than replica.lag.time.max.ms, checking every half of it.
func (m *Manager) isrChecker() {
	t := time.NewTicker(m.opts.ReplicaLagTime / 2)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-t.C:
			for _, p := range m.Partitions() {
				if isr := p.laggingFollowers(now, m.opts.ReplicaLagTime); isr != nil {
					m.alterISR(p, isr)
				}
			}
		}
	}
}
