package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// More errors callers branch on.
var (
	// ErrOutOfOrderOffsets: AppendAsFollower got batches whose offsets do not
	// increase past the log end offset.
	ErrOutOfOrderOffsets = errors.New("storage: offsets out of order")
	// ErrRecordSetTooLarge: one Append is larger than a segment can hold
	// (index positions are int32), or spans more than MaxInt32 offsets.
	ErrRecordSetTooLarge = errors.New("storage: record set too large")
)

// readRetries bounds how often Read starts over after losing a race with a
// truncation that closed the segment it was reading.
const readRetries = 16

// Log is one partition's log: its segments, indexes and offsets. Safe for
// concurrent use: one lock serializes appends, rolls and truncation; reads
// take a snapshot of the segment list and no log-wide lock.
//
// Lock order: the flush gate (flush.go), then mu, then a segment's rw,
// then an index's mu.
type Log struct {
	dir    string
	logger *slog.Logger
	now    func() time.Time
	files  *FileCache // opens and closes the segments' descriptors
	fsys   vfs.FS     // files.fsys: where every file of the log is

	// segs is the current segment list, sorted by base offset, never
	// modified in place: writers under mu publish a new slice.
	segs           atomic.Pointer[[]*segment]
	logStartOffset atomic.Int64
	logEndOffset   atomic.Int64
	recoveryPoint  atomic.Int64
	closed         atomic.Bool // files closed; reads give ErrClosed

	// Flushes (flush.go).
	gate         flushGate                             // one flush at a time; waiters share the next one
	flushFailed  atomic.Pointer[error]                 // the first I/O failure (fsync, write, roll, or its log dir offline): the log takes no more writes
	ioFailed     atomic.Pointer[func(error)]           // set by a Manager: takes the log dir offline
	dirOffline   atomic.Pointer[atomic.Pointer[error]] // set by a Manager: its log dir's offline error
	lastFlush    atomic.Int64                          // time.Now() of the last flush that synced, Unix ns; zero: none yet
	flushes      atomic.Int64                          // flushes that synced files (each a few fsyncs), for tests and benchmarks
	dirtied      atomic.Pointer[func(due time.Time)]   // the Manager's flush task: called when flush.ms is set and the log gets unflushed records
	flushHook    func() error                          // tests: runs before a flush's fsyncs; an error fails the flush
	lastSkipWarn atomic.Int64                          // time.Now() of the last warnSkipped log line, Unix ns

	// rollCheck caches when MaybeRoll has next to look under mu: the
	// periodic roll check visits every log every second, and at 100,000
	// partitions taking each lock cost 0.1 s of CPU a second.
	rollCheck atomic.Pointer[rollCheck]
	cfgGen    atomic.Uint64 // bumped by SetConfig under mu
	// The Manager's roll schedule (tasks.go): rollMoved, called under mu,
	// tells it that the log may be due for segment.ms sooner than
	// rollScheduled, the due time (Unix ns; MaxInt64 none, MinInt64 a
	// look pending) it last recorded under mu; rollIdx is the log's
	// index in its heap plus one, 0 when none, owned by the periodic task.
	rollMoved     atomic.Pointer[func()]
	rollScheduled atomic.Int64
	rollIdx       int
	// ckptMoved is the Manager's flag that a recovery point, log start
	// offset or cleaner offset moved since its last checkpoint.
	ckptMoved atomic.Pointer[atomic.Bool]

	mu             sync.Mutex // guards the fields below; serializes writes
	cfg            Config
	closing        bool   // Close or Delete began; writes give ErrClosed
	truncations    uint64 // bumped by every truncation, so a flush racing one does not advance the recovery point past it
	dirDirty       bool   // files were created or removed since the last directory fsync
	epochsUnsynced bool   // leader-epoch-checkpoint was replaced without an fsync
	epochsStale    bool   // leader-epoch-checkpoint failed to be replaced after a truncation: the next append replaces it
	// epochsUnwritten: the history has an epoch AssignEpoch gave that
	// leader-epoch-checkpoint lacks; WriteEpochs or the next append
	// writes it.
	epochsUnwritten bool
	flusherOn       bool

	epochs *epochCache // leader epoch history (leader-epoch-checkpoint)

	// producers is the producer state (producerstate.go): set by Open,
	// updated by appends under mu.
	producers *producerState

	flushTarget atomic.Int64  // highest offset the background flusher was asked to reach
	flushKick   chan struct{} // wakes the background flusher
	stats       *Stats        // nil: none
	done        chan struct{} // closed by Close to stop it
	wg          sync.WaitGroup

	// Retention and cleaning (retention.go, clean.go).
	bounds         atomic.Pointer[BoundsFunc]
	startMoved     atomic.Pointer[func()]       // called when SetLogStartOffset raised the log start
	startRaised    atomic.Pointer[func()]       // OnLogStartRaised's, called without mu held
	parentSync     atomic.Pointer[func() error] // the Manager's fsync of the log dir holding a new log, due before its first flush completes
	cleanerOffset  atomic.Int64                 // first dirty offset: below it the cleaner has cleaned; -1 unknown
	deleteHorizon  atomic.Int64                 // earliest delete horizon of kept tombstones and markers, ms; MaxInt64 none; horizonUnknown until looked for after Open
	pendingDeletes []pendingDelete              // files renamed .deleted, removed when due; guarded by mu
	retired        []*segment                   // deleted or replaced segments still being read when they went, closed later (closeRetired); guarded by mu

	// The topic id of partition.metadata (partitionmeta.go).
	idMu    sync.Mutex   // guards the fields below; a leaf lock
	topicID [16]byte     // with idState topicIDKnown
	idState topicIDState // unread until TopicID or SetTopicID
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the configuration in force, defaults filled in.
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// SetConfig changes the configuration (a topic config change). It applies
// to the next append or roll; index files already created keep their size
// limit. It returns the error of Config.Validate and changes nothing then.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg.WithDefaults()
	l.cfgGen.Add(1) // segment.ms may be sooner now
	l.rollMovedLocked()
	if l.producers != nil {
		l.producers.setExpiration(l.cfg.ProducerIDExpiration)
	}
	if l.logEndOffset.Load() > l.recoveryPoint.Load() {
		l.dirtiedLocked() // flush.ms may be due sooner now
	}
	return nil
}

func (l *Log) segments() []*segment {
	if p := l.segs.Load(); p != nil {
		return *p
	}
	return nil
}

// activeLocked returns the active (last) segment, creating one at the log
// end offset if an earlier failure left the log without segments.
func (l *Log) activeLocked() (*segment, error) {
	segs := l.segments()
	if len(segs) > 0 {
		return segs[len(segs)-1], nil
	}
	s, err := createSegment(l.files, l.dir, l.logEndOffset.Load(), l.cfg, l.now())
	if err != nil {
		return nil, err
	}
	l.segs.Store(&[]*segment{s})
	l.dirDirty = true
	return s, nil
}

// LogStartOffset is the first offset the log holds (or will hold).
func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.logEndOffset.Load() }

// RecoveryPoint is the offset below which the log is known to be on disk.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// SetLogStartOffset raises the log start offset to offset (DeleteRecords,
// retention; Kafka's maybeIncrementLogStartOffset). A lower offset is
// ignored; one above the log end offset gives ErrOffsetOutOfRange. Segments
// wholly below it stay on disk until DeleteOldSegments removes them (the
// Manager runs it soon after); the producer snapshots below it go at once,
// but the newest at or below it.
func (l *Log) SetLogStartOffset(offset int64) error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	if leo := l.logEndOffset.Load(); offset > leo {
		l.mu.Unlock()
		return fmt.Errorf("%w: log start offset %d past log end offset %d", ErrOffsetOutOfRange, offset, leo)
	}
	raised := offset > l.logStartOffset.Load()
	if raised {
		l.logStartOffset.Store(offset)
		l.checkpointMoved()
		l.deleteSnapshotsBelowLocked()
		if fn := l.startMoved.Load(); fn != nil {
			(*fn)()
		}
	}
	l.mu.Unlock()
	if raised {
		l.logStartRaised()
	}
	return nil
}

// OnLogStartRaised sets fn, called each time SetLogStartOffset
// (DeleteRecords, a follower following its leader) or DeleteOldSegments
// (retention) raised the log start offset, after the move and without
// the log's lock held; nil removes it. The replica layer tells the fetch
// sessions watching the partition with it (replica.SessionWatch). Safe
// for concurrent use.
func (l *Log) OnLogStartRaised(fn func()) {
	if fn == nil {
		l.startRaised.Store(nil)
		return
	}
	l.startRaised.Store(&fn)
}

func (l *Log) logStartRaised() {
	if fn := l.startRaised.Load(); fn != nil {
		(*fn)()
	}
}

// Append writes batches, a concatenation of whole v2 batches already checked
// by record.Validate, at the log end: it stamps each batch's base offset and
// the given partition leader epoch in place (the caller's slice is
// modified), rolls segments as Config asks, and adds index entries.
// Returns the offsets assigned. Errors: ErrClosed, record.ErrCorrupt or
// record.ErrTruncated (wrapped) when batches is not whole batches,
// ErrRecordSetTooLarge, ErrFlushFailed; ErrResourceExhausted when the
// disk is full or the process out of descriptors (nothing was written:
// the log is as before and may take the same append later); ErrOffline
// when any other I/O error took the log's dir offline. When
// FlushIntervalMessages is reached Append returns after an fsync that
// covers the batches, shared with concurrent appends (see FlushTo); an
// error then means the batches are in the log but not known to be on disk.
//
// Batches with a producer id are checked as OriginCoordinator (see
// AppendWith).
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	return l.append(batches, true, leaderEpoch, OriginCoordinator)
}

// AppendWith is Append with the producer checks of origin for the batches
// that carry a producer id (Kafka's analyzeAndValidateProducerState):
// epochs older than the producer's give ErrInvalidProducerEpoch, a marker
// from an older coordinator epoch ErrCoordinatorFenced, a non-transactional
// batch while the producer's transaction is open ErrInvalidTxnState; for
// OriginClient, a retry of one of the producer's last five batches is
// answered with AppendResult.Duplicate and the offsets it got, and a
// sequence that does not follow the last one gives ErrOutOfOrderSequence
// (any sequence is accepted from a producer the partition has no state
// for). Nothing is written on these errors. Transactions started or ended
// by the batches update the last stable offset; an aborted one gets an
// entry in the .txnindex of the segment its marker lands in.
func (l *Log) AppendWith(batches []byte, leaderEpoch int32, origin Origin) (AppendResult, error) {
	return l.append(batches, true, leaderEpoch, origin)
}

// AppendAsFollower writes batches a leader sent, keeping their base offsets
// and partition leader epochs. The first batch's base offset must be at
// least the log end offset and offsets must increase (gaps, left by
// compaction, are kept); otherwise it returns ErrOutOfOrderOffsets and
// writes nothing. Other errors as Append.
func (l *Log) AppendAsFollower(batches []byte) (AppendResult, error) {
	return l.append(batches, false, 0, OriginReplication)
}

// AppendDeferred is AppendWith for a caller that appends under a lock of
// its own (a partition's) and must not hold it through an fsync: it never
// waits for one. When flush.messages asks for an fsync of the batches,
// flush is true and the caller calls FlushTo(res.LastOffset+1) once it has
// released its lock and before it acknowledges the batches, so that
// appends from other callers share the fsync. A duplicate (res.Duplicate)
// whose first append is not flushed yet gives flush true too.
func (l *Log) AppendDeferred(batches []byte, leaderEpoch int32, origin Origin) (res AppendResult, flush bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(batches, nil, true, leaderEpoch, origin)
}

// AppendBatchDeferred is AppendDeferred for one whole batch b whose header
// h the caller parsed already (record.Check on the produce path): the log
// does not parse it again. h must be b's header.
func (l *Log) AppendBatchDeferred(b []byte, h record.Header, leaderEpoch int32, origin Origin) (res AppendResult, flush bool, err error) {
	if h.Size() != len(b) {
		return res, false, fmt.Errorf("%w: header of %d bytes for a batch of %d", record.ErrCorrupt, h.Size(), len(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(b, &h, true, leaderEpoch, origin)
}

func (l *Log) append(batches []byte, assign bool, epoch int32, origin Origin) (AppendResult, error) {
	l.mu.Lock()
	res, flush, err := l.appendLocked(batches, nil, assign, epoch, origin)
	l.mu.Unlock()
	if err == nil && flush {
		err = l.FlushTo(res.LastOffset + 1)
	}
	return res, err
}

// appendLocked appends batches; known, when not nil, is the header of
// batches, then one whole batch, and spares parsing it.
func (l *Log) appendLocked(batches []byte, known *record.Header, assign bool, epoch int32, origin Origin) (res AppendResult, flush bool, err error) {
	if l.closing {
		return res, false, ErrClosed
	}
	if err := l.flushFailure(); err != nil {
		return res, false, err
	}
	leo := l.logEndOffset.Load()
	res = AppendResult{BaseOffset: leo, LastOffset: leo - 1, MaxTimestamp: noTimestamp, OffsetOfMaxTimestamp: -1}
	hs := make([]record.Header, 0, 1)
	var pbsBuf [1]producerBatch
	pbs := pbsBuf[:0] // batches with a producer id
	next := leo
	step := func(b []byte, h record.Header) error {
		if h.LastOffsetDelta < 0 {
			return fmt.Errorf("%w: last offset delta %d", record.ErrCorrupt, h.LastOffsetDelta)
		}
		if assign {
			record.SetBaseOffset(b, next)
			record.SetPartitionLeaderEpoch(b, epoch)
			h.BaseOffset, h.PartitionLeaderEpoch = next, epoch
		} else if h.BaseOffset < next || h.LastOffset() < h.BaseOffset || h.LastOffset() == math.MaxInt64 {
			return fmt.Errorf("%w: batch at offset %d, log end offset %d", ErrOutOfOrderOffsets, h.BaseOffset, next)
		}
		next = h.NextOffset()
		hs = append(hs, h)
		if h.ProducerID >= 0 {
			pbs = append(pbs, newProducerBatch(b, h))
		}
		return nil
	}
	if known != nil {
		err = step(batches, *known)
	} else {
		_, err = record.Batches(batches, step)
	}
	if err != nil {
		return res, false, err
	}
	if len(hs) == 0 {
		return res, false, nil
	}
	first, last := hs[0].BaseOffset, hs[len(hs)-1].LastOffset()
	if last-first > math.MaxInt32 || int64(len(batches)) > math.MaxInt32 {
		return res, false, fmt.Errorf("%w: %d bytes, offsets %d to %d", ErrRecordSetTooLarge, len(batches), first, last)
	}
	res.BaseOffset, res.LastOffset = first, last
	for i := range hs {
		if hs[i].MaxTimestamp > res.MaxTimestamp {
			res.MaxTimestamp, res.OffsetOfMaxTimestamp = hs[i].MaxTimestamp, hs[i].LastOffset()
		}
	}

	var pu *producerUpdate
	if len(pbs) > 0 {
		now := l.now()
		l.producers.maybeExpire(now)
		if pu, err = l.producers.prepare(pbs, origin, now); err != nil {
			return res, false, err
		}
		if d := pu.duplicate; d != nil {
			flush = l.cfg.FlushIntervalMessages > 0 && d.lastOffset >= l.recoveryPoint.Load()
			return AppendResult{BaseOffset: d.firstOffset, LastOffset: d.lastOffset, MaxTimestamp: d.timestamp, OffsetOfMaxTimestamp: d.lastOffset, Duplicate: true}, flush, nil
		}
	}

	seg, err := l.activeLocked()
	if err != nil {
		return res, false, l.ioError(err)
	}
	if l.shouldRollLocked(seg, int64(len(batches)), res.MaxTimestamp, last, l.now()) {
		if seg, err = l.rollLocked(first); err != nil {
			return res, false, err
		}
	}
	if seg.size.Load()+int64(len(batches)) > math.MaxInt32 {
		return res, false, fmt.Errorf("%w: %d bytes", ErrRecordSetTooLarge, len(batches))
	}
	// The files beside the segment are written first, the batches last,
	// so that a failure at any step leaves the log as it was: nothing
	// half-appended to take back out of the .log.
	aborted := l.producers.abortedTxns(pu)
	var txnFile vfs.File
	if len(aborted) > 0 {
		// Opened before anything is written: out of descriptors, the
		// append is refused whole.
		if txnFile, err = seg.openTxnIndex(); err != nil {
			return res, false, l.ioError(err)
		}
		defer txnFile.Close()
	}
	undoEpochs, err := l.recordEpochsLocked(hs)
	if err != nil {
		return res, false, l.ioError(err)
	}
	var txnBefore int64
	if len(aborted) > 0 {
		if txnBefore, err = seg.writeAbortedTxns(txnFile, aborted); err != nil {
			undoEpochs()
			return res, false, l.ioError(err)
		}
	}
	pos := seg.size.Load()
	if err := seg.writeBatches(batches); err != nil {
		undoEpochs()
		if len(aborted) > 0 {
			if terr := txnFile.Truncate(txnBefore); terr != nil {
				err = fmt.Errorf("storage: cut %s back after a failed append (%v): %w", seg.txnIndexPath(), err, terr)
			}
		}
		return res, false, l.ioError(err)
	}
	seg.size.Store(pos + int64(len(batches)))
	if len(aborted) > 0 {
		seg.addAbortedTxns(aborted)
	}
	if err := seg.indexBatches(pos, hs, int64(l.cfg.IndexIntervalBytes)); err != nil {
		// The batches are in the log. An index missing entries still
		// works (it is sparse; a segment whose indexes are empty is
		// re-indexed when it is loaded), so a lack of space or of
		// descriptors only skips them; a failure of the disk takes the
		// dir offline, as Kafka's append does.
		if err = l.ioError(err); !errors.Is(err, ErrResourceExhausted) {
			return res, false, err
		}
		l.warnSkipped("index entry skipped", seg, err)
	}
	l.logEndOffset.Store(next)
	l.producers.commit(pu, next)
	l.rollMovedLocked()
	rp := l.recoveryPoint.Load()
	if leo <= rp {
		l.dirtiedLocked()
	}
	// Kafka's UnifiedLog.append: unflushedMessages >= flush.messages.
	flush = l.cfg.FlushIntervalMessages > 0 && next-rp >= l.cfg.FlushIntervalMessages
	return res, flush, nil
}

// shouldRollLocked is Kafka's LogSegment.shouldRoll: the segment is full
// (bytes or index), too old, or cannot hold offset last relative to its base.
func (l *Log) shouldRollLocked(s *segment, size, maxTs, last int64, now time.Time) bool {
	if s.size.Load() == 0 {
		return !s.canHold(last)
	}
	return s.size.Load() > l.cfg.SegmentBytes-size ||
		s.index.isFull() || s.timeIndex.isFull() ||
		!s.canHold(last) ||
		l.timeWaitedLocked(s, maxTs, now) > l.cfg.maxSegmentAge()
}

// timeWaitedLocked is how old the segment is for segment.ms: the
// timestamp of the incoming batches minus the max timestamp of its first
// append, or, when those are unknown, wall time since it was created.
func (l *Log) timeWaitedLocked(s *segment, msgTs int64, now time.Time) time.Duration {
	if s.rollingBasedTimestamp >= 0 && msgTs >= 0 {
		return time.Duration(msgTs-s.rollingBasedTimestamp) * time.Millisecond
	}
	return now.Sub(s.created)
}

// rollCheck is what MaybeRoll found the last time it looked under the
// lock: the state it looked at (the segment list, the log end offset and
// the config generation, which every append, truncation, roll, cleaner
// swap and config change moves) and the earliest time, Unix nanoseconds,
// at which that state's active segment can be due (math.MaxInt64: never,
// it is empty).
type rollCheck struct {
	segs   *[]*segment
	leo    int64
	cfgGen uint64
	due    int64
}

// MaybeRoll rolls the active segment if it is older than Config.SegmentAge,
// or than max.compaction.lag.ms on a compacted log when sooner (wall time minus the max timestamp of its first batch, or since it was
// created when that is unknown). An empty segment never rolls. A log
// that changed in none of the ways that move its roll time since the last
// call, and is not due, is answered without its lock.
func (l *Log) MaybeRoll() error {
	now := l.now()
	if rc := l.rollCheck.Load(); rc != nil && now.UnixNano() < rc.due && rc.segs == l.segs.Load() &&
		rc.leo == l.logEndOffset.Load() && rc.cfgGen == l.cfgGen.Load() {
		if l.closed.Load() {
			return ErrClosed
		}
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return ErrClosed
	}
	s, err := l.activeLocked()
	if err != nil {
		return l.ioError(err)
	}
	maxAge := l.cfg.maxSegmentAge()
	if s.size.Load() == 0 || l.timeWaitedLocked(s, now.UnixMilli(), now) <= maxAge {
		l.rollCheck.Store(&rollCheck{segs: l.segs.Load(), leo: l.logEndOffset.Load(), cfgGen: l.cfgGen.Load(), due: l.rollDueLocked(s, maxAge)})
		return nil
	}
	_, err = l.rollLocked(l.logEndOffset.Load())
	return err
}

// rollMovedLocked tells the Manager's roll schedule when the active
// segment's roll time by segment.ms is sooner than the one it recorded
// (the first append to an empty segment, a truncation back to an older
// segment, a shorter segment.ms); a later one (a roll, an emptied log) it
// finds when the recorded time comes. Two loads and a comparison on the
// append path.
func (l *Log) rollMovedLocked() {
	fn := l.rollMoved.Load()
	segs := l.segments()
	if fn == nil || len(segs) == 0 {
		return
	}
	if l.rollDueLocked(segs[len(segs)-1], l.cfg.maxSegmentAge()) < l.rollScheduled.Load() {
		l.rollScheduled.Store(math.MinInt64) // told once until it looks
		(*fn)()
	}
}

// maybeRollDue is MaybeRoll for the Manager's roll schedule: it rolls the
// active segment when it is older than its segment.ms at now, then
// records under mu and returns when the active segment can next be due
// (rollDueLocked; MaxInt64 when it is empty or the log closed). A failed
// roll is due again at now (the next look).
func (l *Log) maybeRollDue(now time.Time) (due int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	due = math.MaxInt64
	defer func() { l.rollScheduled.Store(due) }()
	if l.closing {
		return due, ErrClosed
	}
	s, err := l.activeLocked()
	if err != nil {
		return now.UnixNano(), l.ioError(err)
	}
	maxAge := l.cfg.maxSegmentAge()
	if s.size.Load() > 0 && l.timeWaitedLocked(s, now.UnixMilli(), now) > maxAge {
		if s, err = l.rollLocked(l.logEndOffset.Load()); err != nil {
			return now.UnixNano(), err
		}
	}
	return l.rollDueLocked(s, maxAge), nil
}

// rollDueLocked is the earliest time, Unix nanoseconds, at which the active
// segment s can be older than maxAge by timeWaitedLocked: math.MaxInt64
// when it is empty (an append changes the log end offset first).
func (l *Log) rollDueLocked(s *segment, maxAge time.Duration) int64 {
	if s.size.Load() == 0 {
		return math.MaxInt64
	}
	base := s.created.UnixNano()
	if ts := s.rollingBasedTimestamp; ts >= 0 {
		if ts > math.MaxInt64/int64(time.Millisecond) {
			return math.MaxInt64
		}
		base = ts * int64(time.Millisecond)
	}
	if maxAge > 0 && base > math.MaxInt64-int64(maxAge) {
		return math.MaxInt64
	}
	return base + int64(maxAge)
}

// rollLocked starts a new active segment at newBase and asks the
// background flusher to sync the previous ones (Kafka flushes up to the new
// segment after a roll). An empty active segment is replaced, not kept.
// A roll is whole or nothing: when the new segment or the producer
// snapshot at its base cannot be written, the new segment's files are
// removed and the old segment stays active. Errors come classified
// (ioError): ErrResourceExhausted (nothing changed), ErrOffline.
func (l *Log) rollLocked(newBase int64) (*segment, error) {
	old, err := l.activeLocked()
	if err != nil {
		return nil, l.ioError(err)
	}
	segs := l.segments()
	if old.size.Load() == 0 && old.baseOffset == newBase {
		return old, nil
	}
	if err := old.onBecomeInactive(); err != nil {
		// Like any index entry, the last time index entry may be
		// skipped (loading the segment recomputes its max timestamp
		// from the batches after the last offset index entry); a
		// failure of the disk fails the roll and the dir.
		if err = l.ioError(err); !errors.Is(err, ErrResourceExhausted) {
			return nil, err
		}
		l.warnSkipped("final time index entry skipped", old, err)
	}
	s, err := createSegment(l.files, l.dir, newBase, l.cfg, l.now())
	if err != nil {
		return nil, l.ioError(err)
	}
	// The producer snapshot at the new segment's base lets recovery
	// start there (Kafka's roll takes it too, and an IOException of it
	// takes the dir offline).
	wrote, err := l.producers.takeSnapshot(l.now(), l.logStartOffset.Load())
	if err != nil && !wrote {
		if rerr := s.remove(); rerr != nil {
			err = fmt.Errorf("storage: remove %s after a failed roll (%v): %w", s, err, rerr)
		}
		return nil, l.ioError(err)
	}
	if err != nil {
		// The snapshot is written; removing older ones failed.
		if err = l.ioError(err); !errors.Is(err, ErrResourceExhausted) {
			return nil, err
		}
		l.warnSkipped("removing old producer snapshots failed", old, err)
	}
	if wrote {
		l.dirDirty = true
	}
	l.stats.rolled()
	next := make([]*segment, 0, len(segs)+1)
	next = append(next, segs...)
	if old.size.Load() == 0 {
		next = next[:len(next)-1]
	}
	next = append(next, s)
	l.segs.Store(&next)
	l.dirDirty = true
	if old.size.Load() == 0 {
		if err := old.remove(); err != nil {
			l.logger.Warn("removing empty segment failed", "segment", old.String(), "err", err)
		}
	}
	l.logger.Info("rolled segment", "base_offset", newBase, "previous_bytes", old.size.Load())
	l.requestFlushLocked(newBase)
	return s, nil
}

// skippedWarnEvery bounds how often a log warns that it skipped an index
// entry or a snapshot for want of space or descriptors.
const skippedWarnEvery = 10 * time.Second

// warnSkipped logs that the log skipped what (an index entry, the removal
// of old snapshots) of segment s after err, a lack of resources, at most
// every skippedWarnEvery with the other warnings of warnLimited.
func (l *Log) warnSkipped(what string, s *segment, err error) {
	l.warnLimited(what, "segment", s.String(), "err", err)
}

// warnLimited logs msg at warning level unless the log did less than
// skippedWarnEvery ago: a full disk or a process out of descriptors
// would otherwise log every append of every partition.
func (l *Log) warnLimited(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := l.lastSkipWarn.Load()
	if now-last < int64(skippedWarnEvery) || !l.lastSkipWarn.CompareAndSwap(last, now) {
		return
	}
	l.logger.Warn(msg, args...)
}

// Read returns whole batches starting with the batch holding offset, up to
// maxBytes in all, never including a batch whose last offset is at or past
// maxOffset (the high-watermark for consumers). When minOneBatch is set the
// first batch is returned whole even if larger than maxBytes (KIP-74).
// An offset below the log start offset or above the log end offset gives
// ErrOffsetOutOfRange; offset == log end offset gives no records. Batches
// come from one segment: a read at the end of a segment returns what that
// segment has, and the next read continues in the next one. Errors:
// ErrClosed, ErrOffsetOutOfRange, ErrCorruptSegment, I/O errors. Safe for
// concurrent use with appends and other reads; takes no log-wide lock.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	for range readRetries {
		if l.closed.Load() {
			return ReadResult{}, ErrClosed
		}
		leo := l.logEndOffset.Load()
		lso := l.logStartOffset.Load()
		segs := l.segments()
		res := ReadResult{LogStartOffset: lso, LogEndOffset: leo}
		if offset < lso || offset > leo {
			return res, fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, offset, lso, leo)
		}
		maxOffset = min(maxOffset, leo)
		if offset >= maxOffset {
			return res, nil
		}
		for i := floorSegment(segs, offset); i < len(segs); i++ {
			data, found, err := segs[i].read(offset, maxBytes, maxOffset, minOneBatch)
			if errors.Is(err, errSegmentClosed) {
				break // retry on a fresh snapshot
			}
			if err != nil || found {
				res.Records = data
				return res, l.readError(err)
			}
			if i == len(segs)-1 {
				return res, nil
			}
		}
		if len(segs) == 0 {
			return res, nil
		}
	}
	return ReadResult{}, fmt.Errorf("storage: read at %d kept racing with truncation", offset)
}

// floorSegment returns the index of the last segment whose base offset is
// at most offset, or 0.
func floorSegment(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > offset })
	return max(i-1, 0)
}

// OffsetForTimestamp finds the first batch whose max timestamp is >= ts
// (ListOffsets by timestamp) and returns the offset of the first record in
// it with timestamp >= ts and that record's timestamp. ok is false when no
// record has such a timestamp. Records below the log start offset are
// skipped. Errors: ErrClosed, ErrCorruptSegment, record decoding errors.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	for range readRetries {
		if l.closed.Load() {
			return 0, 0, false, ErrClosed
		}
		lso := l.logStartOffset.Load()
		segs := l.segments()
		retry := false
		for _, s := range segs {
			if s.maxTimestamp.Load() < ts {
				continue
			}
			offset, timestamp, ok, err = s.findOffsetByTimestamp(ts, lso)
			if errors.Is(err, errSegmentClosed) {
				retry = true
				break
			}
			if err != nil || ok {
				return offset, timestamp, ok, err
			}
		}
		if !retry {
			return 0, 0, false, nil
		}
	}
	return 0, 0, false, fmt.Errorf("storage: timestamp lookup kept racing with truncation")
}

// findOffsetByTimestamp is OffsetForTimestamp within the segment.
func (s *segment) findOffsetByTimestamp(ts, startOffset int64) (offset, timestamp int64, ok bool, err error) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return 0, 0, false, errSegmentClosed
	}
	size := s.size.Load()
	var pos int64
	if te, found := s.timeIndex.lookup(ts); found {
		rel := max(int64(te.RelativeOffset), startOffset-s.baseOffset)
		pos = int64(s.index.lookup(rel).Position)
	}
	for pos < size {
		h, err := s.readHeaderAt(pos, size)
		if err != nil {
			return 0, 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= startOffset {
			batch, err := s.readBatchAt(pos, h)
			if err != nil {
				return 0, 0, false, err
			}
			err = record.Records(batch, func(r record.Record) error {
				if r.Offset >= startOffset && r.Timestamp >= ts {
					offset, timestamp, ok = r.Offset, r.Timestamp, true
					return errStop
				}
				return nil
			})
			if ok {
				return offset, timestamp, true, nil
			}
			if err != nil {
				return 0, 0, false, fmt.Errorf("storage: %s at position %d: %w", s, pos, err)
			}
		}
		pos += int64(h.Size())
	}
	return 0, 0, false, nil
}

// errStop ends a record iteration early.
var errStop = errors.New("stop")

// MaxTimestamp returns the largest timestamp in the log and the offset of
// the record holding it (ListOffsets MAX_TIMESTAMP, KIP-734); ok is false for
// an empty log or one whose records carry no timestamp. When the record
// cannot be decoded the offset is the last offset of its batch.
func (l *Log) MaxTimestamp() (timestamp, offset int64, ok bool) {
	l.mu.Lock()
	var seg *segment
	timestamp = noTimestamp
	for _, s := range l.segments() {
		if ts := s.maxTimestamp.Load(); ts > timestamp {
			timestamp, offset, seg = ts, s.offsetOfMaxTimestamp.Load(), s
		}
	}
	l.mu.Unlock()
	if seg == nil {
		return noTimestamp, -1, false
	}
	if exact, err := seg.offsetOfTimestamp(offset, timestamp); err == nil {
		offset = exact
	}
	return timestamp, offset, true
}

// offsetOfTimestamp returns the offset of the first record with timestamp
// ts in the batch holding offset.
func (s *segment) offsetOfTimestamp(offset, ts int64) (int64, error) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return 0, errSegmentClosed
	}
	pos, h, found, err := s.findBatchLocked(offset, s.size.Load())
	if err != nil || !found {
		return 0, errors.Join(err, io.ErrUnexpectedEOF)
	}
	batch, err := s.readBatchAt(pos, h)
	if err != nil {
		return 0, err
	}
	exact := int64(-1)
	err = record.Records(batch, func(r record.Record) error {
		if r.Timestamp == ts {
			exact = r.Offset
			return errStop
		}
		return nil
	})
	if exact < 0 {
		return 0, errors.Join(err, io.ErrUnexpectedEOF)
	}
	return exact, nil
}

// Truncate removes every record at or above offset (a follower truncating
// to its leader's history). Used by replication. A batch holding offset is
// removed whole, so the log end offset becomes offset or the base offset of
// that batch, whichever is lower. An offset at or past the log end removes
// no record but drops the leader epochs that start at the log end (an
// epoch this replica assigned as a leader and wrote nothing in, not the
// history of the leader it truncates to, as Kafka's UnifiedLog.truncateTo
// does); one below the log start offset empties the log and restarts it
// there (TruncateFullyAndStartAt). Errors: ErrClosed, I/O errors.
func (l *Log) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return ErrClosed
	}
	leo := l.logEndOffset.Load()
	if offset >= leo {
		return l.truncateEpochsLocked(leo)
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	segs := l.segments()
	keep := sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > offset })
	if offset < l.logStartOffset.Load() || keep == 0 {
		return l.truncateFullyLocked(offset, min(offset, l.logStartOffset.Load()))
	}
	kept := append([]*segment(nil), segs[:keep]...)
	l.truncations++
	l.segs.Store(&kept)
	for _, s := range segs[keep:] {
		l.dirDirty = true
		if err := s.remove(); err != nil {
			l.logger.Error("removing truncated segment failed", "segment", s.String(), "err", err)
		}
	}
	next, err := kept[len(kept)-1].truncateTo(offset)
	if err != nil {
		return err
	}
	l.logEndOffset.Store(next)
	l.rollMovedLocked() // an older segment may be the active one now
	epochErr := l.truncateEpochsLocked(next)
	if l.recoveryPoint.Load() > next {
		l.recoveryPoint.Store(next)
		l.checkpointMoved()
	}
	if err := l.reloadProducersLocked(); err != nil {
		return errors.Join(epochErr, l.ioError(err))
	}
	if epochErr != nil {
		return epochErr
	}
	l.logger.Info("truncated log", "to_offset", offset, "log_end_offset", next, "previous_log_end_offset", leo, "segments_removed", len(segs)-keep)
	return nil
}

// TruncateFullyAndStartAt removes every segment and restarts the log empty
// at offset, which becomes the log start, log end and recovery point (a
// follower whose fetch offset fell below the leader's log start offset).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset, offset)
}

func (l *Log) truncateFullyLocked(offset, logStart int64) error {
	segs := l.segments()
	l.truncations++
	empty := []*segment{}
	l.segs.Store(&empty)
	l.dirDirty = true
	for _, s := range segs {
		if err := s.remove(); err != nil {
			l.logger.Error("removing segment failed", "segment", s.String(), "err", err)
		}
	}
	s, err := createSegment(l.files, l.dir, offset, l.cfg, l.now())
	if err != nil {
		return err
	}
	l.segs.Store(&[]*segment{s})
	l.logStartOffset.Store(logStart)
	l.logEndOffset.Store(offset)
	l.recoveryPoint.Store(offset)
	l.checkpointMoved()
	if err := l.truncateEpochsLocked(offset); err != nil {
		return err
	}
	if l.producers != nil {
		if err := l.producers.truncateFully(offset); err != nil {
			l.logger.Warn("removing producer snapshots failed", "err", err)
		}
	}
	l.logger.Info("truncated log fully", "start_offset", offset, "segments_removed", len(segs))
	return nil
}

// Close flushes and closes the files; later calls give ErrClosed.
func (l *Log) Close() error {
	ok, err := l.beginClose()
	if !ok {
		return ErrClosed
	}
	return errors.Join(err, l.endClose(true))
}

// closeDiscarding closes a log whose files are about to be deleted: as
// Close, without the producer snapshot and without flushing or syncing
// anything, since nothing of it is read again. Kafka's
// LogManager.asyncDelete likewise renames a deleted partition's dir
// without flushing its log. Errors: ErrClosed.
func (l *Log) closeDiscarding() error {
	ok, err := l.beginCloseSnapshot(false)
	if !ok {
		return ErrClosed
	}
	return errors.Join(err, l.endClose(false))
}

// beginClose stops writes and the background flusher, and writes the
// last time index entry and a producer snapshot; ok is false when the log
// was already closing. endClose finishes.
func (l *Log) beginClose() (ok bool, err error) { return l.beginCloseSnapshot(true) }

// beginCloseSnapshot is beginClose, writing the producer snapshot only
// when snapshot is true.
func (l *Log) beginCloseSnapshot(snapshot bool) (ok bool, err error) {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return false, nil
	}
	l.closing = true
	if fn := l.rollMoved.Load(); fn != nil {
		(*fn)() // to leave the Manager's roll schedule
	}
	// Unlike Kafka, the active segment gets no last time index entry
	// here: it is the active one again after a restart, which recomputes
	// its max timestamp from its batches after the last index entry, and
	// the entry would create a .timeindex file for each small log of a
	// node at every shutdown.
	if snapshot && l.producers != nil && l.closeSnapshotWorthLocked() {
		// A snapshot at the log end spares the next Open a replay.
		// Without it the next Open replays the log from an older one;
		// a failure of the disk takes the dir offline (Kafka's close
		// reports the IOException too), and Close then fails, so that
		// the log dir is not marked cleanly shut down.
		wrote, serr := l.producers.takeSnapshot(l.now(), l.logStartOffset.Load())
		if wrote {
			l.dirDirty = true
		}
		if serr = l.ioError(serr); errors.Is(serr, ErrResourceExhausted) {
			l.logger.Warn("writing producer snapshot at close failed: the next open replays more of the log", "err", serr)
		} else if serr != nil {
			err = serr
		}
	}
	l.mu.Unlock()

	close(l.done)
	l.wg.Wait()
	return true, err
}

// closeSnapshotBytes bounds the batches the next Open replays for a log
// closed without a producer snapshot.
const closeSnapshotBytes = 64 << 10

// closeSnapshotWorthLocked reports whether Close should write a producer
// snapshot: not when the next Open would replay no more than the active
// segment's first closeSnapshotBytes (the latest snapshot is at or past its
// base; with none, a log of one segment at offset 0). Kafka writes one at
// every close; at a node's shutdown that is a file created per partition
// (100,000 partitions: 26 s), where reading back a few batches per log at
// the next start costs little.
func (l *Log) closeSnapshotWorthLocked() bool {
	segs := l.segments()
	if len(segs) == 0 {
		return false
	}
	active := segs[len(segs)-1]
	if active.size.Load() > closeSnapshotBytes {
		return true
	}
	return l.producers.lastSnapshot() < active.baseOffset
}

// endClose flushes the log (with sync; without, the caller has made every
// file of it durable another way, syncfs(2), and the recovery point
// becomes the log end) and closes its files.
func (l *Log) endClose(sync bool) error {
	l.gate.enter()
	defer l.gate.exit()
	var err error
	if sync {
		err = l.flushInGate(0, true, true)
	} else {
		l.mu.Lock()
		l.recoveryPoint.Store(l.logEndOffset.Load())
		l.checkpointMoved()
		l.dirDirty, l.epochsUnsynced = false, false
		l.mu.Unlock()
	}
	l.closed.Store(true)
	l.mu.Lock()
	retired := l.retired
	l.retired = nil
	l.mu.Unlock()
	for _, s := range append(retired, l.segments()...) {
		err = errors.Join(err, s.close())
	}
	return err
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Warn("close before delete failed", "err", err)
	}
	if err := l.fsys.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("storage: delete %s: %w", l.dir, err)
	}
	return nil
}

// FS is the filesystem of the log's files (ManagerOptions.FS), for the
// files kept beside it, such as replication-offset-checkpoint.
func (l *Log) FS() vfs.FS { return l.fsys }

// syncDir fsyncs a directory so that file creations, renames and removals
// in it are durable.
func syncDir(fsys vfs.FS, dir string) error {
	if err := vfs.SyncPath(fsys, dir); err != nil {
		return fmt.Errorf("storage: fsync dir %s: %w", dir, err)
	}
	return nil
}

// FileSlice is a byte range of a segment file holding the whole batches a
// Read would return, for a fetch path that writes them to a socket with
// explicit offsets (sendfile, or pread into a pooled buffer), never moving
// the file's shared position. The file stays open until Release is called,
// even if its segment is closed or removed meanwhile; a truncation does not
// wait for it, and a reader then finds the file shorter than Length (the
// fetch writer fails that response's connection), as Kafka's fetch of a
// FileRecords slice would.
type FileSlice struct {
	File     *os.File
	Position int64 // bytes from the start of the file
	Length   int64 // bytes; zero when nothing is readable
	Release  func()
	// Data, when not nil, holds the Length bytes themselves and File is
	// nil: when the node's open files are at log.open.files.max, the
	// bytes are read now rather than holding one more descriptor for as
	// long as the response takes to write (a fetch of 100,000 partitions
	// would hold 100,000).
	Data []byte
}

// ReadSlice is Read without the copy (same arguments, offsets and errors):
// the batches stay in the segment file. A zero length slice has a no-op
// Release. Callers must call Release (once, and always): it keeps a file
// descriptor open.
func (l *Log) ReadSlice(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (FileSlice, ReadResult, error) {
	none := FileSlice{Release: func() {}}
	for range readRetries {
		if l.closed.Load() {
			return none, ReadResult{}, ErrClosed
		}
		leo := l.logEndOffset.Load()
		lso := l.logStartOffset.Load()
		segs := l.segments()
		res := ReadResult{LogStartOffset: lso, LogEndOffset: leo}
		if offset < lso || offset > leo {
			return none, res, fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, offset, lso, leo)
		}
		maxOffset = min(maxOffset, leo)
		if offset >= maxOffset || maxBytes <= 0 && !minOneBatch {
			// Nothing to read (a fetch past fetch.max.bytes or its read
			// budget): answered without opening a file, which past
			// log.open.files.max costs an open and a close.
			return none, res, nil
		}
		retry := false
		for i := floorSegment(segs, offset); i < len(segs) && !retry; i++ {
			s := segs[i]
			s.rw.RLock()
			if s.closed {
				s.rw.RUnlock()
				retry = true
				break
			}
			// One reference from the header scan to the end of the
			// slice's use: the slice holds the descriptor, not the
			// segment, so a truncation, retention or close need not
			// wait for a slow consumer (the reference keeps the file
			// open, even once removed). When files in use already
			// take the whole cap the bytes are copied instead.
			// A test filesystem's file is not a descriptor sendfile
			// can use (vfs.OSFile): copied too.
			full := l.files.full() || l.fsys != vfs.Default
			f, err := s.log.acquire()
			if err != nil {
				s.rw.RUnlock()
				if errors.Is(err, errSegmentClosed) {
					retry = true
					break
				}
				return none, res, l.readError(err)
			}
			pos, n, found, err := s.locateLocked(f, offset, maxBytes, maxOffset, minOneBatch)
			if err != nil || !found || n == 0 {
				s.rw.RUnlock()
				s.log.release()
				if err != nil || found {
					return none, res, l.readError(err)
				}
				continue
			}
			if full {
				data := make([]byte, n)
				_, err := fileReadAt(f, data, pos)
				s.rw.RUnlock()
				s.log.release()
				if err != nil {
					return none, res, l.readError(fmt.Errorf("storage: read %s at %d: %w", s, pos, err))
				}
				return FileSlice{Position: pos, Length: n, Release: func() {}, Data: data}, res, nil
			}
			s.rw.RUnlock()
			return FileSlice{File: vfs.OSFile(f), Position: pos, Length: n, Release: sync.OnceFunc(s.log.release)}, res, nil
		}
		if !retry {
			return none, res, nil
		}
	}
	return none, ReadResult{}, fmt.Errorf("storage: read at %d kept racing with truncation", offset)
}
