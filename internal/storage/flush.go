package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sync"
	"syscall"
	"time"
)

// Flushing: when records reach the disk. Appends write to the page cache;
// an fsync ("flush") makes them survive a crash of the machine and raises
// the recovery point, below which Open trusts the log without re-checking
// it. Kafka's defaults never ask for one (durability comes from
// replication); three things do:
//
//   - flush.messages (Config.FlushIntervalMessages): an append that leaves
//     at least that many messages above the recovery point waits for a
//     flush covering it before it returns (AppendDeferred leaves the wait
//     to the caller, FlushTo).
//   - flush.ms (Config.FlushInterval): the Manager's flush task flushes a
//     log whose unflushed records wait since its last flush is this old.
//   - a roll (the segments before the new one, in the background) and
//     Close.
//
// Flushes of one log run one at a time (flushGate). A flush covers every
// record appended before it started: it fsyncs the segments up to the log
// end offset it read when it began. An append that must wait for a flush
// while another one runs waits for that one to end; if it was not covered,
// the first such waiter starts the next flush, which covers every append
// made meanwhile, and the others wait for it. N concurrent appends with
// flush.messages=1 so cost about two fsyncs rather than N (group commit),
// and each returns only after an fsync that covers it.
//
// An fsync that fails leaves the page cache in an unknown state (Linux may
// drop the dirty pages and report success to a later fsync), so the first
// failure is kept: every later append and flush of the log gives
// ErrFlushFailed until the log is reopened, which recovers from the last
// recovery point. A Manager then takes the whole log dir offline, as
// Kafka does (Manager.OfflineDirs).

// ErrFlushFailed: an fsync of the log's files failed. The log takes no
// more writes until it is reopened (the broker answers KAFKA_STORAGE_ERROR).
// The wrapped error is the I/O error of the first failure.
var ErrFlushFailed = errors.New("storage: flush failed")

// slowFlush is the fsync duration past which a flush is logged.
const slowFlush = time.Second

// flushGate lets one flush of a log run at a time. Unlike with a mutex, a
// caller can wait for the running flush to end without queueing for a turn
// of its own (tryEnter), which is how appends share fsyncs. Waits are on
// channels, which testing/synctest sees as durably blocked. The zero value
// is ready.
type flushGate struct {
	mu      sync.Mutex
	running chan struct{} // closed when the running flush ends; nil when none runs
}

// tryEnter starts a flush and returns nil, or returns a channel closed when
// the flush running now ends.
func (g *flushGate) tryEnter() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running != nil {
		return g.running
	}
	g.running = make(chan struct{})
	return nil
}

// enter waits until no flush runs and starts one.
func (g *flushGate) enter() {
	for {
		wait := g.tryEnter()
		if wait == nil {
			return
		}
		<-wait
	}
}

// exit ends the flush started by enter or tryEnter.
func (g *flushGate) exit() {
	g.mu.Lock()
	close(g.running)
	g.running = nil
	g.mu.Unlock()
}

// requestFlushLocked asks the background flusher to flush below offset.
func (l *Log) requestFlushLocked(offset int64) {
	if offset > l.flushTarget.Load() {
		l.flushTarget.Store(offset)
	}
	if !l.flusherOn {
		l.flusherOn = true
		l.wg.Add(1)
		go l.flusher()
	}
	select {
	case l.flushKick <- struct{}{}:
	default:
	}
}

func (l *Log) flusher() {
	defer l.wg.Done()
	for {
		select {
		case <-l.done:
			return
		case <-l.flushKick:
			l.gate.enter()
			err := l.flushInGate(l.flushTarget.Load(), false, false)
			l.gate.exit()
			// A failed fsync was logged where it failed.
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFlushFailed) {
				l.logger.Error("background flush failed", "err", err)
			}
		}
	}
}

// Flush fsyncs every segment up to the log end offset and the directory
// when files were created or removed, then raises the recovery point to
// that offset. It waits for a flush already running. Errors: ErrClosed,
// ErrFlushFailed, ErrOffline; ErrResourceExhausted when a file to fsync
// could not be opened (nothing failed: the next flush tries again). Safe
// for concurrent use.
func (l *Log) Flush() error {
	l.gate.enter()
	defer l.gate.exit()
	return l.flushInGate(0, true, false)
}

// FlushTo returns once every record below offset is on disk, that is once
// the recovery point is at least offset (or, after a truncation below
// offset, at the log end). Concurrent callers share flushes (see the top
// of flush.go): a flush already running is waited for, and when it did
// not cover offset one caller flushes everything appended by then for all
// of them. Errors: ErrClosed, ErrFlushFailed (then or earlier: the records
// are in the log but not known to be on disk), ErrOffline,
// ErrResourceExhausted (no descriptor to open a file to fsync with; the
// records are in the log, not known to be on disk yet). Safe for
// concurrent use.
func (l *Log) FlushTo(offset int64) error {
	for {
		if l.recoveryPoint.Load() >= offset {
			return nil
		}
		if err := l.flushFailure(); err != nil {
			return err
		}
		if l.closed.Load() {
			return ErrClosed
		}
		if wait := l.gate.tryEnter(); wait != nil {
			<-wait
			continue
		}
		err := l.flushInGate(0, true, false)
		l.gate.exit()
		return err
	}
}

// flushInGate fsyncs the segments holding offsets in [recovery point,
// offset), or up to the log end offset when toEnd, and the active one too
// when force, then raises the recovery point to offset unless a truncation
// happened meanwhile. The caller holds the gate.
func (l *Log) flushInGate(offset int64, toEnd, force bool) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.flushFailure(); err != nil {
		return err
	}
	// The log end offset and the segment list are read together: every
	// record below that offset is in one of these segments' files.
	l.mu.Lock()
	if toEnd {
		offset = l.logEndOffset.Load()
	}
	rp := l.recoveryPoint.Load()
	gen := l.truncations
	segs := l.segments()
	dirDirty := l.dirDirty
	l.dirDirty = false
	epochs := l.epochsUnsynced
	l.epochsUnsynced = false
	l.mu.Unlock()
	if offset <= rp && !force && !dirDirty {
		return nil
	}
	start := time.Now()
	l.flushes.Add(1)
	err := l.syncFiles(segs, rp, offset, force, dirDirty, epochs)
	if err != nil {
		l.mu.Lock()
		l.dirDirty = l.dirDirty || dirDirty
		l.epochsUnsynced = l.epochsUnsynced || epochs
		l.mu.Unlock()
		if outOfDescriptors(err) {
			// A file to fsync could not be opened (evicted from the
			// FileCache, or the directory): no fsync failed, so the
			// page cache is as it was; the recovery point stays and
			// the next flush tries again.
			return exhausted(err)
		}
		return l.fail(err)
	}
	d := time.Since(start)
	l.stats.flushed(d)
	if d > slowFlush {
		l.logger.Warn("slow flush", "duration", d, "up_to_offset", offset)
	}
	l.mu.Lock()
	if gen == l.truncations && offset > l.recoveryPoint.Load() && offset <= l.logEndOffset.Load() {
		l.recoveryPoint.Store(offset)
		l.checkpointMoved()
	}
	l.lastFlush.Store(time.Now().UnixNano())
	l.mu.Unlock()
	return nil
}

// syncFiles fsyncs the segments of segs holding offsets in [rp, offset)
// (and the last one if force) and the directory if dir.
func (l *Log) syncFiles(segs []*segment, rp, offset int64, force, dir, epochs bool) error {
	if l.flushHook != nil {
		if err := l.flushHook(); err != nil {
			return err
		}
	}
	for i, s := range segs {
		last := i == len(segs)-1
		if !last && segs[i+1].baseOffset <= rp && !force {
			continue
		}
		if s.baseOffset >= offset && !(force && last) {
			continue
		}
		if err := s.flush(); err != nil {
			return err
		}
	}
	if fn := l.parentSync.Load(); fn != nil {
		if err := (*fn)(); err != nil {
			return err
		}
		l.parentSync.CompareAndSwap(fn, nil)
	}
	if epochs {
		if err := l.epochs.syncFile(); err != nil {
			return fmt.Errorf("storage: fsync leader-epoch-checkpoint: %w", err)
		}
	}
	if dir {
		return syncDir(l.fsys, l.dir)
	}
	return nil
}

// fail records the first fsync failure, which every later write of the
// log returns, takes the log's dir offline (when a Manager holds the log)
// and returns err as an ErrFlushFailed.
func (l *Log) fail(err error) error {
	err = fmt.Errorf("%w: %w", ErrFlushFailed, err)
	if l.flushFailed.CompareAndSwap(nil, &err) {
		l.logger.Error("fsync failed: the log takes no more writes until it is reopened", "err", err)
	}
	if fn := l.ioFailed.Load(); fn != nil {
		(*fn)(err)
	}
	return err
}

// ErrResourceExhausted: a write, flush or read of the log did not happen
// for want of a resource of the machine, not because of its disk: a
// full disk (ENOSPC on a write), or no file descriptor left (EMFILE for
// the process, ENFILE for the system: idle client connections can hold
// every one the limit allows). The log is as it was before the call
// (nothing of a refused append stays in it), its dir stays online, and
// the same call may succeed once the resource returns. The wrapped error
// is the system call's. The broker answers KAFKA_STORAGE_ERROR (see
// broker's errorCodes).
//
// Kafka has no such class: any IOException of a log dir, these included,
// takes the dir offline (LogDirFailureChannel), and a broker left without
// a dir halts. docs/reliability.md says why Samsa differs.
var ErrResourceExhausted = errors.New("storage: out of disk space or file descriptors")

// transient reports whether err is a lack of resources (ErrResourceExhausted)
// rather than a failure of the disk: ENOSPC, EMFILE or ENFILE.
func transient(err error) bool {
	return errors.Is(err, ErrResourceExhausted) || errors.Is(err, syscall.ENOSPC) || outOfDescriptors(err)
}

// exhausted wraps err, a transient error, in ErrResourceExhausted once.
func exhausted(err error) error {
	if errors.Is(err, ErrResourceExhausted) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrResourceExhausted, err)
}

// ioError handles err, the error of a write of the log's files (a
// segment, an index, the producer snapshot, the leader-epoch checkpoint)
// or of a roll. A lack of resources (transient: ENOSPC, EMFILE, ENFILE)
// comes back wrapping ErrResourceExhausted, and the caller has left the
// log as it was, so the next write may succeed; any other I/O error is a
// failure as fail's: the log takes no more writes and its dir goes
// offline (Kafka's LogDirFailureChannel). Errors that are not the
// filesystem's pass through. nil gives nil.
func (l *Log) ioError(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrOffline) || errors.Is(err, ErrFlushFailed):
		return err
	case transient(err):
		l.warnLimited("write refused: out of disk space or file descriptors; the log is unchanged and its dir stays online", "err", err)
		return exhausted(err)
	case !isIOError(err):
		return err
	}
	return l.offline("write", err)
}

// offline fails the log, and takes its dir offline, after err, an I/O
// error of a what ("write", "read") of its files; it returns err wrapping
// ErrOffline.
func (l *Log) offline(what string, err error) error {
	err = fmt.Errorf("%w: %w", ErrOffline, err)
	if l.flushFailed.CompareAndSwap(nil, &err) {
		l.logger.Error(what+" failed: the log takes no more writes until it is reopened", "err", err)
	}
	if fn := l.ioFailed.Load(); fn != nil {
		(*fn)(err)
	}
	return err
}

// readError handles err, the error of a read of the log's files (nil
// passes through): an I/O error of the disk (EIO) takes the log's dir
// offline, as Kafka's UnifiedLog.read reports an IOException to
// LogDirFailureChannel, and comes back wrapping ErrOffline. A file that is
// gone (a segment removed under a reader) and the log's own errors
// (ErrOffsetOutOfRange, ErrCorruptSegment, ...) are returned as they are;
// EMFILE or ENFILE (no descriptor to reopen a segment file with) wraps
// ErrResourceExhausted and leaves the dir online.
func (l *Log) readError(err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrClosed) || !isIOError(err) {
		return err
	}
	if outOfDescriptors(err) {
		// Opening a segment file evicted from the FileCache failed: the
		// process, not the disk, is short of something.
		return exhausted(err)
	}
	return l.offline("read", err)
}

// isIOError reports whether err comes from the filesystem (an
// *fs.PathError, a syscall.Errno or a short write) rather than from the
// log's own checks.
func isIOError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno) || errors.Is(err, io.ErrShortWrite)
}

// flushFailure is the error of the log's first failed fsync or write, or
// that of its log dir going offline, or nil.
func (l *Log) flushFailure() error {
	if p := l.flushFailed.Load(); p != nil {
		return *p
	}
	if d := l.dirOffline.Load(); d != nil {
		if p := d.Load(); p != nil {
			return *p
		}
	}
	return nil
}

// unflushed reports whether records are above the recovery point.
func (l *Log) unflushed() bool { return l.logEndOffset.Load() > l.recoveryPoint.Load() }

// flushDue is when flush.ms (interval) wants the unflushed records of the
// log on disk: interval after its last flush.
func (l *Log) flushDue(interval time.Duration) time.Time {
	return time.Unix(0, l.lastFlush.Load()).Add(interval)
}

// dirtiedLocked tells the Manager's flush task, when flush.ms is set, that
// the log has unflushed records and when they are due.
func (l *Log) dirtiedLocked() {
	if l.cfg.FlushInterval <= 0 {
		return
	}
	if fn := l.dirtied.Load(); fn != nil {
		(*fn)(l.flushDue(l.cfg.FlushInterval))
	}
}

// The Manager's flush task (Kafka's LogManager flushDirtyLogs): it flushes
// every log whose flush.ms is set, that has unflushed records and whose
// last flush is at least flush.ms old. With
// ManagerOptions.FlushCheckInterval (log.flush.scheduler.interval.ms) it
// checks at that period, as Kafka does. Without it (Kafka's default,
// Long.MAX_VALUE, under which Kafka never applies flush.ms) it sleeps until
// the earliest log is due, and an append that leaves a clean log with
// unflushed records wakes it when that log is due sooner. Times are
// time.Now's (not ManagerOptions.Now or OpenOptions.Now: flushes run in
// the background), which testing/synctest fakes.

// adoptFlush wires a log to the flush task.
func (m *Manager) adoptFlush(l *Log) {
	l.lastFlush.CompareAndSwap(0, time.Now().UnixNano())
	fn := func(due time.Time) {
		if m.opts.FlushCheckInterval <= 0 && wakeNanos(due) < m.flushWake.Load() {
			kickChan(m.flushKick)
		}
	}
	l.dirtied.Store(&fn)
}

// wakeNanos is t in Unix nanoseconds, MaxInt64 for the zero time or one
// past the int64 range.
func wakeNanos(t time.Time) int64 {
	if t.IsZero() || t.After(time.Unix(0, math.MaxInt64)) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

func (m *Manager) flushTask() {
	defer m.tasks.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		// While the logs are scanned every append that dirties one kicks:
		// the scan may have passed it.
		m.flushWake.Store(math.MinInt64)
		now := time.Now()
		next := m.flushDueLogs(now)
		if iv := m.opts.FlushCheckInterval; iv > 0 {
			next = now.Add(iv)
		}
		m.flushWake.Store(wakeNanos(next))
		var fire <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
			fire = timer.C
		}
		select {
		case <-m.stop:
			return
		case <-fire:
		case <-m.flushKick:
			timer.Stop()
		}
	}
}

// flushDueLogs flushes every log due for flush.ms at now and returns when
// the next one is due, zero when none has unflushed records.
func (m *Manager) flushDueLogs(now time.Time) (next time.Time) {
	for _, l := range m.Logs() {
		interval := l.Config().FlushInterval
		if interval <= 0 || l.flushFailure() != nil || !l.unflushed() {
			continue
		}
		if !l.flushDue(interval).After(now) {
			// A failure is logged by the log and stops its writes.
			if err := l.Flush(); err != nil {
				continue
			}
			if !l.unflushed() {
				continue
			}
		}
		if due := l.flushDue(interval); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}
