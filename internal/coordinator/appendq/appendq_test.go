package appendq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rec is a test record: its name, and its size against MaxBytes.
type rec struct {
	name  string
	size  int
	alone bool
}

// harness runs a Writer[rec] whose Append blocks until the test releases
// it, and whose posted functions run on the test goroutine (standing for
// the coordinator's run goroutine) when it calls drain.
type harness struct {
	t      *testing.T
	w      *Writer[rec]
	calls  chan []rec // each Append call's records
	result chan error // what the blocked Append returns
	posted chan func()
	closed chan struct{} // closed: Post returns false
	wg     sync.WaitGroup
	done   []string // "name:err" in the order dones ran
	log    bytes.Buffer
}

func newHarness(t *testing.T, ctx context.Context, cfg Config[rec]) *harness {
	t.Helper()
	h := &harness{t: t, calls: make(chan []rec), result: make(chan error), posted: make(chan func(), 100), closed: make(chan struct{})}
	cfg.Append = func(ctx context.Context, p int32, recs []rec) error {
		if p != 7 {
			t.Errorf("Append to partition %d, want 7", p)
		}
		select {
		case h.calls <- slices.Clone(recs):
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-h.result:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg.Size = func(r rec) int { return r.size }
	cfg.Post = func(fn func()) bool {
		select {
		case <-h.closed:
			return false
		default:
		}
		h.posted <- fn
		return true
	}
	cfg.Log = slog.New(slog.NewTextHandler(&h.log, nil))
	cfg.Topic = "__test"
	h.w = New(ctx, 7, cfg)
	h.wg.Go(h.w.Run)
	t.Cleanup(func() { // a failed test leaves no goroutine behind
		h.w.Stop()
		h.wg.Wait()
	})
	return h
}

// enqueue queues records named by names, each of size 1 unless named
// "big" (size 10) or "alone".
func (h *harness) enqueue(names ...string) {
	h.t.Helper()
	var recs []rec
	for _, n := range names {
		r := rec{name: n, size: 1}
		switch {
		case strings.HasPrefix(n, "big"):
			r.size = 10
		case strings.HasPrefix(n, "alone"):
			r.alone = true
		}
		recs = append(recs, r)
	}
	label := strings.Join(names, "+")
	if !h.w.Enqueue(recs, func(err error) { h.done = append(h.done, fmt.Sprintf("%s:%v", label, err)) }) {
		h.t.Fatalf("Enqueue(%s) = false", label)
	}
}

// next waits for the next Append call and returns its record names.
func (h *harness) next() []string {
	h.t.Helper()
	var names []string
	for _, r := range <-h.calls {
		names = append(names, r.name)
	}
	return names
}

// drain runs what was posted so far.
func (h *harness) drain() {
	for {
		select {
		case fn := <-h.posted:
			fn()
		default:
			return
		}
	}
}

func (h *harness) stop() {
	h.w.Stop()
	h.wg.Wait()
	h.drain()
}

// wantDone fails the test unless the dones that ran are want, in order.
func (h *harness) wantDone(want ...string) {
	h.t.Helper()
	if !slices.Equal(h.done, want) {
		h.t.Fatalf("dones ran %v, want %v", h.done, want)
	}
}

var errFail = errors.New("fail")

// TestCombine: the first append is written alone while the rest queue;
// then the queued appends are combined in order up to MaxBytes (one larger
// than MaxBytes is still written), appends that go alone are never
// combined (with Alone nil, none goes alone), and the dones run in Enqueue
// order with their call's error.
func TestCombine(t *testing.T) {
	isAlone := func(recs []rec) bool { return len(recs) > 0 && recs[0].alone }
	tests := []struct {
		name     string
		maxBytes int
		alone    func([]rec) bool
		queued   [][]string // enqueued while the first append is in flight
		calls    [][]string // the Append calls after the first
		fail     int        // the index in calls that fails
		done     []string
	}{{
		name:     "limit and alone",
		maxBytes: 3,
		alone:    isAlone,
		queued:   [][]string{{"b", "c"}, {"d"}, {"e"}, {"alone1"}, {"f"}, {"alone2"}, {"alone3"}, {"big"}, {"g"}},
		calls:    [][]string{{"b", "c", "d"}, {"e"}, {"alone1"}, {"f"}, {"alone2"}, {"alone3"}, {"big"}, {"g"}},
		fail:     1,
		done: []string{"a:<nil>", "b+c:<nil>", "d:<nil>", "e:fail", "alone1:<nil>", "f:<nil>",
			"alone2:<nil>", "alone3:<nil>", "big:<nil>", "g:<nil>"},
	}, {
		name:     "alone nil",
		maxBytes: 100,
		queued:   [][]string{{"alone1"}, {"b"}, {"alone2"}},
		calls:    [][]string{{"alone1", "b", "alone2"}},
		fail:     0,
		done:     []string{"a:<nil>", "alone1:fail", "b:fail", "alone2:fail"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, t.Context(), Config[rec]{Timeout: time.Minute, MaxBytes: tt.maxBytes, Alone: tt.alone})
				h.enqueue("a")
				if got := h.next(); !slices.Equal(got, []string{"a"}) {
					t.Fatalf("first Append %v, want [a]", got)
				}
				for _, q := range tt.queued {
					h.enqueue(q...)
				}
				h.result <- nil
				for i, want := range tt.calls {
					if got := h.next(); !slices.Equal(got, want) {
						t.Fatalf("Append %d: %v, want %v", i+1, got, want)
					}
					if i == tt.fail {
						h.result <- errFail
					} else {
						h.result <- nil
					}
				}
				synctest.Wait()
				h.drain()
				h.wantDone(tt.done...)
				if h.log.Len() != 0 {
					t.Fatalf("logged %q, want nothing (no append took over a second)", h.log.String())
				}
				h.stop()
			})
		})
	}
}

// TestTimeout: an Append is canceled after Timeout, its done gets the
// context's error, and an Append over a second is logged.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, t.Context(), Config[rec]{Timeout: 5 * time.Second, MaxBytes: 100})
		start := time.Now()
		h.enqueue("a")
		h.next()
		synctest.Wait()      // Append blocked until its deadline
		posted := <-h.posted // once it returns
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("Append returned after %v, want 5s", d)
		}
		posted()
		h.wantDone("a:" + context.DeadlineExceeded.Error())
		for _, s := range []string{`msg="slow __test append"`, "partition=7", "records=1", "duration=5s", `err="context deadline exceeded"`} {
			if !strings.Contains(h.log.String(), s) {
				t.Fatalf("log %q lacks %q", h.log.String(), s)
			}
		}
		h.stop()
	})
}

// TestStop: Stop cancels the Append in flight (its done is still posted),
// returns the dones never started in queue order, makes Run return and
// Exited close, and later Enqueues return false.
func TestStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, t.Context(), Config[rec]{Timeout: time.Minute, MaxBytes: 100})
		h.enqueue("a")
		h.next()
		h.enqueue("b")
		h.enqueue("c")
		for _, done := range h.w.Stop() {
			done(errors.New("left"))
		}
		h.wantDone("b:left", "c:left")
		<-h.w.Exited()
		h.drain()
		h.wantDone("b:left", "c:left", "a:"+context.Canceled.Error())
		if h.w.Enqueue([]rec{{name: "d"}}, func(error) { t.Error("done of an append refused") }) {
			t.Fatal("Enqueue after Stop = true")
		}
		if got := h.w.Stop(); len(got) != 0 {
			t.Fatalf("second Stop returned %d dones", len(got))
		}
		h.wg.Wait()
	})
}

// TestEnds: Run returns when the parent context ends (canceling the Append
// in flight) and when Post reports the coordinator closed, leaving the rest
// of the queue unwritten.
func TestEnds(t *testing.T) {
	t.Run("context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			h := newHarness(t, ctx, Config[rec]{Timeout: time.Minute, MaxBytes: 100})
			h.enqueue("a")
			h.next()
			cancel()
			<-h.w.Exited()
			h.stop()
			h.wantDone("a:" + context.Canceled.Error())
		})
	})
	t.Run("post", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, t.Context(), Config[rec]{Timeout: time.Minute, MaxBytes: 1})
			h.enqueue("a")
			h.next()
			h.enqueue("b")
			close(h.closed)
			h.result <- nil
			<-h.w.Exited()
			if got := h.w.Stop(); len(got) != 1 {
				t.Fatalf("Stop returned %d dones, want b's", len(got))
			}
			h.stop()
			h.wantDone()
		})
	})
}
