package share

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	gcoord "github.com/samsahq/samsa/internal/coordinator/group"
)

// This file persists share group membership in __consumer_offsets, in
// Kafka 4.1+'s records (gcoord.ShareRecord, key types 10 to 15), as Kafka's
// GroupMetadataManager does, so that a share group outlives its
// coordinator: the next leader of the group's partition replays the
// records (LoadPartition) and the group, its epochs, members, assignments
// and initialized topics carry on.
//
// Records are computed under the Coordinator's lock with the change they
// describe and queued; flush hands the queue to the Journal in order,
// outside the lock, so that writes reach the log in the order of the
// changes. A request that changed something waits for its write before it
// is answered, and gets the write's error (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE) if it fails. Kafka reverts the in-memory
// state to the log in that case; here the state stays and the group is
// marked dirty: its next write, at the latest the next heartbeat of one of
// its members, rewrites every record of the group first (and tombstones
// the members removed by failed writes), so the log catches up with
// memory; cut into Appends that each fit the partition's
// max.message.bytes (Journal.MaxBatchBytes) when the group is large. A member whose heartbeat failed retries with
// its previous epoch, which is accepted as Kafka accepts it.

// Journal is where share group records are written: the group
// coordinator's partitions of __consumer_offsets (group.Coordinator's
// Partition and AppendShare).
type Journal interface {
	// Partition returns the partition of __consumer_offsets of groupID.
	Partition(groupID string) int32
	// Append writes recs after the records appended before and calls
	// done once with nil when they are durable, else with the error for
	// the client (a *kerr.Error). done must not block.
	Append(groupID string, recs []gcoord.Record, done func(error))
	// MaxBatchBytes is the size in bytes of the largest batch an Append
	// for groupID may write (max.message.bytes of its partition of
	// __consumer_offsets); zero or less means no limit. A dirty group's
	// rewrite is cut into Appends that fit.
	MaxBatchBytes(groupID string) int
}

// Batch overheads for MaxBatchBytes, bounds of the uncompressed record
// batch v2 the group coordinator's store writes: the batch header, and
// per record its length, attributes, timestamp and offset deltas, key
// and value lengths and header count as varints.
const (
	batchOverhead  = 61
	recordOverhead = 5 + 1 + 10 + 5 + 5 + 5 + 5
)

// SetJournal makes the Coordinator persist its share groups through j
// and keep only the groups of the partitions loaded with LoadPartition
// (COORDINATOR_LOAD_IN_PROGRESS for the others until then). Without a
// journal, groups are kept in memory only. Call it before the first
// request.
func (c *Coordinator) SetJournal(j Journal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.journal = j
}

// pendingWrite is a write queued for the Journal.
type pendingWrite struct {
	g       *group
	recs    []gcoord.Record
	removed []string // members tombstoned by recs
	repair  bool     // recs end a rewrite of every record of g
	gone    []string // the tombstones of g.gone a repair carries
	// chain, for the Appends of one write cut to fit MaxBatchBytes
	// (a dirty group's rewrite), keeps the first error of its Appends:
	// the last one reports it, and a repair counts only without it.
	chain *writeChain
	done  chan error
	// member is the member whose heartbeat made the change, nil for other
	// writes; joined: it joined with this write (none of its records is in
	// the log yet).
	member *member
	joined bool
}

// writeLocked queues recs, the records of a change of g, and returns a
// channel receiving the write's result; nil when nothing is to be written
// (no records and a clean group, or no Journal). A dirty group's whole
// state is written first, with or without a change. The caller flushes
// after releasing the lock.
func (c *Coordinator) writeLocked(g *group, recs []gcoord.ShareRecord, removed []string) chan error {
	if c.journal == nil || len(recs) == 0 && !g.dirty {
		return nil
	}
	w := &pendingWrite{g: g, removed: removed, done: make(chan error, 1)}
	if !g.dirty {
		for i := range recs {
			w.recs = append(w.recs, recs[i].Record())
		}
		c.queue = append(c.queue, w)
		return w.done
	}
	w.repair = true
	var all []gcoord.ShareRecord
	for id := range g.gone {
		w.gone = append(w.gone, id)
		all = append(all, memberTombstones(g.id, id)...)
	}
	all = append(all, c.groupRecordsLocked(g)...)
	all = append(all, recs...)
	// Cut to fit MaxBatchBytes: a big group's rewrite in one Append
	// exceeded max.message.bytes and failed at every try. A crash
	// between the Appends leaves a prefix of the rewrite in the log,
	// each record a whole value of its key (replayed over the older
	// ones): a member's records are kept in one Append, so the group
	// loads with each member's metadata, target and current assignment
	// from before or after. The change's records come last, after
	// the state they apply to.
	chunks := chunkRecords(all, c.journal.MaxBatchBytes(g.id))
	if len(chunks) > 1 {
		// Each in a batch of its own: the group coordinator's writer
		// combines writes up to its own limit otherwise.
		for _, chunk := range chunks {
			chunk[0].Alone = true
		}
	}
	w.chain = &writeChain{}
	for _, chunk := range chunks[:len(chunks)-1] {
		c.queue = append(c.queue, &pendingWrite{g: g, recs: chunk, chain: w.chain, done: make(chan error, 1)})
	}
	w.recs = chunks[len(chunks)-1]
	c.queue = append(c.queue, w)
	return w.done
}

// writeChain is the state the Appends of one cut write share.
type writeChain struct {
	err error // the first error of its Appends
}

// chunkRecords encodes recs and cuts them into runs whose uncompressed
// batch fits maxBytes (zero or less: one run), never between a member's
// metadata and its assignment records; a record, or a member's records,
// too large alone go in a run of their own. At least one run.
func chunkRecords(recs []gcoord.ShareRecord, maxBytes int) [][]gcoord.Record {
	var out [][]gcoord.Record
	var cur []gcoord.Record
	size, unit := batchOverhead, 0 // unit: where the member being added began in cur
	for i := range recs {
		r := recs[i].Record()
		n := recordOverhead + len(r.Key) + len(r.Value)
		member := recs[i].Type == gcoord.ShareTargetMemberType || recs[i].Type == gcoord.ShareCurrentMemberType
		if !member || recs[i].Tombstone {
			unit = len(cur)
		}
		if maxBytes > 0 && size+n > maxBytes && len(cur) > 0 {
			cut := unit
			if cut == 0 {
				cut = len(cur) // the member alone is too large: cut it
			}
			out = append(out, cur[:cut:cut])
			cur = append([]gcoord.Record(nil), cur[cut:]...)
			size = batchOverhead
			for _, r := range cur {
				size += recordOverhead + len(r.Key) + len(r.Value)
			}
			unit = 0
		}
		cur = append(cur, r)
		size += n
	}
	return append(out, cur)
}

// unlockFlush releases the lock and hands the queued writes to the
// Journal.
func (c *Coordinator) unlockFlush() {
	c.mu.Unlock()
	c.flush()
}

// flush hands the queued writes to the Journal, in order, one flusher at
// a time, without holding the lock (the Journal may block while the group
// coordinator is busy, and the group coordinator calls in here).
func (c *Coordinator) flush() {
	c.mu.Lock()
	if c.flushing || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	c.flushing = true
	for len(c.queue) > 0 {
		ws := c.queue
		c.queue = nil
		c.mu.Unlock()
		for _, w := range ws {
			c.journal.Append(w.g.id, w.recs, func(err error) { c.written(w, err) })
		}
		c.mu.Lock()
	}
	c.flushing = false
	c.mu.Unlock()
}

// written records the result of w: a failure makes its group dirty (its
// next write rewrites it whole), a repair's success makes it clean.
func (c *Coordinator) written(w *pendingWrite, err error) {
	c.mu.Lock()
	g := w.g
	if ch := w.chain; ch != nil {
		if ch.err == nil {
			ch.err = err
		}
		err = ch.err // an earlier Append of the chain failed
	}
	switch {
	case err != nil:
		g.dirty = true
		for _, id := range w.removed {
			g.gone[id] = true
		}
		// A write that can never succeed (MESSAGE_TOO_LARGE or
		// RECORD_LIST_TOO_LARGE, mapped to UNKNOWN_SERVER_ERROR as in
		// Kafka): the member whose heartbeat made it leaves the group,
		// else every rewrite of the dirty group would carry it and fail
		// too. Kafka reverts the change instead; the member's next
		// heartbeat gets UNKNOWN_MEMBER_ID either way. A member that
		// joined with it has no record to tombstone (its id may be what
		// made the write too large).
		if m := w.member; errors.Is(err, kerr.UnknownServerError) && m != nil && g.members[m.id] == m {
			c.removeLocked(g, m)
			if !w.joined {
				g.gone[m.id] = true
			}
		}
	case w.repair:
		g.dirty = false
		for _, id := range w.gone {
			if g.members[id] == nil {
				delete(g.gone, id)
			}
		}
	}
	c.mu.Unlock()
	w.done <- err
}

// wait waits for the result of a write (nil: nothing written): nil, the
// write's error, or COORDINATOR_NOT_AVAILABLE when ctx ends first.
func wait(ctx context.Context, done chan error) error {
	if done == nil {
		return nil
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return kerr.CoordinatorNotAvailable
	}
}

// errorCode is the Kafka error code of a write's error.
func errorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// lockGroup takes the lock and returns groupID's group, the lock held; or,
// the lock released, COORDINATOR_LOAD_IN_PROGRESS (loadingLocked) or
// GROUP_ID_NOT_FOUND.
func (c *Coordinator) lockGroup(groupID string) (*group, error) {
	c.mu.Lock()
	if err := c.loadingLocked(groupID); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	g := c.groups[groupID]
	if g == nil {
		c.mu.Unlock()
		return nil, kerr.GroupIDNotFound
	}
	return g, nil
}

// loadingLocked returns COORDINATOR_LOAD_IN_PROGRESS when groupID's
// partition of __consumer_offsets is not loaded (only with a Journal).
func (c *Coordinator) loadingLocked(groupID string) *kerr.Error {
	if c.journal != nil && !c.loaded[c.journal.Partition(groupID)] {
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// Record builders, in Kafka's GroupCoordinatorRecordHelpers' terms.

func metadataRecord(g *group) gcoord.ShareRecord {
	// The metadata hash (KIP-1101) is not computed: 0. Kafka reading
	// these records finds its own hash different and bumps the group
	// epoch at the next heartbeat, which costs nothing to a share group.
	return gcoord.ShareRecord{Type: gcoord.ShareMetadataType, Group: g.id, Epoch: g.epoch}
}

func memberRecord(groupID string, m *member) gcoord.ShareRecord {
	return gcoord.ShareRecord{Type: gcoord.ShareMemberMetadataType, Group: groupID, MemberID: m.id,
		RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost, Topics: slices.Clone(m.topics)}
}

func assignmentRecords(g *group, m *member) []gcoord.ShareRecord {
	return []gcoord.ShareRecord{
		{Type: gcoord.ShareTargetMemberType, Group: g.id, MemberID: m.id, Assignment: m.assigned},
		{Type: gcoord.ShareCurrentMemberType, Group: g.id, MemberID: m.id, Epoch: m.epoch, PrevEpoch: m.prevEpoch, Assignment: m.assigned},
	}
}

// memberTombstones are the tombstones of a member that left, in Kafka's
// order (shareGroupFenceMember).
func memberTombstones(groupID, memberID string) []gcoord.ShareRecord {
	return []gcoord.ShareRecord{
		{Type: gcoord.ShareCurrentMemberType, Group: groupID, MemberID: memberID, Tombstone: true},
		{Type: gcoord.ShareTargetMemberType, Group: groupID, MemberID: memberID, Tombstone: true},
		{Type: gcoord.ShareMemberMetadataType, Group: groupID, MemberID: memberID, Tombstone: true},
	}
}

func statePartitionsRecord(g *group) gcoord.ShareRecord {
	r := gcoord.ShareRecord{Type: gcoord.ShareStatePartitionsType, Group: g.id, Initialized: []gcoord.ShareTopic{}, Initializing: []gcoord.ShareTopic{}, Deleting: []gcoord.ShareTopic{}}
	for _, t := range g.initialized {
		r.Initialized = append(r.Initialized, gcoord.ShareTopic{ID: t.ID, Name: t.Name, Partitions: slices.Clone(t.Partitions)})
	}
	slices.SortFunc(r.Initialized, func(a, b gcoord.ShareTopic) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

// groupRecordsLocked is every record of g: what a dirty group rewrites.
func (c *Coordinator) groupRecordsLocked(g *group) []gcoord.ShareRecord {
	recs := []gcoord.ShareRecord{metadataRecord(g)}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		recs = append(recs, memberRecord(g.id, m))
		if m.assigned != nil {
			recs = append(recs, assignmentRecords(g, m)...)
		}
	}
	recs = append(recs, gcoord.ShareRecord{Type: gcoord.ShareTargetMetadataType, Group: g.id, Epoch: g.assignEpoch})
	if len(g.initialized) > 0 {
		recs = append(recs, statePartitionsRecord(g))
	}
	return recs
}

// initializeLocked adds the partitions of target to the topics g has
// initialized (ShareGroupStatePartitionMetadata), dropping topics that no
// longer exist under their id, and returns the record when they changed.
// The share-partitions themselves start on their leaders at their first
// fetch, as share.auto.offset.reset says (Kafka initializes them from the
// coordinator with InitializeShareGroupState when assigned).
func (c *Coordinator) initializeLocked(g *group, target map[[16]byte][]int32, names map[[16]byte]string) []gcoord.ShareRecord {
	changed := false
	for id, ps := range target {
		t := g.initialized[id]
		if t == nil {
			t = &gcoord.ShareTopic{ID: id, Name: names[id]}
			g.initialized[id] = t
		}
		for _, p := range ps {
			if i, ok := slices.BinarySearch(t.Partitions, p); !ok {
				t.Partitions = slices.Insert(t.Partitions, i, p)
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	c.pruneInitializedLocked(g)
	return []gcoord.ShareRecord{statePartitionsRecord(g)}
}

// pruneInitializedLocked forgets the initialized topics deleted since
// (no topic of their name, or another id).
func (c *Coordinator) pruneInitializedLocked(g *group) {
	for id, t := range g.initialized {
		if cur, _, ok := c.topics.Lookup(t.Name); !ok || cur != id {
			delete(g.initialized, id)
		}
	}
}

// LoadPartition rebuilds the share groups of partition p of
// __consumer_offsets from their records (group.Config.ShareLoaded), as
// Kafka 4.2's GroupMetadataManager replays them (it persists share group
// members and, on load, keeps them with their epochs and schedules their
// session timeouts, onLoaded; it does not fence them): each group with its epoch,
// assignment epoch and initialized topics; each member with its
// subscription, member epoch, previous epoch and assignment, and a new
// session (group.share.session.timeout.ms from now), so members keep
// their epochs across a coordinator move. Groups of p held before are
// replaced; requests for p's groups are served from now on.
//
// Called on the group coordinator's goroutine (group.Config.ShareLoaded):
// it writes nothing and never flushes, which would post to that goroutine.
func (c *Coordinator) LoadPartition(p int32, recs []gcoord.ShareRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropPartitionLocked(p)
	if c.loaded == nil {
		c.loaded = map[int32]bool{}
	}
	c.loaded[p] = true
	now := time.Now()
	loaded := map[string]*group{}
	for i := range recs {
		r := &recs[i]
		if r.MemberID == "" && (r.Type == gcoord.ShareMemberMetadataType || r.Type == gcoord.ShareCurrentMemberType) {
			continue // no member has an empty id (a heartbeat's is refused)
		}
		g := loaded[r.Group]
		if g == nil {
			g = newGroup(r.Group)
			c.groups[r.Group], loaded[r.Group] = g, g
		}
		m := g.members[r.MemberID]
		if m == nil && r.Type == gcoord.ShareMemberMetadataType {
			m = &member{id: r.MemberID, lastSeen: now}
			g.members[m.id] = m
		}
		switch r.Type {
		case gcoord.ShareMetadataType:
			g.epoch = r.Epoch
		case gcoord.ShareTargetMetadataType:
			g.assignEpoch = r.Epoch
		case gcoord.ShareStatePartitionsType:
			for _, t := range r.Initialized {
				g.initialized[t.ID] = &gcoord.ShareTopic{ID: t.ID, Name: t.Name, Partitions: slices.Clone(t.Partitions)}
			}
		case gcoord.ShareMemberMetadataType:
			m.rack, m.clientID, m.clientHost = r.RackID, r.ClientID, r.ClientHost
			m.topics = slices.Compact(slices.Sorted(slices.Values(r.Topics)))
		case gcoord.ShareCurrentMemberType:
			if m != nil { // sorted after its metadata
				m.epoch, m.prevEpoch = r.Epoch, r.PrevEpoch
				m.assigned = map[[16]byte][]int32{}
				for id, ps := range r.Assignment {
					m.assigned[id] = slices.Clone(ps)
				}
			}
		}
	}
	for _, g := range loaded {
		timeout := c.Settings(g.id).SessionTimeout + time.Millisecond
		for _, m := range g.members {
			m.names = map[[16]byte]string{}
			for _, name := range m.topics {
				if id, _, ok := c.topics.Lookup(name); ok {
					m.names[id] = name
				}
			}
			gid := g.id
			m.timer = time.AfterFunc(timeout, func() { c.expireGroup(gid) })
		}
	}
}

// UnloadPartition forgets the share groups of partition p of
// __consumer_offsets, which this broker no longer leads: their members
// are not reported as leaving (OnMemberLeave); they go on at the new
// coordinator, which loads them from the log, and keep the records they
// hold. The share-partitions this broker leads stay.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropPartitionLocked(p)
	delete(c.loaded, p)
}

func (c *Coordinator) dropPartitionLocked(p int32) {
	for id, g := range c.groups {
		if c.journal == nil || c.journal.Partition(id) != p {
			continue
		}
		for _, m := range g.members {
			m.stopTimer()
		}
		delete(c.groups, id)
	}
}

// InitializedTopics returns the topics groupID initialized
// (ShareGroupStatePartitionMetadata's initialized topics: the partitions
// ever assigned to its members or given start offsets by
// AlterShareGroupOffsets), sorted by name; nil for an unknown group.
func (c *Coordinator) InitializedTopics(groupID string) []gcoord.ShareTopic {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil {
		return nil
	}
	return statePartitionsRecord(g).Initialized
}

// EnsureGroup creates groupID as a share group without members when
// missing, and adds topics to the topics it initialized, durably
// (AlterShareGroupOffsets, which Kafka lets create a share group).
// Errors: COORDINATOR_LOAD_IN_PROGRESS while the group's partition loads,
// the write's (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) EnsureGroup(ctx context.Context, groupID string, topics []gcoord.ShareTopic) error {
	c.mu.Lock()
	if err := c.loadingLocked(groupID); err != nil {
		c.mu.Unlock()
		return err
	}
	var recs []gcoord.ShareRecord
	g := c.groups[groupID]
	if g == nil {
		g = newGroup(groupID)
		c.groups[groupID] = g
		recs = append(recs, metadataRecord(g))
	}
	target, names := map[[16]byte][]int32{}, map[[16]byte]string{}
	for _, t := range topics {
		target[t.ID], names[t.ID] = t.Partitions, t.Name
	}
	recs = append(recs, c.initializeLocked(g, target, names)...)
	done := c.writeLocked(g, recs, nil)
	c.unlockFlush()
	return wait(ctx, done)
}

// ForgetTopics removes topics (by id) from the topics groupID initialized,
// durably (DeleteShareGroupOffsets). Errors as EnsureGroup's;
// GROUP_ID_NOT_FOUND for an unknown group.
func (c *Coordinator) ForgetTopics(ctx context.Context, groupID string, ids [][16]byte) error {
	g, err := c.lockGroup(groupID)
	if err != nil {
		return err
	}
	changed := false
	for _, id := range ids {
		if g.initialized[id] != nil {
			delete(g.initialized, id)
			changed = true
		}
	}
	var done chan error
	if changed {
		done = c.writeLocked(g, []gcoord.ShareRecord{statePartitionsRecord(g)}, nil)
	}
	c.unlockFlush()
	return wait(ctx, done)
}
