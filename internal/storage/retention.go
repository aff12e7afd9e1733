package storage

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// BoundsFunc returns the offsets that retention and the log cleaner must
// not pass: retention deletes only segments wholly below the
// high-watermark, and the cleaner cleans only segments wholly below the
// last stable offset (records above them may still be truncated, or belong
// to an open transaction). The replica layer sets it with Log.SetBounds.
type BoundsFunc func() (highWatermark, lastStableOffset int64)

// SetBounds sets the function that bounds retention and cleaning (see
// BoundsFunc). Until it is set, DeleteOldSegments deletes only segments
// below the log start offset and Clean does nothing: a log nobody
// replicates has no high-watermark to trust. Safe for concurrent use.
func (l *Log) SetBounds(fn BoundsFunc) {
	if fn == nil {
		l.bounds.Store(nil)
		return
	}
	l.bounds.Store(&fn)
}

// boundsNow returns the high-watermark and last stable offset, both capped
// at the log end offset; ok is false when no BoundsFunc is set.
func (l *Log) boundsNow() (hw, lso int64, ok bool) {
	fn := l.bounds.Load()
	if fn == nil {
		return 0, 0, false
	}
	hw, lso = (*fn)()
	leo := l.logEndOffset.Load()
	return min(hw, leo), min(lso, hw, leo), true
}

// pendingDelete is a set of files renamed to .deleted, to be removed at due
// (file.delete.delay.ms after the rename).
type pendingDelete struct {
	paths []string
	due   time.Time
}

// renameDeleted renames a segment's files to <name>.deleted so that a
// crash before their removal cannot bring them back (Open removes .deleted
// files). The segment stays open: readers in flight keep their file
// descriptors. It returns the new paths. A failure to rename the .log
// leaves the segment as it was. Requires Log.mu.
func renameDeleted(s *segment) ([]string, error) {
	// Readers still on the segment must keep seeing its aborted
	// transactions once the .txnindex has been renamed.
	s.txn.mu.Lock()
	if err := s.loadTxnIndexLocked(); err != nil && !errors.Is(err, ErrCorruptTxnIndex) {
		s.txn.mu.Unlock()
		return nil, err
	}
	s.txn.mu.Unlock()
	var paths []string
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		from := s.path(suf)
		to := from + deletedSuffix
		rename := s.fsys().Rename
		// Readers still on the segment reopen its files by their new
		// names when the cache closed them meanwhile.
		switch suf {
		case logSuffix:
			rename = func(_, to string) error { return s.log.rename(to) }
		case indexSuffix:
			rename = func(_, to string) error { return s.index.f.rename(to) }
		case timeIndexSuffix:
			rename = func(_, to string) error { return s.timeIndex.f.rename(to) }
		}
		if err := rename(from, to); err != nil {
			if errors.Is(err, os.ErrNotExist) && suf != logSuffix {
				continue
			}
			if suf == logSuffix {
				return nil, fmt.Errorf("storage: rename %s for deletion: %w", from, err)
			}
			// The .log is gone already; a stray index is removed on open.
			continue
		}
		paths = append(paths, to)
	}
	return paths, nil
}

// scheduleDeleteLocked queues files for removal after delay. Requires mu.
func (l *Log) scheduleDeleteLocked(paths []string, delay time.Duration) {
	if len(paths) == 0 {
		return
	}
	l.pendingDeletes = append(l.pendingDeletes, pendingDelete{paths: paths, due: l.now().Add(delay)})
}

// closeRetired closes segments that deletion or cleaning took out of the
// log, without waiting for readers: a fetch writing a segment's bytes to a
// slow or stalled consumer holds it for as long as the socket write takes,
// and waiting would stall retention (or the cleaner) of every log of the
// node. Segments still being read are closed by a later removeDueFiles
// (every retention pass) or by Close; their files stay open until then,
// whether or not the .deleted names are removed. Must not hold mu.
func (l *Log) closeRetired(segs []*segment) {
	var busy []*segment
	for _, s := range segs {
		ok, err := s.tryClose()
		if err != nil {
			l.logger.Warn("closing retired segment failed", "segment", s.String(), "err", err)
		}
		if !ok {
			busy = append(busy, s)
		}
	}
	if len(busy) == 0 {
		return
	}
	l.mu.Lock()
	if !l.closed.Load() {
		l.retired = append(l.retired, busy...)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	// Close has already closed the retired segments: wait for these.
	for _, s := range busy {
		if err := s.close(); err != nil {
			l.logger.Warn("closing retired segment failed", "segment", s.String(), "err", err)
		}
	}
}

// removeDueFiles removes the .deleted files whose delay has passed, closes
// the retired segments no longer being read, and returns when the next
// files are due (zero time when none are pending).
func (l *Log) removeDueFiles() (next time.Time) {
	now := l.now()
	l.mu.Lock()
	retired := l.retired
	l.retired = nil
	var due []pendingDelete
	kept := l.pendingDeletes[:0]
	for _, p := range l.pendingDeletes {
		if !p.due.After(now) {
			due = append(due, p)
			continue
		}
		kept = append(kept, p)
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	l.pendingDeletes = kept
	l.mu.Unlock()
	l.closeRetired(retired)
	for _, p := range due {
		for _, path := range p.paths {
			if err := l.fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.logger.Warn("removing deleted segment file failed", "file", path, "err", err)
			}
		}
	}
	return next
}

// nextFileDeletion returns when the next .deleted files are due, zero when
// none are pending.
func (l *Log) nextFileDeletion() (next time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.pendingDeletes {
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	return next
}

// segmentLargestTimestamp is the timestamp retention.ms compares: the
// segment's max timestamp, or the file's modification time when its batches
// carry none (Kafka's LogSegment.largestTimestamp).
func segmentLargestTimestamp(s *segment) int64 {
	if ts := s.maxTimestamp.Load(); ts != noTimestamp {
		return ts
	}
	if fi, err := s.fsys().Stat(s.path(logSuffix)); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return noTimestamp
}

// DeleteOldSegments is Kafka's deleteOldSegments: it deletes, oldest first
// and never past the first segment that must stay,
//   - segments wholly below the log start offset (DeleteRecords), always;
//   - with Cleanup.Delete, segments whose largest timestamp is older than
//     retention.ms, and the oldest segments while the log is larger than
//     retention.bytes, provided they lie wholly below the high-watermark.
//
// When every segment qualifies, the active one is rolled first so the log
// keeps an (empty) active segment; an empty active segment is never
// deleted. The log start offset moves up to the first remaining segment's
// base offset, and the producer snapshots below it go but the newest at
// or below it. Deleted segments' files are renamed to .deleted and removed
// file.delete.delay.ms later (by a later call, as the Manager's retention
// task does); this call also removes files whose delay has passed. It
// returns the number of segments deleted. Errors: ErrClosed, I/O errors of
// the roll or the renames. Safe for concurrent use.
func (l *Log) DeleteOldSegments() (deleted int, err error) {
	defer l.removeDueFiles()
	now := l.now()
	hw, _, bounded := l.boundsNow()
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	cfg := l.cfg.Cleanup
	segs := l.segments()
	logStart := l.logStartOffset.Load()
	leo := l.logEndOffset.Load()

	var size int64
	for _, s := range segs {
		size += s.size.Load()
	}
	overSize := int64(-1) // bytes above retention.bytes
	if cfg.Delete && cfg.RetentionBytes >= 0 {
		overSize = size - cfg.RetentionBytes
	}
	reasons := map[string]int{}
	n := 0
	for ; n < len(segs); n++ {
		s := segs[n]
		last := n == len(segs)-1
		if last && s.size.Load() == 0 {
			break
		}
		upper := leo
		if !last {
			upper = segs[n+1].baseOffset
		}
		if !last && upper <= logStart {
			reasons["log_start_offset"]++
			overSize -= s.size.Load()
			continue
		}
		if !cfg.Delete || !bounded || upper > hw {
			break
		}
		if overSize >= 0 && overSize-s.size.Load() >= 0 {
			reasons["retention_bytes"]++
			overSize -= s.size.Load()
			continue
		}
		if cfg.RetentionAge >= 0 {
			if ts := segmentLargestTimestamp(s); ts != noTimestamp && now.UnixMilli()-ts > cfg.RetentionAge.Milliseconds() {
				reasons["retention_ms"]++
				overSize -= s.size.Load()
				continue
			}
		}
		break
	}
	if n == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	if n == len(segs) {
		// Every segment expired: roll so that the log keeps an active one.
		if _, err := l.rollLocked(leo); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		segs = l.segments()
	}
	var victims []*segment
	for _, s := range segs[:n] {
		paths, err := renameDeleted(s)
		if err != nil {
			l.logger.Error("deleting segment failed", "segment", s.String(), "err", err)
			break
		}
		victims = append(victims, s)
		l.scheduleDeleteLocked(paths, cfg.FileDeleteDelay)
	}
	if len(victims) > 0 {
		rest := append([]*segment(nil), segs[len(victims):]...)
		l.segs.Store(&rest)
		l.dirDirty = true
		if b := rest[0].baseOffset; b > l.logStartOffset.Load() {
			l.logStartOffset.Store(b)
			l.checkpointMoved()
			defer l.logStartRaised() // after mu is released below
		}
		l.deleteSnapshotsBelowLocked()
		l.logger.Info("deleted segments", "segments", len(victims), "reasons", reasons,
			"log_start_offset", l.logStartOffset.Load(), "base_offsets", fmt.Sprintf("%d..%d", victims[0].baseOffset, victims[len(victims)-1].baseOffset))
	}
	l.mu.Unlock()
	l.closeRetired(victims)
	if len(victims) < n {
		err = fmt.Errorf("storage: deleted %d of %d segments", len(victims), n)
	}
	return len(victims), err
}

// deleteSnapshotsBelowLocked removes the producer snapshots below the log
// start offset but the one a reload may need (deleteSnapshotsBelow), as
// Kafka deletes the producer snapshots of deleted segments with them. The
// directory is not fsynced for it: a removed snapshot that a crash brings
// back is removed again. Requires mu.
func (l *Log) deleteSnapshotsBelowLocked() {
	if err := l.producers.deleteSnapshotsBelow(l.logStartOffset.Load()); err != nil {
		l.logger.Warn("removing producer snapshots below the log start offset failed", "log_start_offset", l.logStartOffset.Load(), "err", err)
	}
}

// Size is the total size in bytes of the log's segments (.log files).
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// Segments returns the base offsets of the log's segments, in order, the
// active one last.
func (l *Log) Segments() []int64 {
	segs := l.segments()
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.baseOffset
	}
	return out
}
