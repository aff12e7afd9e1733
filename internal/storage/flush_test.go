package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestFlushGroupsConcurrentAppends holds the first fsync of a log with
// flush.messages=1 until n-1 more appends have been written and wait for
// theirs: one more flush serves them all, and each append returns only
// once the recovery point covers it.
func TestFlushGroupsConcurrentAppends(t *testing.T) {
	for _, deferred := range []bool{false, true} {
		name := "Append"
		if deferred {
			name = "AppendDeferred+FlushTo"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 16
				l := openTest(t, t.TempDir(), Config{FlushIntervalMessages: 1}, 0)
				started, release := holdFirstFlush(l, nil)
				batch := testBatch(t, 1, 0, "x")
				var wg sync.WaitGroup
				errs := make(chan error, n)
				appendOne := func() {
					defer wg.Done()
					b := append([]byte(nil), batch...)
					var res AppendResult
					var err error
					if deferred {
						var flush bool
						res, flush, err = l.AppendDeferred(b, 0, OriginClient)
						if err == nil && !flush {
							err = errors.New("flush.messages=1 but AppendDeferred owes no flush")
						}
						if err == nil {
							err = l.FlushTo(res.LastOffset + 1)
						}
					} else {
						res, err = l.Append(b, 0)
					}
					if err == nil && l.RecoveryPoint() <= res.LastOffset {
						err = errors.New("returned before a flush covered it")
					}
					errs <- err
				}
				wg.Add(1)
				go appendOne()
				<-started
				for range n - 1 {
					wg.Add(1)
					go appendOne()
				}
				synctest.Wait() // every append written, all waiting for the first flush
				if l.LogEndOffset() != n {
					t.Fatalf("log end %d while the first flush runs, want %d", l.LogEndOffset(), n)
				}
				if l.RecoveryPoint() != 0 {
					t.Fatalf("recovery point %d before any fsync ended", l.RecoveryPoint())
				}
				close(release)
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
				if got := l.flushes.Load(); got != 2 {
					t.Errorf("%d flushes for %d appends, want 2 (the held one and one for the rest)", got, n)
				}
				if l.RecoveryPoint() != n {
					t.Errorf("recovery point %d, want %d", l.RecoveryPoint(), n)
				}
			})
		})
	}
}

// holdFirstFlush makes the first flush of l close started and wait for
// release before its fsyncs, and the later ones fail with later (nil: do
// not fail).
func holdFirstFlush(l *Log, later error) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	l.flushHook = func() error {
		if calls.Add(1) == 1 {
			close(started)
			<-release
			return nil
		}
		return later
	}
	return started, release
}

// TestFlushConcurrentAppendersCovered runs many appenders with
// flush.messages=1 on real fsyncs, concurrently with explicit flushes and
// rolls (small segments), and checks that each append returns covered by
// the recovery point.
func TestFlushConcurrentAppendersCovered(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{FlushIntervalMessages: 1, SegmentBytes: 4096}, 0)
	const workers, each = 16, 20
	batch := testBatch(t, 1, 0, "x")
	var wg sync.WaitGroup
	errs := make(chan error, workers*each+10)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				res, err := l.Append(append([]byte(nil), batch...), 0)
				if err == nil && l.RecoveryPoint() <= res.LastOffset {
					err = errors.New("append returned before a flush covered it")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 10 {
			if err := l.Flush(); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.RecoveryPoint() != workers*each {
		t.Errorf("recovery point %d, want %d", l.RecoveryPoint(), workers*each)
	}
	t.Logf("%d flushes for %d appends", l.flushes.Load(), workers*each)
}

// TestFlushMessagesThreshold: with flush.messages=3 the appends below the
// threshold owe no flush and the one reaching it does.
func TestFlushMessagesThreshold(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{FlushIntervalMessages: 3}, 0)
	for i, want := range []bool{false, false, true, false, false, true} {
		res, flush, err := l.AppendDeferred(testBatch(t, 1, 0, "x"), 0, OriginClient)
		if err != nil {
			t.Fatal(err)
		}
		if flush != want {
			t.Fatalf("append %d: flush %v, want %v", i, flush, want)
		}
		if flush {
			if err := l.FlushTo(res.LastOffset + 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.RecoveryPoint() != 6 || l.flushes.Load() != 2 {
		t.Fatalf("recovery point %d after %d flushes, want 6 after 2", l.RecoveryPoint(), l.flushes.Load())
	}
}

// TestFlushFailureIsSticky: a failed fsync fails the appends waiting for
// it with ErrFlushFailed, and every later write and flush too, without
// raising the recovery point; the reopened log takes writes again.
func TestFlushFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(OpenOptions{Dir: dir, Config: Config{FlushIntervalMessages: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testBatch(t, 1, 0, "ok"), 0); err != nil {
		t.Fatal(err)
	}
	l.flushHook = func() error { return syscall.EIO }
	_, err = l.Append(testBatch(t, 1, 0, "lost"), 0)
	if !errors.Is(err, ErrFlushFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose fsync failed: %v, want ErrFlushFailed wrapping EIO", err)
	}
	l.flushHook = nil
	leo := l.LogEndOffset()
	if _, err := l.Append(testBatch(t, 1, 0, "after"), 0); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("append after the failure: %v, want ErrFlushFailed", err)
	}
	if _, err := l.AppendAsFollower(nil); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("follower append after the failure: %v", err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end %d after a refused append, want %d", l.LogEndOffset(), leo)
	}
	if err := l.Flush(); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("flush after the failure: %v", err)
	}
	if l.RecoveryPoint() != 1 {
		t.Fatalf("recovery point %d, want 1 (the last good flush)", l.RecoveryPoint())
	}
	if err := l.Close(); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("close: %v, want ErrFlushFailed", err)
	}

	l = openTest(t, dir, Config{FlushIntervalMessages: 1}, 1)
	if _, err := l.Append(testBatch(t, 1, 0, "again"), 0); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
}

// TestFlushFailureFailsEveryWaiter: appends sharing a flush that fails all
// get ErrFlushFailed.
func TestFlushFailureFailsEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := Open(OpenOptions{Dir: t.TempDir(), Config: Config{FlushIntervalMessages: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		started, release := holdFirstFlush(l, syscall.EIO)
		const n = 8
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := l.Append(testBatch(t, 1, 0, "x"), 0)
				errs <- err
			}()
			if i == 0 {
				<-started
			}
		}
		synctest.Wait()
		close(release)
		failed := 0
		for range n {
			if err := <-errs; errors.Is(err, ErrFlushFailed) {
				failed++
			} else if err != nil {
				t.Error(err)
			}
		}
		if failed != n-1 {
			t.Fatalf("%d appends failed, want %d (all but the one the first flush covered)", failed, n-1)
		}
	})
}

// TestManagerFlushMs: the Manager's flush task honours each log's flush.ms
// (one flushed at 1 s, one never), wakes for a log dirtied after it went to
// sleep, and applies a flush.ms set later by SetConfig.
func TestManagerFlushMs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := openFlushManager(t, 0)
		fast := createLog(t, m, "fast", Config{FlushInterval: time.Second})
		never := createLog(t, m, "never", Config{})
		time.Sleep(10 * time.Second) // the last flush of fast is old: an append is due at once
		appendAt(t, fast, 1, 0)
		appendAt(t, never, 1, 0)
		recoveryPointAfter(t, 0, fast, 2, "fast, last flush 10 s ago")
		appendAt(t, fast, 1, 0)
		recoveryPointAfter(t, 0, fast, 2, "fast, right after a flush")
		recoveryPointAfter(t, 999*time.Millisecond, fast, 2, "fast, before flush.ms passed")
		recoveryPointAfter(t, time.Millisecond, fast, 4, "fast, once flush.ms passed")
		recoveryPointAfter(t, time.Hour, never, 0, "never, without flush.ms")

		// A dynamic change of flush.ms applies at once.
		if err := never.SetConfig(Config{FlushInterval: time.Minute}); err != nil {
			t.Fatal(err)
		}
		recoveryPointAfter(t, 0, never, 2, "never, after flush.ms=1min with the last flush an hour ago")
		appendAt(t, never, 1, 0)
		recoveryPointAfter(t, time.Minute, never, 4, "never, a minute later")
	})
}

// TestManagerFlushCheckInterval: with log.flush.scheduler.interval.ms the
// task checks at that period only, as Kafka's does.
func TestManagerFlushCheckInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := openFlushManager(t, 5*time.Second)
		l := createLog(t, m, "t", Config{FlushInterval: time.Second})
		appendAt(t, l, 1, 0)
		recoveryPointAfter(t, 4*time.Second, l, 0, "before the first check")
		recoveryPointAfter(t, time.Second, l, 2, "after the check at 5 s")
	})
}

// openFlushManager opens a Manager on a temporary dir, closed at the end
// of the test.
func openFlushManager(t *testing.T, checkInterval time.Duration) *Manager {
	t.Helper()
	// No rolls by age: a roll flushes, and these tests append batches
	// stamped 1970.
	m, err := OpenManager(ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, FlushCheckInterval: checkInterval, RollCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func createLog(t *testing.T, m *Manager, topic string, cfg Config) *Log {
	t.Helper()
	l, err := m.Create(TopicPartition{Topic: topic, Partition: 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// recoveryPointAfter lets d pass in the bubble, waits until its goroutines
// are idle and checks l's recovery point.
func recoveryPointAfter(t *testing.T, d time.Duration, l *Log, want int64, when string) {
	t.Helper()
	time.Sleep(d) // the bubble's clock; called in bubbles only
	synctest.Wait()
	if got := l.RecoveryPoint(); got != want {
		t.Fatalf("%s: recovery point %d, want %d", when, got, want)
	}
}

// TestConfigFlushInterval: flush.ms is inherited like the other fields and
// may not be negative.
func TestConfigFlushInterval(t *testing.T) {
	if got := (Config{}).Inherit(Config{FlushInterval: time.Second}).FlushInterval; got != time.Second {
		t.Fatalf("inherited flush.ms %v", got)
	}
	if err := (Config{FlushInterval: -1}).Validate(); err == nil {
		t.Fatal("negative flush.ms accepted")
	}
}
