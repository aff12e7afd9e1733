package storage

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// uncleanManagerDir makes logs meta-0 and t-0..t-3 in dir, each with one
// batch, and leaves them as a crash would (no clean-shutdown marker).
func uncleanManagerDir(t *testing.T, dir string) {
	t.Helper()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "bg", RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []TopicPartition{{"meta", 0}, {"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}} {
		l, err := m.Create(tp, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(testBatch(t, 3, 1000, tp.String()), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
}

// openHeld opens dir with Background and First meta-0, one recovery
// thread, and the t-* logs held by a gate until Release; it returns once
// a t log's open is held.
func openHeld(t *testing.T, dir string) (*Manager, *errorfs.Gate) {
	t.Helper()
	return openHeldLogged(t, dir, nil)
}

// openHeldLogged is openHeld with the Manager's logger.
func openHeldLogged(t *testing.T, dir string, logger *slog.Logger) (*Manager, *errorfs.Gate) {
	t.Helper()
	g := errorfs.NewGate(filepath.Join(dir, "t-"))
	g.Shut()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "bg", RollCheckInterval: -1, RecoveryThreads: 1,
		FS: errorfs.Wrap(vfs.Default, g), Background: true, First: []TopicPartition{{"meta", 0}}, Logger: logger})
	if err != nil {
		g.Release()
		t.Fatal(err)
	}
	<-g.Held()
	return m, g
}

// TestBackgroundLoad: after an unclean shutdown OpenManager with
// Background returns with the First logs open while the others still
// load; a checkpoint meanwhile leaves the dir's files as they were (they
// would lose the recovery points of the logs not loaded), a Create of a
// log still loading waits for it and gets the loaded log, and once loaded
// Close marks the dir clean.
func TestBackgroundLoad(t *testing.T) {
	dir := t.TempDir()
	uncleanManagerDir(t, dir)
	rpPath := filepath.Join(dir, RecoveryPointCheckpointFile)
	before, err := os.ReadFile(rpPath)
	if err != nil {
		t.Fatal(err)
	}
	m, g := openHeld(t, dir)
	if m.Get(TopicPartition{"meta", 0}) == nil {
		t.Fatal("First log not open when OpenManager returned")
	}
	select {
	case <-m.Loaded():
		t.Fatal("Loaded closed while a log is still being opened")
	default:
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(rpPath); err != nil || !bytes.Equal(after, before) {
		t.Errorf("recovery point checkpoint rewritten during the load (%v):\n%s\nwas\n%s", err, after, before)
	}
	created := make(chan *Log, 1)
	go func() {
		l, err := m.Create(TopicPartition{"t", 3}, Config{})
		if err != nil {
			t.Error(err)
		}
		created <- l
	}()
	g.Release()
	<-m.Loaded()
	l := <-created
	if l != m.Get(TopicPartition{"t", 3}) || l.LogEndOffset() != 3 {
		t.Errorf("Create during the load: end offset %d, the loaded log: %v", l.LogEndOffset(), l == m.Get(TopicPartition{"t", 3}))
	}
	if n := len(m.Logs()); n != 5 {
		t.Errorf("%d logs loaded, want 5", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Errorf("no clean-shutdown marker after a close once loaded: %v", err)
	}
}

// TestCloseDuringBackgroundLoad: Close during a background load stops it
// after the log being opened and writes no clean-shutdown marker (the next
// open would trust logs never recovered); the next open finds every log.
func TestCloseDuringBackgroundLoad(t *testing.T) {
	dir := t.TempDir()
	uncleanManagerDir(t, dir)
	m, g := openHeld(t, dir)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	g.Release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := len(m.Logs()); n >= 5 {
		t.Errorf("%d logs open after a close during the load: it did not stop", n)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean-shutdown marker after a close during the load: %v", err)
	}
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "bg", RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for tp, l := range m.Logs() {
		if l.LogEndOffset() != 3 {
			t.Errorf("%s: end offset %d after the restart, want 3", tp, l.LogEndOffset())
		}
	}
	if n := len(m.Logs()); n != 5 {
		t.Errorf("%d logs after the restart, want 5", n)
	}
}

// TestBackgroundLoadLogCounts: the line that starts a background load and
// the dir's line once loaded count the same logs, those found in the dir
// (the First one opened before OpenManager returned included, a log
// created during the load not).
func TestBackgroundLoadLogCounts(t *testing.T) {
	dir := t.TempDir()
	uncleanManagerDir(t, dir)
	var out bytes.Buffer // slog's handler serializes the writes
	m, g := openHeldLogged(t, dir, slog.New(slog.NewJSONHandler(&out, nil)))
	if _, err := m.Create(TopicPartition{"new", 0}, Config{}); err != nil {
		g.Release()
		t.Fatal(err)
	}
	g.Release()
	<-m.Loaded()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	lines := map[string]map[string]any{}
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines[rec["msg"].(string)] = rec
	}
	for _, tc := range []struct {
		msg  string
		want map[string]float64
	}{
		{"loading logs in the background", map[string]float64{"logs": 5, "first": 1, "background": 4}},
		{"loaded log dir", map[string]float64{"logs": 5, "offline": 0}},
	} {
		rec, ok := lines[tc.msg]
		if !ok {
			t.Errorf("no %q line in:\n%s", tc.msg, out.Bytes())
			continue
		}
		for k, want := range tc.want {
			if got, _ := rec[k].(float64); got != want {
				t.Errorf("%q: %s=%v, want %v", tc.msg, k, rec[k], want)
			}
		}
	}
}
