package storage

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// openFilesUnder counts this process's descriptors open on files under
// dir, from /proc/self/fd.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			n++
		}
	}
	return n
}

// TestFileCacheCapsOpenDescriptors: 40 logs sharing a cache of 12
// descriptors take appends and reads, rolls and a restart, and never hold
// more than 12 of their files open, whatever the number of segments.
func TestFileCacheCapsOpenDescriptors(t *testing.T) {
	root := t.TempDir()
	const logs, capacity = 40, 12
	files := NewFileCache(capacity)
	open := func() []*Log {
		var ls []*Log
		for i := range logs {
			l, err := Open(OpenOptions{Dir: filepath.Join(root, fmt.Sprintf("t-%d", i)), Config: Config{SegmentBytes: 200}, Files: files})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		return ls
	}
	ls := open()
	want := map[int][][]byte{}
	for round := range 3 {
		for i, l := range ls {
			b := testBatch(t, 2, int64(round), fmt.Sprint(i))
			if _, err := l.Append(b, 0); err != nil {
				t.Fatal(err)
			}
			want[i] = append(want[i], b)
		}
	}
	// The background flushes of rolled segments hold their files while
	// they run (the cap is a soft one); wait for them.
	for _, l := range ls {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := files.Open(); n > capacity {
		t.Fatalf("cache holds %d descriptors, cap %d", n, capacity)
	}
	if n := openFilesUnder(t, root); n > capacity {
		t.Fatalf("%d descriptors open under the log dirs, cap %d", n, capacity)
	}
	check := func(ls []*Log) {
		t.Helper()
		for i, l := range ls {
			for j, b := range want[i] {
				res, err := l.Read(int64(2*j), 1<<20, 1<<62, true)
				if err != nil || !bytes.Equal(res.Records[:len(b)], b) {
					t.Fatalf("log %d batch %d: %v, got %d bytes", i, j, err, len(res.Records))
				}
			}
		}
		if n := openFilesUnder(t, root); n > capacity {
			t.Fatalf("%d descriptors open under the log dirs after reads, cap %d", n, capacity)
		}
	}
	check(ls)
	if segs := len(ls[0].segments()); segs < 2 {
		t.Fatalf("log 0 has %d segments, want rolls", segs)
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := files.Open(); n != 0 {
		t.Fatalf("cache holds %d descriptors after every log closed", n)
	}
	ls = open()
	check(ls)
	for _, l := range ls {
		l.Close()
	}
	if n := openFilesUnder(t, root); n != 0 {
		t.Fatalf("%d descriptors left open", n)
	}
}

// TestFileCacheKeepsFilesInUse: a file in use is not closed by eviction,
// nor by its segment's close; the last release closes it.
func TestFileCacheKeepsFilesInUse(t *testing.T) {
	dir := t.TempDir()
	c := NewFileCache(1)
	var hs []*cachedFile
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, c.file(p, nil))
	}
	var fs []vfs.File
	for _, h := range hs {
		f, err := h.acquire()
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	if n := c.Open(); n != 3 {
		t.Fatalf("open = %d with 3 in use, want 3 (over the cap, none evictable)", n)
	}
	if err := hs[0].close(); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := fs[0].ReadAt(b[:], 0); err != nil {
		t.Fatalf("file closed under its user: %v", err)
	}
	if _, err := hs[0].acquire(); err != errSegmentClosed {
		t.Fatalf("acquire after close: %v, want errSegmentClosed", err)
	}
	for _, h := range hs {
		h.release()
	}
	if n := c.Open(); n != 1 {
		t.Fatalf("open = %d once idle, want the cap, 1", n)
	}
	if _, err := fs[0].ReadAt(b[:], 0); err == nil {
		t.Fatal("closed file still open after its last release")
	}
	// hs[2] was released last: it is the one kept; hs[1] opens again,
	// also after a rename.
	if err := hs[1].rename(filepath.Join(dir, "renamed")); err != nil {
		t.Fatal(err)
	}
	if _, err := hs[1].ReadAt(b[:], 0); err != nil || b[0] != 1 {
		t.Fatalf("reopen after rename: %v, byte %d", err, b[0])
	}
	if opens := c.Opens(); opens != 4 {
		t.Fatalf("opens = %d, want 4 (3 first uses, 1 reopen)", opens)
	}
}

// TestReadSliceDoesNotHoldUpTruncation: a fetch holding a slice of a
// segment (writing it to a slow socket) does not stall truncation or the
// removal of the segment, and still reads the bytes it located from the
// file it holds.
func TestReadSliceDoesNotHoldUpTruncation(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{SegmentBytes: 300}, 0)
	var a appended
	fill(t, l, &a, 6, 1000)
	slice, _, err := l.ReadSlice(0, 1<<20, 1<<62, true)
	if err != nil || slice.Length == 0 {
		t.Fatalf("ReadSlice: %v, %d bytes", err, slice.Length)
	}
	defer slice.Release()
	done := make(chan error, 1)
	go func() { done <- l.TruncateFullyAndStartAt(100) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("truncation waits for a reader's slice")
	}
	got := make([]byte, slice.Length)
	if _, err := slice.File.ReadAt(got, slice.Position); err != nil {
		t.Fatalf("reading the held slice after its segment was removed: %v", err)
	}
	if want := a.all()[:slice.Length]; !bytes.Equal(got, want) {
		t.Fatal("held slice reads other bytes than it located")
	}
	slice.Release()
	if n := l.files.Open(); n != 1 {
		t.Fatalf("%d descriptors open after release, want the new segment's .log", n)
	}
}

// TestReadSliceDoesNotHoldUpRetention: a stalled reader holding a slice
// of the oldest segment (a fetch whose consumer stopped reading its
// socket) does not stop retention from deleting that segment, nor appends
// meanwhile; it still reads the bytes it located.
func TestReadSliceDoesNotHoldUpRetention(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Config{SegmentBytes: 300}, 0)
	var a appended
	fill(t, l, &a, 6, 1000)
	segs := l.segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	oldLog := segs[0].path(logSuffix)
	slice, _, err := l.ReadSlice(0, 1<<20, 1<<62, true)
	if err != nil || slice.Length == 0 || slice.File == nil {
		t.Fatalf("ReadSlice: %v, %d bytes, file %v", err, slice.Length, slice.File)
	}
	defer slice.Release()
	done := make(chan error, 1)
	go func() {
		// Retention deletes the oldest segment under the reader while
		// appends go on.
		if err := l.SetLogStartOffset(segs[1].baseOffset); err != nil {
			done <- err
			return
		}
		deleted, err := l.DeleteOldSegments()
		if err == nil && deleted != 1 {
			err = fmt.Errorf("deleted %d segments, want 1", deleted)
		}
		for i := 0; i < 20 && err == nil; i++ {
			_, err = l.Append(testBatch(t, 1, 5000+int64(i), "more"), 7)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("retention or appends wait for a stalled reader's slice")
	}
	if got := l.segments()[0].baseOffset; got != segs[1].baseOffset {
		t.Fatalf("first segment at %d after retention, want %d", got, segs[1].baseOffset)
	}
	if names := segmentFiles(t, dir, logSuffix); len(names) == 0 || slices.Contains(names, oldLog) {
		t.Fatalf("the deleted segment's .log is still there: %v", names)
	}
	got := make([]byte, slice.Length)
	if _, err := slice.File.ReadAt(got, slice.Position); err != nil {
		t.Fatalf("reading the held slice after retention deleted its segment: %v", err)
	}
	if want := a.all()[:slice.Length]; !bytes.Equal(got, want) {
		t.Fatal("held slice reads other bytes than it located")
	}
}

// TestReopenSmallLogKeepsMaxTimestamp: a small log (no index entries, so
// no index files) closed and reopened, as most logs of a node with many
// partitions are at a restart, still knows its largest timestamp and
// finds offsets by time, without the last time index entry Kafka writes
// at close.
func TestReopenSmallLogKeepsMaxTimestamp(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Config{}, 0)
	var a appended
	fill(t, l, &a, 3, 5000)
	ts, off, ok := l.MaxTimestamp()
	if !ok {
		t.Fatal("no max timestamp")
	}
	l.Close()
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if got := segmentFiles(t, dir, suf); len(got) != 0 {
			t.Fatalf("index files of a small log: %v", got)
		}
	}
	l = openTest(t, dir, Config{}, -1)
	ts2, off2, ok := l.MaxTimestamp()
	if !ok || ts2 != ts || off2 != off {
		t.Fatalf("after reopen: max timestamp %d at %d (%v), want %d at %d", ts2, off2, ok, ts, off)
	}
	got, _, found, err := l.OffsetForTimestamp(ts)
	if err != nil || !found || got != off {
		t.Fatalf("offset for timestamp %d after reopen: %d %v %v, want %d", ts, got, found, err, off)
	}
}

// TestReadSliceCopiesWhenFilesFull: once the node's open files are at
// log.open.files.max, a zero-copy read gives the bytes instead of holding
// one more descriptor (a fetch of every partition of a node holds a slice
// of each until its response is written).
func TestReadSliceCopiesWhenFilesFull(t *testing.T) {
	root := t.TempDir()
	files := NewFileCache(2)
	var logs []*Log
	var want [][]byte
	for i := range 4 {
		l, err := Open(OpenOptions{Dir: filepath.Join(root, fmt.Sprint(i)), Files: files})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		b := testBatch(t, 1, 1, fmt.Sprint(i))
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		logs, want = append(logs, l), append(want, b)
	}
	var held []FileSlice
	for i, l := range logs {
		s, _, err := l.ReadSlice(0, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
		got := s.Data
		if s.File != nil {
			got = make([]byte, s.Length)
			if _, err := s.File.ReadAt(got, s.Position); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("log %d: slice holds other bytes", i)
		}
	}
	if held[0].File == nil || held[1].File == nil || held[2].Data == nil || held[3].Data == nil {
		t.Fatal("want the first two slices holding files, the next two copied")
	}
	if n := files.Open(); n != 2 {
		t.Fatalf("%d files open, want the cap, 2", n)
	}
	for _, s := range held {
		s.Release()
	}
}

// TestPartitionsMaxFollowsDescriptors: with every file open
// (log.open.files.max=-1) the default partition limit stays under half the
// descriptor limit at 3 files a partition, however small; memory's limit
// has a floor of 1,000.
func TestPartitionsMaxFollowsDescriptors(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		mem          int64
		nofile       uint64
		openFilesMax int
		want         int
	}{
		{24 * gib, 1024, -1, 170},
		{24 * gib, 1024, 0, 24 * gib / PartitionMemory},
		{24 * gib, 20000, -1, 3333},
		{24 * gib, 0, -1, 24 * gib / PartitionMemory},
		{32 << 20, 1 << 20, 0, 1000},
		{0, 4, -1, 1},
		{0, 0, 0, 1 << 20},
	} {
		if got := partitionsMax(c.mem, c.nofile, c.openFilesMax); got != c.want {
			t.Errorf("partitionsMax(%d, %d, %d) = %d, want %d", c.mem, c.nofile, c.openFilesMax, got, c.want)
		}
	}
}

// TestMaxConnections: the default connection limit leaves the logs their
// segment files and reservedDescriptors; a limit too small for both
// still admits a few connections, and an unknown or huge limit none.
func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		nofile       uint64
		openFilesMax int
		want         int
	}{
		{1024, 512, 1024 - 512 - 64},
		{20000, 4096, 20000 - 4096 - 64},
		{1024, -1, 1024 - 512 - 64},
		{100, 64, 16},
		{0, 4096, math.MaxInt32},
		{1 << 40, 4096, math.MaxInt32},
	} {
		if got := maxConnections(tc.nofile, tc.openFilesMax); got != tc.want {
			t.Errorf("maxConnections(%d, %d) = %d, want %d", tc.nofile, tc.openFilesMax, got, tc.want)
		}
	}
}
