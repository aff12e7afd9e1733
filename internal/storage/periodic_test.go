package storage

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestPeriodicTask: the Manager rolls an active segment older than its
// segment.ms within RollCheckInterval, and writes the checkpoints, then
// runs the checkpoint hook, every CheckpointInterval (the root package's
// loop did both before).
func TestPeriodicTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var hooked atomic.Int32
		m.SetCheckpointHook(func() error { hooked.Add(1); return nil })
		l, err := m.Create(TopicPartition{"t", 0}, Config{SegmentAge: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(testBatch(t, 1, time.Now().UnixMilli(), "x"), 0); err != nil {
			t.Fatal(err)
		}
		ckpt := filepath.Join(dir, RecoveryPointCheckpointFile)
		os.Remove(ckpt)

		time.Sleep(time.Minute - DefaultRollCheckInterval)
		synctest.Wait()
		if n := len(l.Segments()); n != 1 {
			t.Fatalf("%d segments before segment.ms passed, want 1", n)
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		if n := len(l.Segments()); n != 2 {
			t.Fatalf("%d segments once segment.ms passed, want 2 (rolled)", n)
		}
		if _, err := os.Stat(ckpt); err == nil || hooked.Load() != 0 {
			t.Fatalf("checkpoint written or hook run (%d) before CheckpointInterval", hooked.Load())
		}

		time.Sleep(time.Hour - time.Minute)
		synctest.Wait()
		if _, err := os.Stat(ckpt); err != nil {
			t.Fatalf("no checkpoint after CheckpointInterval: %v", err)
		}
		if hooked.Load() != 1 {
			t.Fatalf("hook ran %d times after CheckpointInterval, want 1", hooked.Load())
		}
		m.SetCheckpointHook(nil)
		time.Sleep(time.Hour)
		synctest.Wait()
		if hooked.Load() != 1 {
			t.Fatalf("removed hook ran: %d", hooked.Load())
		}
	})
}
