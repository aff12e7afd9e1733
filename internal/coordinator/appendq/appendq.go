// Package appendq is the writer of one partition of a coordinator's
// internal topic (__consumer_offsets for the group coordinator,
// __transaction_state for the transaction coordinator): a queue of
// appends that one goroutine writes one Append call at a time, combining
// the appends queued meanwhile up to a byte limit, and whose results it
// hands back, in queue order, to the coordinator's state goroutine.
//
// The coordinator owns the goroutine: it starts Writer.Run (under its own
// sync.WaitGroup) and waits for it in its Close. Enqueue and Stop are safe
// for concurrent use; the queue's mutex is never held while calling out.
package appendq

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// slowAppend is how long an Append may take before it is logged.
const slowAppend = time.Second

// Config is what the writers of one internal topic share. The zero value
// is not usable: Append, Size and Post are required.
type Config[R any] struct {
	// Append writes recs, in order, to partition and returns once they are
	// durable, or an error; the Writer never overlaps two calls. ctx ends
	// after Timeout, at Stop, or when the Writer's parent context ends.
	Append func(ctx context.Context, partition int32, recs []R) error
	// Timeout bounds each Append call; zero or negative means each call
	// ends at once (the caller's config supplies the default).
	Timeout time.Duration
	// MaxBytes caps the sum of Size over the records of one Append when
	// appends are combined; one append larger than MaxBytes is still
	// written, alone.
	MaxBytes int
	// Size is the bytes a record counts against MaxBytes (its key and
	// value, for both coordinators).
	Size func(rec R) int
	// Alone, when set, reports an append that must be written by an Append
	// call of its own, never combined with the appends before or after it
	// (the group coordinator's transactional offset commits, which the
	// Store writes as one transactional batch). Nil combines every append.
	// It is called once per append, by Enqueue.
	Alone func(recs []R) bool
	// Post hands fn to the coordinator's state goroutine, which runs the
	// posted functions in order; false means the coordinator closed, and
	// Run returns without writing more.
	Post func(fn func()) bool
	// Log receives a warning for each Append call that took longer than a
	// second; nil discards.
	Log *slog.Logger
	// Topic names the internal topic in the warning ("slow <Topic>
	// append").
	Topic string
}

// job is one append: the records of one Enqueue call.
type job[R any] struct {
	recs  []R
	bytes int
	alone bool
	done  func(err error)
}

// Writer is the writer of one partition: New creates it, Run is its
// goroutine, Enqueue queues appends and Stop ends it. Enqueue, Stop and
// Exited are safe for concurrent use.
type Writer[R any] struct {
	cfg       Config[R]
	partition int32
	ctx       context.Context
	cancel    context.CancelFunc
	wake      chan struct{} // capacity 1
	exited    chan struct{} // closed when Run returns

	mu struct {
		sync.Mutex // guards the fields below
		queue      []*job[R]
		stopped    bool
	}
}

// New returns the writer of partition under ctx (the coordinator's
// context: ending it cancels the Append in flight and ends Run). The
// caller must run Run, once, on a goroutine it owns.
func New[R any](ctx context.Context, partition int32, cfg Config[R]) *Writer[R] {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Writer[R]{
		cfg: cfg, partition: partition, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), exited: make(chan struct{}),
	}
}

// Enqueue queues recs (written in order, after every append queued
// before) and returns true; done is later posted, through Config.Post,
// with the error of the Append call that wrote them (nil once durable;
// the context's error after Timeout). Dones run in the order of their
// Enqueue calls. Enqueue returns false, and done will never run, once Stop
// was called.
func (w *Writer[R]) Enqueue(recs []R, done func(err error)) bool {
	j := &job[R]{recs: recs, done: done, alone: w.cfg.Alone != nil && w.cfg.Alone(recs)}
	for _, r := range recs {
		j.bytes += w.cfg.Size(r)
	}
	w.mu.Lock()
	if w.mu.stopped {
		w.mu.Unlock()
		return false
	}
	w.mu.queue = append(w.mu.queue, j)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// Stop makes Run return after the Append in flight, whose context it
// cancels (that append's done is still posted), and returns the dones of
// the appends never started, in queue order, for the caller to run or
// drop (Run never posts them); later calls return none.
func (w *Writer[R]) Stop() []func(err error) {
	w.mu.Lock()
	q := w.mu.queue
	w.mu.queue = nil
	w.mu.stopped = true
	w.mu.Unlock()
	w.cancel()
	dones := make([]func(error), len(q))
	for i, j := range q {
		dones[i] = j.done
	}
	return dones
}

// Exited returns a channel closed when Run has returned: no Append of
// this Writer is in flight any more.
func (w *Writer[R]) Exited() <-chan struct{} { return w.exited }

// take removes the next appends to write together: the first, then the
// following ones while their total Size stays within MaxBytes and none of
// them goes alone. Nil when stopped or empty.
func (w *Writer[R]) take() []*job[R] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.stopped || len(w.mu.queue) == 0 {
		return nil
	}
	q := w.mu.queue
	n, size := 1, q[0].bytes
	for n < len(q) && !q[0].alone && !q[n].alone && size+q[n].bytes <= w.cfg.MaxBytes {
		size += q[n].bytes
		n++
	}
	jobs := slices.Clone(q[:n])
	w.mu.queue = slices.Delete(q, 0, n)
	return jobs
}

// Run writes the queued appends until Stop, until the context given to
// New ends, or until Config.Post returns false. Call it once, on a
// goroutine the coordinator waits for.
func (w *Writer[R]) Run() {
	defer close(w.exited)
	for {
		select {
		case <-w.wake:
		case <-w.ctx.Done():
			return
		}
		for jobs := w.take(); len(jobs) > 0; jobs = w.take() {
			recs := jobs[0].recs
			if len(jobs) > 1 {
				recs = nil
				for _, j := range jobs {
					recs = append(recs, j.recs...)
				}
			}
			ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Timeout)
			begin := time.Now()
			err := w.cfg.Append(ctx, w.partition, recs)
			cancel()
			if d := time.Since(begin); d > slowAppend {
				w.cfg.Log.Warn("slow "+w.cfg.Topic+" append", "partition", w.partition, "records", len(recs), "duration", d, "err", err)
			}
			if !w.cfg.Post(func() {
				for _, j := range jobs {
					j.done(err)
				}
			}) {
				return
			}
		}
	}
}
