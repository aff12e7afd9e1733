package replica

import (
	"sync"
	"sync/atomic"
	"time"
)

// SessionWatch lets a fetch session (KIP-227), a follower's on the
// leader or a consumer's, cost what changed instead of what the session
// holds (issue 13). It is
// registered once with each partition of the session (Partition.Watch);
// the partition marks it dirty on whatever can change what a fetch of it
// answers: an append (log end offset), a high-watermark move, a
// truncation, a transaction marker (last stable offset), a log start
// offset raised by DeleteRecords (Partition.SetLogStartOffset) or by
// retention, a change of leadership, ISR or epochs, the partition's
// removal. The session then
// reads only the dirty partitions, those its request names, and those
// whose last read was not quiet.
//
// For a follower's session it is also the follower's fetch clock (Kafka's lastFetchTimeMs for the
// partitions the fetch did not read): Fetched stamps the time of each
// session fetch, and a partition whose follower was caught up to the log
// end offset at its last read (UpdateFollower with this watch) counts it
// caught up at each later stamp, as long as no change made it dirty (a
// dirty partition is read, which sets its own times). A follower that
// stops fetching stops the stamps, and leaves the ISR after
// replica.lag.time.max.ms as before.
//
// Safe for concurrent use. Its mutex is a leaf, taken inside the
// partitions' purgatory locks.
type SessionWatch struct {
	c chan struct{} // a value when a partition turned dirty (capacity 1)
	// at is the Unix nanoseconds of the session's last fetch (Fetched),
	// 0 before the first.
	at atomic.Int64

	mu    sync.Mutex          // guards dirty
	dirty map[*Partition]bool // the partitions changed since Drain
}

// NewSessionWatch returns a watch registered with no partition.
func NewSessionWatch() *SessionWatch {
	return &SessionWatch{c: make(chan struct{}, 1), dirty: map[*Partition]bool{}}
}

// C receives a value when a partition turned dirty since the last Drain
// (possibly before it: wakes may be spurious).
func (w *SessionWatch) C() <-chan struct{} { return w.c }

// mark records p as changed and wakes the session.
func (w *SessionWatch) mark(p *Partition) {
	w.mu.Lock()
	w.dirty[p] = true
	w.mu.Unlock()
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Drain appends the partitions changed since the last Drain to into and
// forgets them; O(partitions changed).
func (w *SessionWatch) Drain(into []*Partition) []*Partition {
	w.mu.Lock()
	for p := range w.dirty {
		into = append(into, p)
	}
	clear(w.dirty)
	w.mu.Unlock()
	return into
}

// Fetched stamps now as the time of a session fetch that covered every
// partition of the session: those it did not read were unchanged since
// their last read.
func (w *SessionWatch) Fetched(now time.Time) { w.at.Store(now.UnixNano()) }

// last is the time of the session's last fetch, zero before the first.
func (w *SessionWatch) last() time.Time {
	if ns := w.at.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Watch registers w with p: p marks w dirty on each change (see
// SessionWatch). Unwatch removes it.
func (p *Partition) Watch(w *SessionWatch) {
	p.purg.mu.Lock()
	p.purg.sessions[w] = struct{}{}
	p.purg.mu.Unlock()
}

// Unwatch removes w from p, and stops counting w's fetches as fetches of
// p by a follower whose last read of p used w (the partition was dropped
// from the session).
func (p *Partition) Unwatch(w *SessionWatch) {
	p.purg.mu.Lock()
	delete(p.purg.sessions, w)
	p.purg.mu.Unlock()
	p.mu.Lock()
	for _, f := range p.followers {
		if f.clock == w {
			f.foldClock()
			f.clock = nil
		}
	}
	p.mu.Unlock()
}

// SetLogStartOffset raises the log start offset of p's log to offset
// (DeleteRecords; see storage.Log.SetLogStartOffset). The fetch sessions
// watching p are told of the move, as of one by retention
// (storage.Log.OnLogStartRaised, set in newPartition).
func (p *Partition) SetLogStartOffset(offset int64) error {
	return p.log.SetLogStartOffset(offset)
}

// foldClock moves f's fetch times up to its session's last fetch, when
// that is later: the follower fetched then, at the same offset, with the
// leader's log end offset unchanged. Called with Partition.mu held.
func (f *followerState) foldClock() {
	if f.clock == nil {
		return
	}
	at := f.clock.last()
	if !at.After(f.lastFetch) {
		return
	}
	f.lastFetch = at
	if f.clockCaughtUp {
		f.lastCaughtUp = at
	}
}
