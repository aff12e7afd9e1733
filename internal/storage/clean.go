package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// Log compaction (Kafka's LogCleaner), for logs whose Config.Cleanup has
// Compact.
//
// A log is split at its cleaner checkpoint, the first dirty offset: below
// it is the clean section, already compacted; from it to the first
// uncleanable offset is the dirty section. Only closed segments are ever
// cleaned, and only those wholly below the last stable offset (BoundsFunc)
// whose records are all older than min.compaction.lag.ms. Nor is the
// segment holding the log's last batch, which counts as active when the
// active segment is empty (MaybeRoll rolled it by age): that batch stays
// whole, records included, as in Kafka's never-cleaned active segment, so
// that a fetch below the log end always finds a batch. A cleaning
//
//  1. walks the batch headers of the whole log to learn each producer's
//     last batch (whose header must survive, emptied if need be, so that
//     producer id, epoch and sequence are not lost when producer state is
//     rebuilt from the log) and the ranges of aborted transactions (from
//     the ABORT markers, which is what .txnindex records; the walk also
//     covers producers whose state expired);
//  2. maps each key of the dirty section to its last offset (offsetMap),
//     up to the number of keys log.cleaner.dedupe.buffer.size allows;
//  3. rewrites the segments from the first one up to where the map ends,
//     in groups whose total size fits segment.bytes (small segments merge),
//     keeping a record when it is the latest of its key (or above the
//     mapped range), dropping tombstones and transaction markers whose
//     delete horizon has passed, and aborted transactional data;
//  4. swaps each cleaned group in crash-safely: the output is written as
//     <base>.log.cleaned (plus index files), fsynced, renamed to
//     <base>.log.swap, the replaced segments' files are renamed to
//     .deleted, and the swap file becomes <base>.log. Open removes
//     .cleaned files and completes a .swap (see completeSwap), so a crash
//     at any point leaves either the old segments, or the cleaned one
//     followed by those old segments of the group it does not reach
//     (uncleaned, still valid);
//  5. moves the cleaner checkpoint to the end of the mapped range
//     (cleaner-offset-checkpoint, written by the Manager).
//
// A batch keeps its base offset, last offset delta, producer id and epoch,
// base sequence and partition leader epoch when rewritten; one whose
// records all go is dropped, except its producer's last batch while the
// producer is in the producer state (producer.id.expiration.ms has not
// expired it), which is kept as an empty batch (a header) so that the
// producer's epoch and sequence survive a rebuild of the producer state
// (Kafka keeps the last batches of its active producers for the same
// reason). Once the producer expires, the next cleaning drops it. A group of which nothing survives is swapped for an empty
// segment: a zero-length .log with empty index files, named after the
// group's base offset, as Kafka does. Such a segment keeps the offsets up
// to the next segment's base for itself, so that the log start offset,
// segment lookups and later groupings stay as they were; reads at an
// offset in it go on to the next segment, and retention.ms takes its
// file's modification time, which the cleaner sets to that of the last
// segment it replaced (Kafka's LogCleaner does the same). A group that is
// one empty segment already is left alone.
//
// The first time a batch holding a kept tombstone (or a removable
// transaction marker) is cleaned, its delete horizon is set to now +
// delete.retention.ms (KIP-534: attribute bit 6, the horizon in the base
// timestamp); a later cleaning after the horizon removes them, and a batch
// rewritten without tombstones loses its horizon. The earliest horizon
// still ahead is kept in memory (Log.deleteHorizon) so that the log is
// cleaned again when it passes; a reopened log finds it with one walk of
// its batch headers before its first cleaning (findDeleteHorizon).
//
// The cleaner's reads and writes of segments go through a throttler
// (log.cleaner.io.max.bytes.per.second, throttle.go) shared by the
// Manager's cleanings.

// ErrCleaningAborted reports a cleaning that gave up because the segments
// it was rewriting changed under it (retention, DeleteRecords, truncation,
// close). Nothing is lost; the next cleaning starts over.
var ErrCleaningAborted = errors.New("storage: cleaning aborted")

// DefaultDedupeBufferSize is log.cleaner.dedupe.buffer.size's default
// (128 MiB).
const DefaultDedupeBufferSize = 128 << 20

// MaxKeysForBuffer is the number of keys one cleaning maps with a dedupe
// buffer of bufferSize bytes: 24 bytes a key at a 0.9 load factor, as
// Kafka counts.
func MaxKeysForBuffer(bufferSize int64) int {
	if bufferSize <= 0 {
		bufferSize = DefaultDedupeBufferSize
	}
	return int(float64(bufferSize/offsetMapEntryBytes) * dedupeLoadFactor)
}

// CleanOptions are the arguments of Log.Clean.
type CleanOptions struct {
	// MaxKeys bounds the keys one cleaning maps; the dirty section is
	// cleaned up to where the map filled and the rest waits for the next
	// cleaning. Zero means MaxKeysForBuffer(DefaultDedupeBufferSize).
	MaxKeys int
	// Force cleans whatever is cleanable even when the dirty ratio is
	// below min.cleanable.dirty.ratio.
	Force bool

	// throttle bounds the cleaning's I/O (the Manager's, nil: none).
	throttle *throttler
}

// CleanResult describes one Clean.
type CleanResult struct {
	// FirstDirtyOffset and EndOffset bound the dirty offsets that were
	// mapped, [FirstDirtyOffset, EndOffset); EndOffset is the new cleaner
	// checkpoint.
	FirstDirtyOffset, EndOffset int64
	// Segments rewritten, and Groups: the cleaned segments that replaced
	// them (fewer when small segments merged).
	Segments, Groups int
	// Keys mapped from the dirty section.
	Keys int
	// BytesRead and BytesWritten of the rewritten segments.
	BytesRead, BytesWritten int64
	// RecordsRead and RecordsKept of the rewritten segments.
	RecordsRead, RecordsKept int64
	// EmptyBatches kept as headers only (producers' last batches).
	EmptyBatches int
	// EmptySegments: groups of which nothing survived, swapped for an
	// empty segment (counted in Groups too).
	EmptySegments int
	Duration      time.Duration
}

// cleanPlan is what a cleaning would do now.
type cleanPlan struct {
	segs       []*segment // snapshot of the segment list
	end        int        // segs[:end] may be cleaned
	dirtyFrom  int        // index of the first segment with dirty records
	firstDirty int64
	cleanBytes int64 // bytes of segs[:dirtyFrom]
	dirtyBytes int64 // bytes of segs[dirtyFrom:end]
	needNow    bool  // max.compaction.lag.ms passed for dirty records
	horizonDue bool  // a kept tombstone or marker's delete horizon passed
}

// ratio is the dirty ratio of the cleanable part of the log.
func (p *cleanPlan) ratio() float64 {
	if t := p.cleanBytes + p.dirtyBytes; t > 0 {
		return float64(p.dirtyBytes) / float64(t)
	}
	return 0
}

// plan returns what a cleaning would cover now; ok is false when the log is
// not compacted, has no bounds or is closing.
func (l *Log) plan(now time.Time) (p cleanPlan, cfg Config, ok bool) {
	l.mu.Lock()
	cfg = l.cfg
	closing := l.closing
	l.mu.Unlock()
	if closing || !cfg.Cleanup.Compact {
		// The cleaner asks every log each log.cleaner.backoff.ms: a
		// log that is not compacted answers without its bounds (its
		// partition's high-watermark and LSO).
		return p, cfg, false
	}
	_, lso, bounded := l.boundsNow()
	if !bounded {
		return p, cfg, false
	}
	p.segs = l.segments()
	logStart := l.logStartOffset.Load()
	p.firstDirty = l.cleanerOffset.Load()
	if p.firstDirty < logStart || p.firstDirty > l.logEndOffset.Load() {
		p.firstDirty = logStart
	}
	nowMs := now.UnixMilli()
	// The segment holding the log's last batch counts as active: it is
	// never cleaned. Kafka rolls only on append, so its last batch is
	// always in the active segment, which it never cleans; Samsa's
	// MaybeRoll rolls a quiet partition by age, leaving an empty active
	// segment, and the cleaner must not remove that batch either (a
	// tombstone past its delete horizon would go), or fetches between
	// the last surviving record and the log end would find nothing.
	active := len(p.segs) - 1
	for active > 0 && p.segs[active].size.Load() == 0 {
		active--
	}
	for i := 0; i < active; i++ {
		s := p.segs[i]
		if p.segs[i+1].baseOffset > lso {
			break
		}
		if lag := cfg.Cleanup.MinCompactionLag; lag > 0 && s.maxTimestamp.Load() > nowMs-lag.Milliseconds() {
			break
		}
		p.end = i + 1
	}
	p.dirtyFrom = p.end
	for i := 0; i < p.end; i++ {
		if p.segs[i+1].baseOffset > p.firstDirty {
			p.dirtyFrom = i
			break
		}
	}
	for i, s := range p.segs[:p.end] {
		if i < p.dirtyFrom {
			p.cleanBytes += s.size.Load()
		} else {
			p.dirtyBytes += s.size.Load()
		}
	}
	if lag := cfg.Cleanup.MaxCompactionLag; lag > 0 && p.dirtyBytes > 0 {
		// The oldest dirty batch: the first of the first dirty segment
		// that has one (a cleaned segment may be empty).
		for _, s := range p.segs[p.dirtyFrom:p.end] {
			if ts, ok := firstBatchTimestamp(s); ok {
				p.needNow = ts >= 0 && nowMs-ts > lag.Milliseconds()
				break
			}
		}
	}
	if p.end > 0 {
		horizon := l.deleteHorizon.Load()
		if horizon == horizonUnknown {
			horizon = l.findDeleteHorizon(p.segs[:len(p.segs)-1])
		}
		p.horizonDue = horizon <= nowMs
	}
	return p, cfg, true
}

// horizonUnknown is Log.deleteHorizon of a log opened and not yet looked
// at by the cleaner: its batches may hold delete horizons written before
// the restart.
const horizonUnknown = math.MinInt64

// findDeleteHorizon walks the batch headers of segs (the closed segments,
// where cleanings write horizons) for the earliest delete horizon, passed
// or not, and records it in Log.deleteHorizon (math.MaxInt64 when there
// is none), unless a cleaning recorded one meanwhile. A segment retired
// under the walk leaves the horizon unknown, for the next plan to try
// again; a corrupt one is logged and skipped (the cleaning that reads it
// fails on it anyway).
func (l *Log) findDeleteHorizon(segs []*segment) int64 {
	found := int64(math.MaxInt64)
	for _, s := range segs {
		err := s.walkHeaders(func(_ int64, h record.Header) error {
			if h.Attributes&record.DeleteHorizonBit != 0 {
				found = min(found, h.BaseTimestamp)
			}
			return nil
		})
		if errors.Is(err, ErrCleaningAborted) {
			return math.MaxInt64
		}
		if err != nil {
			l.logger.Warn("looking for delete horizons failed", "segment", s.String(), "err", err)
		}
	}
	if !l.deleteHorizon.CompareAndSwap(horizonUnknown, found) {
		return l.deleteHorizon.Load()
	}
	if found != math.MaxInt64 {
		l.logger.Info("found delete horizon", "delete_horizon", time.UnixMilli(found).UTC())
	}
	return found
}

// due reports whether the plan is worth a cleaning under minRatio.
func (p *cleanPlan) due(minRatio float64) bool {
	if p.end == 0 {
		return false
	}
	return p.dirtyBytes > 0 && (p.needNow || p.ratio() >= minRatio) || p.horizonDue
}

// firstBatchTimestamp reads the max timestamp of a segment's first batch.
func firstBatchTimestamp(s *segment) (int64, bool) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed || s.size.Load() < record.HeaderSize {
		return 0, false
	}
	h, err := s.readHeaderAt(0, s.size.Load())
	if err != nil {
		return 0, false
	}
	return h.MaxTimestamp, true
}

// CleanPriority reports whether the log needs cleaning now and how badly:
// its dirty ratio, or +Inf when max.compaction.lag.ms has passed. ok is
// false when the log is not compacted, has no bounds, or is not due.
func (l *Log) CleanPriority() (priority float64, ok bool) {
	p, cfg, ok := l.plan(l.now())
	if !ok || !p.due(cfg.Cleanup.MinCleanableDirtyRatio) {
		return 0, false
	}
	if p.needNow || p.horizonDue {
		return math.Inf(1), true
	}
	return p.ratio(), true
}

// CleanerCheckpoint is the log's first dirty offset: below it the log is
// compacted. -1 when no cleaning happened and none was checkpointed.
func (l *Log) CleanerCheckpoint() int64 { return l.cleanerOffset.Load() }

// SetCleanerCheckpoint sets the first dirty offset (from
// cleaner-offset-checkpoint).
func (l *Log) SetCleanerCheckpoint(offset int64) {
	l.cleanerOffset.Store(offset)
	l.checkpointMoved()
}

// Clean compacts the log once (see the comment at the top of clean.go) when
// it is due, or whenever something is cleanable with opts.Force. It returns
// a zero result when there was nothing to do. Errors: ErrCleaningAborted,
// ErrClosed, ctx's error, ErrCorruptSegment and record errors for bad
// segment data, I/O errors; the log is unchanged by a failed group, and
// groups swapped before a failure stay cleaned. Not safe to call
// concurrently with itself on one log (the Manager runs one cleaner);
// safe with appends, reads, retention and truncation.
func (l *Log) Clean(ctx context.Context, opts CleanOptions) (CleanResult, error) {
	start := time.Now()
	now := l.now()
	p, cfg, ok := l.plan(now)
	if !ok || p.end == 0 || (!opts.Force && !p.due(cfg.Cleanup.MinCleanableDirtyRatio)) {
		return CleanResult{}, nil
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = MaxKeysForBuffer(0)
	}
	c := &cleaning{
		l: l, ctx: ctx, cfg: cfg, now: now.UnixMilli(),
		om:         newOffsetMap(opts.MaxKeys),
		active:     l.producers.active(now),
		txnKept:    map[int64]bool{},
		minHorizon: math.MaxInt64,
		throttle:   opts.throttle,
	}
	c.res.FirstDirtyOffset = p.firstDirty
	var err error
	if c.tx, err = scanProducers(ctx, p.segs); err != nil {
		return c.res, err
	}
	if err := c.buildOffsetMap(p); err != nil {
		return c.res, err
	}
	endOffset := c.om.latest + 1
	c.res.EndOffset, c.res.Keys = endOffset, c.om.len()

	k := 0
	for k < p.end && p.segs[k].baseOffset < endOffset {
		k++
	}
	i := 0
	for _, g := range groupSegments(p.segs[:k+1], cfg) {
		if err := ctx.Err(); err != nil {
			return c.res, err
		}
		i += len(g)
		if err := c.cleanGroup(g, p.segs[i]); err != nil {
			return c.res, err
		}
	}
	l.cleanerOffset.Store(endOffset)
	l.checkpointMoved()
	l.deleteHorizon.Store(c.minHorizon)
	c.res.Duration = time.Since(start)
	l.logger.Info("cleaned log",
		"first_dirty_offset", c.res.FirstDirtyOffset, "end_offset", endOffset, "keys", c.res.Keys,
		"segments", c.res.Segments, "groups", c.res.Groups, "empty_segments", c.res.EmptySegments,
		"bytes_read", c.res.BytesRead, "bytes_written", c.res.BytesWritten,
		"records_read", c.res.RecordsRead, "records_kept", c.res.RecordsKept,
		"duration", c.res.Duration)
	return c.res, nil
}

// groupSegments splits segs[:len(segs)-1] into runs to clean into one
// segment each: total .log size within segment.bytes, index sizes within
// segment.index.bytes, offsets within 2³¹ of the group's base (Kafka's
// groupSegmentsBySize). The last element of segs is the segment after the
// cleaned ones (its base bounds the last group's offsets).
func groupSegments(segs []*segment, cfg Config) [][]*segment {
	var groups [][]*segment
	for i := 0; i+1 < len(segs); {
		g := []*segment{segs[i]}
		size := segs[i].size.Load()
		idx := int64(segs[i].index.len() * offsetEntrySize)
		tidx := int64(segs[i].timeIndex.len() * timeEntrySize)
		j := i + 1
		for ; j+1 < len(segs); j++ {
			s := segs[j]
			si := int64(s.index.len() * offsetEntrySize)
			st := int64(s.timeIndex.len() * timeEntrySize)
			if size+s.size.Load() > cfg.SegmentBytes ||
				idx+si > int64(cfg.SegmentIndexBytes) || tidx+st > int64(cfg.SegmentIndexBytes) ||
				segs[j+1].baseOffset-1-g[0].baseOffset > math.MaxInt32 {
				break
			}
			g = append(g, s)
			size, idx, tidx = size+s.size.Load(), idx+si, tidx+st
		}
		groups = append(groups, g)
		i = j
	}
	return groups
}

// offsetRange is [first, last], inclusive.
type offsetRange struct{ first, last int64 }

// txnState is what the header walk learns of producers and transactions.
type txnState struct {
	// lastBatch maps a producer id to the base offset of its last batch.
	lastBatch map[int64]int64
	// aborted maps a producer id to the offset ranges of its aborted
	// transactions, first data batch to ABORT marker, in order.
	aborted map[int64][]offsetRange
}

// isAborted reports whether a transactional batch of pid at offset belongs
// to an aborted transaction.
func (t *txnState) isAborted(pid, offset int64) bool {
	for _, r := range t.aborted[pid] {
		if offset >= r.first && offset <= r.last {
			return true
		}
	}
	return false
}

// scanProducers walks the batch headers of every segment (reading only the
// control batches whole) for each producer's last batch and the aborted
// transactions. A cleaned segment has no .txnindex: the aborted records it
// would list are gone from it.
func scanProducers(ctx context.Context, segs []*segment) (*txnState, error) {
	t := &txnState{lastBatch: map[int64]int64{}, aborted: map[int64][]offsetRange{}}
	open := map[int64]int64{} // producer id → first offset of its open transaction
	for _, s := range segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.walkHeaders(func(pos int64, h record.Header) error {
			if h.ProducerID < 0 {
				return nil
			}
			t.lastBatch[h.ProducerID] = h.BaseOffset
			if !h.IsTransactional() {
				return nil
			}
			if !h.IsControl() {
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = h.BaseOffset
				}
				return nil
			}
			abort, err := s.isAbortMarker(pos, h)
			if err != nil {
				return err
			}
			if first, ok := open[h.ProducerID]; ok && abort {
				t.aborted[h.ProducerID] = append(t.aborted[h.ProducerID], offsetRange{first, h.LastOffset()})
			}
			delete(open, h.ProducerID)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// walkHeaders calls fn with the position and header of each batch of the
// segment, reading only headers. A closed segment gives ErrCleaningAborted.
func (s *segment) walkHeaders(fn func(pos int64, h record.Header) error) error {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return ErrCleaningAborted
	}
	size := s.size.Load()
	for pos := int64(0); pos < size; {
		h, err := s.readHeaderAt(pos, size)
		if err != nil {
			return err
		}
		if err := fn(pos, h); err != nil {
			return err
		}
		pos += int64(h.Size())
	}
	return nil
}

// isAbortMarker reads the control batch at pos and reports whether it is an
// ABORT marker. An empty control batch (a marker the cleaner emptied) is
// not. Requires rw.
func (s *segment) isAbortMarker(pos int64, h record.Header) (bool, error) {
	if h.NumRecords == 0 {
		return false, nil
	}
	b, err := s.readBatchAt(pos, h)
	if err != nil {
		return false, err
	}
	abort := false
	err = record.Records(b, func(r record.Record) error {
		t, err := record.ParseControlKey(r.Key)
		abort = err == nil && t == record.ControlAbort
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, fmt.Errorf("storage: control batch at %d of %s: %w", h.BaseOffset, s, err)
	}
	return abort, nil
}

// cleaning is the state of one Clean.
type cleaning struct {
	l   *Log
	ctx context.Context
	cfg Config
	now int64 // milliseconds
	om  *offsetMap
	tx  *txnState
	// active holds the producers whose state has not expired: only their
	// last batches are kept, emptied if need be.
	active map[int64]bool
	// txnKept marks producers whose current transaction kept data in
	// this pass: its COMMIT marker must stay.
	txnKept    map[int64]bool
	minHorizon int64 // earliest future delete horizon written
	throttle   *throttler
	res        CleanResult
	kept       []record.Record // scratch
}

// checkBatch turns a ScanSegment callback's batch into an error when it is
// torn or corrupt.
func checkBatch(path string, b SegmentBatch) error {
	if b.Err != nil {
		return fmt.Errorf("%w: %s at position %d: %w", ErrCorruptSegment, path, b.Position, b.Err)
	}
	if !b.CRCValid {
		return fmt.Errorf("%w: %s at position %d: CRC mismatch", ErrCorruptSegment, path, b.Position)
	}
	return nil
}

// buildOffsetMap maps the keys of the dirty section, setting om.latest to
// the last offset covered.
func (c *cleaning) buildOffsetMap(p cleanPlan) error {
	first := p.firstDirty
	c.om.latest = first - 1
	full := false
	for _, s := range p.segs[p.dirtyFrom:p.end] {
		path := s.path(logSuffix)
		_, err := scanSegment(c.l.fsys, path, func(b SegmentBatch) error {
			if err := checkBatch(path, b); err != nil {
				return err
			}
			if err := c.ctx.Err(); err != nil {
				return err
			}
			h := &b.Header
			if h.LastOffset() < first {
				return nil
			}
			if err := c.throttle.maybeThrottle(c.ctx, int64(len(b.Batch))); err != nil {
				return err
			}
			if !h.IsControl() && !(h.IsTransactional() && c.tx.isAborted(h.ProducerID, h.BaseOffset)) {
				err := record.Records(b.Batch, func(r record.Record) error {
					if r.Key == nil || r.Offset < first {
						return nil
					}
					if !c.om.put(r.Key, r.Offset) {
						return errStop
					}
					return nil
				})
				if errors.Is(err, errStop) {
					full = true
					return errStop
				}
				if err != nil {
					return fmt.Errorf("%w: %s at position %d: %w", ErrCorruptSegment, path, b.Position, err)
				}
			}
			c.om.latest = max(c.om.latest, h.LastOffset())
			return nil
		})
		if errors.Is(err, errStop) {
			break
		}
		if errors.Is(err, os.ErrNotExist) {
			return ErrCleaningAborted
		}
		if err != nil {
			return err
		}
	}
	if !full && p.end < len(p.segs) && p.dirtyFrom < p.end {
		// Offsets may have gaps: the map covers up to the next segment.
		c.om.latest = p.segs[p.end].baseOffset - 1
	}
	if full && c.om.latest < first {
		return fmt.Errorf("storage: log.cleaner.dedupe.buffer.size too small: %d keys do not cover one batch at offset %d", c.om.maxEntries, first)
	}
	return nil
}

// cleanGroup rewrites group into one cleaned segment and swaps it in. next
// is the segment after the cleaned ones.
func (c *cleaning) cleanGroup(group []*segment, next *segment) error {
	l := c.l
	base := group[0].baseOffset
	w, err := createCleaned(l.fsys, l.dir, base, int64(c.cfg.IndexIntervalBytes))
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			w.discard()
		}
	}()
	for _, s := range group {
		path := s.path(logSuffix)
		size := s.size.Load()
		_, err := scanSegment(c.l.fsys, path, func(b SegmentBatch) error {
			if err := checkBatch(path, b); err != nil {
				return err
			}
			if err := c.ctx.Err(); err != nil {
				return err
			}
			if b.Position >= size {
				return errStop // appended past the snapshot (cannot happen to a closed segment)
			}
			if err := c.throttle.maybeThrottle(c.ctx, int64(len(b.Batch))); err != nil {
				return err
			}
			out, err := c.filter(b.Batch, b.Header)
			if err != nil {
				return fmt.Errorf("storage: cleaning %s at position %d: %w", path, b.Position, err)
			}
			if out == nil {
				return nil
			}
			h, err := record.ParseHeader(out)
			if err != nil {
				return err
			}
			if err := w.write(out, h); err != nil {
				return err
			}
			return c.throttle.maybeThrottle(c.ctx, int64(len(out)))
		})
		if errors.Is(err, os.ErrNotExist) {
			return ErrCleaningAborted
		}
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		c.res.BytesRead += size
	}
	last := group[len(group)-1]
	if w.pos == 0 && len(group) == 1 && last.size.Load() == 0 {
		return nil // an empty segment alone: nothing changes
	}
	// The cleaned segment keeps the last replaced segment's modification
	// time, which retention.ms goes by when it holds no timestamp (empty),
	// as Kafka's cleaner does.
	fi, err := l.fsys.Stat(last.path(logSuffix))
	if errors.Is(err, os.ErrNotExist) {
		return ErrCleaningAborted
	}
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := w.finish(fi.ModTime()); err != nil {
		return err
	}
	if err := l.replaceSegments(group, w, next); err != nil {
		return err
	}
	ok = true
	c.res.Segments += len(group)
	c.res.Groups++
	if w.pos == 0 {
		c.res.EmptySegments++
	}
	c.res.BytesWritten += w.pos
	return nil
}

// filter returns what of one batch stays: the batch itself, a rebuilt
// batch, an empty batch (header only: the last batch of a producer still
// in the producer state, so that its epoch and sequence survive), or nil.
func (c *cleaning) filter(batch []byte, h record.Header) ([]byte, error) {
	hasHorizon := h.Attributes&record.DeleteHorizonBit != 0
	horizonPassed := hasHorizon && h.BaseTimestamp <= c.now
	keepHeader := h.ProducerID >= 0 && c.active[h.ProducerID] && c.tx.lastBatch[h.ProducerID] == h.BaseOffset
	empty := func() ([]byte, error) {
		if !keepHeader {
			return nil, nil
		}
		c.res.EmptyBatches++
		return record.Build(record.Spec{
			BaseOffset:           h.BaseOffset,
			PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			LogAppendTime:        h.IsLogAppendTime(),
			Transactional:        h.IsTransactional(),
			Control:              h.IsControl(),
			BaseTimestamp:        h.MaxTimestamp,
			MaxTimestamp:         h.MaxTimestamp,
			ProducerID:           h.ProducerID,
			ProducerEpoch:        h.ProducerEpoch,
			BaseSequence:         h.BaseSequence,
			LastOffsetDelta:      h.LastOffsetDelta,
		}, nil)
	}
	c.res.RecordsRead += int64(h.NumRecords)

	if h.IsControl() {
		// A marker can go once its transaction kept no data and its
		// delete horizon passed (Kafka: never before the data is gone).
		abort := false
		if h.NumRecords > 0 {
			err := record.Records(batch, func(r record.Record) error {
				t, err := record.ParseControlKey(r.Key)
				abort = err == nil && t == record.ControlAbort
				return errStop
			})
			if err != nil && !errors.Is(err, errStop) {
				return nil, err
			}
		}
		removable := abort || !c.txnKept[h.ProducerID]
		delete(c.txnKept, h.ProducerID)
		switch {
		case removable && horizonPassed:
			return empty()
		case removable && !hasHorizon:
			c.res.RecordsKept += int64(h.NumRecords)
			return c.rebuild(batch, h, c.now+c.cfg.Cleanup.DeleteRetention.Milliseconds())
		}
		c.noteHorizon(h, hasHorizon)
		c.res.RecordsKept += int64(h.NumRecords)
		return batch, nil
	}
	if h.IsTransactional() && c.tx.isAborted(h.ProducerID, h.BaseOffset) {
		return empty()
	}

	c.kept = c.kept[:0]
	tombstones := false
	retainDeletes := !horizonPassed
	err := record.Records(batch, func(r record.Record) error {
		keep := false
		switch {
		case r.Offset > c.om.latest:
			keep = true
		case r.Key == nil:
			// A keyless record has no place in a compacted log.
		case r.Offset >= c.om.get(r.Key):
			keep = r.Value != nil || retainDeletes
		}
		if keep {
			tombstones = tombstones || r.Value == nil
			c.kept = append(c.kept, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.res.RecordsKept += int64(len(c.kept))
	if h.IsTransactional() && len(c.kept) > 0 {
		c.txnKept[h.ProducerID] = true
	}
	switch {
	case len(c.kept) == 0:
		return empty()
	case len(c.kept) == int(h.NumRecords) && tombstones == hasHorizon:
		if tombstones {
			c.noteHorizon(h, true)
		}
		return batch, nil
	}
	// A batch keeps a delete horizon only while it holds tombstones, so
	// that a horizon found in the log (findDeleteHorizon) means work.
	horizon := int64(-1)
	switch {
	case tombstones && hasHorizon:
		horizon = h.BaseTimestamp
	case tombstones:
		horizon = c.now + c.cfg.Cleanup.DeleteRetention.Milliseconds()
	}
	return c.rebuildRecords(h, c.kept, horizon)
}

// noteHorizon records the delete horizon of a batch kept with tombstones or
// a removable marker, so that the log is cleaned again once it passes.
func (c *cleaning) noteHorizon(h record.Header, hasHorizon bool) {
	if hasHorizon && h.BaseTimestamp > c.now {
		c.minHorizon = min(c.minHorizon, h.BaseTimestamp)
	}
}

// rebuild re-encodes every record of batch with a delete horizon.
func (c *cleaning) rebuild(batch []byte, h record.Header, horizon int64) ([]byte, error) {
	c.kept = c.kept[:0]
	if err := record.Records(batch, func(r record.Record) error {
		c.kept = append(c.kept, r)
		return nil
	}); err != nil {
		return nil, err
	}
	return c.rebuildRecords(h, c.kept, horizon)
}

// rebuildRecords builds a batch holding recs with h's identity (base
// offset, last offset delta, producer, sequence, leader epoch, codec,
// timestamp type, flags). horizon, when not negative, is the delete
// horizon to store (KIP-534); record timestamps are kept exactly.
func (c *cleaning) rebuildRecords(h record.Header, recs []record.Record, horizon int64) ([]byte, error) {
	base := recs[0].Timestamp
	if horizon >= 0 {
		base = horizon
		if horizon > c.now {
			c.minHorizon = min(c.minHorizon, horizon)
		}
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(recs[i].Offset - h.BaseOffset)
		recs[i].TimestampDelta = recs[i].Timestamp - base
	}
	return record.Build(record.Spec{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Codec:                h.Codec(),
		LogAppendTime:        h.IsLogAppendTime(),
		Transactional:        h.IsTransactional(),
		Control:              h.IsControl(),
		BaseTimestamp:        base,
		MaxTimestamp:         h.MaxTimestamp,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		LastOffsetDelta:      h.LastOffsetDelta,
		DeleteHorizon:        horizon >= 0,
	}, recs)
}

// cleanedWriter writes a cleaned segment: <base>.log.cleaned with its
// .index.cleaned and .timeindex.cleaned, building the indexes as Append
// and recovery do.
type cleanedWriter struct {
	fsys     vfs.FS
	dir      string
	base     int64
	interval int64
	f        vfs.File
	w        *bufio.Writer

	pos, sinceIndex      int64
	maxTs, offsetOfMaxTs int64
	entries              []OffsetEntry
	tentries             []TimeEntry
}

// cleanedName is the file name of a cleaned segment's file with suffix.
func cleanedName(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentName(base)+suffix+cleanedSuffix)
}

func createCleaned(fsys vfs.FS, dir string, base, interval int64) (*cleanedWriter, error) {
	f, err := fsys.OpenFile(cleanedName(dir, base, logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: log directory %s is gone", ErrCleaningAborted, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: create cleaned segment: %w", err)
	}
	return &cleanedWriter{fsys: fsys, dir: dir, base: base, interval: interval, f: f, w: bufio.NewWriterSize(f, 1<<20),
		maxTs: noTimestamp, offsetOfMaxTs: base}, nil
}

func (w *cleanedWriter) rel(offset int64) int32 { return int32(offset - w.base) }

func (w *cleanedWriter) write(b []byte, h record.Header) error {
	if h.MaxTimestamp > w.maxTs {
		w.maxTs, w.offsetOfMaxTs = h.MaxTimestamp, h.LastOffset()
	}
	if w.sinceIndex > w.interval {
		w.entries = append(w.entries, OffsetEntry{RelativeOffset: w.rel(h.LastOffset()), Position: int32(w.pos)})
		if n := len(w.tentries); w.maxTs >= 0 && (n == 0 || w.maxTs > w.tentries[n-1].Timestamp) {
			w.tentries = append(w.tentries, TimeEntry{Timestamp: w.maxTs, RelativeOffset: w.rel(w.offsetOfMaxTs)})
		}
		w.sinceIndex = 0
	}
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("storage: write cleaned segment: %w", err)
	}
	w.sinceIndex += int64(len(b))
	w.pos += int64(len(b))
	return nil
}

// finish writes the index files and fsyncs all three. The .log gets
// modification time mtime. A writer that wrote nothing leaves an empty
// segment: a zero-length .log and empty index files.
func (w *cleanedWriter) finish(mtime time.Time) error {
	if n := len(w.tentries); w.maxTs >= 0 && (n == 0 || w.maxTs > w.tentries[n-1].Timestamp) {
		w.tentries = append(w.tentries, TimeEntry{Timestamp: w.maxTs, RelativeOffset: w.rel(w.offsetOfMaxTs)})
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("storage: write cleaned segment: %w", err)
	}
	if err := w.fsys.Chtimes(w.f.Name(), time.Time{}, mtime); err != nil {
		return fmt.Errorf("storage: cleaned segment: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("storage: fsync cleaned segment: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	for _, x := range []struct {
		suffix string
		data   []byte
	}{
		{indexSuffix, EncodeOffsetIndex(nil, w.entries)},
		{timeIndexSuffix, EncodeTimeIndex(nil, w.tentries)},
	} {
		if err := writeSynced(w.fsys, cleanedName(w.dir, w.base, x.suffix), x.data); err != nil {
			return err
		}
	}
	return nil
}

// writeSynced writes a file and fsyncs it.
func writeSynced(fsys vfs.FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: write %s: %w", path, err)
	}
	return nil
}

// discard removes the cleaned files of an abandoned cleaning.
func (w *cleanedWriter) discard() {
	if w.f != nil {
		w.f.Close()
	}
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		w.fsys.Remove(cleanedName(w.dir, w.base, suf))
	}
}

// errSwapIncomplete: replaceSegments failed once the files began to move;
// the log's files are between the old segments and the cleaned one until
// the next Open completes the swap, so the cleaner takes the dir offline
// whatever the I/O error was (a lack of space or descriptors included).
var errSwapIncomplete = errors.New("storage: swap of a cleaned segment incomplete until restart")

// replaceSegments swaps the cleaned segment written by w in for olds (a run
// of closed segments of the log, next being the segment after them),
// crash-safely: cleaned → .swap, olds → .deleted, .swap → final names.
// It gives ErrCleaningAborted, changing nothing, when olds are no longer
// in the log as they were.
func (l *Log) replaceSegments(olds []*segment, w *cleanedWriter, next *segment) error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	segs := l.segments()
	at := -1
	for i, s := range segs {
		if s == olds[0] {
			at = i
			break
		}
	}
	if at < 0 || at+len(olds) >= len(segs) || segs[at+len(olds)] != next {
		l.mu.Unlock()
		return ErrCleaningAborted
	}
	for i, s := range olds {
		if segs[at+i] != s {
			l.mu.Unlock()
			return ErrCleaningAborted
		}
	}
	base := w.base
	final := func(suf string) string { return filepath.Join(l.dir, segmentName(base)+suf) }
	testHookSwap("cleaned")
	// 1. cleaned → swap: from here recovery completes the replacement.
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := l.fsys.Rename(cleanedName(l.dir, base, suf), final(suf)+swapSuffix); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("%w: %w", errSwapIncomplete, err)
		}
	}
	if err := syncDir(l.fsys, l.dir); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", errSwapIncomplete, err)
	}
	testHookSwap("swap")
	// 2. olds → .deleted; 3. swap → final.
	var deleted []string
	err := func() error {
		for _, s := range olds {
			paths, err := renameDeleted(s)
			if err != nil {
				return err
			}
			deleted = append(deleted, paths...)
		}
		testHookSwap("deleted")
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := l.fsys.Rename(final(suf)+swapSuffix, final(suf)); err != nil {
				return fmt.Errorf("storage: swap cleaned segment: %w", err)
			}
		}
		if err := syncDir(l.fsys, l.dir); err != nil {
			return err
		}
		testHookSwap("final")
		return nil
	}()
	if err != nil {
		// The old segments stay in use through their open files; the
		// next Open completes the swap.
		l.mu.Unlock()
		l.logger.Error("swapping in cleaned segment failed; restart completes it", "segment", final(logSuffix), "err", err)
		return fmt.Errorf("%w: %w", errSwapIncomplete, err)
	}
	s, err := openSegmentFiles(l.files, l.dir, base, l.cfg, l.now())
	if err == nil {
		var fi os.FileInfo
		if fi, err = s.log.Stat(); err == nil {
			s.size.Store(fi.Size())
			if lerr := s.loadIndexes(next.baseOffset, false, int64(l.cfg.IndexIntervalBytes), true, true); lerr != nil {
				_, err = l.recoverSegment(s, next.baseOffset)
			}
		}
		if err != nil {
			s.closeFiles()
		}
	}
	if err != nil {
		l.mu.Unlock()
		l.logger.Error("opening cleaned segment failed; restart completes the swap", "segment", final(logSuffix), "err", err)
		return fmt.Errorf("%w: %w", errSwapIncomplete, err)
	}
	updated := make([]*segment, 0, len(segs)-len(olds)+1)
	updated = append(updated, segs[:at]...)
	updated = append(updated, s)
	updated = append(updated, segs[at+len(olds):]...)
	l.segs.Store(&updated)
	l.scheduleDeleteLocked(deleted, l.cfg.Cleanup.FileDeleteDelay)
	l.mu.Unlock()
	l.closeRetired(olds)
	return nil
}

// testHookSwap is called at each stage of replaceSegments, with Log.mu
// held; tests replace it to copy the directory as a crash would leave it.
var testHookSwap = func(stage string) {}
