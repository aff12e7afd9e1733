package replica

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// syncCountFS counts the fsyncs of files and directories.
type syncCountFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *syncCountFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncCountFile{File: f, n: &c.syncs}, nil
}

type syncCountFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *syncCountFile) Sync() error {
	f.n.Add(1)
	return f.File.Sync()
}

// newRemoveManager is a Manager of broker 1 over one log dir on a
// syncCountFS, hosting the n partitions of topic "b" (leader 1), with
// records in each.
func newRemoveManager(tb testing.TB, n int) (*Manager, *storage.Manager, *syncCountFS, string) {
	tb.Helper()
	fsys := &syncCountFS{FS: vfs.Default}
	dir := tb.TempDir()
	m, logs := newFSManager(tb, dir, fsys, 0)
	m.ApplyBatch(moves(n, 1, 1))
	waitCreated(tb, m)
	return m, logs, fsys, dir
}

// removals is the n partitions of moves.
func removals(n int) []TopicPartition {
	tps := make([]TopicPartition, n)
	for i := range tps {
		tps[i] = TopicPartition{Topic: "b", Partition: int32(i)}
	}
	return tps
}

// RemoveBatch (a metadata commit deleting topics) stops serving every
// partition at once and deletes their logs with one fsync of the log dir
// (the offset checkpoints are not rewritten: a Create of a deleted name
// writes them first), not a flush and a directory fsync per partition;
// the directories are
// removed in the background, and the same partitions can be created again
// at once, empty.
func TestRemoveBatchSyncsOnce(t *testing.T) {
	const n = 40
	m, logs, fsys, dir := newRemoveManager(t, n)
	for i := range n {
		if _, err := m.Get("b", int32(i)).log.Append(batch(t, 0, 1, 3), 1); err != nil {
			t.Fatal(err)
		}
	}
	before := fsys.syncs.Load()
	for i, err := range m.RemoveBatch(removals(n)) {
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
	}
	// One fsync of the log dir for the renames; the checkpoints are
	// written later (the next periodic write, or a Create of one of
	// these names: storage.Manager.DeleteBatch). None per partition.
	const want = 1
	if syncs := fsys.syncs.Load() - before; syncs != want {
		t.Errorf("RemoveBatch of %d partitions made %d fsyncs, want %d (the log dir)", n, syncs, want)
	}
	for i := range n {
		tp := storage.TopicPartition{Topic: "b", Partition: int32(i)}
		if m.Get("b", int32(i)) != nil || logs.Get(tp) != nil {
			t.Fatalf("b-%d still hosted after RemoveBatch", i)
		}
		if _, err := os.Stat(filepath.Join(dir, tp.String())); !os.IsNotExist(err) {
			t.Fatalf("b-%d: directory still under its name: %v", i, err)
		}
	}
	// Created again under the same names right away: empty logs.
	m.ApplyBatch(moves(n, 1, 2))
	waitCreated(t, m)
	for i := range n {
		p := m.Get("b", int32(i))
		if p == nil || p.log.LogEndOffset() != 0 {
			t.Fatalf("b-%d created again: %+v", i, p)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), "-delete") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deleted directories left after a minute", left)
		}
		time.Sleep(time.Millisecond) // polling the directory: the removal signals no one
	}
}

// BenchmarkRemoveTopics deletes 10,000 hosted partitions as the metadata
// listener does for deleted topics: one Remove each (before RemoveBatch)
// or one RemoveBatch. Each op is the whole deletion.
func BenchmarkRemoveTopics(b *testing.B) {
	const n = 10000
	for _, c := range []struct {
		name   string
		remove func(*Manager, []TopicPartition)
	}{
		{"Each", func(m *Manager, tps []TopicPartition) {
			for _, tp := range tps {
				if err := m.Remove(tp); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"Batch", func(m *Manager, tps []TopicPartition) {
			for _, err := range m.RemoveBatch(tps) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				m, _, _, _ := newRemoveManager(b, n)
				b.StartTimer()
				c.remove(m, removals(n))
			}
		})
	}
}
