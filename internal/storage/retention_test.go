package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// retentionLog opens a log whose segments hold 4 batches of testBatch(…,
// 2, …) each, with bounds at the log end offset.
func retentionLog(t *testing.T, clock *fakeClock, cleanup Cleanup) *Log {
	t.Helper()
	size := int64(len(testBatch(t, 2, 0, "x")))
	l, err := Open(OpenOptions{Dir: t.TempDir(), Now: clock.now, Config: Config{SegmentBytes: 4 * size, Cleanup: cleanup}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	return l
}

// appendAt appends n two-record batches with max timestamp ts.
func appendAt(t *testing.T, l *Log, n int, ts int64) {
	t.Helper()
	for range n {
		if _, err := l.Append(testBatch(t, 2, ts-1, "r"), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteOld(t *testing.T, l *Log) int {
	t.Helper()
	n, err := l.DeleteOldSegments()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRetentionByTime(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	cfg := DefaultCleanup()
	cfg.RetentionAge = time.Hour
	l := retentionLog(t, clock, cfg)
	old := testEpoch.Add(-2 * time.Hour).UnixMilli()
	appendAt(t, l, 10, old) // segments [0,8) [8,16) and half of [16,24)
	appendAt(t, l, 10, testEpoch.UnixMilli())
	if got := l.Segments(); !slices.Equal(got, []int64{0, 8, 16, 24, 32}) {
		t.Fatalf("segments %v", got)
	}
	if n := deleteOld(t, l); n != 2 {
		t.Fatalf("deleted %d segments, want 2 (the third mixes old and new records)", n)
	}
	if l.LogStartOffset() != 16 || !slices.Equal(l.Segments(), []int64{16, 24, 32}) {
		t.Fatalf("log start %d, segments %v", l.LogStartOffset(), l.Segments())
	}
	if _, err := l.Read(0, 1<<20, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if res, err := l.Read(16, 1<<20, 1<<62, true); err != nil || len(res.Records) == 0 {
		t.Fatalf("read at the log start: %v", err)
	}
	// The files wait file.delete.delay.ms as .deleted.
	if got := segmentFiles(t, l.Dir(), ".log.deleted"); len(got) != 2 {
		t.Fatalf(".deleted files %v", got)
	}
	clock.t = clock.t.Add(cfg.FileDeleteDelay)
	deleteOld(t, l)
	if got := segmentFiles(t, l.Dir(), ".deleted"); len(got) != 0 {
		t.Fatalf(".deleted files left after the delay: %v", got)
	}
	// Once everything is old, the active segment rolls and goes too.
	clock.t = clock.t.Add(2 * time.Hour)
	if n := deleteOld(t, l); n != 3 {
		t.Fatalf("deleted %d, want 3", n)
	}
	if l.LogStartOffset() != 40 || l.LogEndOffset() != 40 || !slices.Equal(l.Segments(), []int64{40}) {
		t.Fatalf("log start %d end %d segments %v", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
	}
	appendAt(t, l, 1, clock.t.UnixMilli())
	if l.LogEndOffset() != 42 {
		t.Fatalf("log end %d after append", l.LogEndOffset())
	}
}

func TestRetentionBySize(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	cfg := DefaultCleanup()
	l := retentionLog(t, clock, cfg)
	appendAt(t, l, 18, testEpoch.UnixMilli()) // 4 full segments and one of 2 batches
	seg := 4 * int64(len(testBatch(t, 2, 0, "x")))
	cfg.RetentionBytes = 2*seg + seg/2 // 4.5 segments of data: 2 must go
	if err := l.SetConfig(Config{SegmentBytes: seg, Cleanup: cfg}); err != nil {
		t.Fatal(err)
	}
	if n := deleteOld(t, l); n != 2 {
		t.Fatalf("deleted %d segments, want 2", n)
	}
	if l.Size() > 2*seg+seg/2 || l.Size()+seg <= cfg.RetentionBytes {
		t.Fatalf("size %d after retention.bytes %d", l.Size(), cfg.RetentionBytes)
	}
	if n := deleteOld(t, l); n != 0 {
		t.Fatalf("second pass deleted %d", n)
	}
}

func TestRetentionStopsAtHighWatermark(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	cfg := DefaultCleanup()
	cfg.RetentionAge = 0
	l := retentionLog(t, clock, cfg)
	appendAt(t, l, 12, testEpoch.Add(-time.Minute).UnixMilli())
	l.SetBounds(func() (int64, int64) { return 15, 15 })
	if n := deleteOld(t, l); n != 1 || l.LogStartOffset() != 8 {
		t.Fatalf("deleted %d, log start %d: want only [0,8) below the high-watermark 15", n, l.LogStartOffset())
	}
	// Without bounds (nobody replicates the log) nothing goes by age.
	l.SetBounds(nil)
	if n := deleteOld(t, l); n != 0 {
		t.Fatalf("deleted %d without bounds", n)
	}
}

func TestRetentionLogStartOffset(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := retentionLog(t, clock, Cleanup{}) // keeps everything by policy
	l.SetBounds(nil)
	appendAt(t, l, 12, testEpoch.UnixMilli())
	moved := 0
	kick := func() { moved++ }
	l.startMoved.Store(&kick)
	if err := l.SetLogStartOffset(17); err != nil {
		t.Fatal(err)
	}
	if moved != 1 {
		t.Fatalf("start moved hook called %d times", moved)
	}
	if n := deleteOld(t, l); n != 2 {
		t.Fatalf("deleted %d segments below the log start 17, want 2", n)
	}
	if l.LogStartOffset() != 17 || !slices.Equal(l.Segments(), []int64{16}) {
		t.Fatalf("log start %d, segments %v", l.LogStartOffset(), l.Segments())
	}
	res, err := l.Read(17, 1<<20, 1<<62, true)
	if err != nil || len(res.Records) == 0 || res.LogStartOffset != 17 {
		t.Fatalf("read at the log start: %+v %v", res, err)
	}
	// Up to the log end: the active segment stays (it is never deleted
	// for the log start alone).
	if err := l.SetLogStartOffset(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n := deleteOld(t, l); n != 0 || len(l.Segments()) != 1 {
		t.Fatalf("deleted %d, segments %v", n, l.Segments())
	}
}

// TestManagerRetentionTask runs the Manager's retention task in a bubble:
// a segment older than retention.ms goes at the next check, the log start
// offset is checkpointed, and the .deleted files go after the delay.
func TestManagerRetentionTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, RetentionCheckInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		seg := 4 * int64(len(testBatch(t, 2, 0, "x")))
		cfg := DefaultCleanup()
		cfg.RetentionAge = time.Hour
		tp := TopicPartition{Topic: "t", Partition: 0}
		l, err := m.Create(tp, Config{SegmentBytes: seg, Cleanup: cfg})
		if err != nil {
			t.Fatal(err)
		}
		l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
		appendAt(t, l, 8, time.Now().Add(-2*time.Hour).UnixMilli())
		appendAt(t, l, 1, time.Now().UnixMilli())

		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if l.LogStartOffset() != 16 {
			t.Fatalf("log start %d after the retention check, want 16", l.LogStartOffset())
		}
		lsos, err := ReadOffsetCheckpoint(nil, filepath.Join(dir, LogStartOffsetCheckpointFile))
		if err != nil || lsos[tp] != 16 {
			t.Fatalf("log-start-offset-checkpoint %v %v", lsos, err)
		}
		if got := segmentFiles(t, l.Dir(), ".log.deleted"); len(got) != 2 {
			t.Fatalf(".deleted files %v", got)
		}
		time.Sleep(cfg.FileDeleteDelay)
		synctest.Wait()
		if got := segmentFiles(t, l.Dir(), ".deleted"); len(got) != 0 {
			t.Fatalf(".deleted files after file.delete.delay.ms: %v", got)
		}

		// DeleteRecords: the task runs at once, not at the next interval.
		if err := l.SetLogStartOffset(17); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		lsos, err = ReadOffsetCheckpoint(nil, filepath.Join(dir, LogStartOffsetCheckpointFile))
		if err != nil || lsos[tp] != 17 {
			t.Fatalf("log-start-offset-checkpoint after SetLogStartOffset: %v %v", lsos, err)
		}
		if _, err := os.Stat(filepath.Join(l.Dir(), segmentName(16)+logSuffix)); err != nil {
			t.Fatalf("segment holding the log start: %v", err)
		}
	})
}

// TestRetentionDoesNotWaitForReaders: a fetch holding a segment's bytes
// (ReadSlice, as the sendfile path does while it writes them to a slow
// consumer) neither stops retention from deleting the segment nor makes it
// wait; the reader still reads its bytes through the descriptor it holds,
// which is closed once it lets go.
func TestRetentionDoesNotWaitForReaders(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := retentionLog(t, clock, DefaultCleanup())
	appendAt(t, l, 12, testEpoch.UnixMilli()) // segments [0,8) [8,16) [16,24)
	first := l.segments()[0]
	slice, _, err := l.ReadSlice(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || slice.Length == 0 {
		t.Fatalf("read slice: %+v %v", slice, err)
	}
	if err := l.SetLogStartOffset(16); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		n, _ := l.DeleteOldSegments()
		done <- n
	}()
	select {
	case n := <-done:
		if n != 2 {
			t.Fatalf("deleted %d segments, want 2", n)
		}
	case <-time.After(10 * time.Second):
		slice.Release()
		t.Fatal("retention waited for a reader of the deleted segment")
	}
	clock.t = clock.t.Add(DefaultCleanup().FileDeleteDelay)
	deleteOld(t, l) // removes the .deleted files; the reader keeps its file
	if got := segmentFiles(t, l.Dir(), ".deleted"); len(got) != 0 {
		t.Fatalf(".deleted files left after the delay: %v", got)
	}
	buf := make([]byte, slice.Length)
	if _, err := slice.File.ReadAt(buf, slice.Position); err != nil {
		t.Fatalf("reader of the deleted segment: %v", err)
	}
	if !bytes.HasPrefix(buf, testBatch(t, 2, testEpoch.UnixMilli()-1, "r")[:8]) {
		t.Fatal("reader of the deleted segment got other bytes")
	}
	slice.Release()
	// The reader held the descriptor, not the segment. Once it and the
	// background flush of the rolled segments (started by the appends;
	// Flush waits for it) let go, the deleted segment's files are closed.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	deleteOld(t, l)
	l.mu.Lock()
	left := len(l.retired)
	l.mu.Unlock()
	first.rw.RLock()
	closed := first.closed
	first.rw.RUnlock()
	l.files.mu.Lock()
	fdOpen := first.log.f != nil
	l.files.mu.Unlock()
	if !closed || left != 0 || fdOpen {
		t.Fatalf("after the reader let go: closed %v, %d retired segments left, descriptor open %v", closed, left, fdOpen)
	}
}
