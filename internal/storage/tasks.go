package storage

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The Manager's background tasks: retention (DeleteOldSegments on every
// log each log.retention.check.interval.ms, and removal of .deleted files
// when file.delete.delay.ms has passed) and the log cleaner (one goroutine
// that cleans the dirtiest compacted log, then the next, and sleeps
// log.cleaner.backoff.ms when none is due; its reads and writes are held
// to log.cleaner.io.max.bytes.per.second), and the periodic task (rolls by
// segment.ms, looking every second at the logs due or changed only;
// checkpoints every log.flush.offset.checkpoint.interval.ms when an offset
// they hold moved). They stop in Close before the logs close; a cleaning
// in progress is cancelled.

// adopt wires a log to the Manager's tasks; the roll schedule looks at it
// at its next pass.
func (m *Manager) adopt(l *Log) {
	kick := func() { kickChan(m.retentionKick) }
	l.startMoved.Store(&kick)
	l.ckptMoved.Store(&m.ckptMoved)
	m.ckptMoved.Store(true) // a new log, or one opened: its offsets may differ from the files'
	if m.opts.RollCheckInterval > 0 {
		moved := func() { m.rolls.moved(l) }
		l.rollMoved.Store(&moved)
		l.rollScheduled.Store(math.MinInt64)
		m.rolls.moved(l)
	}
}

// checkpointMoved tells the Manager that the log's checkpointed offsets
// moved (a load and no store while its flag is already set).
func (l *Log) checkpointMoved() {
	if p := l.ckptMoved.Load(); p != nil && !p.Load() {
		p.Store(true)
	}
}

// rollSchedule is when each log's active segment can next be due for
// segment.ms, so that the periodic roll check looks only at the logs due
// and at those that changed (Kafka's LogManager walks every log at each
// log.roll check; at 100,000 idle partitions that was 16 ms of CPU a
// second). A log's time only moves sooner by an append to its empty
// active segment, a truncation or a config change, which add it to dirty
// (Log.rollMovedLocked); a time that moved later (a roll) is found when
// the recorded one comes, and the log is looked at again.
type rollSchedule struct {
	mu    sync.Mutex        // guards dirty
	dirty map[*Log]struct{} // logs to look at in the next pass
	heap  rollHeap          // logs by due time; the periodic task's own
	// looks counts the logs looked at under their lock, for tests.
	looks atomic.Int64
}

func (r *rollSchedule) moved(l *Log) {
	r.mu.Lock()
	if r.dirty == nil {
		r.dirty = map[*Log]struct{}{}
	}
	r.dirty[l] = struct{}{}
	r.mu.Unlock()
}

// pass rolls the logs due at now and reschedules them and the changed
// ones; a closed log leaves the schedule. Roll errors are logged.
func (m *Manager) rollPass(now time.Time) {
	r := &m.rolls
	r.mu.Lock()
	dirty := r.dirty
	r.dirty = nil
	r.mu.Unlock()
	var due []*Log
	for len(r.heap) > 0 && r.heap[0].rollAt <= now.UnixNano() {
		due = append(due, heap.Pop(&r.heap).(*rollEntry).log)
	}
	look := func(l *Log) {
		r.looks.Add(1)
		at, err := l.maybeRollDue(now)
		if err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Warn("rolling segment failed", "dir", l.Dir(), "err", err)
		}
		r.heap.set(l, at)
	}
	for _, l := range due {
		delete(dirty, l)
		look(l)
	}
	for l := range dirty {
		look(l)
	}
}

// rollEntry is a log in the heap and the time it is due, Unix ns.
type rollEntry struct {
	log    *Log
	rollAt int64
}

// rollHeap is a min-heap of rollEntry by rollAt (container/heap); each
// log's rollIdx is its index plus one.
type rollHeap []*rollEntry

func (h rollHeap) Len() int           { return len(h) }
func (h rollHeap) Less(i, j int) bool { return h[i].rollAt < h[j].rollAt }
func (h rollHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].log.rollIdx, h[j].log.rollIdx = i+1, j+1
}
func (h *rollHeap) Push(x any) {
	e := x.(*rollEntry)
	e.log.rollIdx = len(*h) + 1
	*h = append(*h, e)
}
func (h *rollHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.log.rollIdx = 0
	return e
}

// set puts l in the heap at at, or takes it out for MaxInt64.
func (h *rollHeap) set(l *Log, at int64) {
	switch i := l.rollIdx - 1; {
	case i < 0 && at == math.MaxInt64:
	case i < 0:
		heap.Push(h, &rollEntry{log: l, rollAt: at})
	case at == math.MaxInt64:
		heap.Remove(h, i)
	default:
		(*h)[i].rollAt = at
		heap.Fix(h, i)
	}
}

func kickChan(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (m *Manager) startTasks() {
	m.ckptMoved.Store(true) // the first checkpoint writes the files, whatever the dirs held
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.tasks.Add(2)
	go m.retentionTask()
	go m.periodicTask()
	if !m.opts.Cleaner.Disable {
		m.tasks.Add(1)
		go m.cleanerTask(ctx)
	}
}

func (m *Manager) stopTasks() {
	if m.cancel != nil { // nil: never started (Close during a background load)
		m.cancel()
	}
	m.tasks.Wait()
}

// KickRetention asks the retention task to run now rather than at its next
// interval.
func (m *Manager) KickRetention() { kickChan(m.retentionKick) }

// KickCleaner asks the log cleaner to look for work now rather than after
// its backoff.
func (m *Manager) KickCleaner() { kickChan(m.cleanerKick) }

// SetCheckpointHook sets f to run on the periodic task after each
// periodic Checkpoint (the replica manager writes
// replication-offset-checkpoint with it); its error is logged. nil removes
// the hook. Safe for concurrent use.
func (m *Manager) SetCheckpointHook(f func() error) {
	if f == nil {
		m.ckptHook.Store(nil)
		return
	}
	m.ckptHook.Store(&f)
}

// periodicTask rolls the logs whose active segment is older than their
// segment.ms every RollCheckInterval (looking only at those due or
// changed: rollSchedule), and writes the checkpoints, then
// runs the checkpoint hook, every CheckpointInterval.
func (m *Manager) periodicTask() {
	defer m.tasks.Done()
	var rollC <-chan time.Time // nil: no rolls by age
	if m.opts.RollCheckInterval > 0 {
		roll := time.NewTicker(m.opts.RollCheckInterval)
		defer roll.Stop()
		rollC = roll.C
	}
	ckpt := time.NewTicker(m.opts.CheckpointInterval)
	defer ckpt.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-rollC:
			m.rollPass(m.opts.Now())

		case <-ckpt.C:
			if err := m.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
				m.logger.Warn("writing checkpoints failed", "err", err)
			}
			if f := m.ckptHook.Load(); f != nil {
				if err := (*f)(); err != nil {
					m.logger.Warn("checkpoint hook failed", "err", err)
				}
			}
		}
	}
}

func (m *Manager) retentionTask() {
	defer m.tasks.Done()
	interval := m.opts.RetentionCheckInterval
	nextCheck := m.opts.Now().Add(interval)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		kicked := false
		select {
		case <-m.stop:
			return
		case <-timer.C:
		case <-m.retentionKick:
			kicked = true
		}
		if now := m.opts.Now(); !now.Before(nextCheck) {
			nextCheck = now.Add(interval)
		}
		wake := m.runRetention(kicked)
		if wake.IsZero() || wake.After(nextCheck) {
			wake = nextCheck
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(wake.Sub(m.opts.Now()), time.Millisecond))
	}
}

// runRetention runs DeleteOldSegments on every log, writes the checkpoints
// when a log start offset moved (or checkpoint is set: a kick, which
// SetLogStartOffset sends), and returns when the next .deleted files are
// due (zero when none are pending).
func (m *Manager) runRetention(checkpoint bool) (next time.Time) {
	moved := checkpoint
	for tp, l := range m.Logs() {
		before := l.LogStartOffset()
		if _, err := l.DeleteOldSegments(); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Error("retention failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		if l.LogStartOffset() != before {
			moved = true
		}
		if due := l.nextFileDeletion(); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	if moved {
		if err := m.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Error("writing checkpoints after retention failed", "err", err)
		}
	}
	return next
}

func (m *Manager) cleanerTask(ctx context.Context) {
	defer m.tasks.Done()
	failed := map[*Log]bool{} // uncleanable logs (Kafka marks them so too)
	timer := time.NewTimer(time.Duration(m.cleanerBackoff.Load()))
	defer timer.Stop()
	for {
		for ctx.Err() == nil && m.cleanOnce(ctx, failed) {
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Duration(m.cleanerBackoff.Load()))
		select {
		case <-m.stop:
			return
		case <-timer.C:
		case <-m.cleanerKick:
		}
	}
}

// cleanOnce cleans the compacted log that needs it most and reports
// whether it cleaned one.
func (m *Manager) cleanOnce(ctx context.Context, failed map[*Log]bool) bool {
	var (
		best     *Log
		bestTP   TopicPartition
		priority float64
	)
	for tp, l := range m.Logs() {
		if failed[l] || l.flushFailure() != nil {
			// Uncleanable, or failed (its dir offline): Kafka's
			// cleaner skips both.
			continue
		}
		if p, ok := l.CleanPriority(); ok && (best == nil || p > priority) {
			best, bestTP, priority = l, tp, p
		}
	}
	if best == nil {
		return false
	}
	res, err := best.Clean(ctx, CleanOptions{MaxKeys: MaxKeysForBuffer(m.cleanerDedupe.Load()), throttle: m.throttle})
	switch {
	case err == nil:
	case errors.Is(err, ErrCleaningAborted), errors.Is(err, ErrClosed), errors.Is(err, context.Canceled):
		m.logger.Info("cleaning stopped", "topic", bestTP.Topic, "partition", bestTP.Partition, "err", err)
		return false
	case errors.Is(err, errSwapIncomplete):
		best.offline("clean", err)
		m.opts.Stats.cleaned(res, true)
		return true
	case transient(err):
		// Out of space or descriptors: the cleaning left the log as it
		// was (its .cleaned files are removed) and is tried again after
		// log.cleaner.backoff.ms.
		m.logger.Warn("cleaning stopped for want of disk space or file descriptors: tried again later", "topic", bestTP.Topic, "partition", bestTP.Partition, "err", err)
		m.opts.Stats.cleaned(res, true)
		return false
	case isIOError(err):
		// Kafka's LogCleaner.cleanLog: an IOException takes the log's
		// dir offline (LogDirFailureChannel).
		best.offline("clean", err)
		m.opts.Stats.cleaned(res, true)
		return true
	default:
		// Kafka's LogCleaningException: the partition is marked
		// uncleanable (bad data in the log, a dedupe buffer too small).
		m.logger.Error("cleaning failed: the log is left uncleaned until restart", "topic", bestTP.Topic, "partition", bestTP.Partition, "err", err)
		failed[best] = true
		m.opts.Stats.cleaned(res, true)
		return true
	}
	m.opts.Stats.cleaned(res, false)
	if res.Groups > 0 || res.EndOffset > res.FirstDirtyOffset {
		if err := m.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Error("writing checkpoints after cleaning failed", "err", err)
		}
		kickChan(m.retentionKick) // to schedule the replaced files' removal
		return true
	}
	return false
}
