package replica

import (
	"container/heap"
	"math"
	"sync"
	"sync/atomic"
)

// The purgatory (Kafka's DelayedOperationPurgatory, reduced to what the
// broker parks): requests waiting on partitions register a Waiter with
// each partition they wait on, and the partition wakes only the waiters
// whose condition its change can complete:
//
//   - a produce with acks=all, and the group and transaction coordinators'
//     writes, wait for the high-watermark to pass an offset
//     (Partition.WatchHighWatermark): each partition keeps them in a heap
//     by offset, so a high-watermark move pops exactly the waits it
//     completes;
//   - a fetch waiting for min_bytes counts the bytes appends make
//     readable (Partition.WatchBytes): a follower's fetch the bytes
//     appended to the log, a consumer's those the high-watermark passes
//     over; the partition adds them to each fetch waiting on it, which
//     wakes when the sum reaches what it still needs, instead of
//     re-reading every partition it fetches on each append.
//
// A change of leadership, a partition removed or a transaction marker
// (which moves the last stable offset) wakes every waiter of the
// partition, to check its state again. The work of an append or a
// high-watermark move is proportional to the waiters of that partition it
// completes or counts bytes for.

// Waiter is one request parked in the purgatory of one or more
// partitions. The goroutine that made it registers it, waits on C, and
// must Close it; the partitions wake it from any goroutine.
type Waiter struct {
	c chan struct{}
	// bytes is what appends made readable in the partitions watched with
	// WatchBytes since they were watched; target is the sum at which the
	// waiter wakes (math.MaxInt64 until Arm).
	bytes, target atomic.Int64
	regs          []registration // guarded by the owner goroutine
}

type registration struct {
	p  *Partition
	hw *hwWait // nil: a WatchBytes registration
}

// NewWaiter returns a waiter registered nowhere.
func NewWaiter() *Waiter {
	w := &Waiter{c: make(chan struct{}, 1)}
	w.target.Store(math.MaxInt64)
	return w
}

// C receives a value when a watched partition may have completed the
// wait; the owner checks its condition again (wakes may be spurious).
func (w *Waiter) C() <-chan struct{} { return w.c }

func (w *Waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Bytes is the number of bytes appends have made readable in the
// partitions watched with WatchBytes since they were watched.
func (w *Waiter) Bytes() int64 { return w.bytes.Load() }

// Arm makes the waiter wake once Bytes reaches target (at once when it
// has).
func (w *Waiter) Arm(target int64) {
	w.target.Store(target)
	if w.bytes.Load() >= target {
		w.wake()
	}
}

func (w *Waiter) addBytes(n int64) {
	if w.bytes.Add(n) >= w.target.Load() {
		w.wake()
	}
}

// Close removes every registration of w. Safe to call more than once.
func (w *Waiter) Close() {
	for _, r := range w.regs {
		r.p.purg.remove(w, r.hw)
	}
	w.regs = nil
}

// WatchBytes registers w to count the bytes appends make readable in p:
// appended to the log for a follower's fetch, passed by the
// high-watermark otherwise.
func (p *Partition) WatchBytes(w *Waiter, follower bool) {
	p.purg.mu.Lock()
	if follower {
		p.purg.leo[w] = struct{}{}
	} else {
		p.purg.hw[w] = struct{}{}
	}
	p.purg.mu.Unlock()
	w.regs = append(w.regs, registration{p: p})
}

// WatchHighWatermark registers w to wake once p's high-watermark is past
// offset (at once when it is), or when p changes leadership or is
// removed.
func (p *Partition) WatchHighWatermark(w *Waiter, offset int64) {
	p.purg.mu.Lock()
	defer p.purg.mu.Unlock()
	if p.hw.Load() > offset {
		w.wake()
		return
	}
	hw := &hwWait{offset: offset, w: w}
	heap.Push(&p.purg.offsets, hw)
	w.regs = append(w.regs, registration{p: p, hw: hw})
}

// maxPending bounds the appends a partition remembers above its
// high-watermark (a follower in the ISR that stopped fetching holds the
// high-watermark until replica.lag.time.max.ms): past it the newest two
// merge, so that their bytes count when the later one is committed.
const maxPending = 4096

// purgatory is the waiters of one partition. Its mutex is a leaf lock,
// taken inside Partition.mu.
type purgatory struct {
	mu      sync.Mutex // guards the fields below
	leo     map[*Waiter]struct{}
	hw      map[*Waiter]struct{}
	offsets hwHeap
	// pending is the appends above the high-watermark, oldest first: the
	// bytes a consumer can read once the high-watermark passes end.
	pending []pendingAppend
	// sessions are the fetch sessions watching the partition, marked on
	// each change (SessionWatch).
	sessions map[*SessionWatch]struct{}
	p        *Partition // the partition, for the marks
}

type pendingAppend struct {
	end   int64 // the log end offset after the append
	bytes int64
}

func newPurgatory(p *Partition) purgatory {
	return purgatory{leo: map[*Waiter]struct{}{}, hw: map[*Waiter]struct{}{}, sessions: map[*SessionWatch]struct{}{}, p: p}
}

// markSessions marks the partition dirty in the sessions watching it.
// Called with g.mu held.
func (g *purgatory) markSessions() {
	for w := range g.sessions {
		w.mark(g.p)
	}
}

// appended counts bytes appended up to end (the new log end offset) for
// the followers' fetches and remembers them for the consumers'.
func (g *purgatory) appended(end, bytes int64) {
	g.mu.Lock()
	for w := range g.leo {
		w.addBytes(bytes)
	}
	if n := len(g.pending); n >= maxPending {
		g.pending[n-1].end = end
		g.pending[n-1].bytes += bytes
	} else {
		g.pending = append(g.pending, pendingAppend{end, bytes})
	}
	g.markSessions()
	g.mu.Unlock()
}

// advanced counts the bytes the high-watermark, now hw, passed for the
// consumers' fetches and wakes the waits for offsets below hw.
func (g *purgatory) advanced(hw int64) {
	g.mu.Lock()
	var bytes int64
	i := 0
	for ; i < len(g.pending) && g.pending[i].end <= hw; i++ {
		bytes += g.pending[i].bytes
	}
	if i > 0 {
		g.pending = append(g.pending[:0], g.pending[i:]...)
	}
	if bytes > 0 {
		for w := range g.hw {
			w.addBytes(bytes)
		}
	}
	for len(g.offsets) > 0 && g.offsets[0].offset < hw {
		heap.Pop(&g.offsets).(*hwWait).w.wake()
	}
	g.markSessions()
	g.mu.Unlock()
}

// truncated forgets the appends past offset (a follower truncating, or
// restarting its log when offset is -1).
func (g *purgatory) truncated(offset int64) {
	g.mu.Lock()
	i := len(g.pending)
	for i > 0 && (offset < 0 || g.pending[i-1].end > offset) {
		i--
	}
	g.pending = g.pending[:i]
	g.markSessions()
	g.mu.Unlock()
}

// wakeAll wakes every waiter, to check its state again.
func (g *purgatory) wakeAll() {
	g.mu.Lock()
	for w := range g.leo {
		w.wake()
	}
	for w := range g.hw {
		w.wake()
	}
	for _, hw := range g.offsets {
		hw.w.wake()
	}
	g.markSessions()
	g.mu.Unlock()
}

// startRaised marks the sessions watching the partition: its log start
// offset moved up (storage.Log.OnLogStartRaised).
func (g *purgatory) startRaised() {
	g.mu.Lock()
	g.markSessions()
	g.mu.Unlock()
}

// wakeFetches wakes the consumers' fetches (the last stable offset moved).
func (g *purgatory) wakeFetches() {
	g.mu.Lock()
	for w := range g.hw {
		w.wake()
	}
	g.markSessions()
	g.mu.Unlock()
}

func (g *purgatory) remove(w *Waiter, hw *hwWait) {
	g.mu.Lock()
	if hw == nil {
		delete(g.leo, w)
		delete(g.hw, w)
	} else if hw.index >= 0 {
		heap.Remove(&g.offsets, hw.index)
	}
	g.mu.Unlock()
}

// hwWait is a wait for the high-watermark to pass offset.
type hwWait struct {
	offset int64
	w      *Waiter
	index  int // in the heap, -1 once out of it
}

// hwHeap is a min-heap of waits by offset (container/heap).
type hwHeap []*hwWait

func (h hwHeap) Len() int           { return len(h) }
func (h hwHeap) Less(i, j int) bool { return h[i].offset < h[j].offset }
func (h hwHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *hwHeap) Push(x any) {
	hw := x.(*hwWait)
	hw.index = len(*h)
	*h = append(*h, hw)
}

func (h *hwHeap) Pop() any {
	old := *h
	n := len(old)
	hw := old[n-1]
	old[n-1] = nil
	hw.index = -1
	*h = old[:n-1]
	return hw
}
