package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingIndexOfClosedSegmentRebuilt: an offset index removed while
// the log was stopped cleanly (no recovery runs from the recovery point)
// is rebuilt with its entries, not left empty.
func TestMissingIndexOfClosedSegmentRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 20000, IndexIntervalBytes: 200}
	l := openTest(t, dir, cfg, 0)
	a := &appended{}
	fill(t, l, a, 200, 1000)
	l.Close()
	idx := segmentFiles(t, dir, ".index")
	if len(idx) < 2 {
		t.Fatalf("want several segments, have %v", idx)
	}
	first := idx[0]
	want, err := os.ReadFile(first)
	if err != nil || len(want) == 0 {
		t.Fatalf("index before: %v (%d bytes)", err, len(want))
	}
	os.Remove(first)
	l = openTest(t, dir, cfg, -1) // a clean shutdown's recovery point
	got, err := os.ReadFile(first)
	if err != nil || string(got) != string(want) {
		t.Fatalf("index after reopen: %v, %d bytes, want %d identical bytes", err, len(got), len(want))
	}
	checkEveryOffset(t, l, a)
}

// TestDeleteLongTopicName: a topic name of 249 characters (the longest
// valid) still fits in the -delete directory name.
func TestDeleteLongTopicName(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tp := TopicPartition{Topic: strings.Repeat("y", 249), Partition: 12345}
	if _, err := m.Create(tp, Config{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(tp); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tp.String())); !os.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
	if len(deletedDirName(tp, [16]byte{})) > 255 {
		t.Fatal("name too long")
	}
}

// TestEmptyIndexOfLargeBatchesKept: a closed segment whose batches all
// start within index.interval.bytes of its start has no offset index entry
// however large it is (one big batch, or a small one and a big one), so
// its empty index is right and reopening after a clean shutdown does not
// rebuild it (TestMissingIndexOfClosedSegmentRebuilt: a lost index that
// had entries is rebuilt).
func TestEmptyIndexOfLargeBatchesKept(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 100000, IndexIntervalBytes: 200}
	l := openTest(t, dir, cfg, 0)
	a := &appended{}
	appendOne := func(n int) {
		b := testBatch(t, n, 1000+int64(len(a.batches)), fmt.Sprint(len(a.batches)))
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
		a.batches = append(a.batches, b)
	}
	appendOne(200) // one batch of about 3 KB: a segment of its own
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendOne(1) // a small batch, then a big one: still no entry
	appendOne(200)
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendOne(1)
	l.Close()
	reopen := func() string {
		var logs bytes.Buffer
		l, err := Open(OpenOptions{Dir: dir, Config: cfg, RecoveryPoint: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		checkEveryOffset(t, l, a)
		l.Close()
		return logs.String()
	}
	if logs := reopen(); strings.Contains(logs, "rebuilding indexes") {
		t.Fatalf("reopening rebuilt a right empty index:\n%s", logs)
	}
}
