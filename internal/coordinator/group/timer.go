package group

import (
	"container/heap"
	"time"
)

// timer is one deadline in a timerQueue. It is owned by the run goroutine.
type timer struct {
	at    time.Time
	seq   uint64 // ties broken in scheduling order, for determinism
	fn    func()
	index int // position in the heap; -1 once fired or canceled
}

// timerQueue is a min-heap of deadlines. The run goroutine arms one
// time.Timer for its earliest entry, so that timeouts are driven by package
// time (and testing/synctest can advance them) while all the callbacks run
// on the run goroutine. Not safe for concurrent use.
type timerQueue struct {
	h   timerHeap
	seq uint64
}

// schedule adds fn to run at at and returns its handle.
func (q *timerQueue) schedule(at time.Time, fn func()) *timer {
	q.seq++
	t := &timer{at: at, seq: q.seq, fn: fn}
	heap.Push(&q.h, t)
	return t
}

// cancel removes t; a nil, fired or canceled t is a no-op.
func (q *timerQueue) cancel(t *timer) {
	if t == nil || t.index < 0 {
		return
	}
	heap.Remove(&q.h, t.index)
}

// next returns the earliest timer or nil.
func (q *timerQueue) next() *timer {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}

// popDue removes and returns the earliest timer due at now, or nil.
func (q *timerQueue) popDue(now time.Time) *timer {
	if len(q.h) == 0 || q.h[0].at.After(now) {
		return nil
	}
	return heap.Pop(&q.h).(*timer)
}

type timerHeap []*timer

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
	t := x.(*timer)
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
