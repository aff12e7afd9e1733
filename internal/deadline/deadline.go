// Package deadline is a queue of callbacks due at given times, for a
// state machine that runs on one goroutine (the group and transaction
// coordinators): the goroutine selects on Queue.C next to its other
// events and calls Queue.RunDue when it fires, so every callback runs on
// that goroutine and package time (and so testing/synctest) drives the
// deadlines. Nothing here is safe for concurrent use.
package deadline

import (
	"container/heap"
	"time"
)

// Timer is one scheduled callback, a handle for Queue.Cancel.
type Timer struct {
	at    time.Time
	seq   uint64 // ties broken in scheduling order, for determinism
	fn    func()
	index int // position in the heap; -1 once run or canceled
}

// Queue is a min-heap of Timers with one time.Timer armed for the
// earliest. The zero value is an empty queue.
type Queue struct {
	h       timerHeap
	seq     uint64
	tm      *time.Timer // created at the first C with a deadline
	armedAt time.Time
	armed   bool
}

// Schedule adds fn to run at at and returns its handle. Timers due at the
// same time run in the order they were scheduled.
func (q *Queue) Schedule(at time.Time, fn func()) *Timer {
	q.seq++
	t := &Timer{at: at, seq: q.seq, fn: fn}
	heap.Push(&q.h, t)
	return t
}

// Cancel removes t; a nil, run or canceled t is a no-op.
func (q *Queue) Cancel(t *Timer) {
	if t == nil || t.index < 0 {
		return
	}
	heap.Remove(&q.h, t.index)
}

// C returns the channel that receives when the earliest deadline is due,
// arming the queue's time.Timer for it, or nil when nothing is scheduled.
// Call it again after anything that may have changed the queue.
func (q *Queue) C() <-chan time.Time {
	if len(q.h) == 0 {
		if q.armed {
			q.tm.Stop()
			q.armed = false
		}
		return nil
	}
	next := q.h[0].at
	if !q.armed || !next.Equal(q.armedAt) {
		if q.tm == nil {
			q.tm = time.NewTimer(time.Until(next))
		} else {
			q.tm.Reset(time.Until(next))
		}
		q.armedAt, q.armed = next, true
	}
	return q.tm.C
}

// RunDue runs, earliest first, the callbacks of the timers due now; call
// it when C's channel fired. Callbacks may schedule and cancel.
func (q *Queue) RunDue() {
	q.armed = false
	now := time.Now()
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		heap.Pop(&q.h).(*Timer).fn()
	}
}

// Stop stops the armed time.Timer; the queue keeps its timers.
func (q *Queue) Stop() {
	if q.tm != nil {
		q.tm.Stop()
	}
	q.armed = false
}

type timerHeap []*Timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*Timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}
