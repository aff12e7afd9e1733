package actor

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

var errClosed = errors.New("closed")

// TestLoop: start runs first, posted functions run in order, Call waits
// for a reply given later by a deadline, a Call whose context ends returns
// false, and Close runs stop, waits for the goroutines of Go, and makes
// Post and Call return false.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		var ran []string // touched on the loop goroutine only
		l.Start(func() { ran = append(ran, "start") }, func() { ran = append(ran, "stop") })
		for _, s := range []string{"a", "b", "c"} {
			if !l.Post(func() { ran = append(ran, s) }) {
				t.Fatal("Post before Close returned false")
			}
		}
		begin := time.Now()
		v, ok := Call(l, context.Background(), func(reply func(int)) {
			l.Timers().Schedule(time.Now().Add(time.Second), func() { reply(1); reply(2) })
		})
		if !ok || v != 1 || time.Since(begin) != time.Second {
			t.Fatalf("Call = %d, %v after %v; want 1, true after 1s", v, ok, time.Since(begin))
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, ok := Call(l, ctx, func(reply func(int)) {}); ok {
			t.Fatal("Call without a reply returned ok")
		}
		if err := l.Err(ctx, errClosed); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after a context ended: %v", err)
		}

		goDone := false
		l.Go(func() {
			<-l.Ctx().Done()
			time.Sleep(time.Second) // Close waits for it
			goDone = true
		})
		l.Close()
		if !goDone {
			t.Fatal("Close returned before a goroutine of Go")
		}
		if want := []string{"start", "a", "b", "c", "stop"}; !slices.Equal(ran, want) {
			t.Fatalf("ran %v, want %v", ran, want)
		}
		if l.Post(func() { t.Error("ran after Close") }) {
			t.Fatal("Post after Close returned true")
		}
		if _, ok := Call(l, context.Background(), func(reply func(int)) { reply(1) }); ok {
			t.Fatal("Call after Close returned ok")
		}
		if err := l.Err(context.Background(), errClosed); err != errClosed {
			t.Fatalf("Err after Close: %v", err)
		}
		l.Close() // again: a no-op
	})
}

// TestCallWaitsForStart: a Call made before Start waits for the loop.
func TestCallWaitsForStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		defer l.Close()
		got := make(chan int)
		go func() {
			v, _ := Call(l, context.Background(), func(reply func(int)) { reply(7) })
			got <- v
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Call returned before Start")
		default:
		}
		l.Start(nil, nil)
		if v := <-got; v != 7 {
			t.Fatalf("Call = %d, want 7", v)
		}
	})
}

// TestRead: Read waits for the previous writer's exit, then reads with a
// context that Close cancels; a context that ends while it waits is its
// error.
func TestRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		l.Start(nil, nil)
		prev := make(chan struct{})
		go func() {
			time.Sleep(time.Second)
			close(prev)
		}()
		begin := time.Now()
		var readAt time.Duration
		errRead := errors.New("read")
		err := l.Read(context.Background(), prev, func(ctx context.Context) error {
			readAt = time.Since(begin)
			return errRead
		})
		if err != errRead || readAt != time.Second {
			t.Fatalf("Read = %v, read at %v; want the read's error at 1s", err, readAt)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.Read(ctx, make(chan struct{}), func(context.Context) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read waiting for a writer that never exits: %v", err)
		}

		go func() {
			time.Sleep(time.Second)
			l.Close()
		}()
		err = l.Read(context.Background(), nil, func(ctx context.Context) error {
			<-ctx.Done() // a read blocked until Close
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read during Close: %v", err)
		}
	})
}
