// Package actor is the goroutine shell the group and transaction
// coordinators share: one goroutine (the loop) runs every event posted to
// it and every deadline due, in order, so the state machine it drives
// needs no lock and does no I/O of its own (writes go through appendq,
// reads of a partition being loaded run on the caller's goroutine, Read).
//
// Request methods hand the loop a function with Post or Call and return
// when it replies, when their context ends, or when the loop closes.
// Every goroutine the coordinator starts besides the loop (appendq
// writers, marker senders) goes through Go, so that Close waits for it.
// Deadlines come from package time (deadline.Queue), so testing/synctest
// drives them.
package actor

import (
	"context"
	"sync"

	"github.com/samsahq/samsa/internal/deadline"
)

// Loop is one coordinator's state goroutine. Create it with New, start it
// with Start, stop it with Close. Post, Call, Ctx, Closed, Go, Err and
// Read are safe for concurrent use; Timers belongs to the loop goroutine.
type Loop struct {
	events    chan func()   // run on the loop goroutine, in order
	done      chan struct{} // closed when Close begins
	ctx       context.Context
	cancel    context.CancelFunc // cancels ctx when Close begins
	closeOnce sync.Once
	wg        sync.WaitGroup // the loop goroutine and those started with Go
	timers    deadline.Queue // owned by the loop goroutine
}

// New returns a Loop that is not running yet: Post and Call wait until
// Start (or return false once Close began).
func New() *Loop {
	ctx, cancel := context.WithCancel(context.Background())
	return &Loop{events: make(chan func()), done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// Start starts the loop goroutine: it runs start first, then each posted
// function and each due deadline in turn until Close begins, then stops
// the deadline timer and runs stop. start and stop may be nil. Call it
// once.
func (l *Loop) Start(start, stop func()) {
	l.wg.Go(func() {
		if start != nil {
			start()
		}
		for {
			select {
			case fn := <-l.events:
				fn()
			case <-l.timers.C():
				l.timers.RunDue()
			case <-l.done:
				l.timers.Stop()
				if stop != nil {
					stop()
				}
				return
			}
		}
	})
}

// Timers is the loop's deadline queue; use it on the loop goroutine only
// (in start, stop, posted functions and deadline callbacks).
func (l *Loop) Timers() *deadline.Queue { return &l.timers }

// Post hands fn to the loop goroutine without waiting for it to run;
// false if the loop closed first.
func (l *Loop) Post(fn func()) bool {
	select {
	case l.events <- fn:
		return true
	case <-l.done:
		return false
	}
}

// Call runs fn on the loop goroutine and waits for the first value fn
// passes to reply (at once or later, from another event or a deadline;
// reply never blocks and ignores all but the first value). ok is false
// when ctx ended or the loop closed first.
func Call[T any](l *Loop, ctx context.Context, fn func(reply func(T))) (v T, ok bool) {
	ch := make(chan T, 1)
	reply := func(v T) {
		select {
		case ch <- v:
		default:
		}
	}
	select {
	case l.events <- func() { fn(reply) }:
	case <-ctx.Done():
		return v, false
	case <-l.done:
		return v, false
	}
	select {
	case v = <-ch:
		return v, true
	case <-ctx.Done():
		return v, false
	case <-l.done:
		return v, false
	}
}

// Ctx is canceled when Close begins: the parent of the loads, appends and
// sends in flight.
func (l *Loop) Ctx() context.Context { return l.ctx }

// Closed is closed when Close begins.
func (l *Loop) Closed() <-chan struct{} { return l.done }

// Go runs f on a new goroutine that Close waits for; f should return soon
// after Ctx is canceled.
func (l *Loop) Go(f func()) { l.wg.Go(f) }

// Err is the error of a Call or Post that returned false: closed once the
// loop closed, else ctx's error, else closed.
func (l *Loop) Err(ctx context.Context, closed error) error {
	select {
	case <-l.done:
		return closed
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return closed
}

// Read runs read on the caller's goroutine, the middle step of loading a
// partition (after a Call registered it as loading, before a Call
// installs what was read): first it waits for prev, when not nil (the
// exit of the partition's writer from an earlier leadership, whose last
// write the read must see), then it calls read with a context that ends
// with ctx or when Close begins. It returns ctx's error if that ends
// first, else read's.
func (l *Loop) Read(ctx context.Context, prev <-chan struct{}, read func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return read(ctx)
}

// Close begins closing (Ctx canceled, Closed closed, waiting Posts and
// Calls return false), then waits for the loop goroutine, which runs its
// stop function, and for every goroutine started with Go. Safe to call
// more than once and from several goroutines.
func (l *Loop) Close() {
	l.closeOnce.Do(func() {
		l.cancel()
		close(l.done)
	})
	l.wg.Wait()
}
