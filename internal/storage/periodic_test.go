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

// TestRollSchedule: the periodic roll check looks only at the logs due or
// changed. An idle node's passes do no per-log work (the check walked
// every log every second, reading the clock for each: N calls of
// ManagerOptions.Now a pass before, one now); a log rolls when its
// segment.ms has passed, again after the next append to its new segment,
// sooner after its segment.ms is shortened, and after a truncation back
// to an old segment; a deleted log leaves the schedule.
func TestRollSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const logs = 50
		var nows atomic.Int64
		m, err := OpenManager(ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, CheckpointInterval: 24 * time.Hour,
			RetentionCheckInterval: 24 * time.Hour, Now: func() time.Time { nows.Add(1); return time.Now() }})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var ls []*Log
		for i := range logs {
			l, err := m.Create(TopicPartition{"t", int32(i)}, Config{SegmentAge: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(testBatch(t, 1, time.Now().UnixMilli(), "x"), 0); err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		time.Sleep(2 * DefaultRollCheckInterval) // the new logs' first look
		synctest.Wait()

		nows.Store(0)
		looks := m.rolls.looks.Load()
		const passes = 10
		time.Sleep(passes * DefaultRollCheckInterval)
		synctest.Wait()
		if n := nows.Load(); n > passes {
			t.Errorf("%d passes over %d idle logs read the clock %d times, want at most one a pass", passes, logs, n)
		}
		if n := m.rolls.looks.Load() - looks; n != 0 {
			t.Errorf("%d passes over %d idle logs looked at %d of them", passes, logs, n)
		}

		segs := func(l *Log) int { return len(l.Segments()) }
		time.Sleep(time.Hour) // segment.ms passed
		synctest.Wait()
		for i, l := range ls {
			if segs(l) != 2 {
				t.Fatalf("log %d: %d segments after segment.ms, want 2", i, segs(l))
			}
		}
		if n := len(m.rolls.heap); n != 0 {
			t.Fatalf("%d logs scheduled with empty active segments", n)
		}

		// The next append to the new segment schedules it again.
		a := ls[0]
		if _, err := a.Append(testBatch(t, 1, time.Now().UnixMilli(), "y"), 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour + 2*DefaultRollCheckInterval)
		synctest.Wait()
		if segs(a) != 3 {
			t.Fatalf("%d segments an hour after the append to the new segment, want 3", segs(a))
		}

		// A shorter segment.ms rolls an idle log sooner.
		b := ls[1]
		if err := b.SetConfig(Config{SegmentAge: 7 * 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Append(testBatch(t, 1, time.Now().UnixMilli(), "y"), 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		if err := b.SetConfig(Config{SegmentAge: time.Minute}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + 2*DefaultRollCheckInterval)
		synctest.Wait()
		if segs(b) != 3 {
			t.Fatalf("%d segments a minute after segment.ms became a minute, want 3", segs(b))
		}

		// A truncation back to an old segment makes it the active one,
		// past its segment.ms.
		c, err := m.Create(TopicPartition{"u", 0}, Config{SegmentAge: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := c.Append(testBatch(t, 1, time.Now().UnixMilli(), "y"), 0); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Hour + 2*DefaultRollCheckInterval)
		synctest.Wait()
		if _, err := c.Append(testBatch(t, 1, time.Now().UnixMilli(), "y"), 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		if err := c.Truncate(1); err != nil {
			t.Fatal(err)
		}
		if segs(c) != 1 {
			t.Fatalf("%d segments after truncating to offset 1, want 1", segs(c))
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		if segs(c) != 2 {
			t.Fatalf("%d segments after a truncation back to a segment past segment.ms, want 2", segs(c))
		}

		// A deleted log leaves the schedule.
		if _, err := a.Append(testBatch(t, 1, time.Now().UnixMilli(), "z"), 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		if a.rollIdx == 0 {
			t.Fatal("a log with records in its active segment is not scheduled")
		}
		if err := m.Delete(TopicPartition{"t", 0}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * DefaultRollCheckInterval)
		synctest.Wait()
		for _, e := range m.rolls.heap {
			if e.log == a {
				t.Fatal("a deleted log is still scheduled")
			}
		}
	})
}

// TestCheckpointOnlyWhenMoved: the periodic checkpoints are written
// within CheckpointInterval of a recovery point, log start offset or
// cleaner offset moving, or of a log going, and not while nothing
// changes (every log was written every interval before); what they hold
// is what the next start recovers from.
func TestCheckpointOnlyWhenMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		dir := t.TempDir()
		m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, CheckpointInterval: interval, RetentionCheckInterval: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var ls []*Log
		for i := range 5 {
			l, err := m.Create(TopicPartition{"t", int32(i)}, Config{})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := l.Append(testBatch(t, 1, time.Now().UnixMilli(), "x"), 0); err != nil {
					t.Fatal(err)
				}
			}
			ls = append(ls, l)
		}
		files := []string{RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile, CleanerOffsetCheckpointFile}
		read := func(name string) map[TopicPartition]int64 {
			t.Helper()
			offs, err := ReadOffsetCheckpoint(nil, filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return offs
		}
		removeAll := func() {
			t.Helper()
			for _, f := range files {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}
		written := func() bool {
			t.Helper()
			_, err := os.Stat(filepath.Join(dir, RecoveryPointCheckpointFile))
			return err == nil
		}
		time.Sleep(interval + time.Second)
		synctest.Wait()
		if !written() {
			t.Fatal("no checkpoint an interval after logs were created")
		}

		removeAll()
		time.Sleep(3 * interval)
		synctest.Wait()
		if written() {
			t.Fatal("checkpoints written while no offset moved")
		}

		for _, c := range []struct {
			what   string
			change func() error
			file   string
			tp     TopicPartition
			want   int64
		}{
			{"recovery point (a flush)", ls[1].Flush, RecoveryPointCheckpointFile, TopicPartition{"t", 1}, 2},
			{"log start offset", func() error { return ls[2].SetLogStartOffset(1) }, LogStartOffsetCheckpointFile, TopicPartition{"t", 2}, 1},
			{"cleaner offset", func() error { ls[3].SetCleanerCheckpoint(2); return nil }, CleanerOffsetCheckpointFile, TopicPartition{"t", 3}, 2},
		} {
			if written() {
				removeAll()
			}
			if err := c.change(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(interval)
			synctest.Wait()
			if got := read(c.file)[c.tp]; got != c.want {
				t.Fatalf("%s's %s in the checkpoint an interval after it moved: %d, want %d", c.tp, c.what, got, c.want)
			}
		}

		removeAll()
		if err := m.Delete(TopicPartition{"t", 0}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
		synctest.Wait()
		if _, ok := read(RecoveryPointCheckpointFile)[TopicPartition{"t", 0}]; ok {
			t.Fatal("a deleted log is still in the checkpoint an interval later")
		}
	})
}

// TestCleanPriorityOfUncompactedLog: the cleaner's look at a log that is
// not compacted (every log.cleaner.backoff.ms, at every log) does not ask
// its partition for its bounds: at 20,000 idle partitions that was most of
// an idle node's CPU once the roll check and checkpoints looked only at
// what changed.
func TestCleanPriorityOfUncompactedLog(t *testing.T) {
	m, err := OpenManager(ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Create(TopicPartition{"t", 0}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	l.SetBounds(func() (int64, int64) { asked.Add(1); return l.LogEndOffset(), l.LogEndOffset() })
	if _, ok := l.CleanPriority(); ok {
		t.Fatal("a log with cleanup.policy=delete is cleanable")
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the cleaner asked an uncompacted log's bounds %d times", n)
	}
}
