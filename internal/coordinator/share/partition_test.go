package share

import (
	"errors"
	"math"
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
			got, d := p.Acquire("a", 1, false, spans(10, 10), time.Now())
			dead = append(dead, d...)
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
		if dead, n := p.Expire(time.Now()); n != 0 || len(dead) != 0 {
			t.Fatalf("expired %d before the lock time", n)
		}
		next := p.NextExpiry()
		if want := time.Now().Add(5 * time.Second); !next.Equal(want) {
			t.Fatalf("next expiry %v, want %v", next, want)
		}
		time.Sleep(time.Until(next))
		if dead, n := p.Expire(time.Now()); n != 3 || len(dead) != 0 {
			t.Fatalf("expired %d (dead %v), want 3 (offsets 3-5)", n, dead)
		}
		if st, dc := p.State(2); st != Acquired || dc != 1 {
			t.Fatalf("renewed record %v %d", st, dc)
		}
		if st, dc := p.State(3); st != Available || dc != 1 {
			t.Fatalf("expired record %v %d", st, dc)
		}
		next = p.NextExpiry()
		time.Sleep(time.Until(next))
		if _, n := p.Expire(time.Now()); n != 1 {
			t.Fatalf("renewed lock: expired %d, want 1", n)
		}
		got, _ = p.Acquire("b", 10, false, nil, time.Now())
		wantRanges(t, got, AcquiredRange{2, 5, 2})
		time.Sleep(10 * time.Second)
		dead, n := p.Expire(time.Now())
		if n != 4 || len(dead) != 4 || dead[0] != (DeadLetter{Offset: 2, DeliveryCount: 2}) {
			t.Fatalf("at the delivery limit: expired %d, dead %+v", n, dead)
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
