package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// AbortedTxn is one entry of a segment's .txnindex (Kafka's AbortedTxn): a
// transaction of ProducerID that was aborted. FirstOffset is the offset of
// its first record in this partition, LastOffset that of its ABORT marker,
// and LastStableOffset the last stable offset once the marker was written
// (the first offset of the next transaction still open, or LastOffset+1).
// Fetch with read_committed returns the entries overlapping the fetched
// range so that consumers drop the aborted records (KIP-98).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnEntrySize is the size of one .txnindex entry: version int16 (0),
// producer id int64, first offset int64, last offset int64, last stable
// offset int64, big-endian.
const txnEntrySize = 34

// ErrCorruptTxnIndex reports a .txnindex whose size is not a whole number
// of entries or whose entries do not parse.
var ErrCorruptTxnIndex = errors.New("storage: corrupt transaction index")

// EncodeTxnIndex returns the .txnindex bytes of entries.
func EncodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnEntrySize)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastStableOffset))
	}
	return b
}

// DecodeTxnIndex parses .txnindex bytes. Errors: ErrCorruptTxnIndex for a
// trailing partial entry or a version other than 0.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptTxnIndex, len(b))
	}
	out := make([]AbortedTxn, 0, len(b)/txnEntrySize)
	for i := 0; i < len(b); i += txnEntrySize {
		e := b[i : i+txnEntrySize]
		if v := int16(binary.BigEndian.Uint16(e)); v != 0 {
			return nil, fmt.Errorf("%w: entry %d has version %d", ErrCorruptTxnIndex, i/txnEntrySize, v)
		}
		out = append(out, AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		})
	}
	return out, nil
}

// txnIndex is a segment's .txnindex: the aborted transactions whose ABORT
// marker is in the segment, in marker order. The file is created on the
// first entry; the entries are kept in memory once read. Writers hold
// Log.mu; readers (Fetch with read_committed) only mu.
type txnIndex struct {
	mu      sync.Mutex // guards the fields below
	loaded  bool
	entries []AbortedTxn
	dirty   bool // appended since the last sync
}

// txnIndexPath is the .txnindex file of the segment.
func (s *segment) txnIndexPath() string { return s.path(txnIndexSuffix) }

// loadLocked reads the file once. A corrupt file is dropped (the caller
// rebuilds it from the log when it recovers the segment). Requires mu.
func (s *segment) loadTxnIndexLocked() error {
	t := &s.txn
	if t.loaded {
		return nil
	}
	b, err := vfs.ReadFile(s.fsys(), s.txnIndexPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.entries = nil
	case err != nil:
		return fmt.Errorf("storage: read %s: %w", s.txnIndexPath(), err)
	default:
		if t.entries, err = DecodeTxnIndex(b); err != nil {
			t.entries = nil
			t.loaded = true
			return fmt.Errorf("%s: %w", s.txnIndexPath(), err)
		}
	}
	t.loaded = true
	return nil
}

// openTxnIndex loads the segment's .txnindex entries and opens its file
// for appending, creating it, for an append whose markers abort
// transactions: it is opened before the append writes anything, so that
// running out of descriptors refuses the append whole. The caller closes
// the file.
func (s *segment) openTxnIndex() (vfs.File, error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnIndexLocked(); err != nil && !errors.Is(err, ErrCorruptTxnIndex) {
		return nil, err
	}
	f, err := s.fsys().OpenFile(s.txnIndexPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", s.txnIndexPath(), err)
	}
	return f, nil
}

// writeAbortedTxns appends entries to f, the .txnindex from openTxnIndex,
// without adding them to the index in memory (addAbortedTxns does, once
// the batches holding their markers are written). It returns the file's
// size before them, to cut it back to when those batches are not
// written; on error it has cut it back already, if it could.
func (s *segment) writeAbortedTxns(f vfs.File, entries []AbortedTxn) (before int64, err error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("storage: append %s: %w", s.txnIndexPath(), err)
	}
	before = fi.Size()
	if _, err := f.Write(EncodeTxnIndex(entries)); err != nil {
		if terr := f.Truncate(before); terr != nil {
			// A partial entry stays: a failure of the disk, whatever
			// the write's was.
			return before, fmt.Errorf("storage: cut %s back after a failed append (%v): %w", s.txnIndexPath(), err, terr)
		}
		return before, fmt.Errorf("storage: append %s: %w", s.txnIndexPath(), err)
	}
	return before, nil
}

// addAbortedTxns adds entries, written by writeAbortedTxns, to the index
// in memory.
func (s *segment) addAbortedTxns(entries []AbortedTxn) {
	t := &s.txn
	t.mu.Lock()
	t.entries = append(t.entries, entries...)
	t.dirty = true
	t.mu.Unlock()
}

// appendAbortedTxns adds entries to the segment's .txnindex, file and
// memory (recovery and replay: the markers are in the log already).
func (s *segment) appendAbortedTxns(entries []AbortedTxn) error {
	f, err := s.openTxnIndex()
	if err != nil {
		return err
	}
	_, err = s.writeAbortedTxns(f, entries)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.addAbortedTxns(entries)
	return nil
}

// truncateTxnIndex removes the entries whose marker is at or after offset
// (Kafka's TransactionIndex.truncateTo) and rewrites the file; an index left
// empty is removed.
func (s *segment) truncateTxnIndex(offset int64) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	loadErr := s.loadTxnIndexLocked()
	if loadErr != nil && !errors.Is(loadErr, ErrCorruptTxnIndex) {
		return loadErr
	}
	keep := 0
	for keep < len(t.entries) && t.entries[keep].LastOffset < offset {
		keep++
	}
	if keep == len(t.entries) && loadErr == nil {
		return nil
	}
	t.entries = t.entries[:keep]
	if keep == 0 {
		if err := s.fsys().Remove(s.txnIndexPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("storage: %w", err)
		}
		t.dirty = false
		return nil
	}
	if err := vfs.WriteFile(s.fsys(), s.txnIndexPath(), EncodeTxnIndex(t.entries), 0o644); err != nil {
		return fmt.Errorf("storage: rewrite %s: %w", s.txnIndexPath(), err)
	}
	t.dirty = true
	return nil
}

// syncTxnIndex fsyncs the .txnindex if entries were added since the last
// sync.
func (s *segment) syncTxnIndex() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil
	}
	f, err := s.fsys().OpenFile(s.txnIndexPath(), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		t.dirty = false
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: fsync %s: %w", s.txnIndexPath(), err)
	}
	t.dirty = false
	return nil
}

// collectAbortedTxns appends to out the segment's entries overlapping
// [from, upper) and reports whether no later segment can hold more (an
// entry's last stable offset reached upper), as Kafka's
// TransactionIndex.collectAbortedTxns.
func (s *segment) collectAbortedTxns(from, upper int64, out []AbortedTxn) ([]AbortedTxn, bool, error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnIndexLocked(); err != nil {
		return out, false, err
	}
	for _, e := range t.entries {
		if e.LastOffset >= from && e.FirstOffset < upper {
			out = append(out, e)
		}
		if e.LastStableOffset >= upper {
			return out, true, nil
		}
	}
	return out, false, nil
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, upper): those whose marker is at or after from and whose first
// offset is below upper, in marker order (Fetch with read_committed;
// upper is the end of the fetched data, at most the last stable offset).
// Errors: ErrClosed, I/O errors, ErrCorruptTxnIndex (a segment whose index
// is corrupt and was not recovered since).
func (l *Log) AbortedTransactions(from, upper int64) ([]AbortedTxn, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if from >= upper {
		return nil, nil
	}
	segs := l.segments()
	var out []AbortedTxn
	for i := floorSegment(segs, from); i < len(segs); i++ {
		var done bool
		var err error
		out, done, err = segs[i].collectAbortedTxns(from, upper, out)
		if err != nil {
			return out, err
		}
		if done {
			break
		}
	}
	return out, nil
}
