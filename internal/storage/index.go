package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"
)

// offsetEntrySize is the size of one .index entry: int32 relative offset,
// int32 position, big-endian.
const offsetEntrySize = 8

// ErrCorruptIndex reports an index file that cannot be trusted (a size that
// is not a whole number of entries, entries out of order or pointing past
// the log). Open rebuilds such files from the .log; callers of the decoders
// see it wrapped with the file name.
var ErrCorruptIndex = errors.New("storage: corrupt index")

// OffsetEntry is one entry of a segment's .index file: the batch holding
// base offset + RelativeOffset starts at byte Position of the .log file.
// Kafka indexes a batch's last offset, so RelativeOffset is that of the last
// record of the batch at Position.
type OffsetEntry struct {
	RelativeOffset int32
	Position       int32
}

// DecodeOffsetIndex decodes the contents of an .index file. It returns
// ErrCorruptIndex (wrapped) when len(b) is not a multiple of 8, an offset or
// position is negative, or the entries are not strictly increasing in both
// offset and position. It never panics and allocates at most len(b) bytes.
func DecodeOffsetIndex(b []byte) ([]OffsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: size %d is not a multiple of %d", ErrCorruptIndex, len(b), offsetEntrySize)
	}
	entries := make([]OffsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := OffsetEntry{
			RelativeOffset: int32(binary.BigEndian.Uint32(b[i:])),
			Position:       int32(binary.BigEndian.Uint32(b[i+4:])),
		}
		if e.RelativeOffset < 0 || e.Position < 0 {
			return nil, fmt.Errorf("%w: negative entry %d at byte %d", ErrCorruptIndex, e, i)
		}
		if n := len(entries); n > 0 {
			last := entries[n-1]
			if e.RelativeOffset <= last.RelativeOffset || e.Position <= last.Position {
				return nil, fmt.Errorf("%w: entry %v after %v at byte %d", ErrCorruptIndex, e, last, i)
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// EncodeOffsetIndex appends the file form of entries to dst.
func EncodeOffsetIndex(dst []byte, entries []OffsetEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.RelativeOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Position))
	}
	return dst
}

// offsetIndex is a segment's sparse offset index. The entries live in
// memory; the file is written append-only, so that after any crash it holds
// a prefix of the entries (any prefix of a sparse index is a valid index).
type offsetIndex struct {
	path       string
	f          *cachedFile
	maxEntries int

	mu      sync.RWMutex // guards entries
	entries []OffsetEntry
}

func newOffsetIndex(path string, f *cachedFile, entries []OffsetEntry, maxEntries int) *offsetIndex {
	return &offsetIndex{path: path, f: f, entries: entries, maxEntries: maxEntries}
}

// len returns the number of entries.
func (x *offsetIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

func (x *offsetIndex) isFull() bool { return x.len() >= x.maxEntries }

// append adds an entry; the caller guarantees it sorts after the last one.
func (x *offsetIndex) append(e OffsetEntry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var buf [offsetEntrySize]byte
	binary.BigEndian.PutUint32(buf[:], uint32(e.RelativeOffset))
	binary.BigEndian.PutUint32(buf[4:], uint32(e.Position))
	if _, err := x.f.WriteAt(buf[:], int64(len(x.entries))*offsetEntrySize); err != nil {
		return fmt.Errorf("storage: append to %s: %w", x.path, err)
	}
	x.entries = append(x.entries, e)
	return nil
}

// lookup returns the last entry whose relative offset is at most rel, or
// the zero entry (position 0) when there is none.
func (x *offsetIndex) lookup(rel int64) OffsetEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].RelativeOffset) > rel })
	if i == 0 {
		return OffsetEntry{}
	}
	return x.entries[i-1]
}

// last returns the last entry, ok false when empty.
func (x *offsetIndex) last() (OffsetEntry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.entries) == 0 {
		return OffsetEntry{}, false
	}
	return x.entries[len(x.entries)-1], true
}

// truncateToPosition drops entries pointing at or past pos.
func (x *offsetIndex) truncateToPosition(pos int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].Position) >= pos })
	return x.truncateLocked(i)
}

func (x *offsetIndex) truncateLocked(n int) error {
	if n >= len(x.entries) {
		return nil
	}
	if err := x.f.Truncate(int64(n) * offsetEntrySize); err != nil {
		return fmt.Errorf("storage: truncate %s: %w", x.path, err)
	}
	// A new array, so that no reader holding the old one sees it change.
	x.entries = append([]OffsetEntry(nil), x.entries[:n]...)
	return nil
}

// replace rewrites the whole file with entries.
func (x *offsetIndex) replace(entries []OffsetEntry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(entries) == 0 && len(x.entries) == 0 {
		// Nothing in memory: empty the file if there is one, without
		// creating it (recovery of a segment without index entries).
		if err := x.f.c.fsys.Truncate(x.f.name(), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("storage: truncate %s: %w", x.path, err)
		}
		x.entries = entries
		return nil
	}
	if err := x.f.Truncate(0); err != nil {
		return fmt.Errorf("storage: truncate %s: %w", x.path, err)
	}
	if len(entries) > 0 {
		if _, err := x.f.WriteAt(EncodeOffsetIndex(nil, entries), 0); err != nil {
			return fmt.Errorf("storage: write %s: %w", x.path, err)
		}
	}
	x.entries = entries
	return nil
}
