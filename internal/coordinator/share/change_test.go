package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// changeModel drives one share-partition as its leader does (changes
// written to a Store through ShareUpdate and ShareSnapshot records, each
// write failing at random) and checks it against what clients and a
// failover expect.
type changeModel struct {
	t     testing.TB // goroutineT when steps run on goroutines of their own
	p     *Partition
	store *Store
	key   StateKey

	mu       sync.Mutex // guards the fields below and rng
	rng      *rand.Rand
	accepted map[int64]bool // offsets whose acceptance committed
	dead     map[int64]bool // offsets given up on (rejected, delivery limit)
	writes   [2]int         // failed, succeeded

	// during, when set, runs while a change's write is in flight.
	during func(c *Change)
}

const (
	modelLock  = 10 * time.Second
	modelLimit = 3
)

var modelMembers = []string{"a", "b", "c"}

func newChangeModel(t testing.TB, seed uint64) *changeModel {
	m := &changeModel{
		t:        t,
		p:        NewPartition(PartitionConfig{LockDuration: modelLock, DeliveryLimit: modelLimit, MaxLocks: 40}),
		store:    NewStore(),
		key:      StateKey{Group: "g", Partition: 0},
		rng:      rand.New(rand.NewPCG(seed, seed)),
		accepted: map[int64]bool{},
		dead:     map[int64]bool{},
	}
	m.store.Load(0, NewShard())
	rec, err := m.store.Prepare(0, m.key, Write{Initialize: true, LeaderEpoch: -1}, 3, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.store.Apply(0, rec)
	m.p.Init(0)
	return m
}

func (m *changeModel) intn(n int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rng.IntN(n)
}

// write writes the delta of c (nil: none), which fails one time in three
// unless must, and finishes c; it reports whether it was written. During
// the write of a change m.during runs, when set.
func (m *changeModel) write(c *Change, must bool) bool {
	m.t.Helper()
	d := m.p.Delta(c)
	if c != nil && m.during != nil {
		m.during(c)
	}
	ok := d.Empty() || must || m.intn(3) != 0
	if ok && !d.Empty() {
		rec, err := m.store.Prepare(0, m.key, Write{StateEpoch: 0, LeaderEpoch: -1, StartOffset: d.Start, Batches: d.Batches}, 3, time.Now())
		if err != nil {
			m.t.Fatalf("prepare: %v", err)
		}
		m.store.Apply(0, rec)
	}
	m.mu.Lock()
	m.writes[b2i(ok)]++
	m.mu.Unlock()
	m.gaveUp(m.p.Finish(c, d, ok))
	return ok
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gaveUp records dead letters: each offset once, never an accepted one,
// and only once its archival is durable (Archived, or below the durable
// start offset): a new leader would deliver it again otherwise.
func (m *changeModel) gaveUp(dead []DeadLetter) {
	m.t.Helper()
	st := m.store.Get(0, m.key)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range dead {
		if m.dead[d.Offset] || m.accepted[d.Offset] {
			m.t.Fatalf("offset %d given up on twice, or after its acceptance", d.Offset)
		}
		if ds, _ := durableAt(st, d.Offset); d.Offset >= st.StartOffset && ds != Archived {
			m.t.Fatalf("offset %d given up on while durable as %v (start %d)", d.Offset, ds, st.StartOffset)
		}
		if d.DeliveryCount > modelLimit || !d.Rejected && d.DeliveryCount != modelLimit {
			m.t.Fatalf("dead letter %+v, delivery limit %d", d, modelLimit)
		}
		m.dead[d.Offset] = true
	}
}

// records returns a copy of the in-flight records, dirty marks cleared,
// and the start offset.
func (m *changeModel) records() (int64, []recState) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	recs := slices.Clone(m.p.recs)
	for i := range recs {
		recs[i].dirty = false
	}
	return m.p.start, recs
}

// acks returns random acknowledgement batches, mostly of records held by
// the member returned.
func (m *changeModel) acks() (string, []AckBatch) {
	start, recs := m.records()
	member := modelMembers[m.intn(len(modelMembers))]
	at := start - 2 + int64(m.intn(len(recs)+4))
	for i := range recs {
		if r := recs[(i+int(at-start+2))%len(recs)]; r.state == Acquired && m.intn(5) != 0 {
			member, at = r.member, start+int64((i+int(at-start+2))%len(recs))
			break
		}
	}
	var batches []AckBatch
	for range 1 + m.intn(2) {
		n := 1 + m.intn(4)
		b := AckBatch{First: at, Last: at + int64(n) - 1}
		pick := func() AckType {
			if m.intn(10) == 0 {
				return AckRenew
			}
			return []AckType{AckGap, AckAccept, AckAccept, AckRelease, AckReject}[m.intn(5)]
		}
		if m.intn(3) == 0 {
			for range n {
				b.Types = append(b.Types, pick())
			}
		} else {
			b.Types = []AckType{pick()}
		}
		batches = append(batches, b)
		at = b.Last + 1 + int64(m.intn(3))
	}
	return member, batches
}

// ack acknowledges at random as a ShareAcknowledge does (under the persist
// lock, written before it is answered). In exact mode (one goroutine) it
// checks that a refused or rolled back acknowledgement left every record as
// it was: state, member, lock and delivery count.
func (m *changeModel) ack(exact bool) {
	m.t.Helper()
	member, batches := m.acks()
	m.p.LockPersist()
	defer m.p.UnlockPersist()
	if exact {
		// Expiries are not rolled back: apply and write them first.
		if m.p.Expire(time.Now()) > 0 {
			m.write(nil, false)
		}
	}
	start, before := m.records()
	c, err := m.p.Acknowledge(member, batches, time.Now())
	switch {
	case errors.Is(err, ErrInvalidRecordState):
		if exact {
			m.same(start, before, nil, "refused acknowledgement")
		}
		if c.Expired() > 0 { // written though the acknowledgement is refused, as the broker does
			m.write(nil, false)
		}
		return
	case err != nil:
		m.t.Fatalf("acknowledge %s %+v: %v", member, batches, err)
	}
	if !m.write(c, false) {
		if exact {
			// Other records may have changed during the write.
			m.same(start, before, changed(c), "rolled back acknowledgement")
			// A lock that ran out during the write runs out now.
			if m.p.Expire(time.Now()) > 0 {
				m.write(nil, false)
			}
			m.unlockedExpired()
		}
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range batches {
		for off := max(b.First, start); off <= b.Last; off++ {
			typ := b.Types[0]
			if len(b.Types) > 1 {
				typ = b.Types[off-b.First]
			}
			if typ != AckAccept {
				continue
			}
			if m.accepted[off] || m.dead[off] {
				m.t.Fatalf("offset %d accepted twice, or after it was given up on", off)
			}
			m.accepted[off] = true
		}
	}
}

// changed returns the offsets c changed.
func changed(c *Change) []int64 {
	offsets := make([]int64, len(c.prev))
	for i, ps := range c.prev {
		offsets[i] = ps.off
	}
	return offsets
}

// same fails unless the records at offsets (nil: all) are those of
// before, taken at start.
func (m *changeModel) same(start int64, before []recState, offsets []int64, what string) {
	m.t.Helper()
	s, recs := m.records()
	if offsets == nil {
		if s != start || len(recs) != len(before) {
			m.t.Fatalf("%s: start %d, %d records; was %d, %d", what, s, len(recs), start, len(before))
		}
		for i := range recs {
			offsets = append(offsets, start+int64(i))
		}
	}
	for _, off := range offsets {
		if off < s || off >= s+int64(len(recs)) {
			m.t.Fatalf("%s: offset %d gone (start %d, end %d)", what, off, s, s+int64(len(recs)))
		}
		a, b := recs[off-s], before[off-start]
		if a.state != b.state || a.member != b.member || a.deliveries != b.deliveries || !a.expiry.Equal(b.expiry) || a.pending {
			m.t.Fatalf("%s: offset %d is %+v, was %+v", what, off, a, b)
		}
	}
}

// step is one random action of a member or of the lock-expiry timer.
func (m *changeModel) step(exact bool) {
	m.t.Helper()
	switch k := m.intn(10); {
	case k < 4:
		end, _ := m.p.ReadFrom()
		var ss []Span
		for range m.intn(3) {
			n := int64(1 + m.intn(4))
			ss = append(ss, Span{First: end, Last: end + n - 1, Skip: m.intn(6) == 0})
			end += n
		}
		// The expiries a fetch applies are written at once, as the broker's
		// acquire does.
		if _, n := m.p.Acquire(modelMembers[m.intn(len(modelMembers))], 1+m.intn(6), m.intn(2) == 0, ss, time.Now()); n > 0 {
			m.persisting(func() { m.write(nil, false) })
		}
	case k < 8:
		m.ack(exact)
	case k < 9:
		m.persisting(func() {
			start, before := m.records()
			c, n := m.p.ReleaseMember(modelMembers[m.intn(len(modelMembers))], time.Now())
			if n > 0 && !m.write(c, false) && exact && c.Expired() == 0 {
				m.same(start, before, changed(c), "rolled back release")
			}
		})
	default:
		time.Sleep(time.Duration(m.intn(int(modelLock/time.Second))) * time.Second) // the lock-expiry timer fires at a random time (synctest's clock)
		m.persisting(func() {
			if m.p.Expire(time.Now()) > 0 {
				m.write(nil, false)
			}
		})
		if exact {
			m.unlockedExpired()
		}
	}
}

// persisting runs f under the persist lock, released however f ends (a
// failure on one of TestChangesConcurrent's goroutines ends it with
// runtime.Goexit, and the others must not wait for the lock forever).
func (m *changeModel) persisting(f func()) {
	m.p.LockPersist()
	defer m.p.UnlockPersist()
	f()
}

// goroutineT is a testing.TB for goroutines other than the test's:
// Fatal and Fatalf mark the test failed and end the calling goroutine
// only (testing's FailNow must be called from the test's goroutine).
// Whoever waits for the goroutine checks Failed.
type goroutineT struct{ testing.TB }

func (g goroutineT) Fatal(args ...any) {
	g.Helper()
	g.Error(args...)
	runtime.Goexit()
}

func (g goroutineT) Fatalf(format string, args ...any) {
	g.Helper()
	g.Errorf(format, args...)
	runtime.Goexit()
}

// unlockedExpired fails when a record stays Acquired past its lock after
// Expire (its lock lost from the expiry heap, as when a rolled back change
// did not put it back).
func (m *changeModel) unlockedExpired() {
	m.t.Helper()
	start, recs := m.records()
	for i, r := range recs {
		if r.state == Acquired && !time.Now().Before(r.expiry) {
			m.t.Fatalf("offset %d Acquired by %s past its lock after Expire", start+int64(i), r.member)
		}
	}
}

// check fails when the partition breaks an invariant: a change left
// pending, the count of available records wrong, a delivery count past the
// limit, or the durable state behind what the records written say (a
// record not marked for the next write must be durable as it is; an
// Acquired one durable as Available with no more deliveries; nothing
// durable past the start offset the records need).
func (m *changeModel) check() {
	m.t.Helper()
	checkCounts(m.t, m.p)
	st := m.store.Get(0, m.key)
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if st.StartOffset > m.p.start {
		m.t.Fatalf("durable start %d past the start %d", st.StartOffset, m.p.start)
	}
	for i, r := range m.p.recs {
		off := m.p.start + int64(i)
		if r.pending || r.deliveries > modelLimit {
			m.t.Fatalf("offset %d: %+v", off, r)
		}
		ds, dc := durableAt(st, off)
		switch {
		case r.state == Acquired:
			if ds != Available || dc > r.deliveries {
				m.t.Fatalf("offset %d %+v durable as %v %d", off, r, ds, dc)
			}
		case !r.dirty && (ds != r.state || dc != r.deliveries):
			m.t.Fatalf("offset %d %+v (written) durable as %v %d", off, r, ds, dc)
		}
	}
}

// durableAt returns the durable state and delivery count of off.
func durableAt(st *State, off int64) (RecordState, int16) {
	for _, b := range st.Batches {
		if b.First <= off && off <= b.Last {
			return b.State, b.DeliveryCount
		}
	}
	return Available, 0
}

// settle lets every lock expire and writes until nothing is left to write,
// then checks that the durable state is the partition's exactly: a new
// leader restoring it has the same state.
func (m *changeModel) settle() {
	m.t.Helper()
	time.Sleep(2 * modelLock) // every lock runs out (synctest's clock)
	m.p.LockPersist()
	m.p.Expire(time.Now())
	m.write(nil, true)
	if d := m.p.Delta(nil); !d.Empty() {
		m.t.Fatalf("left to write after a write: %+v", d)
	}
	m.p.UnlockPersist()
	m.check()
	st := m.store.Get(0, m.key)
	q := NewPartition(PartitionConfig{LockDuration: modelLock, DeliveryLimit: modelLimit, MaxLocks: 40})
	q.Restore(st.StartOffset, st.Batches)
	s1, b1, _ := m.p.Snapshot()
	s2, b2, _ := q.Snapshot()
	// Trailing records never delivered are not kept by Restore.
	for len(b1) > 0 && b1[len(b1)-1].State == Available && b1[len(b1)-1].DeliveryCount == 0 {
		b1 = b1[:len(b1)-1]
	}
	if s1 != s2 || !slices.Equal(b1, b2) {
		m.t.Fatalf("restored from the durable state: %d %+v; the partition: %d %+v", s2, b2, s1, b1)
	}
}

// meanwhile is what may happen while the write of c is in flight, half
// the time: the write takes long enough for locks to run out, another
// member's fetch expires them (taking their ranges off the expiry heap,
// those of c's records too), and the member acknowledges c's records again
// (a client retrying, or a second connection), which must be refused
// whatever the type: c's records are applied once.
func (m *changeModel) meanwhile(c *Change) {
	m.t.Helper()
	if m.intn(2) == 0 {
		return
	}
	time.Sleep(time.Duration(m.intn(int(2*modelLock/time.Second))) * time.Second) // a write slow enough for locks to run out (synctest's clock)
	// Its expiries are written by the next write (the persist lock is
	// held by this one).
	m.p.Acquire(modelMembers[m.intn(len(modelMembers))], 1+m.intn(6), false, nil, time.Now())
	for _, ps := range c.prev {
		for _, typ := range []AckType{AckAccept, AckRelease, AckReject, AckGap, AckRenew} {
			if _, err := m.p.Acknowledge(ps.rec.member, []AckBatch{{First: ps.off, Last: ps.off, Types: []AckType{typ}}}, time.Now()); !errors.Is(err, ErrInvalidRecordState) {
				m.t.Fatalf("offset %d acknowledged (%d) by %s while its change is in flight: %v", ps.off, typ, ps.rec.member, err)
			}
		}
	}
}

// TestChangesModel: random acquisitions, acknowledgements (Accept, Release,
// Reject, Gap, Renew; one type or one per offset; batches of records the
// member holds or not), releases of a member's records and lock expiries by
// three members, every change written to a Store with one write in three
// failing, one step at a time. After every step: an acknowledgement refused
// or rolled back left every record as it was (state, member, lock,
// delivery count: Acquired by its member again); no record Acquired past
// its lock after an expiry (a lock that ran out while its change was in
// flight included); no offset accepted twice or after it was given up on,
// none given up on twice; the durable state matches every record written.
// At the end the durable state, restored, is the partition's.
func TestChangesModel(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newChangeModel(t, seed)
				m.during = m.meanwhile
				for range 300 {
					m.step(true)
					m.check()
				}
				m.settle()
				if m.writes[0] == 0 || m.writes[1] == 0 || len(m.accepted) == 0 || len(m.dead) == 0 {
					t.Fatalf("writes %v, %d accepted, %d dead: the walk did not reach both outcomes", m.writes, len(m.accepted), len(m.dead))
				}
			})
		})
	}
}

// TestChangesConcurrent: the steps of TestChangesModel from four goroutines
// at once, changes serialized by the persist lock as the broker does and
// acquisitions not: no acknowledgement applies twice, no record is given up
// on twice, and the durable state at the end is the partition's.
func TestChangesConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newChangeModel(goroutineT{t}, 42)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 300 {
					if t.Failed() {
						return
					}
					m.step(false)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		m.t = t
		m.settle()
	})
}
