package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

func TestManagerLifecycle(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	open := func(clusterID string) (*Manager, error) {
		m, err := OpenManager(ManagerOptions{Dirs: dirs, NodeID: 1, ClusterID: clusterID, Default: smallSegments})
		if err == nil {
			t.Cleanup(func() { m.Close() })
		}
		return m, err
	}
	m, err := open("")
	if err != nil {
		t.Fatal(err)
	}
	cid := m.ClusterID()
	if len(cid) != 22 {
		t.Fatalf("cluster id %q", cid)
	}
	tps := []TopicPartition{{"a", 0}, {"a", 1}, {"b-c", 0}, {"d", 7}}
	data := map[TopicPartition]*appended{}
	for _, tp := range tps {
		l, err := m.Create(tp, smallSegments)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := m.Create(tp, Config{}); err != nil || again != l {
			t.Fatal("Create of an existing log returned another")
		}
		data[tp] = &appended{}
		fill(t, l, data[tp], 40, 0)
	}
	if l, err := m.Create(TopicPartition{"inherits", 0}, Config{SegmentAge: time.Hour}); err != nil ||
		l.Config().SegmentBytes != smallSegments.SegmentBytes || l.Config().SegmentAge != time.Hour {
		t.Fatalf("config not inherited: %v", err)
	}
	if err := m.Delete(TopicPartition{"inherits", 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(TopicPartition{"bad/name", 0}, Config{}); !errors.Is(err, ErrInvalidPartition) {
		t.Fatalf("bad name: %v", err)
	}
	// Logs are spread over both dirs.
	for _, d := range dirs {
		if n := len(globDirs(t, d)); n != 2 {
			t.Fatalf("%s holds %d logs", d, n)
		}
	}
	if err := m.Get(tps[0]).SetLogStartOffset(5); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(tps[3]); err != nil {
		t.Fatal(err)
	}
	if m.Get(tps[3]) != nil || len(m.Logs()) != 3 {
		t.Fatal("deleted log still listed")
	}
	if err := m.Delete(tps[3]); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, CleanShutdownFile)); err != nil {
			t.Fatal("no clean shutdown file")
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "d-7") || strings.HasSuffix(e.Name(), deleteSuffix) {
				t.Fatalf("deleted log left: %s", e.Name())
			}
		}
	}

	if _, err := open("other-cluster-id-12345"); err == nil {
		t.Fatal("opened with another cluster id")
	}
	if _, err := OpenManager(ManagerOptions{Dirs: dirs, NodeID: 2}); err == nil {
		t.Fatal("opened with another node id")
	}
	m, err = open(cid)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Logs()) != 3 {
		t.Fatalf("%d logs after reopen", len(m.Logs()))
	}
	for _, tp := range tps[:3] {
		l := m.Get(tp)
		if l == nil {
			t.Fatalf("%s missing", tp)
		}
		want := data[tp].all()
		if tp == tps[0] {
			if l.LogStartOffset() != 5 {
				t.Fatalf("log start offset %d", l.LogStartOffset())
			}
			continue
		}
		if !bytes.Equal(readAllLog(t, l), want) {
			t.Fatalf("%s differs after reopen", tp)
		}
		if l.RecoveryPoint() != l.LogEndOffset() {
			t.Fatalf("%s: recovery point %d after clean shutdown", tp, l.RecoveryPoint())
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, CleanShutdownFile)); !os.IsNotExist(err) {
			t.Fatal("clean shutdown file kept while running")
		}
	}
}

// TestManagerUncleanReopen: without the clean shutdown file, logs recover
// from the checkpointed recovery point, and leftovers of deletions go.
func TestManagerUncleanReopen(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, Default: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tp := TopicPartition{"t", 0}
	l, _ := m.Create(tp, smallSegments)
	var a appended
	fill(t, l, &a, 50, 0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, CleanShutdownFile))
	// A torn tail, a half-deleted partition and a stray directory.
	modifyFile(t, lastLogFile(t, filepath.Join(dir, "t-0")), func(b []byte) []byte { return b[:len(b)-5] })
	os.MkdirAll(filepath.Join(dir, "x-0.0123456789abcdef0123456789abcdef-delete"), 0o755)
	os.MkdirAll(filepath.Join(dir, "not a partition"), 0o755)
	m, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, Default: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := appended{batches: a.batches[:len(a.batches)-1]}
	if !bytes.Equal(readAllLog(t, m.Get(tp)), want.all()) {
		t.Fatal("torn tail not recovered")
	}
	if len(m.Logs()) != 1 {
		t.Fatalf("%d logs", len(m.Logs()))
	}
}

func globDirs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), deleteSuffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// The clean shutdown marker carries the broker epoch given to
// SetBrokerEpoch, in Kafka's format (KIP-966), and the next open reports
// it only when every log dir holds the same one; a dir without a marker
// (a crash), an empty marker (an older Samsa) or two dirs that disagree
// report -1.
func TestManagerCleanShutdownBrokerEpoch(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	open := func() *Manager {
		t.Helper()
		m, err := OpenManager(ManagerOptions{Dirs: dirs, NodeID: 1})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	closeWith := func(m *Manager, epoch int64) {
		t.Helper()
		m.SetBrokerEpoch(epoch)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m := open()
	if got := m.CleanShutdownBrokerEpoch(); got != -1 {
		t.Fatalf("new dirs: %d, want -1", got)
	}
	closeWith(m, 42)
	b, err := os.ReadFile(filepath.Join(dirs[1], CleanShutdownFile))
	if err != nil || !regexp.MustCompile(`^\{"broker_epoch":"42","samsa_manifest_id":"[0-9a-f]{32}","version":"0"\}$`).Match(b) {
		t.Fatalf("marker %q (%v)", b, err)
	}
	m = open()
	if got := m.CleanShutdownBrokerEpoch(); got != 42 {
		t.Fatalf("after a clean shutdown at epoch 42: %d", got)
	}
	closeWith(m, 43)
	for name, change := range map[string]func(){
		"crash": func() { os.Remove(filepath.Join(dirs[0], CleanShutdownFile)) },
		"empty": func() { os.WriteFile(filepath.Join(dirs[1], CleanShutdownFile), nil, 0o644) },
		"disagree": func() {
			os.WriteFile(filepath.Join(dirs[1], CleanShutdownFile), []byte(`{"version":0,"brokerEpoch":7}`), 0o644)
		},
		"version 1": func() {
			os.WriteFile(filepath.Join(dirs[0], CleanShutdownFile), []byte(`{"version":1,"brokerEpoch":43}`), 0o644)
		},
	} {
		change()
		m = open()
		if got := m.CleanShutdownBrokerEpoch(); got != -1 {
			t.Errorf("%s: %d, want -1", name, got)
		}
		closeWith(m, 43)
	}
}

// TestDeleteDoesNotFlushTheLog: deleting a partition syncs none of its
// files and writes no producer snapshot into it, as Kafka's
// LogManager.asyncDelete renames the dir without flushing the log: the
// files are about to go. Before, each deleted log was flushed and synced
// (its .log, its dir) and got a snapshot, in the metadata listener: a
// DeleteTopics of 3,000 partitions held a node's listener for 18-49 s.
// Only the rename is made durable (one sync of the log dir, not of the
// partition's dir).
func TestDeleteDoesNotFlushTheLog(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{Topic: "gone", Partition: 0}
	var armed atomic.Bool
	var mu sync.Mutex
	var touched []string
	watch := errorfs.Func(func(op errorfs.Op) error {
		if armed.Load() && op.Kind&(errorfs.OpSync|errorfs.OpOpen|errorfs.OpWrite) != 0 &&
			strings.Contains(op.Path, string(filepath.Separator)+tp.Topic+"-") {
			mu.Lock()
			touched = append(touched, fmt.Sprintf("kind %d %s", op.Kind, op.Path))
			mu.Unlock()
		}
		return nil
	})
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, FS: errorfs.Wrap(vfs.Default, watch), RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Create(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testBatch(t, 3, 1000, "a"), 0); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := m.Delete(tp); err != nil {
		t.Fatalf("delete: %v", err)
	}
	armed.Store(false)
	mu.Lock()
	defer mu.Unlock()
	if len(touched) > 0 {
		t.Fatalf("deleting the partition opened, wrote or synced its files: %q", touched)
	}
	if _, err := os.Stat(filepath.Join(dir, tp.String())); !os.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
}
