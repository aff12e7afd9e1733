package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"
)

// timeEntrySize is the size of one .timeindex entry: int64 timestamp,
// int32 relative offset, big-endian.
const timeEntrySize = 12

// TimeEntry is one entry of a segment's .timeindex file: Timestamp
// (milliseconds) is the largest batch max timestamp of the segment up to the
// batch whose last offset is base offset + RelativeOffset. Entries are added
// only when the segment's max timestamp grows.
type TimeEntry struct {
	Timestamp      int64
	RelativeOffset int32
}

// DecodeTimeIndex decodes the contents of a .timeindex file. It returns
// ErrCorruptIndex (wrapped) when len(b) is not a multiple of 12, an offset is
// negative, timestamps are not strictly increasing or offsets decrease. It
// never panics and allocates at most len(b) bytes.
func DecodeTimeIndex(b []byte) ([]TimeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: size %d is not a multiple of %d", ErrCorruptIndex, len(b), timeEntrySize)
	}
	entries := make([]TimeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		e := TimeEntry{
			Timestamp:      int64(binary.BigEndian.Uint64(b[i:])),
			RelativeOffset: int32(binary.BigEndian.Uint32(b[i+8:])),
		}
		if e.RelativeOffset < 0 {
			return nil, fmt.Errorf("%w: negative offset in %v at byte %d", ErrCorruptIndex, e, i)
		}
		if n := len(entries); n > 0 {
			last := entries[n-1]
			if e.Timestamp <= last.Timestamp || e.RelativeOffset < last.RelativeOffset {
				return nil, fmt.Errorf("%w: entry %v after %v at byte %d", ErrCorruptIndex, e, last, i)
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// EncodeTimeIndex appends the file form of entries to dst.
func EncodeTimeIndex(dst []byte, entries []TimeEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.RelativeOffset))
	}
	return dst
}

// timeIndex is a segment's time index, kept in memory and written
// append-only like offsetIndex.
type timeIndex struct {
	path       string
	f          *cachedFile
	maxEntries int

	mu      sync.RWMutex // guards entries
	entries []TimeEntry
}

func newTimeIndex(path string, f *cachedFile, entries []TimeEntry, maxEntries int) *timeIndex {
	return &timeIndex{path: path, f: f, entries: entries, maxEntries: maxEntries}
}

// len returns the number of entries.
func (x *timeIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

func (x *timeIndex) isFull() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries) >= x.maxEntries
}

// maybeAppend adds (ts, rel) when ts is larger than the last entry's
// timestamp and, unless skipFull, the index has room.
func (x *timeIndex) maybeAppend(ts int64, rel int32, skipFull bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.entries)
	if n > 0 && ts <= x.entries[n-1].Timestamp {
		return nil
	}
	if ts < 0 || (!skipFull && n >= x.maxEntries) {
		return nil
	}
	if n > 0 && rel < x.entries[n-1].RelativeOffset {
		return fmt.Errorf("storage: time index %s: offset %d before %d", x.path, rel, x.entries[n-1].RelativeOffset)
	}
	var buf [timeEntrySize]byte
	binary.BigEndian.PutUint64(buf[:], uint64(ts))
	binary.BigEndian.PutUint32(buf[8:], uint32(rel))
	if _, err := x.f.WriteAt(buf[:], int64(n)*timeEntrySize); err != nil {
		return fmt.Errorf("storage: append to %s: %w", x.path, err)
	}
	x.entries = append(x.entries, TimeEntry{Timestamp: ts, RelativeOffset: rel})
	return nil
}

// lookup returns the last entry whose timestamp is at most ts; ok is false
// when there is none (search from the start of the segment).
func (x *timeIndex) lookup(ts int64) (TimeEntry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].Timestamp > ts })
	if i == 0 {
		return TimeEntry{}, false
	}
	return x.entries[i-1], true
}

func (x *timeIndex) last() (TimeEntry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.entries) == 0 {
		return TimeEntry{}, false
	}
	return x.entries[len(x.entries)-1], true
}

// truncateToOffset drops entries whose relative offset is at least rel.
func (x *timeIndex) truncateToOffset(rel int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].RelativeOffset) >= rel })
	if i >= len(x.entries) {
		return nil
	}
	if err := x.f.Truncate(int64(i) * timeEntrySize); err != nil {
		return fmt.Errorf("storage: truncate %s: %w", x.path, err)
	}
	x.entries = append([]TimeEntry(nil), x.entries[:i]...)
	return nil
}

func (x *timeIndex) replace(entries []TimeEntry) error {
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
		if _, err := x.f.WriteAt(EncodeTimeIndex(nil, entries), 0); err != nil {
			return fmt.Errorf("storage: write %s: %w", x.path, err)
		}
	}
	x.entries = entries
	return nil
}
