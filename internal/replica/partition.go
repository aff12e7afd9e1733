package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// LogConfig are the topic configs a partition applies on append.
type LogConfig struct {
	// MaxMessageBytes is max.message.bytes: the largest batch accepted.
	MaxMessageBytes int32
	// SegmentBytes is segment.bytes; a produce larger than it is rejected.
	SegmentBytes int64
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// MinInsyncReplicas is min.insync.replicas.
	MinInsyncReplicas int32
	// Compact is cleanup.policy containing compact: records need keys.
	Compact bool
	// TimestampBounded applies TimestampBeforeMaxMs and
	// TimestampAfterMaxMs, message.timestamp.before.max.ms and
	// message.timestamp.after.max.ms (KIP-937): a CreateTime record more
	// than that many milliseconds before or after the broker's time is
	// refused (INVALID_TIMESTAMP). The broker always sets it; the zero
	// LogConfig bounds nothing.
	TimestampBounded                          bool
	TimestampBeforeMaxMs, TimestampAfterMaxMs int64
	// Recompress and Compression are compression.type: when it names a
	// codec (Recompress true), batches in another codec are recompressed
	// on append; with "producer" they stay as the producer sent them.
	Recompress  bool
	Compression record.Codec
	// LeaderThrottled and FollowerThrottled are the topic's
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas.
	LeaderThrottled, FollowerThrottled ThrottledReplicas
	// Storage is the log's own configuration.
	Storage storage.Config
}

// State is a partition's replica placement and leadership, from the
// metadata image.
type State struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// Errors of Partition methods, mapped to Kafka codes by the broker.
var (
	ErrNotLeader       = errors.New("replica: not the leader")
	ErrFencedEpoch     = errors.New("replica: fenced leader epoch")
	ErrUnknownEpoch    = errors.New("replica: unknown leader epoch")
	ErrMessageTooLarge = errors.New("replica: batch larger than max.message.bytes")
	ErrRecordListLarge = errors.New("replica: records larger than segment.bytes")
	// ErrNotEnoughReplicas: acks=all with fewer in-sync replicas than
	// min.insync.replicas (NOT_ENOUGH_REPLICAS); nothing is written.
	ErrNotEnoughReplicas = errors.New("replica: fewer in-sync replicas than min.insync.replicas")
	// ErrNotEnoughReplicasAfterAppend: the ISR shrank below
	// min.insync.replicas while an acks=all write waited
	// (NOT_ENOUGH_REPLICAS_AFTER_APPEND); the records may be in the log.
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: in-sync replicas fell below min.insync.replicas after the append")
)

// isrRetryBackoff is how long a leader waits after a failed AlterPartition
// before asking for another ISR change of the partition; it doubles with
// each failure in a row up to isrRetryBackoffMax, and starts over when new
// metadata changes the partition (the next request carries its epochs).
const (
	isrRetryBackoff    = 500 * time.Millisecond
	isrRetryBackoffMax = 4 * time.Second
)

// followerState is what the leader knows of one follower.
type followerState struct {
	logEndOffset int64 // -1 until the follower's first fetch
	// logStartOffset is the follower's log start offset as of its last
	// fetch (-1 before, or when the fetch did not say).
	logStartOffset int64
	// lastCaughtUp is the last time the follower had fetched up to the
	// leader's log end offset as of its previous fetch (Kafka's
	// lastCaughtUpTimeMs); it leaves the ISR once this is older than
	// replica.lag.time.max.ms.
	lastCaughtUp    time.Time
	lastFetch       time.Time
	lastFetchLeader int64 // leader LEO at the last fetch
	// clock is the fetch session whose fetches after the last read of
	// this partition count as fetches of it (SessionWatch), nil when
	// none; clockCaughtUp: the follower's fetch offset was at the log
	// end offset at that read. foldClock applies them.
	clock         *SessionWatch
	clockCaughtUp bool
}

// caughtUp is the last time the follower was caught up, its session's
// fetches counted. Called with Partition.mu held.
func (f *followerState) caughtUp() time.Time {
	f.foldClock()
	return f.lastCaughtUp
}

// Partition is one hosted partition, as leader or follower. Safe for
// concurrent use.
type Partition struct {
	TopicPartition
	TopicID [16]byte
	// Stats counts the topic's traffic through this partition; nil when
	// the Manager has no Options.Topics.
	Stats   *metrics.Topic
	localID int32
	log     *storage.Log

	// mu serializes appends, truncation and changes of the fields below
	// and of hw.
	mu             sync.Mutex
	leaderID       int32
	partitionEpoch int32
	replicas       []int32
	followers      map[int32]*followerState // leader only
	isrPending     bool                     // an AlterPartition is in flight
	// isrGen counts the metadata changes of the partition's leadership or
	// partition epoch: an AlterPartition answer for an earlier generation
	// is stale and ignored.
	isrGen uint64
	// isrRetryAt: after a failed AlterPartition no ISR change is asked
	// for before this time; isrFailures counts the failures in a row.
	isrRetryAt  time.Time
	isrFailures int
	// epochStartOffset (leader only) is the log end offset when this
	// broker became leader at the current epoch: a follower joins the ISR
	// only once it has every record below it.
	epochStartOffset int64
	// verifications are the KIP-890 guards of producers whose first
	// transactional batch is being verified with the transaction
	// coordinator (txn.go).
	verifications map[int64]*TxnVerification

	leaderEpoch atomic.Int32
	hw          atomic.Int64 // set by setHW
	leader      atomic.Bool
	cfg         atomic.Pointer[LogConfig]
	isr         atomic.Pointer[[]int32] // in-sync replica ids, leader included
	nreplicas   atomic.Int32            // len(replicas), read without mu
	preferred   atomic.Int32            // replicas[0], -1 when none; read without mu
	// hwMoved is the Manager's flag that a high-watermark moved since
	// its last checkpoint (nil: none, a partition made by a test).
	hwMoved *atomic.Bool

	purg purgatory // the requests waiting on this partition (purgatory.go)
}

func newPartition(tp TopicPartition, id [16]byte, localID int32, log *storage.Log, cfg LogConfig) *Partition {
	p := &Partition{TopicPartition: tp, TopicID: id, localID: localID, log: log}
	p.purg = newPurgatory(p)
	p.cfg.Store(&cfg)
	empty := []int32{}
	p.isr.Store(&empty)
	p.leaderEpoch.Store(-1)
	// Retention stays below the high-watermark, the cleaner below the LSO.
	log.SetBounds(func() (int64, int64) { return p.HighWatermark(), p.LastStableOffset() })
	// A log start raised by DeleteRecords or retention changes what a
	// fetch of the partition answers.
	log.OnLogStartRaised(p.purg.startRaised)
	return p
}

// Log is the partition's log.
func (p *Partition) Log() *storage.Log { return p.log }

// Config is the partition's current log config.
func (p *Partition) Config() *LogConfig { return p.cfg.Load() }

// SetConfig applies changed topic configs at once.
func (p *Partition) SetConfig(cfg LogConfig) {
	p.cfg.Store(&cfg)
	p.log.SetConfig(cfg.Storage)
}

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool { return p.leader.Load() }

// Leader is the id of the partition's leader, -1 when none.
func (p *Partition) Leader() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderID
}

func (p *Partition) setReplicaGauges(replicas []int32) {
	p.nreplicas.Store(int32(len(replicas)))
	if len(replicas) > 0 {
		p.preferred.Store(replicas[0])
	} else {
		p.preferred.Store(-1)
	}
}

// PreferredLeader is the preferred replica (the first assigned), -1 when
// none.
func (p *Partition) PreferredLeader() int32 { return p.preferred.Load() }

// ReplicaCount is the number of assigned replicas (the replication
// factor, adding replicas of a reassignment included).
func (p *Partition) ReplicaCount() int { return int(p.nreplicas.Load()) }

// ISR is the in-sync replica set, the leader included. Do not modify.
func (p *Partition) ISR() []int32 { return *p.isr.Load() }

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// HighWatermark is the offset below which records are committed and visible
// to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// setHW sets the high-watermark and, when it moved, tells the Manager's
// checkpointer (a load and no store while the flag is already set, as it
// is between two checkpoints of a busy node).
func (p *Partition) setHW(hw int64) {
	if p.hw.Swap(hw) != hw && p.hwMoved != nil && !p.hwMoved.Load() {
		p.hwMoved.Store(true)
	}
}

// LastStableOffset is the offset below which every transaction is decided
// and its marker below the high-watermark (KIP-98): the high-watermark, or
// the first offset of the earliest transaction still open (or whose marker
// is not replicated yet) when that is lower. read_committed consumers read
// up to it.
func (p *Partition) LastStableOffset() int64 { return p.lsoAt(p.hw.Load()) }

// lsoAt is the last stable offset given the high-watermark hw.
func (p *Partition) lsoAt(hw int64) int64 {
	if fu, ok := p.log.FirstUnstableOffset(hw); ok && fu < hw {
		return fu
	}
	return hw
}

// LogEndOffset is the offset of the next record appended.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LogStartOffset is the first offset the partition holds.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// HighWatermarkLagging reports whether this broker leads the partition
// and its high-watermark is still below the offset where its leader epoch
// began (the log end offset it had when elected): the previous leader may
// have served a higher high-watermark, so a consumer's ListOffsets gets
// OFFSET_NOT_AVAILABLE until it catches up (KIP-207, Kafka's
// Partition.fetchOffsetForTimestamp).
func (p *Partition) HighWatermarkLagging() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader.Load() && p.epochStartOffset > p.hw.Load()
}

// CheckEpoch compares a request's current leader epoch (KIP-320; -1 means
// none given) with the partition's.
func (p *Partition) CheckEpoch(current int32) error {
	if current < 0 {
		return nil
	}
	switch e := p.leaderEpoch.Load(); {
	case current < e:
		return ErrFencedEpoch
	case current > e:
		return ErrUnknownEpoch
	}
	return nil
}

// makeLeader switches the partition to leader for st (st.Leader is this
// broker). Followers start with unknown log end offsets; those in the ISR
// count as caught up now, so that they are not dropped before their first
// fetch (Kafka does the same on a leader change). A new leader epoch
// starts at the log end offset in the log's epoch history (Kafka's
// makeLeader assigns it there); epochDue reports that the history changed
// and its leader-epoch-checkpoint is to be written (storage.Log.WriteEpochs),
// which the Manager does on its creators rather than here, under its lock.
func (p *Partition) makeLeader(st State, now time.Time) (epochDue bool) {
	p.mu.Lock()
	newEpoch := st.LeaderEpoch != p.leaderEpoch.Load() || !p.leader.Load()
	changed := newEpoch || st.PartitionEpoch != p.partitionEpoch
	p.leaderID, p.partitionEpoch, p.replicas = st.Leader, st.PartitionEpoch, slices.Clone(st.Replicas)
	p.setReplicaGauges(st.Replicas)
	isr := slices.Clone(st.ISR)
	p.isr.Store(&isr)
	if newEpoch || p.followers == nil {
		p.followers = map[int32]*followerState{}
	}
	for _, r := range st.Replicas {
		if r == p.localID {
			continue
		}
		if _, ok := p.followers[r]; !ok {
			p.followers[r] = &followerState{logEndOffset: -1, logStartOffset: -1, lastCaughtUp: now}
		}
	}
	for r := range p.followers {
		if !slices.Contains(st.Replicas, r) {
			delete(p.followers, r)
		}
	}
	if changed {
		// New metadata for the partition: an AlterPartition in flight
		// carries old epochs (its answer is ignored), and the next one
		// goes at once, with the new ones.
		p.isrPending = false
		p.isrGen++
		p.isrRetryAt, p.isrFailures = time.Time{}, 0
	}
	if newEpoch {
		p.epochStartOffset = p.log.LogEndOffset()
		// Under mu, so that no append comes between: the epoch starts
		// exactly where this leader's first batch will.
		epochDue = p.log.AssignEpoch(st.LeaderEpoch)
	}
	p.verifications = nil
	p.leaderEpoch.Store(st.LeaderEpoch)
	p.leader.Store(true)
	if newEpoch && p.hw.Load() > p.log.LogEndOffset() {
		p.setHW(p.log.LogEndOffset())
	}
	if newEpoch && p.cfg.Load().Storage.FlushIntervalMessages > 0 && p.log.RecoveryPoint() < p.log.LogEndOffset() {
		// The high-watermark counts flushed records only (see
		// maybeAdvanceHWLocked): flush a tail left by a crash, which no
		// append may come to flush. A failure is logged by the log.
		p.log.Flush()
	}
	p.maybeAdvanceHWLocked()
	p.mu.Unlock()
	p.purg.wakeAll()
	return epochDue
}

// makeFollower switches the partition to follow st.Leader.
func (p *Partition) makeFollower(st State) {
	p.mu.Lock()
	p.leaderID, p.partitionEpoch, p.replicas = st.Leader, st.PartitionEpoch, slices.Clone(st.Replicas)
	p.setReplicaGauges(st.Replicas)
	isr := slices.Clone(st.ISR)
	p.isr.Store(&isr)
	p.followers = nil
	p.isrPending = false
	p.isrGen++
	p.verifications = nil

	p.leaderEpoch.Store(st.LeaderEpoch)
	p.leader.Store(false)
	if hw := p.hw.Load(); hw > p.log.LogEndOffset() {
		p.setHW(p.log.LogEndOffset())
	}
	p.mu.Unlock()
	p.purg.wakeAll()
}

// Check validates records, one Produce partition's records (the broker
// framed them as one v2 batch), before Append: it answers ErrNotLeader on
// a follower, ErrMessageTooLarge past max.message.bytes,
// ErrRecordListLarge past segment.bytes, then applies record.Check with
// the topic's configs (cleanup.policy, message.timestamp.type,
// message.timestamp.before.max.ms and after.max.ms) and nowMillis; its
// errors are *record.ValidationError. The batch it returns, bytes
// unchanged and header parsed, is what Append takes.
func (p *Partition) Check(records []byte, nowMillis int64) (record.Batch, error) {
	if !p.leader.Load() {
		return record.Batch{}, ErrNotLeader
	}
	cfg := p.cfg.Load()
	if cfg.MaxMessageBytes > 0 && len(records) > int(cfg.MaxMessageBytes) {
		return record.Batch{}, fmt.Errorf("%w: the batch is %d bytes, larger than the maximum allowed (max.message.bytes %d)", ErrMessageTooLarge, len(records), cfg.MaxMessageBytes)
	}
	if cfg.SegmentBytes > 0 && int64(len(records)) > cfg.SegmentBytes {
		return record.Batch{}, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrRecordListLarge, len(records), cfg.SegmentBytes)
	}
	pol := record.Policy{
		Compacted:            cfg.Compact,
		LogAppendTime:        cfg.LogAppendTime,
		NowMillis:            nowMillis,
		TimestampBeforeMaxMs: record.NoTimestampBound,
		TimestampAfterMaxMs:  record.NoTimestampBound,
	}
	if cfg.TimestampBounded {
		pol.TimestampBeforeMaxMs, pol.TimestampAfterMaxMs = cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs
	}
	return record.Check(records, &pol)
}

// Append appends b, a batch Check accepted, at the log end, stamping its
// offsets and the leader epoch in place (and, on a LogAppendTime topic,
// its max timestamp, nowMillis). A batch Check did not accept gives
// record.ErrInvalidRecord; a follower ErrNotLeader; nothing is written
// then. The header Check parsed goes down to the log, which does not
// parse the batch again.
//
// Batches with a producer id get the producer checks of a client (see
// storage.Log.AppendWith): a retried batch is answered with its first
// offsets (AppendResult.Duplicate) and not written again; sequence and
// epoch errors are storage's. A transactional batch that would start the
// producer's transaction in this partition needs verified, the guard of
// StartTxnVerification once the transaction coordinator confirmed the
// partition is in the transaction (KIP-890); otherwise it gets
// storage.ErrInvalidTxnState.
//
// With acks=-1 (all), fewer in-sync replicas than min.insync.replicas give
// ErrNotEnoughReplicas before anything is written.
//
// When the topic's flush.messages asks for an fsync, Append returns after
// one that covers the batch, shared with concurrent producers
// (storage.Log.FlushTo); storage.ErrFlushFailed then means the batch is
// in the log but not known to be on disk.
func (p *Partition) Append(b record.Batch, acks int16, nowMillis int64, verified *TxnVerification) (storage.AppendResult, error) {
	if !b.Checked() {
		return storage.AppendResult{}, fmt.Errorf("%w: batch not checked", record.ErrInvalidRecord)
	}
	cfg := p.cfg.Load()
	if !p.leader.Load() {
		return storage.AppendResult{}, ErrNotLeader
	}
	if acks == -1 && int32(len(p.ISR())) < cfg.MinInsyncReplicas {
		return storage.AppendResult{}, ErrNotEnoughReplicas
	}
	if cfg.LogAppendTime {
		record.SetMaxTimestampLogAppendTime(b.Bytes, nowMillis)
		b.Header.MaxTimestamp = nowMillis
		b.Header.Attributes |= record.TimestampTypeBit
	}
	batch, h := b.Bytes, b.Header
	if cfg.Recompress && h.Codec() != cfg.Compression {
		var err error
		if batch, err = recompressBatch(batch, cfg); err != nil {
			return storage.AppendResult{}, err
		}
		if h, err = record.ParseHeader(batch); err != nil {
			return storage.AppendResult{}, err
		}
	}
	return p.appendAsLeader(batch, &h, storage.OriginClient, verified)
}

// AppendInternal appends batches built by the broker itself (coordinators'
// records, control batches) without the client-facing checks.
func (p *Partition) AppendInternal(batches []byte) (storage.AppendResult, error) {
	if !p.leader.Load() {
		return storage.AppendResult{}, ErrNotLeader
	}
	return p.appendAsLeader(batches, nil, storage.OriginCoordinator, nil)
}

// appendAsLeader appends batches; h, when not nil, is the header of
// batches, then one batch, parsed by the caller.
func (p *Partition) appendAsLeader(batches []byte, h *record.Header, origin storage.Origin, verified *TxnVerification) (storage.AppendResult, error) {
	p.mu.Lock()
	if !p.leader.Load() {
		p.mu.Unlock()
		return storage.AppendResult{}, ErrNotLeader
	}
	if origin == storage.OriginClient || verified != nil {
		if err := p.checkVerificationLocked(batches, h, verified); err != nil {
			p.mu.Unlock()
			return storage.AppendResult{}, err
		}
	}
	var (
		res   storage.AppendResult
		flush bool
		err   error
	)
	if h != nil {
		res, flush, err = p.log.AppendBatchDeferred(batches, *h, p.leaderEpoch.Load(), origin)
	} else {
		res, flush, err = p.log.AppendDeferred(batches, p.leaderEpoch.Load(), origin)
	}
	if err == nil && verified != nil && !res.Duplicate {
		p.clearVerificationLocked(verified)
	}
	if err == nil && !res.Duplicate {
		p.purg.appended(p.log.LogEndOffset(), int64(len(batches)))
	}
	if err == nil {
		p.maybeAdvanceHWLocked()
	}
	p.mu.Unlock()
	if err == nil && flush {
		// flush.messages: answer only after an fsync that covers the
		// batches, waited for outside the partition lock so that
		// concurrent producers share it (group commit).
		if err = p.log.FlushTo(res.LastOffset + 1); err == nil {
			p.mu.Lock()
			p.maybeAdvanceHWLocked()
			p.mu.Unlock()
		}
	}
	return res, err
}

// maybeAdvanceHWLocked sets the high-watermark to the smallest log end
// offset over the ISR (the leader's own included). A follower whose log end
// offset is not known yet holds the high-watermark where it is. With
// flush.messages set, the leader's own log end counts no more than
// flush.messages-1 messages above its recovery point: Kafka's leader
// fsyncs inside the append, before its high-watermark moves, and appends
// here wait for their fsync outside the partition lock.
func (p *Partition) maybeAdvanceHWLocked() bool {
	hw := p.log.LogEndOffset()
	if n := p.cfg.Load().Storage.FlushIntervalMessages; n > 0 {
		hw = min(hw, p.log.RecoveryPoint()+n-1)
	}
	for _, r := range p.ISR() {
		if r == p.localID {
			continue
		}
		f := p.followers[r]
		if f == nil || f.logEndOffset < 0 {
			return false
		}
		hw = min(hw, f.logEndOffset)
	}
	if hw > p.hw.Load() {
		p.advanceHWLocked(hw)
		return true
	}
	return false
}

// advanceHWLocked moves the high-watermark up to hw and completes what
// waited for it in the purgatory.
func (p *Partition) advanceHWLocked(hw int64) {
	p.setHW(hw)
	p.purg.advanced(hw)
}

// AckState tells a produce waiting for acks=all whether offset (the last
// offset it appended) is committed: done when the high-watermark passed
// it, err when it can no longer be (leadership lost, ISR below
// min.insync.replicas).
func (p *Partition) AckState(offset int64) (done bool, err error) {
	if !p.leader.Load() {
		return false, ErrNotLeader
	}
	if p.hw.Load() > offset {
		if int32(len(p.ISR())) < p.cfg.Load().MinInsyncReplicas {
			return true, ErrNotEnoughReplicasAfterAppend
		}
		return true, nil
	}
	return false, nil
}

// ReadResult is what Read returns.
type ReadResult struct {
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// AbortedTransactions are those overlapping the records read, for
	// read_committed (ReadSliceCommitted only).
	AbortedTransactions []storage.AbortedTxn
}

// Read returns batches from offset up to maxBytes, bounded by the
// high-watermark for consumers (untilLogEnd false) or the log end
// (followers). minOne returns the first batch whole even when it is larger
// than maxBytes (KIP-74). Offsets outside [log start, log end] give
// storage.ErrOffsetOutOfRange.
func (p *Partition) Read(offset int64, maxBytes int32, untilLogEnd, minOne bool) (ReadResult, error) {
	hw := p.hw.Load()
	limit := hw
	if untilLogEnd {
		limit = p.log.LogEndOffset()
	}
	res := ReadResult{HighWatermark: hw, LastStableOffset: p.lsoAt(hw)}
	r, err := p.log.Read(offset, maxBytes, limit, minOne)
	res.LogStartOffset = r.LogStartOffset
	if err != nil {
		res.LogStartOffset = p.log.LogStartOffset()
		return res, err
	}
	res.Records = r.Records
	return res, nil
}

// ReadSlice is Read leaving the batches in the segment file (see
// storage.Log.ReadSlice); the caller must call the slice's Release.
func (p *Partition) ReadSlice(offset int64, maxBytes int32, untilLogEnd, minOne bool) (storage.FileSlice, ReadResult, error) {
	hw := p.hw.Load()
	limit := hw
	if untilLogEnd {
		limit = p.log.LogEndOffset()
	}
	res := ReadResult{HighWatermark: hw, LastStableOffset: p.lsoAt(hw)}
	fs, r, err := p.log.ReadSlice(offset, maxBytes, limit, minOne)
	res.LogStartOffset = r.LogStartOffset
	if err != nil {
		res.LogStartOffset = p.log.LogStartOffset()
	}
	return fs, res, err
}

// UpdateFollower records a follower fetch at fetchOffset (the follower has
// every record below it) with the follower's log start offset (-1:
// unknown): it may advance the high-watermark, and returns the ISR to ask
// the controller for when the follower caught up and is not in the ISR yet
// (nil otherwise).
func (p *Partition) UpdateFollower(replica int32, fetchOffset, logStartOffset int64, now time.Time) (expand []int32) {
	expand, _ = p.updateFollower(replica, fetchOffset, logStartOffset, now, nil)
	return expand
}

// updateFollower is UpdateFollower for a fetch of session w (nil: none).
// settled reports that nothing is left to do for the follower until the
// partition changes: it is in the ISR, no ISR change is in flight, and
// its fetch offset is at the log end offset; w's later fetches then count
// as its fetches of p (SessionWatch).
func (p *Partition) updateFollower(replica int32, fetchOffset, logStartOffset int64, now time.Time, w *SessionWatch) (expand []int32, settled bool) {
	p.mu.Lock()
	f := p.followers[replica]
	if f == nil || !p.leader.Load() {
		p.mu.Unlock()
		return nil, false
	}
	f.foldClock()
	leo := p.log.LogEndOffset()
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case fetchOffset >= f.lastFetchLeader && !f.lastFetch.IsZero():
		f.lastCaughtUp = f.lastFetch
	}
	f.logEndOffset, f.lastFetch, f.lastFetchLeader = fetchOffset, now, leo
	f.logStartOffset = logStartOffset
	f.clock, f.clockCaughtUp = w, fetchOffset >= leo
	p.maybeAdvanceHWLocked()
	isr := p.ISR()
	in := slices.Contains(isr, replica)
	// Kafka's isFollowerInSync: caught up to the HW and to the start of
	// this leader's epoch (the HW of a new leader may lag records that
	// were committed under the previous one).
	if !in && !p.isrPending && !now.Before(p.isrRetryAt) &&
		fetchOffset >= p.hw.Load() && fetchOffset >= p.epochStartOffset {
		expand = append(slices.Clone(isr), replica)
		p.isrPending = true
	}
	settled = in && !p.isrPending && fetchOffset >= leo
	p.mu.Unlock()
	return expand, settled
}

// laggingFollowers returns the ISR without followers that have not caught
// up within lag, or nil when nothing changes or a change is in flight.
func (p *Partition) laggingFollowers(now time.Time, lag time.Duration) (shrunk []int32) {
	if !p.leader.Load() || len(p.ISR()) <= 1 {
		return nil // no follower to drop (a follower, or the ISR is the leader): no lock, as on a single node for every partition
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leader.Load() || p.isrPending || now.Before(p.isrRetryAt) {
		return nil
	}
	isr := p.ISR()
	out := make([]int32, 0, len(isr))
	for _, r := range isr {
		f := p.followers[r]
		if r != p.localID && (f == nil || now.Sub(f.caughtUp()) > lag) {
			continue
		}
		out = append(out, r)
	}
	if len(out) == len(isr) {
		return nil
	}
	p.isrPending = true
	return out
}

// isrUpdated applies the controller's answer to AlterPartition (or its
// failure, with ok false) sent in generation gen (isrState). It reports
// whether the answer was stale (new metadata came meanwhile: ignored) and
// the failures in a row.
func (p *Partition) isrUpdated(gen uint64, isr []int32, partitionEpoch int32, ok bool) (stale bool, failures int) {
	p.mu.Lock()
	if gen != p.isrGen {
		p.mu.Unlock()
		return true, 0
	}
	p.isrPending = false
	if !ok {
		// The controller refused (a replica still fenced, a stale
		// partition epoch until the next metadata) or is unreachable:
		// ask again later, not on the next follower fetch.
		p.isrFailures++
		p.isrRetryAt = time.Now().Add(min(isrRetryBackoff<<min(p.isrFailures-1, 8), isrRetryBackoffMax))
	} else {
		p.isrFailures = 0
	}
	failures = p.isrFailures
	if ok && partitionEpoch >= p.partitionEpoch {
		p.partitionEpoch = partitionEpoch
		c := slices.Clone(isr)
		p.isr.Store(&c)
		p.maybeAdvanceHWLocked()
	}
	p.mu.Unlock()
	return false, failures
}

// isrCancel drops the ISR change UpdateFollower proposed in generation gen
// without sending it (no backoff).
func (p *Partition) isrCancel(gen uint64) {
	p.mu.Lock()
	if gen == p.isrGen {
		p.isrPending = false
	}
	p.mu.Unlock()
}

// isrState returns the partition epoch, for AlterPartition, and the
// generation its answer goes to isrUpdated with.
func (p *Partition) isrState() (partitionEpoch int32, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.partitionEpoch, p.isrGen
}

// appendAsFollower writes batches fetched from the leader and moves the
// high-watermark to min(leaderHW, log end offset). Batches whose CRC does
// not match are refused whole (checkFetchedBatches): nothing is written
// and the high-watermark stays.
func (p *Partition) appendAsFollower(batches []byte, leaderHW int64) error {
	// Checked before the lock: a CRC-32C of a fetch's megabyte is tens
	// of microseconds, which fetches and appends need not wait for.
	if err := checkFetchedBatches(batches); err != nil {
		return err
	}
	p.mu.Lock()
	if p.leader.Load() {
		p.mu.Unlock()
		return ErrNotLeader
	}
	var err error
	if len(batches) > 0 {
		if _, err = p.log.AppendAsFollower(batches); err == nil {
			p.purg.appended(p.log.LogEndOffset(), int64(len(batches)))
		}
	}
	if hw := min(leaderHW, p.log.LogEndOffset()); err == nil && hw > p.hw.Load() {
		p.advanceHWLocked(hw)
	}
	p.mu.Unlock()
	return err
}

// checkFetchedBatches checks the framing and the CRC-32C of every batch in
// batches, a fetched partition's records, before a follower appends them,
// as Kafka's follower does (UnifiedLog.appendAsFollower validates each
// batch, and a CorruptRecordException fails that partition's fetch, which
// is tried again after replica.fetch.backoff.ms). Bytes damaged on the
// way from the leader (a NIC, a proxy, memory) are then never stored,
// where they would be served to consumers and would cut the log at the
// next recovery. The error wraps record.ErrCorrupt (a CRC that does not
// match, a length too small for a batch), record.ErrTruncated (a partial
// batch at the end) or record.ErrUnsupportedMagic, and names the batch's
// offset.
func checkFetchedBatches(batches []byte) error {
	_, err := record.Batches(batches, func(b []byte, h record.Header) error {
		if !record.CRCValid(b) {
			return fmt.Errorf("%w: fetched batch at offset %d: crc %08x does not match its bytes", record.ErrCorrupt, h.BaseOffset, h.CRC)
		}
		return nil
	})
	return err
}

// truncateAsFollower cuts the log at offset (a divergence found with the
// leader) and clamps the high-watermark.
func (p *Partition) truncateAsFollower(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leader.Load() {
		return nil
	}
	// At or past the log end no record goes, but the log drops an epoch
	// this replica assigned there as a leader, not the leader's history;
	// the sessions are marked either way, so that the next fetch carries
	// the new last fetched epoch, not the one that diverged again.
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	if p.hw.Load() > offset {
		p.setHW(offset)
	}
	p.purg.truncated(offset) // after the high-watermark: it marks the sessions
	return nil
}
