package share

import (
	"errors"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func spans(first, last int64) []Span { return []Span{{First: first, Last: last}} }

func wantRanges(t *testing.T, got []AcquiredRange, want ...AcquiredRange) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("acquired %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("acquired %+v, want %+v", got, want)
		}
	}
}

// TestLockExpiry: an acquired record whose lock expires is delivered again
// with its delivery count raised; an acknowledgement after expiry is
// INVALID_RECORD_STATE.
func TestLockExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: 30 * time.Second})
		p.Init(0)
		got, _ := p.Acquire("a", 10, false, spans(0, 4), time.Now())
		wantRanges(t, got, AcquiredRange{0, 4, 1})
		if got, _ := p.Acquire("b", 10, false, nil, time.Now()); len(got) != 0 {
			t.Fatalf("b acquired %+v while a holds the locks", got)
		}
		if e := p.NextExpiry(); !e.Equal(time.Now().Add(30 * time.Second)) {
			t.Fatalf("next expiry %v", e)
		}
		time.Sleep(29 * time.Second)
		if _, err := p.Ack("a", 0, 0, []AckType{AckAccept}, time.Now()); err != nil {
			t.Fatalf("accept before expiry: %v", err)
		}
		time.Sleep(time.Second)
		if _, err := p.Ack("a", 1, 1, []AckType{AckAccept}, time.Now()); !errors.Is(err, ErrInvalidRecordState) {
			t.Fatalf("accept after expiry: %v", err)
		}
		got, _ = p.Acquire("b", 10, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{1, 4, 2})
		if s, e := p.Offsets(); s != 1 || e != 5 {
			t.Fatalf("offsets %d %d, want 1 5", s, e)
		}
	})
}

// TestDeliveryLimit: a record released or expired at the delivery limit is
// archived and reported as a dead letter.
func TestDeliveryLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: time.Second, DeliveryLimit: 3})
		p.Init(10)
		var dead []DeadLetter
		for i := 1; i <= 3; i++ {
			got, _ := p.Acquire("a", 1, false, spans(10, 10), time.Now())
			wantRanges(t, got, AcquiredRange{10, 10, int16(i)})
			if i < 3 {
				time.Sleep(time.Second) // expires
			} else {
				d, err := p.Ack("a", 10, 10, []AckType{AckRelease}, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				dead = append(dead, d...)
			}
		}
		if len(dead) != 1 || dead[0] != (DeadLetter{Offset: 10, DeliveryCount: 3}) {
			t.Fatalf("dead letters %+v", dead)
		}
		if got, _ := p.Acquire("a", 1, false, nil, time.Now()); len(got) != 0 {
			t.Fatalf("archived record delivered again: %+v", got)
		}
		if s, e := p.Offsets(); s != 11 || e != 11 {
			t.Fatalf("offsets %d %d, want 11 11", s, e)
		}
	})
}

// TestReleaseRejectRenew covers the acknowledgement types of one batch:
// per-offset types, Renew extending the lock, Reject archiving with a dead
// letter, a Gap archiving without one, and another member's offsets refused.
func TestReleaseRejectRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: 10 * time.Second})
		p.Init(0)
		p.Acquire("a", 100, false, spans(0, 5), time.Now())
		if _, err := p.Ack("b", 0, 0, []AckType{AckAccept}, time.Now()); !errors.Is(err, ErrInvalidRecordState) {
			t.Fatalf("b acknowledged a's record: %v", err)
		}
		dead, err := p.Ack("a", 0, 4, []AckType{AckAccept, AckRelease, AckReject, AckGap, AckRenew}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0] != (DeadLetter{Offset: 2, DeliveryCount: 1, Rejected: true}) {
			t.Fatalf("dead %+v", dead)
		}
		for off, want := range map[int64]RecordState{0: Acknowledged, 1: Available, 2: Archived, 3: Archived, 4: Acquired, 5: Acquired} {
			if st, _ := p.State(off); st != want {
				t.Errorf("offset %d: %v, want %v", off, st, want)
			}
		}
		time.Sleep(9 * time.Second)
		p.Ack("a", 4, 4, []AckType{AckRenew}, time.Now())
		time.Sleep(5 * time.Second) // 5 expired, 4 renewed
		got, _ := p.Acquire("b", 100, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{1, 1, 2}, AcquiredRange{5, 5, 2})
		if _, err := p.Ack("a", 4, 4, []AckType{AckAccept}, time.Now()); err != nil {
			t.Fatalf("accept of a renewed record: %v", err)
		}
		for _, bad := range [][]AckType{nil, {9}, {AckAccept, AckAccept}} {
			if _, err := p.Ack("b", 1, 1, bad, time.Now()); !errors.Is(err, ErrInvalidAck) {
				t.Errorf("types %v: %v, want ErrInvalidAck", bad, err)
			}
		}
	})
}

// TestMaxLocks: no more than group.share.partition.max.record.locks
// records are in flight; acknowledging the first ones makes room.
func TestMaxLocks(t *testing.T) {
	p := NewPartition(PartitionConfig{MaxLocks: 4})
	p.Init(0)
	one := []Span{{0, 0, false}, {1, 2, false}, {3, 5, false}, {6, 6, false}}
	got, _ := p.Acquire("a", 100, false, one, time.Now())
	wantRanges(t, got, AcquiredRange{0, 2, 1})
	if _, room := p.ReadFrom(); room != 1 {
		t.Fatalf("room %d", room)
	}
	p.Ack("a", 0, 2, []AckType{AckAccept}, time.Now())
	got, _ = p.Acquire("a", 100, false, one, time.Now())
	wantRanges(t, got, AcquiredRange{3, 6, 1})
}

// TestSkippedSpans: control batches and aborted transactions are archived
// without delivery, and the start offset passes them.
func TestSkippedSpans(t *testing.T) {
	p := NewPartition(PartitionConfig{})
	p.Init(0)
	got, _ := p.Acquire("a", 100, false, []Span{{0, 1, false}, {2, 2, true}, {3, 4, true}, {5, 5, false}}, time.Now())
	wantRanges(t, got, AcquiredRange{0, 1, 1}, AcquiredRange{5, 5, 1})
	p.Ack("a", 0, 1, []AckType{AckAccept}, time.Now())
	if s, _ := p.Offsets(); s != 5 {
		t.Fatalf("start %d, want 5", s)
	}
}

// TestSnapshotRestore: a restored partition keeps acknowledgements and
// delivery counts and turns locks into available records.
func TestSnapshotRestore(t *testing.T) {
	p := NewPartition(PartitionConfig{})
	p.Init(100)
	p.Acquire("a", 100, false, spans(100, 109), time.Now())
	p.Ack("a", 100, 101, []AckType{AckAccept}, time.Now())
	p.Ack("a", 104, 104, []AckType{AckAccept}, time.Now())
	p.Ack("a", 105, 105, []AckType{AckReject}, time.Now())
	start, batches, _ := p.Snapshot()
	q := NewPartition(PartitionConfig{})
	q.Restore(start, batches)
	got, _ := q.Acquire("b", 100, false, spans(110, 110), time.Now())
	wantRanges(t, got, AcquiredRange{102, 103, 2}, AcquiredRange{106, 109, 2}, AcquiredRange{110, 110, 1})
}

// TestStrictAcquire: record_limit mode splits a batch; the rest is acquired
// by the next fetch.
func TestStrictAcquire(t *testing.T) {
	p := NewPartition(PartitionConfig{})
	p.Init(0)
	got, _ := p.Acquire("a", 3, true, spans(0, 9), time.Now())
	wantRanges(t, got, AcquiredRange{0, 2, 1})
	got, _ = p.Acquire("a", 3, true, spans(0, 9), time.Now())
	wantRanges(t, got, AcquiredRange{3, 5, 1})
	got, _ = p.Acquire("a", 3, false, spans(0, 9), time.Now())
	wantRanges(t, got, AcquiredRange{6, 9, 1})
}

// TestExpireTimer: Expire, driven by NextExpiry as the broker's timer
// does, releases expired locks without any fetch or acknowledgement;
// acknowledged and renewed records are not expired by their first lock's
// time, and a record out of deliveries is archived.
func TestExpireTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: 10 * time.Second, DeliveryLimit: 2})
		p.Init(0)
		got, _ := p.Acquire("a", 10, false, spans(0, 5), time.Now())
		wantRanges(t, got, AcquiredRange{0, 5, 1})
		time.Sleep(5 * time.Second)
		if _, err := p.Ack("a", 0, 1, []AckType{AckAccept}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Ack("a", 2, 2, []AckType{AckRenew}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := p.Expire(time.Now()); n != 0 {
			t.Fatalf("expired %d before the lock time", n)
		}
		next := p.NextExpiry()
		if want := time.Now().Add(5 * time.Second); !next.Equal(want) {
			t.Fatalf("next expiry %v, want %v", next, want)
		}
		time.Sleep(time.Until(next))
		if n := p.Expire(time.Now()); n != 3 {
			t.Fatalf("expired %d, want 3 (offsets 3-5)", n)
		}
		if dead := p.Finish(nil, p.Delta(nil), true); len(dead) != 0 {
			t.Fatalf("dead letters %+v below the delivery limit", dead)
		}
		if st, dc := p.State(2); st != Acquired || dc != 1 {
			t.Fatalf("renewed record %v %d", st, dc)
		}
		if st, dc := p.State(3); st != Available || dc != 1 {
			t.Fatalf("expired record %v %d", st, dc)
		}
		next = p.NextExpiry()
		time.Sleep(time.Until(next))
		if n := p.Expire(time.Now()); n != 1 {
			t.Fatalf("renewed lock: expired %d, want 1", n)
		}
		got, _ = p.Acquire("b", 10, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{2, 5, 2})
		time.Sleep(10 * time.Second)
		n := p.Expire(time.Now())
		d := p.Delta(nil)
		if dead := p.Finish(nil, d, false); n != 4 || len(dead) != 0 {
			t.Fatalf("at the delivery limit: expired %d, dead letters %+v of a failed write", n, dead)
		}
		// The archivals are dead letters once a write carries them.
		dead := p.Finish(nil, p.Delta(nil), true)
		if len(dead) != 4 || dead[0] != (DeadLetter{Offset: 2, DeliveryCount: 2}) {
			t.Fatalf("at the delivery limit: dead %+v", dead)
		}
		if s, e := p.Offsets(); s != 6 || e != 6 || !p.NextExpiry().IsZero() {
			t.Fatalf("offsets %d %d, next expiry %v", s, e, p.NextExpiry())
		}
	})
}

// TestGapBelowStart: a Gap acknowledgement reaching below the start offset
// skips what is below in one step (a hostile ShareAcknowledge of
// [math.MinInt64, start] spun under the partition lock for 2^63 offsets, the
// share-partition stuck and a core busy), and still archives the records
// it names at and above the start; any other type below the start is
// INVALID_RECORD_STATE.
func TestGapBelowStart(t *testing.T) {
	const start = int64(1) << 40
	p := NewPartition(PartitionConfig{})
	p.Init(start)
	got, _ := p.Acquire("a", 100, false, spans(start, start+2), time.Now())
	wantRanges(t, got, AcquiredRange{start, start + 2, 1})
	done := make(chan error, 1)
	go func() {
		_, err := p.Ack("a", math.MinInt64, start, []AckType{AckGap}, time.Now())
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gap below the start: %v", err)
		}
	case <-time.After(30 * time.Second): // a liveness bound, not a speed claim
		t.Fatal("a gap from math.MinInt64 did not return")
	}
	if _, err := p.Ack("a", start, start, []AckType{AckAccept}, time.Now()); !errors.Is(err, ErrInvalidRecordState) {
		t.Errorf("accept of the record the gap archived: %v, want ErrInvalidRecordState", err)
	}
	if _, err := p.Ack("a", 0, start+1, []AckType{AckAccept}, time.Now()); !errors.Is(err, ErrInvalidRecordState) {
		t.Errorf("accept below the start: %v, want ErrInvalidRecordState", err)
	}
	if _, err := p.Ack("a", start+1, start+2, []AckType{AckAccept}, time.Now()); err != nil {
		t.Errorf("accept of the rest: %v", err)
	}
}

// checkCounts fails when the partition's count of available records is not
// the number of records Available without a change in flight.
func checkCounts(t testing.TB, p *Partition) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := range p.recs {
		if p.recs[i].counts() {
			n++
			if off := p.start + int64(i); off < p.availFrom {
				t.Fatalf("offset %d available below availFrom %d", off, p.availFrom)
			}
		}
	}
	if n != p.avail {
		t.Fatalf("avail %d, counted %d", p.avail, n)
	}
}

// TestAckRollback: an acknowledgement whose write fails is rolled back, as
// Kafka's SharePartition rolls back: the records are Acquired by their
// member again with their delivery count and lock, the start offset did
// not move, no dead letter is given; while the write is in flight its
// records are neither acquired by another member nor acknowledged again.
// The same acknowledgement then succeeds.
func TestAckRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: 10 * time.Second})
		p.Init(0)
		w := make(chan struct{}, 1)
		p.Watch(w)
		defer p.Unwatch(w)
		p.Acquire("a", 100, false, spans(0, 9), time.Now())
		acks := []AckBatch{{First: 0, Last: 4, Types: []AckType{AckAccept}}, {First: 5, Last: 6, Types: []AckType{AckReject, AckRelease}}}
		c, err := p.Acknowledge("a", acks, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, p)
		if got, _ := p.Acquire("b", 100, false, nil, time.Now()); len(got) != 0 {
			t.Fatalf("b acquired %+v, released by a write in flight", got)
		}
		if _, err := p.Acknowledge("a", acks[:1], time.Now()); !errors.Is(err, ErrInvalidRecordState) {
			t.Fatalf("acknowledged twice while the write is in flight: %v", err)
		}
		d := p.Delta(c)
		if want := []StateBatch{{First: 6, Last: 6, State: Available, DeliveryCount: 1}}; d.Start != 6 || !slices.Equal(d.Batches, want) {
			t.Fatalf("delta start %d %+v, want 6 %+v", d.Start, d.Batches, want)
		}
		if dead := p.Finish(c, d, false); len(dead) != 0 {
			t.Fatalf("dead letters of a rolled back change: %+v", dead)
		}
		checkCounts(t, p)
		select {
		case <-w:
			t.Fatal("woken by a rolled back release")
		default:
		}
		for off := int64(0); off <= 9; off++ {
			if st, dc := p.State(off); st != Acquired || dc != 1 {
				t.Fatalf("offset %d after the rollback: %v %d", off, st, dc)
			}
		}
		if s, _ := p.Offsets(); s != 0 {
			t.Fatalf("start %d after the rollback", s)
		}
		c, err = p.Acknowledge("a", acks, time.Now())
		if err != nil {
			t.Fatalf("acknowledgement after the rollback: %v", err)
		}
		d = p.Delta(c)
		dead := p.Finish(c, d, true)
		if len(dead) != 1 || dead[0] != (DeadLetter{Offset: 5, DeliveryCount: 1, Rejected: true}) {
			t.Fatalf("dead letters %+v", dead)
		}
		select {
		case <-w:
		default:
			t.Fatal("the committed release woke no watcher")
		}
		checkCounts(t, p)
		if s, _ := p.Offsets(); s != 6 {
			t.Fatalf("start %d, want 6", s)
		}
		got, _ := p.Acquire("b", 100, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{6, 6, 2})
		// A lock that expired while the failed write was in flight
		// expires once rolled back.
		c, _ = p.Acknowledge("a", []AckBatch{{First: 7, Last: 7, Types: []AckType{AckAccept}}}, time.Now())
		time.Sleep(11 * time.Second)
		p.Finish(c, p.Delta(c), false)
		if n := p.Expire(time.Now()); n != 4 {
			t.Fatalf("expired %d after the rollback, want 4 (6-9)", n)
		}
		checkCounts(t, p)
	})
}

// TestRenewExpiresDuringWrite: a Renew written with other acknowledgements
// whose write outlasts the renewed lock, while a fetch expires locks (and
// skips the records in flight), still expires once committed. Before, the
// fetch took the record's lock ranges off the heap and the commit put none
// back: the record stayed Acquired by its member past every lock.
func TestRenewExpiresDuringWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPartition(PartitionConfig{LockDuration: 10 * time.Second})
		p.Init(0)
		p.Acquire("a", 100, false, spans(0, 1), time.Now())
		c, err := p.Acknowledge("a", []AckBatch{{First: 0, Last: 1, Types: []AckType{AckAccept, AckRenew}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		d := p.Delta(c)
		time.Sleep(11 * time.Second) // the write is slow
		if got, _ := p.Acquire("b", 100, false, nil, time.Now()); len(got) != 0 {
			t.Fatalf("b acquired %+v in flight", got)
		}
		p.Finish(c, d, true)
		if st, _ := p.State(0); st != Acknowledged {
			t.Fatalf("offset 0 %v after the commit", st)
		}
		if n := p.Expire(time.Now()); n != 1 {
			t.Fatalf("expired %d, want 1: the renewed lock ran out during the write", n)
		}
		got, _ := p.Acquire("b", 100, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{1, 1, 2})
		checkCounts(t, p)
	})
}

// TestDelta: a write carries the records changed since the last one at or
// past the start offset it carries (not the whole in-flight state), and
// none when nothing changed; a failed write's records are carried again.
func TestDelta(t *testing.T) {
	p := NewPartition(PartitionConfig{})
	p.Init(0)
	now := time.Now()
	p.Acquire("a", 1000, false, []Span{{First: 0, Last: 999}, {First: 1000, Last: 1000, Skip: true}}, now)
	write := func(acks []AckBatch, ok bool) Delta {
		t.Helper()
		c, err := p.Acknowledge("a", acks, now)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Delta(c)
		p.Finish(c, d, ok)
		checkCounts(t, p)
		return d
	}
	d := write([]AckBatch{{First: 500, Last: 500, Types: []AckType{AckAccept}}}, true)
	want := []StateBatch{{First: 500, Last: 500, State: Acknowledged, DeliveryCount: 1}, {First: 1000, Last: 1000, State: Archived}}
	if d.Start != 0 || !slices.Equal(d.Batches, want) {
		t.Fatalf("delta %d %+v, want 0 %+v", d.Start, d.Batches, want)
	}
	if d := p.Delta(nil); !d.Empty() {
		t.Fatalf("delta without a change: %+v", d)
	}
	d = write([]AckBatch{{First: 501, Last: 502, Types: []AckType{AckRelease}}}, false)
	if want := []StateBatch{{First: 501, Last: 502, State: Available, DeliveryCount: 1}}; !slices.Equal(d.Batches, want) {
		t.Fatalf("delta %+v, want %+v", d.Batches, want)
	}
	d = write([]AckBatch{{First: 0, Last: 499, Types: []AckType{AckAccept}}}, true)
	// 501-502 rolled back (Acquired again) are written again, as
	// Available with their delivery count.
	if want := []StateBatch{{First: 501, Last: 502, State: Available, DeliveryCount: 1}}; d.Start != 501 || !slices.Equal(d.Batches, want) {
		t.Fatalf("delta %d %+v, want 501 %+v", d.Start, d.Batches, want)
	}
	if s, _ := p.Offsets(); s != 501 {
		t.Fatalf("start %d", s)
	}
}

// TestWatchers: a fetch watching a share-partition is woken by its
// releases and lock expiries only, not by another share-partition's (every
// release on the broker woke every waiting fetch before); HasAvailable
// follows the count of available records.
func TestWatchers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, q := NewPartition(PartitionConfig{LockDuration: time.Second}), NewPartition(PartitionConfig{LockDuration: time.Minute})
		p.Init(0)
		q.Init(0)
		w := make(chan struct{}, 1)
		p.Watch(w)
		woken := func() bool {
			select {
			case <-w:
				return true
			default:
				return false
			}
		}
		p.Acquire("a", 10, false, spans(0, 1), time.Now())
		q.Acquire("a", 10, false, spans(0, 1), time.Now())
		if _, err := q.Ack("a", 0, 1, []AckType{AckRelease}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if woken() {
			t.Fatal("woken by another share-partition's release")
		}
		if !q.HasAvailable(time.Now()) || p.HasAvailable(time.Now()) {
			t.Fatal("HasAvailable does not follow the released records")
		}
		time.Sleep(time.Second)
		if n := p.Expire(time.Now()); n != 2 || !woken() {
			t.Fatalf("expired %d, woken %v", n, false)
		}
		p.Unwatch(w)
		p.Acquire("b", 10, false, nil, time.Now())
		if _, err := p.Ack("b", 0, 0, []AckType{AckRelease}, time.Now()); err != nil || woken() {
			t.Fatalf("woken after Unwatch (%v)", err)
		}
		checkCounts(t, p)
		checkCounts(t, q)
	})
}

// TestDirtyBounded: records archived without delivery (control records)
// and passed by the start offset while nothing is written do not pile up
// in the list of records to write.
func TestDirtyBounded(t *testing.T) {
	p := NewPartition(PartitionConfig{})
	p.Init(0)
	for off := int64(0); off < 10000; off++ {
		p.Acquire("a", 1, false, []Span{{First: off, Last: off, Skip: true}}, time.Now())
	}
	if s, _ := p.Offsets(); s != 10000 || len(p.dirty) > 100 {
		t.Fatalf("start %d, %d offsets listed to write", s, len(p.dirty))
	}
	if d := p.Delta(nil); d.Start != 10000 || len(d.Batches) != 0 || d.Empty() {
		t.Fatalf("delta %+v", d)
	}
}
