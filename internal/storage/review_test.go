package storage

import (
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
