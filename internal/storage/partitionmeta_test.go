package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

var testTopicID = [16]byte{0x3a, 0x07, 0xdb, 0xa6, 0x5a, 0xb4, 0xbb, 0xf1, 0x80, 0x8b, 0xd6, 0xa2, 0xbc, 0x41, 0x4e, 0xb3}

// partitionMetadataSeeds are files as Kafka writes them, and variants.
func partitionMetadataSeeds() [][]byte {
	return [][]byte{
		EncodePartitionMetadata(testTopicID),
		[]byte("version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw\n"),
		[]byte("version: 1\r\ntopic_id:\tOgfbplq0u_GAi9aivEFOsw==\r\nmore: lines\n"),
		[]byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"),
		[]byte("version:0\ntopic_id: x"),
		{},
	}
}

// TestPartitionMetadataFormat: Kafka's form of partition.metadata
// (PartitionMetadata.encode: no newline at the end) and what its reader
// takes and refuses.
func TestPartitionMetadataFormat(t *testing.T) {
	if got, want := string(EncodePartitionMetadata(testTopicID)), "version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw"; got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw", true},
		{"version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw\n", true},
		{"version: 0\r\ntopic_id: Ogfbplq0u_GAi9aivEFOsw\r\n", true},
		{"version: 0\rtopic_id: Ogfbplq0u_GAi9aivEFOsw", true},
		{"version:  3\ntopic_id:\t Ogfbplq0u_GAi9aivEFOsw\nextra\n", true}, // a later version, later lines: read
		{"version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw==", true},           // Java's decoder takes padding
		{"", false},
		{"version: 0", false},
		{"version: 0\n", false},
		{"\nversion: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw", false},
		{"version:0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw", false}, // no blank after the colon
		{"version: -1\ntopic_id: Ogfbplq0u_GAi9aivEFOsw", false},
		{"version: x\ntopic_id: Ogfbplq0u_GAi9aivEFOsw", false},
		{"topic_id: Ogfbplq0u_GAi9aivEFOsw\nversion: 0", false},
		{"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", false}, // the zero id
		{"version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFO", false},
		{"version: 0\ntopic_id: Ogfbplq0u_GAi9aivEFOsw ", false},
		{"version: 0\ntopic_id: Ogfbplq0u+GAi9aivEFOsw", false}, // not URL-safe
	} {
		id, err := DecodePartitionMetadata([]byte(tc.in))
		switch {
		case tc.ok && (err != nil || id != testTopicID):
			t.Errorf("%q: %x, %v", tc.in, id, err)
		case !tc.ok && !errors.Is(err, ErrCorruptPartitionMetadata):
			t.Errorf("%q: %x, %v; want ErrCorruptPartitionMetadata", tc.in, id, err)
		}
	}
}

func FuzzDecodePartitionMetadata(f *testing.F) {
	for _, s := range partitionMetadataSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodePartitionMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptPartitionMetadata) {
				t.Fatalf("error %v does not wrap ErrCorruptPartitionMetadata", err)
			}
			return
		}
		again, err := DecodePartitionMetadata(EncodePartitionMetadata(id))
		if err != nil || again != id {
			t.Fatalf("round trip: %x %v, want %x", again, err, id)
		}
	})
}

// TestCreateTopicPartitionMetadata: CreateTopic writes partition.metadata
// with the new log; an existing log of another topic id (a deleted topic
// of the same name) is deleted and a new, empty one made; a log without
// the file (an older data dir) takes the id; Create writes none.
func TestCreateTopicPartitionMetadata(t *testing.T) {
	dir := t.TempDir()
	opts := ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "c"}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	tp, plain := TopicPartition{"t", 0}, TopicPartition{"plain", 0}
	l, err := m.CreateTopic(tp, testTopicID, Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, &appended{}, 5, 0)
	if again, err := m.CreateTopic(tp, testTopicID, Config{}); err != nil || again != l {
		t.Fatalf("CreateTopic of an existing log of the same id: %v, another log %v", err, again != l)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "t-0", PartitionMetadataFile)); err != nil || !bytes.Equal(got, EncodePartitionMetadata(testTopicID)) {
		t.Fatalf("partition.metadata %q, %v", got, err)
	}
	if _, err := m.Create(plain, Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plain-0", PartitionMetadataFile)); !os.IsNotExist(err) {
		t.Fatalf("Create without an id wrote partition.metadata: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened after a clean shutdown: the log knows its topic id from
	// the manifest (TestManifestTopicIDs).
	m, err = OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if id, ok := m.Get(tp).KnownTopicID(); !ok || id != testTopicID {
		t.Fatalf("a log loaded from the manifest knows topic id %x %v, want %x", id, ok, testTopicID)
	}
	other := testTopicID
	other[0]++
	l, err = m.CreateTopic(tp, other, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("CreateTopic of another topic id hosts the old log: log end offset %d", l.LogEndOffset())
	}
	if id, ok, err := l.TopicID(); err != nil || !ok || id != other {
		t.Fatalf("new log's topic id %x %v %v", id, ok, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "t-0", PartitionMetadataFile)); err != nil || !bytes.Equal(got, EncodePartitionMetadata(other)) {
		t.Fatalf("partition.metadata %q, %v", got, err)
	}
	pl := m.Get(plain)
	if again, err := m.CreateTopic(plain, other, Config{}); err != nil || again != pl {
		t.Fatalf("CreateTopic of a log without partition.metadata: %v, another log %v", err, again != pl)
	}
	if id, ok, err := pl.TopicID(); err != nil || !ok || id != other {
		t.Fatalf("adopted topic id %x %v %v", id, ok, err)
	}
}

// TestDeleteCheckpoints: a partition deleted, then created again under
// the same name, never loads after a crash with the deleted log's log
// start offset or recovery point: CreateTopic writes the checkpoints
// first when they may still name the deleted log. DeleteBatch itself
// does not rewrite them (Kafka's asyncDelete does, at each deletion: at
// 20,000 partitions 0.6 MB and four fsyncs for each DeleteTopics
// applied, each topic deleted by its own request paying it again).
func TestDeleteCheckpoints(t *testing.T) {
	dir := t.TempDir()
	var written atomic.Int64 // checkpoint files renamed into place
	fsys := errorfs.Wrap(vfs.Default, errorfs.Func(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRename && strings.HasSuffix(op.Path, "-checkpoint.tmp") {
			written.Add(1)
		}
		return nil
	}))
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "c", CheckpointInterval: time.Hour, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	createStartingAt2(t, m, TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"t", 2})
	written.Store(0)
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 2}} {
		if err := m.Delete(tp); err != nil {
			t.Fatal(err)
		}
	}
	if n := written.Load(); n != 0 {
		t.Errorf("deleting two partitions, one call each, wrote %d checkpoint files, want 0", n)
	}

	l, err := m.Create(TopicPartition{"t", 0}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile} {
		ck, err := ReadOffsetCheckpoint(vfs.Default, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ck[TopicPartition{"t", 1}]; !ok || len(ck) != 1 {
			t.Errorf("%s once t-0 is created again: %v, want t-1 only", name, fmt.Sprint(ck))
		}
	}
	fill(t, l, &appended{}, 1, 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// A crash now: the dir as it is, without a clean shutdown.
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(crashed, LockFile))
	mc, err := OpenManager(ManagerOptions{Dirs: []string{crashed}, NodeID: 1, ClusterID: "c", CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	l = mc.Get(TopicPartition{"t", 0})
	if l == nil {
		t.Fatal("t-0 created again is not there after a crash")
	}
	if lso, leo := l.LogStartOffset(), l.LogEndOffset(); lso != 0 || leo != 1 {
		t.Fatalf("t-0 created again, after a crash: log start offset %d, log end offset %d; want 0 and 1 (the deleted log's start was 2)", lso, leo)
	}
}

// TestDeleteCrashRecreateCheckpoints: a partition deleted, a crash before
// the checkpoints were written again, then the partition created again
// by the next process and a second crash: the new log must load empty at
// offset 0, not with the deleted log's start offset, which the checkpoint
// files still name after the first crash.
func TestDeleteCrashRecreateCheckpoints(t *testing.T) {
	dir := t.TempDir()
	opts := func(d string) ManagerOptions {
		return ManagerOptions{Dirs: []string{d}, NodeID: 1, ClusterID: "c", CheckpointInterval: time.Hour}
	}
	// crash copies the dir as it is, without a clean shutdown, but for
	// the directories of deleted logs (removed in the background, never
	// loaded).
	crash := func(from string) string {
		t.Helper()
		to := filepath.Join(t.TempDir(), "crashed")
		err := filepath.WalkDir(from, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(from, path)
			if err != nil {
				return err
			}
			switch {
			case e.IsDir() && strings.HasSuffix(e.Name(), deleteSuffix):
				return filepath.SkipDir
			case e.IsDir():
				return os.MkdirAll(filepath.Join(to, rel), 0o755)
			case e.Name() == LockFile:
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(to, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
		return to
	}
	m, err := OpenManager(opts(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tp := TopicPartition{"t", 0}
	createStartingAt2(t, m, tp)
	if err := m.Delete(tp); err != nil {
		t.Fatal(err)
	}
	first := crash(dir) // the checkpoint files still name t-0 (start 2)

	m2, err := OpenManager(opts(first))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.Get(tp) != nil {
		t.Fatal("deleted t-0 loaded after a crash")
	}
	l, err := m2.Create(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, &appended{}, 1, 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	second := crash(first)

	m3, err := OpenManager(opts(second))
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	l = m3.Get(tp)
	if l == nil {
		t.Fatal("t-0 created again is not there after a crash")
	}
	if lso, leo := l.LogStartOffset(), l.LogEndOffset(); lso != 0 || leo != 1 {
		t.Fatalf("t-0 deleted, crash, created again, crash: log start offset %d, log end offset %d; want 0 and 1 (the deleted log's start was 2)", lso, leo)
	}
}

// createStartingAt2 creates the logs of tps in m, each of three records
// with log start offset 2, flushed, and writes m's checkpoints.
func createStartingAt2(t *testing.T, m *Manager, tps ...TopicPartition) {
	t.Helper()
	for _, tp := range tps {
		l, err := m.Create(tp, Config{})
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, &appended{}, 3, 0)
		if err := l.SetLogStartOffset(2); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}
