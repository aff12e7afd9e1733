package replica

import (
	"testing"
)

func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// TestPurgatory: a follower's fetch counts bytes as they are appended, a
// consumer's as the high-watermark passes them (whole appends), a wait for
// the high-watermark wakes once it passes its offset and not before, a
// fetch wakes only once the bytes reach what it armed, and Close leaves
// nothing registered.
func TestPurgatory(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 1, 0)
	leo, hw, commit := NewWaiter(), NewWaiter(), NewWaiter()
	p.WatchBytes(leo, true)
	p.WatchBytes(hw, false)
	p.WatchHighWatermark(commit, 9)

	b1 := batch(t, 0, 1, 10) // offsets 0-9
	if err := p.appendAsFollower(b1, 0); err != nil {
		t.Fatal(err)
	}
	if got := leo.Bytes(); got != int64(len(b1)) {
		t.Fatalf("follower fetch counted %d bytes after an append of %d", got, len(b1))
	}
	if got := hw.Bytes(); got != 0 {
		t.Fatalf("consumer fetch counted %d bytes above the high-watermark", got)
	}
	// Neither armed: no wake.
	if woken(leo) || woken(hw) || woken(commit) {
		t.Fatal("woken before armed or before the high-watermark moved")
	}
	// The high-watermark inside the append: nothing readable as a whole
	// yet, offset 9 not committed.
	if err := p.appendAsFollower(nil, 5); err != nil {
		t.Fatal(err)
	}
	if hw.Bytes() != 0 || woken(commit) {
		t.Fatalf("high-watermark 5: consumer counted %d bytes or the wait for offset 9 woke", hw.Bytes())
	}
	hw.Arm(int64(len(b1)))
	if woken(hw) {
		t.Fatal("fetch woke before its bytes were readable")
	}
	if err := p.appendAsFollower(nil, 10); err != nil {
		t.Fatal(err)
	}
	if hw.Bytes() != int64(len(b1)) || !woken(hw) {
		t.Fatalf("high-watermark 10: consumer counted %d bytes, want %d, and a wake", hw.Bytes(), len(b1))
	}
	if !woken(commit) {
		t.Fatal("the wait for offset 9 did not wake at high-watermark 10")
	}
	// Armed past the next append: no wake; past two: a wake.
	leo.Arm(leo.Bytes() + int64(len(b1)) + 1)
	b2 := batch(t, 10, 1, 10)
	if err := p.appendAsFollower(b2, 10); err != nil {
		t.Fatal(err)
	}
	if woken(leo) {
		t.Fatal("fetch woke before min bytes")
	}
	if err := p.appendAsFollower(batch(t, 20, 1, 10), 10); err != nil {
		t.Fatal(err)
	}
	if !woken(leo) {
		t.Fatal("fetch did not wake past min bytes")
	}
	// A wait already satisfied wakes at once and registers nothing.
	done := NewWaiter()
	p.WatchHighWatermark(done, 3)
	if !woken(done) {
		t.Fatal("wait for a committed offset did not wake at once")
	}
	late := NewWaiter()
	p.WatchHighWatermark(late, 100)
	// A leadership change wakes every waiter.
	if _, err := m.Apply(testTP, [16]byte{1}, State{Leader: 3, LeaderEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, LogConfig{}); err != nil {
		t.Fatal(err)
	}
	if !woken(late) {
		t.Fatal("leadership change did not wake the wait for offset 100")
	}
	for _, w := range []*Waiter{leo, hw, commit, done, late} {
		w.Close()
	}
	p.purg.mu.Lock()
	defer p.purg.mu.Unlock()
	if len(p.purg.leo)+len(p.purg.hw)+len(p.purg.offsets) != 0 {
		t.Fatalf("registrations left after Close: %d %d %d", len(p.purg.leo), len(p.purg.hw), len(p.purg.offsets))
	}
}

// TestPurgatoryHighWatermarkOrder: of 100 waits for offsets 0-99, a
// high-watermark move to k wakes exactly those below k, and Close removes
// one from the middle of the heap.
func TestPurgatoryHighWatermarkOrder(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 1, 0, batch(t, 0, 1, 100))
	ws := make([]*Waiter, 100)
	for i := range ws {
		ws[i] = NewWaiter()
		// Registered out of order.
		p.WatchHighWatermark(ws[i], int64((i*37)%100))
	}
	ws[0].Close() // offset 0: removed before it completes
	p.mu.Lock()
	p.advanceHWLocked(40)
	p.mu.Unlock()
	for i, w := range ws {
		off := int64((i * 37) % 100)
		if want := off < 40 && i != 0; woken(w) != want {
			t.Fatalf("wait for offset %d: woken %v at high-watermark 40, want %v", off, !want, want)
		}
	}
	p.purg.mu.Lock()
	left := len(p.purg.offsets)
	p.purg.mu.Unlock()
	if left != 60 {
		t.Fatalf("%d waits left, want 60", left)
	}
	for _, w := range ws {
		w.Close()
	}
}
