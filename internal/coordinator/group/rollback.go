package group

import (
	"maps"
	"time"

	"github.com/samsahq/samsa/internal/deadline"
)

// Rolling back a consumer group after a failed write.
//
// The coordinator changes a consumer group in memory, then writes the
// records of the change to __consumer_offsets and answers once they are
// written. When the write fails, the group goes back to its state before
// the change, as Kafka's coordinator reverts its timeline data structures
// to the last committed offset (CoordinatorRuntime), and the client gets
// the error (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR; appendErrorCode):
// it retries against the state that is in the log. Writes to a partition
// complete in the order they were issued, so the first failure finds the
// committed state in its snapshot; changes made on top of it by writes
// still in flight are reverted with it, and those writes are answered with
// an error even if they land (g.writeEpoch), their records being upserts
// that the client's retry writes again.
//
// A snapshot copies the group's scalar fields and shares its maps of
// members, static members and targets, which the group copies before it
// next modifies them (consumerGroup.thaw): a heartbeat that changes no
// membership or target costs O(1), a change O(members) once. A member's
// fields are copied only when the change is about to modify it (save).
// Partition owners are not copied: a rollback recomputes them from the
// members' assignments.

// cgSnapshot is a consumer group as it was before a change.
type cgSnapshot struct {
	part  *partition
	id    string
	g     *group // nil: the change creates the group
	epoch uint64 // g.writeEpoch when taken

	wasConsumer    bool
	protocolType   string
	protocolName   *string
	generation     int32
	stateTimestamp int64

	cg      *consumerGroup       // the live group, when wasConsumer
	val     consumerGroup        // its fields, maps cloned
	members map[*cmember]cmember // members' fields saved before a change

	classic *classicSnap // a classic group with members (an upgrade may convert it)
}

// classicSnap is a classic group's membership before an online upgrade.
type classicSnap struct {
	members   map[string]*member
	static    map[string]string
	supported map[string]int
	leader    string
	state     state
}

// snapshotConsumer records group id of part before a change, in O(1): the
// group's maps of members, static members and targets are shared with the
// snapshot and copied before the change modifies them (thaw).
func (c *Coordinator) snapshotConsumer(part *partition, id string) *cgSnapshot {
	s := &cgSnapshot{part: part, id: id, g: part.groups[id]}
	g := s.g
	if g == nil {
		return s
	}
	s.epoch = g.writeEpoch
	s.protocolType, s.protocolName, s.generation, s.stateTimestamp = g.protocolType, g.protocolName, g.generation, g.stateTimestamp
	if g.cg == nil {
		if len(g.members) > 0 {
			s.classic = &classicSnap{members: maps.Clone(g.members), static: maps.Clone(g.static),
				supported: maps.Clone(g.supported), leader: g.leader, state: g.state}
		}
		return s
	}
	g.cg.frozen = true
	s.wasConsumer, s.cg, s.val = true, g.cg, *g.cg
	s.val.owners = nil // recomputed
	s.members = map[*cmember]cmember{}
	return s
}

// save records m's fields before the change modifies them.
func (s *cgSnapshot) save(m *cmember) {
	if s == nil || m == nil || s.members == nil {
		return
	}
	if _, ok := s.members[m]; !ok {
		s.members[m] = *m
	}
}

// current reports whether no write failed since s was taken: a write
// issued after s may be answered as written.
func (s *cgSnapshot) current() bool {
	g := s.part.groups[s.id]
	return g != nil && (s.g == nil || g == s.g && g.writeEpoch == s.epoch)
}

// rollback puts the group back as it was when s was taken. failedWrite
// says the change's records failed to be written: writes issued after it
// are then answered with an error too. Without it (a request refused
// after the group was touched, nothing written) only this change is
// undone.
func (c *Coordinator) rollback(s *cgSnapshot, failedWrite bool) {
	g := s.part.groups[s.id]
	if g == nil || s.g != nil && (g != s.g || g.writeEpoch != s.epoch) {
		return // deleted, or an earlier failed write already rolled back past s
	}
	if failedWrite {
		g.writeEpoch++
	}
	live := map[string]*cmember{}
	if g.cg != nil {
		live = g.cg.members
	}
	if !s.wasConsumer {
		// The change made the group a consumer group (or created it).
		for _, m := range live {
			c.timers.Cancel(m.session)
			c.timers.Cancel(m.revocation)
			m.session, m.revocation = nil, nil
		}
		g.cg = nil
		g.protocolType, g.protocolName, g.generation, g.stateTimestamp = s.protocolType, s.protocolName, s.generation, s.stateTimestamp
		if s.g == nil && len(g.offsets) == 0 && len(g.pendingCommits) == 0 && len(g.pendingTxnOffsets) == 0 {
			delete(s.part.groups, s.id)
		}
		if cs := s.classic; cs != nil {
			// An online upgrade that was not written: the classic
			// group is back, and rebalances (its parked requests were
			// answered when it was converted).
			g.members, g.static, g.supported, g.leader = cs.members, cs.static, cs.supported, cs.leader
			g.pending, g.pendingSync = map[string]*deadline.Timer{}, map[string]bool{}
			for _, m := range g.members {
				m.join, m.sync = nil, nil
				c.rescheduleHeartbeat(g, m, m.sessionTimeout())
			}
			g.transition(cs.state, time.Now())
			if cs.state != stateEmpty {
				c.prepareRebalance(g, "online upgrade not written")
			}
		}
		return
	}
	if g.cg == nil {
		c.undoDowngrade(g) // a downgrade that was not written
	}
	cg := s.cg
	*cg = s.val
	cg.frozen = true // the maps are the snapshot's, which others may share
	g.cg, g.stateTimestamp = cg, s.stateTimestamp
	for m, v := range s.members {
		session, revocation := m.session, m.revocation
		*m = v
		m.session, m.revocation = session, revocation
	}
	for id, m := range live {
		if cg.members[id] != m {
			c.timers.Cancel(m.session)
			c.timers.Cancel(m.revocation)
			m.session, m.revocation = nil, nil
		}
	}
	cg.owners = map[tpKey]string{}
	for _, m := range cg.sortedMembers() {
		c.holdAll(cg, m)
		if live[m.id] != m || m.session == nil {
			c.scheduleConsumerSession(g, m) // it was removed by the change
		}
		c.scheduleRevocation(g, m)
	}
}
