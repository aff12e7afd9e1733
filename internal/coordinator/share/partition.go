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
	member     string
	expiry     time.Time
}

// Partition is the state of one topic-partition for one share group, kept
// by the partition's leader: the share-partition start offset (SPSO), below
// which every record is acknowledged or archived, the end offset (SPEO), the
// next offset never acquired, and the state of every offset between them.
// The clock is time.Now, so testing/synctest drives lock expiry. Safe for
// concurrent use.
type Partition struct {
	mu      sync.Mutex // guards the fields below
	cfg     PartitionConfig
	started bool  // the start offset was initialized (share.auto.offset.reset)
	start   int64 // SPSO
	recs    []recState
	locks   lockHeap // acquisition ranges by lock expiry, some stale
	epoch   int64    // bumped on every change, for persistence
	// loadedAt is the leader epoch of the partition when its state was
	// loaded; another epoch means leadership moved and back: reload.
	loadedAt int32
	// stateEpoch is the state epoch of the durable state loaded (bumped
	// by AlterShareGroupOffsets), sent with every write.
	stateEpoch int32

	persist sync.Mutex // held across a snapshot and its write, so writes stay in order
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
// it from Snapshot until the write is done.
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
	p.started, p.start = true, start
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
// (AlterShareGroupOffsets; the group must have no members).
func (p *Partition) Reset(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started, p.start, p.recs, p.locks = true, off, nil, nil
	p.epoch++
}

// AdvanceStart moves the start offset up to logStart when records below it
// were deleted (retention, DeleteRecords).
func (p *Partition) AdvanceStart(logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if logStart <= p.start {
		return
	}
	n := min(int(logStart-p.start), len(p.recs))
	p.recs = p.recs[n:]
	p.start = logStart
	p.epoch++
}

// expireLocked makes the records whose lock expired by now available
// again, or archives them at the delivery limit, and returns how many. It
// visits only the acquisition ranges whose lock time passed (a range whose
// records were acknowledged, or whose locks were renewed, is stale and
// skipped), so its cost is proportional to the expiries.
func (p *Partition) expireLocked(now time.Time, dead *[]DeadLetter) int {
	n := 0
	end := p.start + int64(len(p.recs))
	for len(p.locks) > 0 && !now.Before(p.locks[0].expiry) {
		lr := heap.Pop(&p.locks).(lockRange)
		for off := max(lr.first, p.start); off <= lr.last && off < end; off++ {
			r := &p.recs[off-p.start]
			if r.state == Acquired && !now.Before(r.expiry) {
				p.releaseLocked(off-p.start, dead)
				n++
			}
		}
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
// returns the records given up on and how many records changed; the
// caller persists the state when any did, and arms its timer for
// NextExpiry.
func (p *Partition) Expire(now time.Time) ([]DeadLetter, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dead []DeadLetter
	n := p.expireLocked(now, &dead)
	p.advanceLocked()
	return dead, n
}

// releaseLocked releases the acquired record at index i.
func (p *Partition) releaseLocked(i int64, dead *[]DeadLetter) {
	r := &p.recs[i]
	r.member, r.expiry = "", time.Time{}
	if r.deliveries >= p.cfg.DeliveryLimit {
		r.state = Archived
		*dead = append(*dead, DeadLetter{Offset: p.start + i, DeliveryCount: r.deliveries})
	} else {
		r.state = Available
	}
	p.epoch++
}

// advanceLocked moves the start offset past the leading acknowledged and
// archived records.
func (p *Partition) advanceLocked() {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	if n > 0 {
		p.recs = slices.Delete(p.recs, 0, n)
		p.start += int64(n)
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

// HasAvailable reports whether a fetch would acquire something without
// reading the log: a released or expired record below the end offset.
func (p *Partition) HasAvailable(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.recs {
		if r.state == Available || r.state == Acquired && !now.Before(r.expiry) {
			return true
		}
	}
	return false
}

// Acquire hands up to maxRecords records to member: first those available
// below the end offset (released or expired, redelivered), then new ones
// from spans, the batches read from the log at the end offset (spans below
// it are ignored; those past a gap are not used). Whole spans are acquired,
// so maxRecords can be exceeded by the rest of a batch, as Kafka's
// batch-optimized mode does; strict (ShareFetch v2's record_limit mode,
// KIP-1206) acquires no more than maxRecords. It returns the acquired
// ranges in offset order and the records it gave up on meanwhile (expired
// at the delivery limit).
func (p *Partition) Acquire(member string, maxRecords int, strict bool, spans []Span, now time.Time) ([]AcquiredRange, []DeadLetter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dead []DeadLetter
	p.expireLocked(now, &dead)
	var out []AcquiredRange
	n := 0
	take := func(i int) {
		r := &p.recs[i]
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
	for i := range p.recs {
		if n >= maxRecords {
			break
		}
		if p.recs[i].state == Available {
			take(i)
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
				p.epoch++
			} else {
				take(i)
			}
		}
	}
	for _, r := range out {
		p.lockLocked(r.First, r.Last, now.Add(p.cfg.LockDuration))
	}
	p.advanceLocked()
	return out, dead
}

// Ack applies acknowledgements of member to [first, last] with one type
// per offset (types of length 1 applies to the whole range; otherwise one
// per offset, as ShareAcknowledge's AcknowledgeTypes). Accept acknowledges,
// Release makes available again (or archives at the delivery limit),
// Reject and Gap archive, Renew extends the lock by the lock duration. The
// whole range is checked before anything changes: every offset must be
// Acquired by member with its lock unexpired, else ErrInvalidRecordState.
// It returns the records given up on (rejected, or released at the limit).
func (p *Partition) Ack(member string, first, last int64, types []AckType, now time.Time) ([]DeadLetter, error) {
	if last < first || len(types) == 0 || len(types) != 1 && int64(len(types)) != last-first+1 {
		return nil, ErrInvalidAck
	}
	for _, t := range types {
		if t < AckGap || t > AckRenew {
			return nil, ErrInvalidAck
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var dead []DeadLetter
	p.expireLocked(now, &dead)
	typ := func(off int64) AckType {
		if len(types) == 1 {
			return types[0]
		}
		return types[off-first]
	}
	end := p.start + int64(len(p.recs))
	for off := first; off <= last; off++ {
		if off < p.start || off >= end {
			if typ(off) == AckGap && off < p.start {
				if len(types) == 1 {
					off = p.start - 1 // the whole run below start: O(1), not O(start)
				}
				continue // already archived or acknowledged
			}
			return dead, ErrInvalidRecordState
		}
		r := p.recs[off-p.start]
		if r.state != Acquired || r.member != member {
			return dead, ErrInvalidRecordState
		}
	}
	renewed := false
	for off := max(first, p.start); off <= last; off++ {
		i := off - p.start
		r := &p.recs[i]
		switch typ(off) {
		case AckAccept:
			r.state, r.member, r.expiry = Acknowledged, "", time.Time{}
		case AckGap:
			r.state, r.member, r.expiry = Archived, "", time.Time{}
		case AckReject:
			r.state, r.member, r.expiry = Archived, "", time.Time{}
			dead = append(dead, DeadLetter{Offset: off, DeliveryCount: r.deliveries, Rejected: true})
		case AckRelease:
			p.releaseLocked(i, &dead)
		case AckRenew:
			r.expiry = now.Add(p.cfg.LockDuration)
			renewed = true
		}
		p.epoch++
	}
	if renewed {
		p.lockLocked(max(first, p.start), last, now.Add(p.cfg.LockDuration))
	}
	p.advanceLocked()
	return dead, nil
}

// ReleaseMember releases every record member holds (its share session
// closed, or it left the group) and returns the records given up on and
// how many records changed (released, expired or archived).
func (p *Partition) ReleaseMember(member string, now time.Time) ([]DeadLetter, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dead []DeadLetter
	n := p.expireLocked(now, &dead)
	for i := range p.recs {
		if p.recs[i].state == Acquired && p.recs[i].member == member {
			p.releaseLocked(int64(i), &dead)
			n++
		}
	}
	p.advanceLocked()
	return dead, n
}

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
// __share_group_state). Batches outside [start, ...) and gaps between
// batches are dropped/filled as Available with no deliveries.
func (p *Partition) Restore(start int64, batches []StateBatch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started, p.start, p.recs, p.locks = true, start, nil, nil
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
