package deadline

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueue: callbacks run in deadline order, ties in scheduling order,
// canceled ones never, one scheduled by a callback for now in the same
// RunDue, and C is nil once the queue is empty.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q Queue
		var ran []string
		start := time.Now()
		add := func(d time.Duration, name string) *Timer {
			return q.Schedule(start.Add(d), func() { ran = append(ran, name) })
		}
		add(2*time.Second, "b1")
		add(time.Second, "a")
		add(2*time.Second, "b2")
		gone := add(1500*time.Millisecond, "canceled")
		q.Schedule(start.Add(3*time.Second), func() {
			ran = append(ran, "c")
			q.Schedule(time.Now(), func() { ran = append(ran, "c-now") })
		})
		q.Cancel(gone)
		q.Cancel(gone) // a second cancel is a no-op
		q.Cancel(nil)
		for q.C() != nil {
			<-q.C()
			q.RunDue()
		}
		if want := []string{"a", "b1", "b2", "c", "c-now"}; !slices.Equal(ran, want) {
			t.Fatalf("ran %v, want %v", ran, want)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Fatalf("done after %v, want 3s", got)
		}
		q.Stop()
	})
}
