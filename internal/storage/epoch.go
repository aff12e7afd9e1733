package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// LeaderEpochCheckpointFile is the file in a partition directory that keeps
// the leader epoch history (Kafka's leader-epoch-checkpoint): version 0, the
// entry count, then one "epoch startOffset" line per epoch, in order.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is a partition's leader epoch history (KIP-101): which epoch
// wrote which offsets, so that a follower can find where its log diverges
// from its leader's. Entries are in increasing epoch and start offset.
type epochCache struct {
	fsys vfs.FS
	path string

	mu      sync.Mutex // guards entries
	entries []EpochEntry
}

func decodeEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	lines, err := ParseCheckpoint(data, 0, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(lines))
	for _, l := range lines {
		e, err1 := strconv.ParseInt(l[0], 10, 32)
		o, err2 := strconv.ParseInt(l[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("storage: bad leader epoch entry %q", l)
		}
		if n := len(out); n > 0 && (int32(e) <= out[n-1].Epoch || o < out[n-1].StartOffset) {
			return nil, fmt.Errorf("storage: leader epoch entries out of order at %q", l)
		}
		out = append(out, EpochEntry{int32(e), o})
	}
	return out, nil
}

func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	lines := make([][]string, len(entries))
	for i, e := range entries {
		lines[i] = []string{strconv.Itoa(int(e.Epoch)), strconv.FormatInt(e.StartOffset, 10)}
	}
	return EncodeCheckpoint(0, lines)
}

// loadEpochCache reads the checkpoint of dir, dropping entries at or past
// logEnd; when the file is missing or unreadable it rebuilds the history by
// scanning the batch headers of segs.
func loadEpochCache(fsys vfs.FS, dir string, logEnd int64, segs []*segment) (*epochCache, error) {
	c := &epochCache{fsys: fsys, path: filepath.Join(dir, LeaderEpochCheckpointFile)}
	data, err := vfs.ReadFile(fsys, c.path)
	if err == nil {
		if c.entries, err = decodeEpochCheckpoint(data); err == nil {
			c.truncateFromEnd(logEnd)
			return c, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, s := range segs {
		if s.size.Load() == 0 {
			continue
		}
		_, err := scanSegment(fsys, s.path(logSuffix), func(b SegmentBatch) error {
			if b.Err != nil || b.Header.BaseOffset >= logEnd {
				return nil
			}
			c.assign(b.Header.PartitionLeaderEpoch, b.Header.BaseOffset)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(c.entries) == 0 {
		// Nothing to write: a new log (a file per log created would cost
		// two fsyncs each, at 100,000 partitions minutes).
		return c, nil
	}
	// Rebuilt from the segments, it can be rebuilt again: no fsync.
	return c, c.write(false)
}

// assign records that epoch wrote from offset on, when it is newer than
// the latest epoch; it reports whether the history changed. Entries that
// start at or past offset go first, as Kafka's
// LeaderEpochFileCache.assign drops them: an epoch a leader was assigned
// (Log.AssignEpoch) but wrote nothing in is replaced by the next one
// starting at the same offset.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && epoch <= c.entries[n-1].Epoch {
		return false
	}
	for n := len(c.entries); n > 0 && c.entries[n-1].StartOffset >= offset; n-- {
		c.entries = c.entries[:n-1]
	}
	c.entries = append(c.entries, EpochEntry{epoch, offset})
	return true
}

// restore sets the history back to entries (a snapshot).
func (c *epochCache) restore(entries []EpochEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = entries
}

// truncateFromEnd drops epochs that start at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= offset })
	if i == len(c.entries) {
		return false
	}
	c.entries = c.entries[:i]
	return true
}

// flush replaces the checkpoint file and makes it durable.
func (c *epochCache) flush() error { return c.write(true) }

// write replaces the checkpoint file; with sync it is fsynced (and its
// directory), otherwise the next Log flush does it (syncEpochs).
func (c *epochCache) write(sync bool) error {
	c.mu.Lock()
	data := encodeEpochCheckpoint(c.entries)
	c.mu.Unlock()
	if sync {
		return writeFile(c.fsys, c.path, data, true)
	}
	return writeFileRenamed(c.fsys, c.path, data)
}

// syncFile fsyncs the checkpoint file (after write(false)); a missing file
// is nothing to sync.
func (c *epochCache) syncFile() error {
	err := vfs.SyncPath(c.fsys, c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (c *epochCache) latest() (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return -1, false
	}
	return c.entries[len(c.entries)-1].Epoch, true
}

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor: the largest
// epoch at or below requested and the offset where the epoch after it
// starts (logEnd for the latest epoch); (-1, -1) when requested is below
// every known epoch.
func (c *epochCache) endOffsetFor(requested int32, logEnd int64) (int32, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if n == 0 || requested < 0 {
		return -1, -1
	}
	if requested >= c.entries[n-1].Epoch {
		return c.entries[n-1].Epoch, logEnd
	}
	// First entry with epoch > requested.
	i := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > requested })
	if i == 0 {
		return -1, -1
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

func (c *epochCache) snapshot() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]EpochEntry(nil), c.entries...)
}

// LatestEpoch is the epoch of the last batch in the log, ok false when the
// history is empty.
func (l *Log) LatestEpoch() (epoch int32, ok bool) { return l.epochs.latest() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101/KIP-279): the
// largest epoch at or below requested that this log knows, and the offset
// at which the next epoch starts (the log end offset for the latest epoch).
// It returns (-1, -1) when requested is older than every known epoch.
func (l *Log) EndOffsetForEpoch(requested int32) (epoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(requested, l.logEndOffset.Load())
}

// EpochHistory returns the leader epoch entries, oldest first.
func (l *Log) EpochHistory() []EpochEntry { return l.epochs.snapshot() }

// AssignEpoch records that epoch starts at the log end offset, as a
// partition's new leader does before it appends anything (Kafka's
// Partition.makeLeader, UnifiedLog.maybeAssignEpochStartOffset): an
// OffsetForLeaderEpoch for an earlier epoch then ends there. It reports
// whether the history changed, that is whether epoch is newer than the
// latest one (an older or equal epoch changes nothing; false once the
// log is closing). Only the history in memory changes: WriteEpochs
// replaces the leader-epoch-checkpoint off the produce path, and the next
// append does it before writing its batches if WriteEpochs has not, so
// that no batch is ever on disk ahead of its epoch in the file. Safe for
// concurrent use.
func (l *Log) AssignEpoch(epoch int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || !l.epochs.assign(epoch, l.logEndOffset.Load()) {
		return false
	}
	l.epochsUnwritten = true
	return true
}

// WriteEpochs replaces the leader-epoch-checkpoint when the history holds
// what the file lacks (an epoch given by AssignEpoch) or the file holds
// what the history dropped; otherwise it does nothing (one lock). As an
// append's write, it does not fsync: the next flush of the log does. The
// replica manager calls it on its log creators once a partition is led,
// so that the first Produce of a new epoch only appends. Errors:
// ErrClosed; the write's, classified by ioError (a failure of the disk
// takes the log dir offline; out of space or descriptors, the next
// append writes the file before its batches).
func (l *Log) WriteEpochs() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return ErrClosed
	}
	if !l.epochsUnwritten && !l.epochsStale {
		return nil
	}
	if err := l.epochs.write(false); err != nil {
		return l.ioError(fmt.Errorf("storage: write leader-epoch-checkpoint: %w", err))
	}
	l.epochsUnwritten, l.epochsStale = false, false
	l.epochsUnsynced, l.dirDirty = true, true
	return nil
}

// recordEpochsLocked adds the epochs of hs, batches about to be written
// at the log end, to the history and replaces the checkpoint file when it
// changed (or the file differs from the history: an epoch AssignEpoch
// gave that WriteEpochs has not written yet, or a failed write), before
// the batches are written: a crash between the two leaves an entry at or
// past the log end, which loadEpochCache drops. undo sets the history
// back when the batches are not written after all (the file keeps the
// new entries until the next append replaces it). On error the
// history is as before and nothing else changed; the error is the
// write's, for ioError to classify (Kafka's LeaderEpochFileCache writes
// through a CheckpointFileWithFailureHandler: an IOException takes the
// dir offline).
func (l *Log) recordEpochsLocked(hs []record.Header) (undo func(), err error) {
	latest, ok := l.epochs.latest()
	newer := false
	for i := range hs {
		if e := hs[i].PartitionLeaderEpoch; e >= 0 && (!ok || e > latest) {
			newer = true
			break
		}
	}
	if !newer && !l.epochsStale && !l.epochsUnwritten {
		return func() {}, nil
	}
	before := l.epochs.snapshot()
	for i := range hs {
		l.epochs.assign(hs[i].PartitionLeaderEpoch, hs[i].BaseOffset)
	}
	// Without an fsync on the append path (as Kafka since KAFKA-15046):
	// the next flush of the log syncs it, and a crash before that
	// rebuilds the history from the batches' epochs.
	if err := l.epochs.write(false); err != nil {
		l.epochs.restore(before)
		return nil, fmt.Errorf("storage: write leader-epoch-checkpoint: %w", err)
	}
	l.epochsStale, l.epochsUnwritten = false, false
	undo = func() {
		l.epochs.restore(before)
		l.epochsStale = true // the file has them: the next append replaces it
	}
	l.epochsUnsynced = true
	l.dirDirty = true
	return undo, nil
}

// truncateEpochsLocked drops epochs at or past offset after a truncation
// and replaces the checkpoint file. When that fails for want of space or
// descriptors the file keeps entries past the new log end: the next
// append writes it again (epochsStale). A failure of the disk takes the
// dir offline, as Kafka's.
func (l *Log) truncateEpochsLocked(offset int64) error {
	if !l.epochs.truncateFromEnd(offset) && !l.epochsStale && !l.epochsUnwritten {
		return nil
	}
	if err := l.epochs.flush(); err != nil {
		err = l.ioError(fmt.Errorf("storage: write leader-epoch-checkpoint: %w", err))
		if errors.Is(err, ErrResourceExhausted) {
			l.epochsStale = true
			l.logger.Warn("writing leader-epoch-checkpoint after truncation failed: the next append writes it", "err", err)
			return nil
		}
		return err
	}
	l.epochsStale, l.epochsUnwritten = false, false
	return nil
}
