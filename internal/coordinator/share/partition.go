package share

import (
	"container/heap"
	"errors"
	"slices"
	"sync"
	"time"
)

// RecordState is the state of one offset of a share-partition (KIP-932).
type RecordState uint8

// The states of KIP-932. A record is Available until a consumer acquires
// it, Acquired under a time-limited lock, then Acknowledged (accepted),
// Archived (rejected, a gap, or out of deliveries) or Available again
// (released, or its lock expired).
const (
	Available RecordState = iota
	Acquired
	Acknowledged
	Archived
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return "Unknown"
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

// The acknowledgement types of ShareAcknowledge (KIP-932); Renew is v2
// (KIP-1222).
const (
	AckGap     AckType = 0
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4
)

// Errors of the share-partition state machine; the broker maps them to
// Kafka's codes (INVALID_RECORD_STATE, INVALID_REQUEST).
var (
	// ErrInvalidRecordState: an acknowledgement of an offset the member
	// does not hold (never acquired, acquired by another member, lock
	// expired, already acknowledged).
	ErrInvalidRecordState = errors.New("share: record not acquired by this member")
	// ErrInvalidAck: an acknowledgement type out of range, or ranges
	// that are empty or reversed.
	ErrInvalidAck = errors.New("share: invalid acknowledgement")
)

// Span is a run of offsets [First, Last] read from the log: one record
// batch. Skip spans (control batches, aborted transactions under
// read_committed) are archived without delivery.
type Span struct {
	First, Last int64
	Skip        bool
}

// AcquiredRange is a range of offsets [First, Last] handed to a member, all
// with the same delivery count (ShareFetch's AcquiredRecords).
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// DeadLetter is a record the partition gave up on: rejected by a member,
// or released or expired with its delivery count at the limit. The broker
// writes it to the group's dead-letter topic when one is configured.
type DeadLetter struct {
	Offset        int64
	DeliveryCount int16
	Rejected      bool // false: delivery count exceeded
}

// PartitionConfig are the limits of one share-partition.
type PartitionConfig struct {
	// LockDuration is how long an acquired record stays with its member
	// (group.share.record.lock.duration.ms, default 30 s).
	LockDuration time.Duration
	// DeliveryLimit is the number of deliveries after which a released
	// or expired record is archived (group.share.delivery.count.limit,
	// default 5).
	DeliveryLimit int16
	// MaxLocks bounds the in-flight records, from the start offset to the
	// end offset (group.share.partition.max.record.locks, default 2000).
	MaxLocks int
}

func (c PartitionConfig) withDefaults() PartitionConfig {
	if c.LockDuration <= 0 {
		c.LockDuration = DefaultLockDuration
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.MaxLocks <= 0 {
		c.MaxLocks = DefaultMaxLocks
	}
	return c
}

type recState struct {
	state      RecordState
	deliveries int16
	// pending: the record's last transition (an acknowledgement or a
	// release) is applied but not yet durable (Change); it is neither
	// acquired nor acknowledged again, nor passed by the start offset,
	// until the change commits or rolls back.
	pending bool
	// dirty: the record changed since the last durable write (Delta).
	dirty  bool
	member string
	expiry time.Time
}

// counts reports whether r counts as available to acquire.
func (r *recState) counts() bool { return r.state == Available && !r.pending }

// Partition is the state of one topic-partition for one share group, kept
// by the partition's leader: the share-partition start offset (SPSO), below
// which every record is acknowledged or archived, the end offset (SPEO), the
// next offset never acquired, and the state of every offset between them.
// The clock is time.Now, so testing/synctest drives lock expiry. Safe for
// concurrent use.
//
// Durable writes carry only what changed (Delta), as Kafka's SharePartition
// writes only the state batches it changed: an acknowledgement or a release
// is a Change, applied in memory, written, then committed, or rolled back
// when the write fails (Finish). Hold LockPersist from the change (or
// Expire) to Finish, so that one change at a time is in flight and the
// writes go out in order. Lock order: the persist lock, then the state
// lock (mu), which is never held across a write.
type Partition struct {
	mu      sync.Mutex // guards the fields below
	cfg     PartitionConfig
	started bool  // the start offset was initialized (share.auto.offset.reset)
	start   int64 // SPSO
	recs    []recState
	locks   lockHeap // acquisition ranges by lock expiry, some stale
	epoch   int64    // bumped on every change, for persistence
	// avail counts the records Available and not pending, so that a
	// fetch finds whether any is there in O(1); availFrom is an offset
	// below which none is.
	avail     int
	availFrom int64
	// dirty lists the offsets marked dirty (some may be below the start
	// offset by now); startDirty: the start offset moved since the last
	// durable write; durableStart is the start offset last written or
	// loaded.
	dirty        []int64
	startDirty   bool
	durableStart int64
	watchers     map[chan struct{}]struct{} // woken when records become available (Watch)
	// loadedAt is the leader epoch of the partition when its state was
	// loaded; another epoch means leadership moved and back: reload.
	loadedAt int32
	// stateEpoch is the state epoch of the durable state loaded (bumped
	// by AlterShareGroupOffsets), sent with every write.
	stateEpoch int32
	// expired are the records archived by a lock expiry at the delivery
	// limit whose archival is not written yet: handed out for the
	// dead-letter topic by the Finish of the write carrying them, so that
	// a record is dead-lettered only once its archival is durable (a new
	// leader would deliver it again otherwise, and dead-letter it twice).
	expired []DeadLetter

	persist sync.Mutex // held across a change and its write, so writes stay in order
}

// LoadedAt returns the leader epoch the state was loaded at (-1: never).
func (p *Partition) LoadedAt() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loadedAt
}

// SetLoadedAt records the leader epoch the state was loaded at.
func (p *Partition) SetLoadedAt(epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loadedAt = epoch
}

// StateEpoch returns the state epoch of the durable state loaded.
func (p *Partition) StateEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stateEpoch
}

// SetStateEpoch records the state epoch of the durable state loaded.
func (p *Partition) SetStateEpoch(e int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stateEpoch = e
}

// LockPersist serializes the writers of the partition's durable state: hold
// it from a change (Acknowledge, ReleaseMember, Expire) until Finish.
func (p *Partition) LockPersist() { p.persist.Lock() }

// UnlockPersist releases LockPersist.
func (p *Partition) UnlockPersist() { p.persist.Unlock() }

// NewPartition returns a partition with no start offset yet; Init sets it.
func NewPartition(cfg PartitionConfig) *Partition {
	return &Partition{cfg: cfg.withDefaults(), loadedAt: -1}
}

// SetConfig replaces the limits (a group config changed).
func (p *Partition) SetConfig(cfg PartitionConfig) {
	p.mu.Lock()
	p.cfg = cfg.withDefaults()
	p.mu.Unlock()
}

// Init sets the start offset when it is not set yet (from
// share.auto.offset.reset, or from durable state), and reports whether it
// did.
func (p *Partition) Init(start int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return false
	}
	p.started, p.start, p.durableStart, p.availFrom = true, start, start, start
	return true
}

// Started reports whether Init was called.
func (p *Partition) Started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Offsets returns the start offset (SPSO) and the end offset (SPEO).
func (p *Partition) Offsets() (start, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start, p.start + int64(len(p.recs))
}

// Reset moves the start offset to off, forgetting every record state
// (AlterShareGroupOffsets; the group must have no members). The state is
// taken as durable.
func (p *Partition) Reset(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started, p.start, p.recs, p.locks = true, off, nil, nil
	p.avail, p.availFrom, p.dirty, p.startDirty, p.durableStart = 0, off, nil, false, off
	p.epoch++
}

// AdvanceStart moves the start offset up to logStart when records below it
// were deleted (retention, DeleteRecords); the next write carries it. Records
// with a change in flight stay (the change's Finish finds them).
func (p *Partition) AdvanceStart(logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if logStart <= p.start {
		return
	}
	n := min(int(logStart-p.start), len(p.recs))
	for i := range n {
		if p.recs[i].pending {
			n = i
			break
		}
		if p.recs[i].counts() {
			p.avail--
		}
	}
	p.recs = p.recs[n:]
	if n < int(logStart-p.start) && len(p.recs) > 0 {
		p.start += int64(n)
	} else {
		p.start = logStart
	}
	p.availFrom = max(p.availFrom, p.start)
	p.startDirty = true
	p.epoch++
}

// Watch registers w to be woken (a non-blocking send) whenever records of
// the partition become available: released, or their lock expired. w
// should have a buffer of 1; Unwatch removes it. A ShareFetch waiting for
// records watches the share-partitions of its session, and only those.
func (p *Partition) Watch(w chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watchers == nil {
		p.watchers = map[chan struct{}]struct{}{}
	}
	p.watchers[w] = struct{}{}
}

// Unwatch removes w registered by Watch.
func (p *Partition) Unwatch(w chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.watchers, w)
}

func (p *Partition) notifyLocked() {
	for w := range p.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// setLocked gives the record at index i the state st, keeping the count of
// available records and marking it dirty.
func (p *Partition) setLocked(i int64, st RecordState) {
	r := &p.recs[i]
	if r.counts() {
		p.avail--
	}
	r.state = st
	if st != Acquired {
		r.member, r.expiry = "", time.Time{}
	}
	if r.counts() {
		p.avail++
		p.availFrom = min(p.availFrom, p.start+i)
	}
	p.markLocked(i)
	p.epoch++
}

// markLocked marks the record at index i dirty.
func (p *Partition) markLocked(i int64) {
	if r := &p.recs[i]; !r.dirty {
		r.dirty = true
		p.dirty = append(p.dirty, p.start+i)
	}
}

// expireLocked makes the records whose lock expired by now available
// again, or archives them at the delivery limit (kept in p.expired for the
// dead-letter topic until written), and returns how many. It
// visits only the acquisition ranges whose lock time passed (a range whose
// records were acknowledged, or whose locks were renewed, is stale and
// skipped), so its cost is proportional to the expiries. Expiries are not
// rolled back: the caller writes them (a Delta), as Kafka's acquisition
// lock timeout writes the records it releases.
func (p *Partition) expireLocked(now time.Time) int {
	n := 0
	end := p.start + int64(len(p.recs))
	for len(p.locks) > 0 && !now.Before(p.locks[0].expiry) {
		lr := heap.Pop(&p.locks).(lockRange)
		for off := max(lr.first, p.start); off <= lr.last && off < end; off++ {
			r := &p.recs[off-p.start]
			if r.state == Acquired && !r.pending && !now.Before(r.expiry) {
				p.releaseLocked(off-p.start, &p.expired)
				n++
			}
		}
	}
	if n > 0 && p.avail > 0 {
		p.notifyLocked()
	}
	return n
}

// lockLocked records that [first, last] are locked until expiry.
func (p *Partition) lockLocked(first, last int64, expiry time.Time) {
	heap.Push(&p.locks, lockRange{expiry: expiry, first: first, last: last})
}

// Expire releases the records whose acquisition lock expired by now
// (group.share.record.lock.duration.ms), as Kafka's acquisition lock
// timer task: Available again, or Archived at the delivery limit. It
// returns how many records changed; the caller writes the Delta when any
// did (the Finish of that write returns the records archived, for the
// dead-letter topic), and arms its timer for NextExpiry.
func (p *Partition) Expire(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.expireLocked(now)
	p.advanceLocked()
	return n
}

// releaseLocked releases the acquired record at index i.
func (p *Partition) releaseLocked(i int64, dead *[]DeadLetter) {
	r := &p.recs[i]
	if r.deliveries >= p.cfg.DeliveryLimit {
		p.setLocked(i, Archived)
		*dead = append(*dead, DeadLetter{Offset: p.start + i, DeliveryCount: r.deliveries})
	} else {
		p.setLocked(i, Available)
	}
}

// doneLocked reports how many records from the start offset on are
// acknowledged or archived, pending ones included when withPending.
func (p *Partition) doneLocked(withPending bool) int {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) && (withPending || !p.recs[n].pending) {
		n++
	}
	return n
}

// advanceLocked moves the start offset past the leading acknowledged and
// archived records, stopping at a record whose change is in flight.
func (p *Partition) advanceLocked() {
	if n := p.doneLocked(false); n > 0 {
		p.recs = slices.Delete(p.recs, 0, n)
		p.start += int64(n)
		p.availFrom = max(p.availFrom, p.start)
		p.startDirty = true
	}
	// Offsets the start passed need no write: drop them when they pile
	// up without one (control records archived, nothing acknowledged).
	if len(p.dirty) > 2*len(p.recs)+64 {
		p.dirty = slices.DeleteFunc(p.dirty, func(off int64) bool { return off < p.start })
	}
}

// NextExpiry returns when the earliest lock may expire (it may be early:
// those records were acknowledged or renewed meanwhile); zero when no lock
// is held. O(1).
func (p *Partition) NextExpiry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.locks) == 0 {
		return time.Time{}
	}
	return p.locks[0].expiry
}

// ReadFrom returns the offset from which the log must be read to find new
// records (the end offset) and how many more offsets may be in flight
// (group.share.partition.max.record.locks minus the in-flight ones).
func (p *Partition) ReadFrom() (end int64, room int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start + int64(len(p.recs)), p.cfg.MaxLocks - len(p.recs)
}

// HasAvailable reports whether a fetch may acquire something without
// reading the log: a released or expired record below the end offset, or a
// lock due by now (which may have been acknowledged meanwhile: a false
// positive). O(1): a count of the available records, and the earliest
// lock.
func (p *Partition) HasAvailable(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.avail > 0 || len(p.locks) > 0 && !now.Before(p.locks[0].expiry)
}

// Acquire hands up to maxRecords records to member: first those available
// below the end offset (released or expired, redelivered), then new ones
// from spans, the batches read from the log at the end offset (spans below
// it are ignored; those past a gap are not used). Whole spans are acquired,
// so maxRecords can be exceeded by the rest of a batch, as Kafka's
// batch-optimized mode does; strict (ShareFetch v2's record_limit mode,
// KIP-1206) acquires no more than maxRecords. It returns the acquired
// ranges in offset order and how many records' locks it expired first (as
// Expire: the caller writes them). Records with a change in flight are not
// acquired. An acquisition is not written (as in Kafka): its delivery count
// is written with the record's next change.
func (p *Partition) Acquire(member string, maxRecords int, strict bool, spans []Span, now time.Time) ([]AcquiredRange, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	expired := p.expireLocked(now)
	var out []AcquiredRange
	n := 0
	take := func(i int) {
		r := &p.recs[i]
		if r.counts() {
			p.avail--
		}
		r.state, r.member, r.expiry = Acquired, member, now.Add(p.cfg.LockDuration)
		r.deliveries++
		off := p.start + int64(i)
		if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].DeliveryCount == r.deliveries {
			out[k].Last = off
		} else {
			out = append(out, AcquiredRange{First: off, Last: off, DeliveryCount: r.deliveries})
		}
		n++
		p.epoch++
	}
	if p.avail > 0 {
		i := int(max(p.availFrom-p.start, 0))
		for ; i < len(p.recs) && n < maxRecords && p.avail > 0; i++ {
			if p.recs[i].counts() {
				take(i)
			}
		}
		if p.avail == 0 {
			p.availFrom = p.start + int64(len(p.recs))
		} else {
			p.availFrom = p.start + int64(i)
		}
	}
	for _, s := range spans {
		end := p.start + int64(len(p.recs))
		if s.Last < end {
			continue
		}
		if s.First > end || n >= maxRecords && !s.Skip {
			break
		}
		count := int(s.Last - end + 1)
		if strict && !s.Skip {
			count = min(count, maxRecords-n)
		}
		if !s.Skip && len(p.recs)+count > p.cfg.MaxLocks && len(p.recs) > 0 {
			break
		}
		base := len(p.recs)
		p.recs = append(p.recs, make([]recState, count)...)
		for i := base; i < len(p.recs); i++ {
			if s.Skip {
				p.recs[i].state = Archived
				p.markLocked(int64(i))
				p.epoch++
			} else {
				p.recs[i].state = Acquired // new: never counted as available
				take(i)
			}
		}
	}
	for _, r := range out {
		p.lockLocked(r.First, r.Last, now.Add(p.cfg.LockDuration))
	}
	p.advanceLocked()
	return out, expired
}

// AckBatch is one acknowledgement batch of ShareFetch or ShareAcknowledge:
// offsets [First, Last] with one type for all (len(Types) == 1) or one
// per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Change is an acknowledgement or a release applied in memory whose write
// is in flight: Finish commits it or rolls it back.
type Change struct {
	prev []prevState
	// dead are the records the change gives up on (rejected, released
	// at the delivery limit): written to the dead-letter topic once
	// committed.
	dead     []DeadLetter
	released bool // some record became available
	// expired counts the records whose lock expired as the change was
	// applied (not rolled back: to be written whatever becomes of it).
	expired int
}

type prevState struct {
	off int64
	rec recState
}

// Empty reports whether c changed no record.
func (c *Change) Empty() bool { return c == nil || len(c.prev) == 0 }

// Expired returns how many records' locks expired while c was applied
// (Available again or archived whatever becomes of c): when c is refused,
// the caller writes them still.
func (c *Change) Expired() int {
	if c == nil {
		return 0
	}
	return c.expired
}

// Acknowledge applies the acknowledgement batches of member as one change,
// as Kafka's SharePartition.acknowledge: Accept acknowledges, Release makes
// available again (or archives at the delivery limit), Reject and Gap
// archive, Renew extends the lock by the lock duration. Every offset must
// be Acquired by member with its lock unexpired and no change in flight,
// else ErrInvalidRecordState (a Gap below the start offset is skipped);
// types out of range or ranges empty or reversed are ErrInvalidAck. On an
// error nothing changes (the batches applied before it are undone). The
// change is pending until Finish; the start offset does not move past it.
func (p *Partition) Acknowledge(member string, batches []AckBatch, now time.Time) (*Change, error) {
	for _, b := range batches {
		if b.Last < b.First || len(b.Types) == 0 || len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1 {
			return nil, ErrInvalidAck
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return nil, ErrInvalidAck
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &Change{expired: p.expireLocked(now)}
	for _, b := range batches {
		if err := p.ackLocked(c, member, b, now); err != nil {
			p.rollbackLocked(c)
			c.prev, c.dead, c.released = nil, nil, false
			return c, err
		}
	}
	return c, nil
}

func (p *Partition) ackLocked(c *Change, member string, b AckBatch, now time.Time) error {
	typ := func(off int64) AckType {
		if len(b.Types) == 1 {
			return b.Types[0]
		}
		return b.Types[off-b.First]
	}
	end := p.start + int64(len(p.recs))
	for off := b.First; off <= b.Last; off++ {
		if off < p.start || off >= end {
			if typ(off) == AckGap && off < p.start {
				if len(b.Types) == 1 {
					off = p.start - 1 // the whole run below start: O(1), not O(start)
				}
				continue // already archived or acknowledged
			}
			return ErrInvalidRecordState
		}
		r := &p.recs[off-p.start]
		if r.state != Acquired || r.member != member || r.pending {
			return ErrInvalidRecordState
		}
	}
	for off := max(b.First, p.start); off <= b.Last; off++ {
		i := off - p.start
		r := &p.recs[i]
		c.prev = append(c.prev, prevState{off: off, rec: *r})
		r.pending = true
		switch typ(off) {
		case AckAccept:
			p.setLocked(i, Acknowledged)
		case AckGap:
			p.setLocked(i, Archived)
		case AckReject:
			p.setLocked(i, Archived)
			c.dead = append(c.dead, DeadLetter{Offset: off, DeliveryCount: r.deliveries, Rejected: true})
		case AckRelease:
			p.releaseLocked(i, &c.dead)
			c.released = c.released || r.state == Available
		case AckRenew:
			r.expiry = now.Add(p.cfg.LockDuration) // locked by commitLocked
			p.epoch++
		}
	}
	return nil
}

// rollbackLocked undoes c: its records get back their state, member, lock
// and delivery count (a lock that ran out meanwhile expires at the next
// Expire or Acquire, as Kafka's rollback makes such records available).
func (p *Partition) rollbackLocked(c *Change) {
	for j := len(c.prev) - 1; j >= 0; j-- {
		ps := c.prev[j]
		if ps.off < p.start || ps.off >= p.start+int64(len(p.recs)) {
			continue // cannot happen: the start offset stops at pending records
		}
		i := ps.off - p.start
		r := &p.recs[i]
		if r.counts() {
			p.avail--
		}
		dirty := r.dirty
		*r = ps.rec
		r.dirty = dirty // it stays listed in p.dirty
		if r.counts() {
			p.avail++
			p.availFrom = min(p.availFrom, ps.off)
		}
		p.epoch++
	}
	p.relockLocked(c)
}

// relockLocked puts the records of c that are Acquired (again, after a
// rollback, or still, after a committed Renew) back in the lock heap until
// their expiry, in runs of one expiry: a fetch that expired locks while c
// was in flight took their ranges off the heap, skipping them, and without
// this they would stay Acquired past their lock.
func (p *Partition) relockLocked(c *Change) {
	var run *lockRange
	for _, ps := range c.prev {
		i := ps.off - p.start
		if i < 0 || i >= int64(len(p.recs)) || p.recs[i].state != Acquired {
			continue
		}
		expiry := p.recs[i].expiry
		if run != nil && run.last == ps.off-1 && run.expiry.Equal(expiry) {
			run.last = ps.off
			continue
		}
		if run != nil {
			p.lockLocked(run.first, run.last, run.expiry)
		}
		run = &lockRange{expiry: expiry, first: ps.off, last: ps.off}
	}
	if run != nil {
		p.lockLocked(run.first, run.last, run.expiry)
	}
}

// commitLocked makes c's transitions final and moves the start offset.
func (p *Partition) commitLocked(c *Change) {
	for _, ps := range c.prev {
		if i := ps.off - p.start; i >= 0 && i < int64(len(p.recs)) {
			r := &p.recs[i]
			r.pending = false
			if r.counts() {
				p.avail++
				p.availFrom = min(p.availFrom, ps.off)
			}
		}
	}
	p.relockLocked(c)
	if c.released {
		p.notifyLocked()
	}
	p.advanceLocked()
}

// Ack applies and commits the acknowledgements of member to [first, last]
// at once (Acknowledge and Finish without a write: for state kept in
// memory only). It returns the records given up on (lock expiries at the
// delivery limit included).
func (p *Partition) Ack(member string, first, last int64, types []AckType, now time.Time) ([]DeadLetter, error) {
	c, err := p.Acknowledge(member, []AckBatch{{First: first, Last: last, Types: types}}, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	dead := p.expired
	p.expired = nil
	if err != nil {
		return dead, err
	}
	p.commitLocked(c)
	return append(dead, c.dead...), nil
}

// ReleaseMember releases every record member holds (its share session
// closed, or it left the group) as one change, and returns it (nil when
// member held nothing and no lock expired) and how many records changed
// (released, expired or archived). Its cost is proportional to the
// in-flight records.
func (p *Partition) ReleaseMember(member string, now time.Time) (*Change, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &Change{expired: p.expireLocked(now)}
	n := c.expired
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && r.member == member && !r.pending {
			c.prev = append(c.prev, prevState{off: p.start + int64(i), rec: *r})
			r.pending = true
			p.releaseLocked(int64(i), &c.dead)
			c.released = c.released || r.state == Available
			n++
		}
	}
	if n == 0 {
		return nil, 0
	}
	p.advanceLocked()
	return c, n
}

// Delta is a write of a share-partition's durable state carrying only what
// changed, as Kafka's SharePartition writes: the start offset the partition
// has once the change in flight commits, and the state batches of the
// records changed since the last write at or past it (Acquired written as
// Available with its delivery count: a lock does not survive a failover).
type Delta struct {
	Start   int64
	Batches []StateBatch
	offsets []int64
	moved   bool
	expired []DeadLetter // archived by lock expiries, written by d
}

// Empty reports whether d has nothing to write.
func (d Delta) Empty() bool { return len(d.Batches) == 0 && !d.moved }

// Delta collects what changed since the last write, with c (nil: none) in
// flight; Finish says whether it was written. Its cost is proportional to
// the records changed and those the start offset passes.
func (p *Partition) Delta(c *Change) Delta {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := Delta{Start: p.start + int64(p.doneLocked(true))}
	d.moved = d.Start != p.durableStart || p.startDirty
	d.expired, p.expired = p.expired, nil
	slices.Sort(p.dirty)
	d.offsets, p.dirty = slices.Compact(p.dirty), nil
	for _, off := range d.offsets {
		if off < p.start || off >= p.start+int64(len(p.recs)) {
			continue
		}
		r := &p.recs[off-p.start]
		r.dirty = false
		if off < d.Start {
			continue
		}
		st := r.state
		if st == Acquired {
			st = Available
		}
		if k := len(d.Batches) - 1; k >= 0 && d.Batches[k].Last == off-1 && d.Batches[k].State == st && d.Batches[k].DeliveryCount == r.deliveries {
			d.Batches[k].Last = off
			continue
		}
		d.Batches = append(d.Batches, StateBatch{First: off, Last: off, State: st, DeliveryCount: r.deliveries})
	}
	return d
}

// Finish ends the write of d with c (nil: none) in flight: written, c
// commits (its records are final, the start offset moves past them, and
// waiting fetches are woken for the records it released); not written, c
// rolls back (its records are Acquired by their member again, as Kafka's
// SharePartition rolls back a failed write) and d's records stay to be
// written next time. It returns the records given up on whose archival d
// wrote, for the dead-letter topic: c's when it committed, and those
// archived by lock expiries; none when d was not written (the expiries'
// come with the write that carries them).
func (p *Partition) Finish(c *Change, d Delta, written bool) []DeadLetter {
	p.mu.Lock()
	defer p.mu.Unlock()
	if written {
		p.durableStart = d.Start
		if d.Start >= p.start && !p.startDirtyAfterLocked(d.Start) {
			p.startDirty = false
		}
	} else {
		for _, off := range d.offsets {
			if off >= p.start && off < p.start+int64(len(p.recs)) {
				p.markLocked(off - p.start)
			}
		}
		p.expired = append(d.expired, p.expired...)
	}
	if !written {
		if c != nil {
			p.rollbackLocked(c)
		}
		return nil
	}
	if c == nil {
		return d.expired
	}
	p.commitLocked(c)
	return append(d.expired, c.dead...)
}

// startDirtyAfterLocked reports whether the start offset moved past start,
// which the write of start did not carry.
func (p *Partition) startDirtyAfterLocked(start int64) bool { return p.start > start }

// StateBatch is a run of offsets in the same state with the same delivery
// count: the unit of durable share-partition state (ShareSnapshot's
// StateBatches in __share_group_state).
type StateBatch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// Snapshot returns the start offset and the in-flight records as state
// batches, Acquired written as Available (a lock does not survive a
// failover; the delivery count does), with the change epoch.
func (p *Partition) Snapshot() (start int64, batches []StateBatch, epoch int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.recs {
		st := r.state
		if st == Acquired {
			st = Available
		}
		off := p.start + int64(i)
		if k := len(batches) - 1; k >= 0 && batches[k].Last == off-1 && batches[k].State == st && batches[k].DeliveryCount == r.deliveries {
			batches[k].Last = off
			continue
		}
		batches = append(batches, StateBatch{First: off, Last: off, State: st, DeliveryCount: r.deliveries})
	}
	return p.start, batches, p.epoch
}

// Restore replaces the state with a snapshot (a new leader loading
// __share_group_state), taken as durable. Batches outside [start, ...) and
// gaps between batches are dropped/filled as Available with no
// deliveries.
func (p *Partition) Restore(start int64, batches []StateBatch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started, p.start, p.recs, p.locks, p.expired = true, start, nil, nil, nil
	for _, b := range batches {
		if b.Last < start || b.Last < b.First || b.Last-b.First > int64(p.cfg.MaxLocks)*4 {
			continue
		}
		for off := max(b.First, start); off <= b.Last; off++ {
			i := int(off - start)
			if i >= p.cfg.MaxLocks*4 {
				break
			}
			for len(p.recs) <= i {
				p.recs = append(p.recs, recState{})
			}
			st := b.State
			if st == Acquired {
				st = Available
			}
			p.recs[i] = recState{state: st, deliveries: b.DeliveryCount}
		}
	}
	// Trailing Available records with no deliveries are simply unread.
	for len(p.recs) > 0 && p.recs[len(p.recs)-1] == (recState{}) {
		p.recs = p.recs[:len(p.recs)-1]
	}
	p.avail, p.availFrom, p.dirty, p.startDirty, p.durableStart = 0, start, nil, false, start
	for i := range p.recs {
		if p.recs[i].counts() {
			p.avail++
		}
	}
	p.advanceLocked()
}

// State returns the state and delivery count of offset off; offsets below
// the start offset are reported Acknowledged (or Archived: they are not
// told apart once the start offset passed them), offsets at or past the end
// offset Available with no deliveries.
func (p *Partition) State(off int64) (RecordState, int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case off < p.start:
		return Acknowledged, 0
	case off >= p.start+int64(len(p.recs)):
		return Available, 0
	}
	r := p.recs[off-p.start]
	if r.state == Acquired && !time.Now().Before(r.expiry) {
		return Available, r.deliveries
	}
	return r.state, r.deliveries
}

// lockRange is a range of offsets acquired (or renewed) together, locked
// until expiry.
type lockRange struct {
	expiry      time.Time
	first, last int64
}

// lockHeap is a min-heap of lock ranges by expiry.
type lockHeap []lockRange

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].expiry.Before(h[j].expiry) }
func (h lockHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lockHeap) Push(x any)        { *h = append(*h, x.(lockRange)) }
func (h *lockHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
