package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// File name suffixes of a segment (see the package doc).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	cleanedSuffix   = ".cleaned"
	swapSuffix      = ".swap"
	deletedSuffix   = ".deleted"
)

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP.
const noTimestamp = -1

// errSegmentClosed is returned by segment reads that lost a race with a
// truncation or deletion; Log retries them on a fresh snapshot.
var errSegmentClosed = errors.New("storage: segment closed")

// ErrCorruptSegment reports a .log file whose bytes are not whole valid
// batches where they should be (outside recovery, which truncates them).
var ErrCorruptSegment = errors.New("storage: corrupt segment")

// segmentName returns the 20-digit zero-padded base offset Kafka names
// segment files with.
func segmentName(base int64) string {
	var b [24]byte
	return string(appendSegmentName(b[:0], base))
}

// appendSegmentName appends segmentName(base) to b without fmt: a node
// opening 100,000 logs formats it three times a log (fmt.Sprintf and
// filepath.Join were 5% of the CPU of a restart).
func appendSegmentName(b []byte, base int64) []byte {
	if base < 0 {
		return fmt.Appendf(b, "%020d", base)
	}
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], base, 10)
	for range 20 - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// segment is one .log file with its .index and .timeindex.
//
// Locking: rw is held shared by readers (Read, flush, OffsetForTimestamp)
// for the duration of their file I/O and exclusively by truncation and
// close, so a reader sees either the whole segment or errSegmentClosed.
// Appends take neither: they write past size and publish the new size
// after the bytes are written. The writer fields are guarded by Log.mu.
type segment struct {
	baseOffset int64
	dir        string
	fs         vfs.FS
	log        *cachedFile // the .log, opened on use (files.go)
	index      *offsetIndex
	timeIndex  *timeIndex

	// size is the number of bytes of whole batches in the .log file.
	size atomic.Int64
	// maxTimestamp is the largest batch max timestamp (noTimestamp when
	// none) and offsetOfMaxTimestamp the last offset of the first batch
	// that had it.
	maxTimestamp         atomic.Int64
	offsetOfMaxTimestamp atomic.Int64

	rw     sync.RWMutex
	closed bool // guarded by rw

	txn txnIndex // .txnindex, loaded on first use (txnindex.go)

	// Writer state, guarded by Log.mu.
	bytesSinceLastIndexEntry int64
	rollingBasedTimestamp    int64 // max timestamp of the first append, noTimestamp if none
	created                  time.Time
	nextOffset               int64 // offset after the last batch
}

// path is filepath.Join(s.dir, segmentName(s.baseOffset)+suffix) for a
// clean s.dir (Open cleans the log's directory), built in one allocation.
func (s *segment) path(suffix string) string {
	var sb strings.Builder
	sb.Grow(len(s.dir) + 1 + 20 + len(suffix))
	sb.WriteString(s.dir)
	if len(s.dir) > 0 && !os.IsPathSeparator(s.dir[len(s.dir)-1]) {
		sb.WriteByte(filepath.Separator)
	}
	var name [24]byte
	sb.Write(appendSegmentName(name[:0], s.baseOffset))
	sb.WriteString(suffix)
	return sb.String()
}

// paths returns s.path of the .log, .index and .timeindex, substrings of
// one string (one allocation instead of three: a restart sets up every
// segment of every log).
func (s *segment) paths() (log, index, timeIndex string) {
	var name [24]byte
	stem := appendSegmentName(name[:0], s.baseOffset)
	sep := len(s.dir) > 0 && !os.IsPathSeparator(s.dir[len(s.dir)-1])
	var sb strings.Builder
	sb.Grow(3*(len(s.dir)+1+len(stem)) + len(logSuffix) + len(indexSuffix) + len(timeIndexSuffix))
	var ends [3]int
	for i, suffix := range [3]string{logSuffix, indexSuffix, timeIndexSuffix} {
		sb.WriteString(s.dir)
		if sep {
			sb.WriteByte(filepath.Separator)
		}
		sb.Write(stem)
		sb.WriteString(suffix)
		ends[i] = sb.Len()
	}
	all := sb.String()
	return all[:ends[0]], all[ends[0]:ends[1]], all[ends[1]:]
}

func (s *segment) String() string { return s.path(logSuffix) }

// fsys is the filesystem of the segment's files.
func (s *segment) fsys() vfs.FS { return s.fs }

// openSegmentFiles returns the existing segment at base, with empty
// in-memory indexes. It opens nothing: files opens the .log on first use,
// and the index files too, creating them if they are missing (a segment
// without index entries need not have them; see the package doc).
func openSegmentFiles(files *FileCache, dir string, base int64, cfg Config, now time.Time) (*segment, error) {
	s := &segment{baseOffset: base, dir: dir, fs: files.fsys, created: now, nextOffset: base, rollingBasedTimestamp: noTimestamp}
	s.maxTimestamp.Store(noTimestamp)
	s.offsetOfMaxTimestamp.Store(base)
	logPath, indexPath, timeIndexPath := s.paths()
	var index, timeIndex *cachedFile
	s.log, index, timeIndex = files.lazySegment(logPath, indexPath, timeIndexPath)
	s.index = newOffsetIndex(indexPath, index, nil, cfg.maxIndexEntries(offsetEntrySize))
	s.timeIndex = newTimeIndex(timeIndexPath, timeIndex, nil, cfg.maxIndexEntries(timeEntrySize))
	return s, nil
}

// createSegment creates a new, empty segment at base: its .log, kept open
// for the appends to come; its index files when the first entries come.
// Stale index files of that name (left without their log) are removed; a
// non-empty .log is an error.
func createSegment(files *FileCache, dir string, base int64, cfg Config, now time.Time) (*segment, error) {
	s, err := openSegmentFiles(files, dir, base, cfg, now)
	if err != nil {
		return nil, err
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := files.fsys.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("storage: remove stale index: %w", err)
		}
	}
	f, err := files.fsys.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: create segment: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != 0 {
		f.Close()
		return nil, fmt.Errorf("storage: segment %s already exists with %d bytes", s, fi.Size())
	}
	if err != nil {
		// No empty segment is left behind past the log end.
		f.Close()
		if rerr := files.fsys.Remove(s.path(logSuffix)); rerr != nil {
			return nil, fmt.Errorf("storage: remove %s after a failed stat (%v): %w", s, err, rerr)
		}
		return nil, fmt.Errorf("storage: create segment: %w", err)
	}
	s.log = files.file(s.path(logSuffix), f)
	return s, nil
}

// relative returns offset - base, which the caller guarantees fits int32.
func (s *segment) relative(offset int64) int32 { return int32(offset - s.baseOffset) }

// canHold reports whether offsets up to last can be stored relative to base.
func (s *segment) canHold(last int64) bool {
	return last >= s.baseOffset && last-s.baseOffset <= math.MaxInt32
}

// writeBatches writes buf, whole batches, at the end of the .log file,
// without publishing the new size (the caller stores it once the
// append's other files are written). On error the file is cut back to
// its old size, through the descriptor the write used; when that fails
// too, the error is the cut's (a failure of the disk, whatever the
// write's was: part of buf stays in the file).
func (s *segment) writeBatches(buf []byte) error {
	pos := s.size.Load()
	f, err := s.log.acquire()
	if err != nil {
		return fmt.Errorf("storage: write %s at %d: %w", s, pos, err)
	}
	defer s.log.release()
	if _, err := fileWriteAt(f, buf, pos); err != nil {
		if terr := f.Truncate(pos); terr != nil {
			return fmt.Errorf("storage: cut %s back to %d after a failed write (%v): %w", s, pos, err, terr)
		}
		return fmt.Errorf("storage: write %s at %d: %w", s, pos, err)
	}
	return nil
}

// indexBatches updates the writer state and the indexes for batches just
// written at pos (Kafka's LogSegment.append: an offset index entry for a
// batch's last offset once more than interval bytes were appended since the
// previous entry, and a time index entry with it when the max grew).
func (s *segment) indexBatches(pos int64, hs []record.Header, interval int64) error {
	if pos == 0 {
		var maxTs int64 = noTimestamp
		for i := range hs {
			maxTs = max(maxTs, hs[i].MaxTimestamp)
		}
		s.rollingBasedTimestamp = maxTs
	}
	var err error
	for i := range hs {
		h := &hs[i]
		if h.MaxTimestamp > s.maxTimestamp.Load() {
			s.maxTimestamp.Store(h.MaxTimestamp)
			s.offsetOfMaxTimestamp.Store(h.LastOffset())
		}
		if s.bytesSinceLastIndexEntry > interval && err == nil {
			err = s.index.append(OffsetEntry{RelativeOffset: s.relative(h.LastOffset()), Position: int32(pos)})
			if err == nil {
				err = s.timeIndex.maybeAppend(s.maxTimestamp.Load(), s.relative(s.offsetOfMaxTimestamp.Load()), false)
			}
			s.bytesSinceLastIndexEntry = 0
		}
		s.bytesSinceLastIndexEntry += int64(h.Size())
		pos += int64(h.Size())
		s.nextOffset = h.NextOffset()
	}
	return err
}

// onBecomeInactive adds the segment's max timestamp to the time index, as
// Kafka does when a segment is rolled or closed (we do when it rolls).
func (s *segment) onBecomeInactive() error {
	if s.maxTimestamp.Load() == noTimestamp {
		return nil
	}
	return s.timeIndex.maybeAppend(s.maxTimestamp.Load(), s.relative(s.offsetOfMaxTimestamp.Load()), true)
}

// readHeaderAt reads the batch header at pos; size bounds the readable part.
func (s *segment) readHeaderAt(pos, size int64) (record.Header, error) {
	f, err := s.log.acquire()
	if err != nil {
		return record.Header{}, fmt.Errorf("storage: read %s at %d: %w", s, pos, err)
	}
	defer s.log.release()
	return s.readHeaderFrom(f, pos, size)
}

// readHeaderFrom is readHeaderAt reading from r: the segment's .log
// acquired once for a whole read, so that the headers it scans cost a
// pread each and no trip through the FileCache's mutex.
func (s *segment) readHeaderFrom(r vfs.File, pos, size int64) (record.Header, error) {
	var hb [record.HeaderSize]byte
	if size-pos < record.HeaderSize {
		return record.Header{}, fmt.Errorf("%w: %s: %d bytes at position %d", ErrCorruptSegment, s, size-pos, pos)
	}
	if _, err := fileReadAt(r, hb[:], pos); err != nil {
		return record.Header{}, fmt.Errorf("storage: read %s at %d: %w", s, pos, err)
	}
	h, err := record.ParseHeader(hb[:])
	if err == nil && (h.BatchLength < record.HeaderSize-record.LogOverhead || int64(h.Size()) > size-pos) {
		err = fmt.Errorf("batch length %d", h.BatchLength)
	}
	if err != nil {
		return h, fmt.Errorf("%w: %s at position %d: %w", ErrCorruptSegment, s, pos, err)
	}
	return h, nil
}

// findBatchLocked returns the position and header of the first batch whose
// last offset is at least offset, searching below size. Requires rw.
func (s *segment) findBatchLocked(offset, size int64) (pos int64, h record.Header, found bool, err error) {
	f, err := s.log.acquire()
	if err != nil {
		return 0, h, false, fmt.Errorf("storage: read %s: %w", s, err)
	}
	defer s.log.release()
	return s.findBatchIn(f, offset, size)
}

// findBatchIn is findBatchLocked reading from r (see readHeaderFrom).
func (s *segment) findBatchIn(r vfs.File, offset, size int64) (pos int64, h record.Header, found bool, err error) {
	if rel := offset - s.baseOffset; rel > 0 {
		pos = int64(s.index.lookup(rel).Position)
	}
	for pos < size {
		h, err = s.readHeaderFrom(r, pos, size)
		if err != nil {
			return pos, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return pos, h, false, nil
}

// read returns whole batches from the first one whose last offset is at
// least offset (see Log.Read). found reports that such a batch exists, so
// the caller need not look at the next segment.
func (s *segment) read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (data []byte, found bool, err error) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return nil, false, errSegmentClosed
	}
	// One reference for the whole read: the index lookup's scan of
	// headers and the copy are preads on one descriptor.
	f, err := s.log.acquire()
	if err != nil {
		return nil, false, err
	}
	defer s.log.release()
	size := s.size.Load()
	pos, h, found, err := s.findBatchIn(f, offset, size)
	if err != nil || !found {
		return nil, false, err
	}
	if h.LastOffset() >= maxOffset {
		return nil, true, nil
	}
	n := int64(maxBytes)
	if first := int64(h.Size()); n < first {
		if !minOneBatch {
			return nil, true, nil
		}
		n = first
	}
	n = min(n, size-pos)
	buf := make([]byte, n)
	if _, err := fileReadAt(f, buf, pos); err != nil {
		return nil, true, fmt.Errorf("storage: read %s at %d: %w", s, pos, err)
	}
	end, err := wholeBatches(buf, maxOffset)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %s at position %d: %w", ErrCorruptSegment, s, pos+int64(end), err)
	}
	return buf[:end], true, nil
}

// wholeBatches returns the length of the prefix of buf made of whole batches
// whose last offset is below maxOffset.
func wholeBatches(buf []byte, maxOffset int64) (int, error) {
	end := 0
	for end < len(buf) {
		h, err := record.ParseHeader(buf[end:])
		if errors.Is(err, record.ErrTruncated) {
			break
		}
		if err != nil {
			return end, err
		}
		if h.BatchLength < record.HeaderSize-record.LogOverhead {
			return end, fmt.Errorf("batch length %d", h.BatchLength)
		}
		if h.Size() > len(buf)-end || h.LastOffset() >= maxOffset {
			break
		}
		end += h.Size()
	}
	return end, nil
}

// locate is read without the copy: the byte range [pos, pos+n) of the .log
// file that read would return, found by walking batch headers. It is the
// seam for a zero-copy (sendfile) fetch path; the caller must hold rw
// shared until it has used the range. It reads headers from r, the .log
// (see readHeaderFrom).
func (s *segment) locateLocked(r vfs.File, offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (pos, n int64, found bool, err error) {
	size := s.size.Load()
	pos, h, found, err := s.findBatchIn(r, offset, size)
	if err != nil || !found {
		return pos, 0, false, err
	}
	for p := pos; p < size; {
		if p > pos {
			if h, err = s.readHeaderFrom(r, p, size); err != nil {
				return pos, 0, true, err
			}
		}
		if h.LastOffset() >= maxOffset {
			break
		}
		if n+int64(h.Size()) > int64(maxBytes) && !(n == 0 && minOneBatch) {
			break
		}
		n += int64(h.Size())
		p += int64(h.Size())
	}
	return pos, n, true, nil
}

// truncateTo removes every batch whose last offset is at least offset and
// returns the segment's new next offset: offset itself, or the base offset
// of a batch that held offset (a batch is never cut in two). Requires
// Log.mu.
func (s *segment) truncateTo(offset int64) (int64, error) {
	s.rw.Lock()
	defer s.rw.Unlock()
	size := s.size.Load()
	pos, h, found, err := s.findBatchLocked(offset, size)
	if err != nil {
		return 0, err
	}
	if !found {
		// offset lies past every batch here: nothing to remove.
		return max(offset, s.baseOffset), nil
	}
	if err := s.log.Truncate(pos); err != nil {
		return 0, fmt.Errorf("storage: truncate %s: %w", s, err)
	}
	s.size.Store(pos)
	next := min(offset, h.BaseOffset)
	next = max(next, s.baseOffset)
	if err := s.index.truncateToPosition(pos); err != nil {
		return 0, err
	}
	if err := s.timeIndex.truncateToOffset(h.BaseOffset - s.baseOffset); err != nil {
		return 0, err
	}
	s.nextOffset = next
	_, err = s.resetWriterStateLocked()
	return next, err
}

// resetWriterStateLocked recomputes the max timestamp and the bytes since
// the last index entry from the indexes and the batches after the last
// offset index entry. It returns the next offset after the last batch, or
// -1 when the segment is empty. Requires rw (or exclusive use during Open).
func (s *segment) resetWriterStateLocked() (next int64, err error) {
	next = -1
	size := s.size.Load()
	s.maxTimestamp.Store(noTimestamp)
	s.offsetOfMaxTimestamp.Store(s.baseOffset)
	if te, ok := s.timeIndex.last(); ok {
		s.maxTimestamp.Store(te.Timestamp)
		s.offsetOfMaxTimestamp.Store(s.baseOffset + int64(te.RelativeOffset))
	}
	var pos int64
	if e, ok := s.index.last(); ok {
		pos = int64(e.Position)
	}
	s.bytesSinceLastIndexEntry = size - pos
	var first *record.Header // the batch at 0, when read for rollingBasedTimestamp
	if size == 0 {
		s.rollingBasedTimestamp = noTimestamp
	} else if s.rollingBasedTimestamp == noTimestamp {
		if h, err := s.readHeaderAt(0, size); err == nil {
			s.rollingBasedTimestamp = h.MaxTimestamp
			first = &h
		}
	}
	for pos < size {
		var h record.Header
		if pos == 0 && first != nil {
			h = *first // a log of one small segment: read once, not twice
		} else if h, err = s.readHeaderAt(pos, size); err != nil {
			return next, err
		}
		if h.MaxTimestamp > s.maxTimestamp.Load() {
			s.maxTimestamp.Store(h.MaxTimestamp)
			s.offsetOfMaxTimestamp.Store(h.LastOffset())
		}
		next = h.NextOffset()
		pos += int64(h.Size())
	}
	return next, nil
}

// readBatchAt reads the whole batch with header h at pos. Requires rw.
func (s *segment) readBatchAt(pos int64, h record.Header) ([]byte, error) {
	buf := make([]byte, h.Size())
	if _, err := s.log.ReadAt(buf, pos); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %s: batch at %d past the end", ErrCorruptSegment, s, pos)
		}
		return nil, err
	}
	return buf, nil
}

// flush fsyncs the segment's files.
func (s *segment) flush() error {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return nil
	}
	for _, f := range []*cachedFile{s.log, s.index.f, s.timeIndex.f} {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("storage: fsync %s: %w", f.name(), err)
		}
	}
	return s.syncTxnIndex()
}

// close closes the files; readers in flight finish first and later ones
// get errSegmentClosed.
func (s *segment) close() error {
	s.rw.Lock()
	defer s.rw.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeFiles()
}

// tryClose is close without waiting for readers: while any holds the
// segment it closes nothing and reports false.
func (s *segment) tryClose() (bool, error) {
	if !s.rw.TryLock() {
		return false, nil
	}
	defer s.rw.Unlock()
	if s.closed {
		return true, nil
	}
	s.closed = true
	return true, s.closeFiles()
}

func (s *segment) closeFiles() error {
	var errs []error
	for _, f := range []*cachedFile{s.log, s.indexFile(), s.timeIndexFile()} {
		if f != nil {
			errs = append(errs, f.close())
		}
	}
	return errors.Join(errs...)
}

func (s *segment) indexFile() *cachedFile {
	if s.index == nil {
		return nil
	}
	return s.index.f
}

func (s *segment) timeIndexFile() *cachedFile {
	if s.timeIndex == nil {
		return nil
	}
	return s.timeIndex.f
}

// remove closes the segment and deletes its files (the .txnindex too).
func (s *segment) remove() error {
	err := s.close()
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if rerr := s.fsys().Remove(s.path(suf)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
