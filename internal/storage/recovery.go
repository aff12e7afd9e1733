package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// Open opens or creates the log in opts.Dir and recovers it (see
// OpenOptions): segments from the one holding the recovery point on are
// re-checked batch by batch (lengths, CRC-32C, increasing offsets) and cut
// at the first bad byte, deleting the segments after it; index files that
// are missing or fail their sanity check are rebuilt from the .log; stray
// .deleted and .cleaned files are removed and a complete .log.swap replaces
// the segments it covers. Errors: a Config.Validate error, I/O errors.
func Open(opts OpenOptions) (*Log, error) {
	return open(opts, nil)
}

// open is Open, or with m the set-up of a cleanly closed log from its
// entry of the log dir's ManifestFile (Log.loadManifest).
func open(opts OpenOptions, m *logManifest) (*Log, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	files := opts.Files
	if files == nil {
		files = newFileCache(0, opts.FS)
	}
	l := &Log{
		dir:       filepath.Clean(opts.Dir), // segment.path joins without cleaning
		files:     files,
		fsys:      files.fsys,
		logger:    lazyWith(logger, slog.String("dir", opts.Dir)),
		now:       now,
		cfg:       opts.Config.WithDefaults(),
		flushKick: make(chan struct{}, 1),
		done:      make(chan struct{}),
		stats:     opts.Stats,
		producers: newProducerState(files.fsys, opts.Dir, opts.Config.WithDefaults().ProducerIDExpiration),
	}
	l.cleanerOffset.Store(-1)
	l.deleteHorizon.Store(horizonUnknown)
	load := func() error { return l.load(opts) }
	if m != nil {
		load = func() error { return l.loadManifest(m) }
	}
	if err := load(); err != nil {
		for _, s := range l.segments() {
			s.closeFiles()
		}
		return nil, err
	}
	return l, nil
}

// parseBase parses the 20-digit base offset at the start of a file name
// such as 00000000000000000042.log.
func parseBase(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(stem, 10, 64)
	return n, err == nil && n >= 0
}

// load scans the directory, completes or removes leftovers of interrupted
// operations, opens the segments and recovers them.
func (l *Log) load(opts OpenOptions) error {
	// The directory is listed first and created only when missing: a
	// restart lists every partition's directory anyway, and a stat of
	// each before was one of its 17 system calls per log.
	entries, err := l.fsys.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := l.fsys.MkdirAll(l.dir, 0o755); err != nil {
			return fmt.Errorf("storage: create %s: %w", l.dir, err)
		}
		entries, err = nil, nil // a new log: nothing in it yet
	}
	if err != nil {
		return fmt.Errorf("storage: read %s: %w", l.dir, err)
	}
	bases := map[int64]bool{}
	var swaps []int64
	indexes := map[int64][]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			if _, ok := parseBase(name, logSuffix); ok {
				// Skipping it would serve the log without that
				// segment's records.
				return fmt.Errorf("storage: %s: a directory where a segment file belongs", filepath.Join(l.dir, name))
			}
			continue
		}
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, cleanedSuffix):
			l.logger.Info("removing leftover file", "file", name)
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("storage: remove leftover: %w", err)
			}
		case strings.HasSuffix(name, swapSuffix):
			if b, ok := parseBase(strings.TrimSuffix(name, swapSuffix), logSuffix); ok {
				swaps = append(swaps, b)
				continue
			}
			// Index swap files are rebuilt from the log instead.
			l.logger.Info("removing leftover file", "file", name)
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("storage: remove leftover: %w", err)
			}
		default:
			if b, ok := parseBase(name, logSuffix); ok {
				bases[b] = true
				continue
			}
			for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if b, ok := parseBase(name, suf); ok {
					indexes[b] = append(indexes[b], name)
				}
			}
		}
	}
	slices.Sort(swaps)
	for _, b := range swaps {
		if err := l.completeSwap(b, bases); err != nil {
			return err
		}
	}
	for b, names := range indexes {
		if bases[b] {
			continue
		}
		for _, name := range names {
			l.logger.Info("removing index without log", "file", name)
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("storage: remove orphan index: %w", err)
			}
		}
	}

	sorted := make([]int64, 0, len(bases))
	for b := range bases {
		sorted = append(sorted, b)
	}
	slices.Sort(sorted)
	now := l.now()
	var segs []*segment
	for _, b := range sorted {
		s, err := openSegmentFiles(l.files, l.dir, b, l.cfg, now)
		if err != nil {
			for _, s := range segs {
				s.closeFiles()
			}
			return err
		}
		if len(swaps) == 0 && !slices.Contains(indexes[b], segmentName(b)+txnIndexSuffix) {
			// The listing shows no .txnindex: replaying the producer
			// state (which truncates the .txnindex of the segments it
			// reads) need not try to open one, a failed open per log.
			s.txn.loaded = true
		}
		segs = append(segs, s)
	}
	l.segs.Store(&segs)

	recoverFrom := len(segs)
	if opts.RecoveryPoint >= 0 {
		recoverFrom = floorSegment(segs, opts.RecoveryPoint)
	}
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		fi, err := s.log.Stat()
		if err != nil {
			return fmt.Errorf("storage: stat %s: %w", s, err)
		}
		s.size.Store(fi.Size())
		limit := int64(math.MaxInt64)
		if i+1 < len(segs) {
			limit = segs[i+1].baseOffset
		}
		last := i == len(segs)-1
		needRecovery := i >= recoverFrom
		if !needRecovery {
			// The listing says which index files exist (unless a swap
			// completed since): most segments of a node with many
			// small logs have none, and trying to read them cost two
			// failed opens per log.
			listed := len(swaps) == 0
			hasIndex := !listed || slices.Contains(indexes[s.baseOffset], filepath.Base(s.path(indexSuffix)))
			hasTimeIndex := !listed || slices.Contains(indexes[s.baseOffset], filepath.Base(s.path(timeIndexSuffix)))
			if err := s.loadIndexes(limit, last, int64(l.cfg.IndexIntervalBytes), hasIndex, hasTimeIndex); err != nil {
				l.logger.Warn("rebuilding indexes", "segment", s.String(), "reason", err)
				needRecovery = true
			}
		}
		if !needRecovery {
			continue
		}
		cut, err := l.recoverSegment(s, limit)
		if err != nil {
			return err
		}
		if cut > 0 && !last {
			// Like Kafka: what follows a corrupt batch cannot be trusted.
			for _, t := range segs[i+1:] {
				l.logger.Warn("removing segment after corrupt data", "segment", t.String(), "bytes", t.size.Load())
				if err := t.remove(); err != nil {
					return err
				}
			}
			segs = segs[:i+1]
			l.segs.Store(&segs)
		}
	}

	logStart := max(opts.LogStartOffset, 0)
	if len(segs) == 0 {
		s, err := createSegment(l.files, l.dir, logStart, l.cfg, now)
		if err != nil {
			return err
		}
		segs = []*segment{s}
		l.segs.Store(&segs)
		l.dirDirty = true
	}
	active := segs[len(segs)-1]
	active.created = now
	leo := active.nextOffset
	logStart = max(logStart, segs[0].baseOffset)
	l.logEndOffset.Store(leo)
	epochs, err := loadEpochCache(l.fsys, l.dir, leo, segs)
	if err != nil {
		return fmt.Errorf("storage: leader epoch history: %w", err)
	}
	l.epochs = epochs
	if logStart > leo {
		l.logger.Warn("log start offset past log end: restarting the log empty", "log_start_offset", logStart, "log_end_offset", leo)
		return l.truncateFullyLocked(logStart, logStart)
	}
	l.logStartOffset.Store(logStart)
	rp := opts.RecoveryPoint
	if rp < 0 || rp > leo {
		rp = leo
	}
	l.recoveryPoint.Store(rp)
	// Producer state: from the latest snapshot at or below the first
	// segment re-checked, so that recovered segments get their .txnindex
	// rebuilt.
	limit := leo
	if recoverFrom < len(segs) {
		limit = min(limit, segs[recoverFrom].baseOffset)
	}
	// The snapshots are those of the listing: nothing above created or
	// removed one.
	if err := l.loadProducerState(limit, opts.RecoveryPoint < 0, entries); err != nil {
		return fmt.Errorf("storage: producer state: %w", err)
	}
	l.logger.Debug("opened log", "segments", len(segs), "log_start_offset", logStart, "log_end_offset", leo, "recovery_point", rp)
	return nil
}

// completeSwap finishes a log cleaner swap: a valid NNN.log.swap replaces
// segment NNN and the segments whose base offsets lie in [NNN, next),
// next being the offset after the swap's last batch; an invalid one is
// removed. As with Kafka's LogLoader, that range is empty for an empty
// swap (a group of which nothing survived): NNN alone is replaced, and
// whatever other old segments of the group are still there stay, with
// their uncleaned records. That is safe at every stage of
// replaceSegments: below next the log is the cleaned segment; from next
// on the cleaning kept nothing of the group, and an old segment left
// there holds a superset of it (the records superseding what it dropped
// are in it or after the group, untouched). The files of segment NNN (its
// .txnindex too: a cleaned segment has none) are replaced whether or not
// its .log is still there.
func (l *Log) completeSwap(base int64, bases map[int64]bool) error {
	swapPath := filepath.Join(l.dir, segmentName(base)+logSuffix+swapSuffix)
	var next int64 = base
	var valid int64
	info, err := scanSegment(l.fsys, swapPath, func(b SegmentBatch) error {
		if b.Err != nil {
			return fmt.Errorf("%s at position %d: %w", swapPath, b.Position, b.Err)
		}
		if !b.CRCValid || b.Header.BaseOffset < next {
			return fmt.Errorf("%w: %s at position %d: invalid batch", record.ErrCorrupt, swapPath, b.Position)
		}
		next = b.Header.NextOffset()
		valid = b.Position + int64(b.Header.Size())
		return nil
	})
	if err != nil || valid != info.Size {
		l.logger.Warn("removing incomplete swap file", "file", swapPath, "err", err)
		return l.fsys.Remove(swapPath)
	}
	for b := range bases {
		if b > base && b < next {
			s := &segment{baseOffset: b, dir: l.dir, fs: l.fsys}
			if err := s.remove(); err != nil {
				return err
			}
			delete(bases, b)
		}
	}
	s := &segment{baseOffset: base, dir: l.dir, fs: l.fsys}
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := l.fsys.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := l.fsys.Rename(swapPath, s.path(logSuffix)); err != nil {
		return fmt.Errorf("storage: complete swap: %w", err)
	}
	l.logger.Info("completed segment swap", "segment", s.path(logSuffix), "next_offset", next, "bytes", info.Size)
	bases[base] = true
	l.dirDirty = true
	return nil
}

// loadIndexes reads the index files of a segment that needs no recovery
// and checks them against the log: entries in order, the last offset entry
// naming a batch that is there, offsets below limit (the next segment's
// base). For the active segment it also finds the next offset. Any error
// means the indexes must be rebuilt.
func (s *segment) loadIndexes(limit int64, active bool, indexInterval int64, hasIndex, hasTimeIndex bool) error {
	size := s.size.Load()
	var ib, tb []byte
	var err error
	if hasIndex {
		if ib, err = s.index.f.readAll(); err != nil {
			return err
		}
	}
	entries, err := DecodeOffsetIndex(ib)
	if err != nil {
		return fmt.Errorf("%s: %w", s.index.path, err)
	}
	if hasTimeIndex {
		if tb, err = s.timeIndex.f.readAll(); err != nil {
			return err
		}
	}
	tentries, err := DecodeTimeIndex(tb)
	if err != nil {
		return fmt.Errorf("%s: %w", s.timeIndex.path, err)
	}
	if size > 0 && len(tentries) == 0 && !active {
		// A closed segment got its last time entry when it rolled; the
		// active one may have none: its max timestamp comes from its
		// batches after the last offset entry (resetWriterStateLocked).
		return fmt.Errorf("%s is empty, its log %d bytes", s.timeIndex.path, size)
	}
	if len(entries) == 0 && indexInterval > 0 && size > indexInterval {
		// Appends add an entry for a batch that starts more than
		// index.interval.bytes after the last entry (the segment's start
		// when there is none): if such a batch is here, the index was lost
		// (a missing file comes back empty). A segment of one large batch
		// has none.
		pos := int64(0)
		for pos <= indexInterval && pos < size {
			h, err := s.readHeaderAt(pos, size)
			if err != nil {
				return err
			}
			pos += int64(h.Size())
		}
		if pos < size {
			return fmt.Errorf("%s is empty, but the batch at position %d of its log is more than index.interval.bytes in", s.index.path, pos)
		}
	}
	maxRel := limit - 1 - s.baseOffset
	if n := len(entries); n > 0 {
		e := entries[n-1]
		if int64(e.RelativeOffset) > maxRel || int64(e.Position) >= size {
			return fmt.Errorf("%w: %s at byte %d: last entry %v past the log (%d bytes, next segment at offset %d)", ErrCorruptIndex, s.index.path, (n-1)*offsetEntrySize, e, size, limit)
		}
		h, err := s.readHeaderAt(int64(e.Position), size)
		if err != nil {
			return err
		}
		if h.LastOffset() != s.baseOffset+int64(e.RelativeOffset) {
			return fmt.Errorf("%w: %s at byte %d: entry %v names the batch at position %d, which ends at offset %d", ErrCorruptIndex, s.index.path, (n-1)*offsetEntrySize, e, e.Position, h.LastOffset())
		}
	}
	if n := len(tentries); n > 0 && int64(tentries[n-1].RelativeOffset) > maxRel {
		return fmt.Errorf("%w: %s at byte %d: last entry %v past the log (next segment at offset %d)", ErrCorruptIndex, s.timeIndex.path, (n-1)*timeEntrySize, tentries[n-1], limit)
	}
	s.index.entries = entries
	s.timeIndex.entries = tentries
	next, err := s.resetWriterStateLocked()
	if err != nil {
		return err
	}
	if active {
		s.nextOffset = s.baseOffset
		if next >= 0 {
			s.nextOffset = next
		}
	}
	return nil
}

// recoverSegment re-checks every batch of the segment, cuts the file at the
// first batch that is torn, fails its CRC or does not follow the previous
// batch's offsets, rebuilds both indexes and the writer state, and returns
// the number of bytes cut. limit is the next segment's base offset.
func (l *Log) recoverSegment(s *segment, limit int64) (cut int64, err error) {
	start := time.Now()
	size := s.size.Load()
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, size), 1<<20)
	interval := int64(l.cfg.IndexIntervalBytes)
	var (
		pos, sinceIndex int64
		next            = s.baseOffset
		maxTs           = int64(noTimestamp)
		offsetOfMaxTs   = s.baseOffset
		firstTs         = int64(noTimestamp)
		entries         []OffsetEntry
		tentries        []TimeEntry
		buf             = make([]byte, 0, 64<<10)
		reason          string
	)
	for pos < size {
		if size-pos < record.HeaderSize {
			reason = fmt.Sprintf("%d bytes left, less than a batch header", size-pos)
			break
		}
		var overhead [record.LogOverhead]byte
		if _, err := io.ReadFull(r, overhead[:]); err != nil {
			return 0, fmt.Errorf("storage: read %s at %d: %w", s, pos, err)
		}
		length := int64(int32(binary.BigEndian.Uint32(overhead[8:])))
		if length < record.HeaderSize-record.LogOverhead || length > size-pos-record.LogOverhead {
			reason = fmt.Sprintf("batch length %d with %d bytes left", length, size-pos-record.LogOverhead)
			break
		}
		total := int(length) + record.LogOverhead
		buf = slices.Grow(buf[:0], total)[:total]
		copy(buf, overhead[:])
		if _, err := io.ReadFull(r, buf[record.LogOverhead:]); err != nil {
			return 0, fmt.Errorf("storage: read %s at %d: %w", s, pos, err)
		}
		h, err := record.Validate(buf)
		switch {
		case err != nil:
			reason = err.Error()
		case h.BaseOffset < next:
			reason = fmt.Sprintf("base offset %d below expected %d", h.BaseOffset, next)
		case h.LastOffset() >= limit:
			reason = fmt.Sprintf("last offset %d reaches the next segment at %d", h.LastOffset(), limit)
		case !s.canHold(h.LastOffset()) || h.LastOffset() == math.MaxInt64:
			reason = fmt.Sprintf("last offset %d too far from base offset", h.LastOffset())
		}
		if reason != "" {
			break
		}
		if pos == 0 {
			firstTs = h.MaxTimestamp
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offsetOfMaxTs = h.MaxTimestamp, h.LastOffset()
		}
		if sinceIndex > interval {
			entries = append(entries, OffsetEntry{RelativeOffset: s.relative(h.LastOffset()), Position: int32(pos)})
			if n := len(tentries); maxTs >= 0 && (n == 0 || maxTs > tentries[n-1].Timestamp) {
				tentries = append(tentries, TimeEntry{Timestamp: maxTs, RelativeOffset: s.relative(offsetOfMaxTs)})
			}
			sinceIndex = 0
		}
		sinceIndex += int64(total)
		next = h.NextOffset()
		pos += int64(total)
	}
	if n := len(tentries); maxTs >= 0 && (n == 0 || maxTs > tentries[n-1].Timestamp) {
		tentries = append(tentries, TimeEntry{Timestamp: maxTs, RelativeOffset: s.relative(offsetOfMaxTs)})
	}
	if pos < size {
		l.logger.Warn("truncating corrupt or torn segment tail",
			"segment", s.String(), "position", pos, "bytes_cut", size-pos, "reason", reason)
		if err := s.log.Truncate(pos); err != nil {
			return 0, fmt.Errorf("storage: truncate %s: %w", s, err)
		}
		s.size.Store(pos)
	}
	if err := s.index.replace(entries); err != nil {
		return 0, err
	}
	if err := s.timeIndex.replace(tentries); err != nil {
		return 0, err
	}
	s.maxTimestamp.Store(maxTs)
	s.offsetOfMaxTimestamp.Store(offsetOfMaxTs)
	s.bytesSinceLastIndexEntry = sinceIndex
	s.rollingBasedTimestamp = firstTs
	s.nextOffset = next
	l.logger.Debug("recovered segment", "segment", s.String(), "bytes", pos, "next_offset", next, "duration", time.Since(start))
	return size - pos, nil
}
