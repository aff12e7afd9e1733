package group

import (
	"bytes"
	"github.com/samsahq/samsa/internal/clip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the rebalance protocol of classic groups: JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup and the timeouts between them, after
// Kafka's GroupMetadataManager (classic groups). Everything runs on the run
// goroutine.

func newJoinResponse(version int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	return r
}

// errJoinResponse is a JoinGroup error for waiter w (nil w: version 0).
func errJoinResponse(w *joinWaiter, code int16, memberID string) *kmsg.JoinGroupResponse {
	var v int16
	if w != nil {
		v = w.version
	}
	r := newJoinResponse(v)
	r.ErrorCode = code
	r.MemberID = memberID
	return r
}

// completeJoin answers m's parked JoinGroup, if any.
func completeJoin(m *member, r *kmsg.JoinGroupResponse) bool {
	w := m.join
	if w == nil {
		return false
	}
	m.join = nil
	w.reply(r)
	return true
}

// completeSync answers m's parked SyncGroup, if any.
func completeSync(m *member, code int16, protocolType, protocolName *string) bool {
	w := m.sync
	if w == nil {
		return false
	}
	m.sync = nil
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	r.MemberAssignment = []byte{}
	if code == 0 {
		r.ProtocolType = protocolType
		r.Protocol = protocolName
		if m.assignment != nil {
			r.MemberAssignment = m.assignment
		}
	}
	w.reply(r)
	return true
}

func strPtrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// joinResponse is the response of the current generation for m; with the
// member list when withMembers (the leader's).
func (g *group) joinResponse(m *member, withMembers bool) *kmsg.JoinGroupResponse {
	r := newJoinResponse(0)
	r.MemberID = m.id
	r.Generation = g.generation
	r.ProtocolType = strPtrOrNil(g.protocolType)
	r.Protocol = g.protocolName
	r.LeaderID = g.leader
	if withMembers {
		r.Members = g.joinMembers()
	}
	return r
}

// joinMembers lists the members with their metadata for the selected
// protocol, for the leader.
func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	proto := ""
	if g.protocolName != nil {
		proto = *g.protocolName
	}
	ms := g.sortedMembers()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadata(proto)
		out = append(out, jm)
	}
	return out
}

func durationMs(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// joinGroup handles JoinGroup v0-v9.
func (c *Coordinator) joinGroup(cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	v := req.Version
	w := &joinWaiter{version: v, answer: reply}
	fail := func(code int16, memberID string) { w.reply(errJoinResponse(w, code, memberID)) }

	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code, req.MemberID)
		return
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		fail(code, req.MemberID)
		return
	}
	if s := durationMs(req.SessionTimeoutMillis); s < c.cfg.MinSessionTimeout || s > c.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return
	}
	j := joinRequest{
		client:    cl,
		req:       req,
		w:         w,
		session:   req.SessionTimeoutMillis,
		rebalance: req.RebalanceTimeoutMillis,
	}
	if v == 0 || j.rebalance < 0 { // v0 has none: the session timeout serves
		j.rebalance = req.SessionTimeoutMillis
	}
	if v >= 5 {
		j.instanceID = req.InstanceID
	}

	now := time.Now()
	g := part.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			fail(kerr.UnknownMemberID.Code, req.MemberID)
			return
		}
		if c.isShareGroup(req.Group) {
			fail(kerr.InconsistentGroupProtocol.Code, "")
			return
		}
		g = newGroup(part, req.Group, now)
		part.groups[g.id] = g
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			// A classic member of a consumer group (migrate.go).
			c.classicJoinToConsumer(g, j)
			return
		}
		// An empty consumer group becomes a classic group, as in Kafka.
		c.appendRecords(part, g.deletionTombstones(), func(err error) {
			if err != nil {
				c.logGroup(g).Warn("failed to write the tombstones of a consumer group becoming classic", "err", err)
			}
		})
		g.cg, g.protocolType, g.generation = nil, "", 0
	}
	if !c.acceptJoiningMember(g, req.MemberID) {
		if m := g.members[req.MemberID]; m != nil {
			c.removeMember(g, m, kerr.GroupMaxSizeReached.Code)
			c.maybeCompleteJoinPhase(g)
		}
		fail(kerr.GroupMaxSizeReached.Code, "")
		return
	}
	if req.MemberID == "" {
		c.joinNewMember(g, j)
	} else {
		c.joinExistingMember(g, j)
	}
	c.maybeDropUnused(g)
}

// joinRequest is a validated JoinGroup.
type joinRequest struct {
	client     Client
	req        *kmsg.JoinGroupRequest
	w          *joinWaiter
	instanceID *string
	session    int32 // milliseconds
	rebalance  int32 // milliseconds
}

func (j *joinRequest) fail(code int16, memberID string) {
	j.w.reply(errJoinResponse(j.w, code, memberID))
}

// acceptJoiningMember enforces group.max.size as Kafka does: while
// preparing a rebalance, by the members already parked; otherwise by the
// group's size; existing members are always accepted.
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	switch g.state {
	case statePreparingRebalance:
		if m := g.members[memberID]; m != nil && m.join != nil {
			return true
		}
		return g.numAwaitingJoin() < int(c.cfg.MaxSize)
	case stateCompletingRebalance, stateStable:
		if g.members[memberID] != nil {
			return true
		}
		return len(g.members) < int(c.cfg.MaxSize)
	}
	return true
}

func (c *Coordinator) joinNewMember(g *group, j joinRequest) {
	if g.state == stateDead {
		j.fail(kerr.CoordinatorNotAvailable.Code, "")
		return
	}
	if !g.supportsProtocols(j.req.ProtocolType, j.req.Protocols) {
		j.fail(kerr.InconsistentGroupProtocol.Code, "")
		return
	}
	id := newMemberID(j.client.ID, j.instanceID)
	if j.instanceID != nil {
		if old, ok := g.static[*j.instanceID]; ok {
			c.replaceStaticMemberAndRebalance(g, j, old, id)
		} else {
			c.addMemberAndRebalance(g, j, id)
		}
		return
	}
	if j.req.Version >= 4 { // KIP-394: hand out the id, expect a second join
		g.pending[id] = c.timers.Schedule(time.Now().Add(durationMs(j.session)), func() { c.expirePending(g, id) })
		c.logGroup(g).Debug("member id required", "member_id", clip.String(id))
		j.fail(kerr.MemberIDRequired.Code, id)
		return
	}
	c.addMemberAndRebalance(g, j, id)
}

func (c *Coordinator) joinExistingMember(g *group, j joinRequest) {
	id := j.req.MemberID
	if g.state == stateDead {
		j.fail(kerr.CoordinatorNotAvailable.Code, id)
		return
	}
	if !g.supportsProtocols(j.req.ProtocolType, j.req.Protocols) {
		j.fail(kerr.InconsistentGroupProtocol.Code, id)
		return
	}
	if _, ok := g.pending[id]; ok {
		if j.instanceID != nil { // pending ids are only given to dynamic members
			j.fail(kerr.UnknownMemberID.Code, id)
			return
		}
		c.addMemberAndRebalance(g, j, id)
		return
	}
	if code := g.validateMember(id, j.instanceID); code != 0 {
		j.fail(code, id)
		return
	}
	m := g.members[id]
	switch g.state {
	case statePreparingRebalance:
		c.updateMemberAndRebalance(g, m, j, "member rejoining")
	case stateCompletingRebalance:
		if m.matches(j.req.Protocols) {
			// It likely missed the JoinGroup response: send it again.
			j.w.reply(g.joinResponse(m, g.leader == id))
			return
		}
		c.updateMemberAndRebalance(g, m, j, "member metadata changed")
	case stateStable:
		if g.leader == id || !m.matches(j.req.Protocols) {
			// The leader rejoins to force a rebalance (e.g. the
			// partitions of a topic changed).
			c.updateMemberAndRebalance(g, m, j, "leader rejoining or member metadata changed")
			return
		}
		j.w.reply(g.joinResponse(m, false))
	default:
		j.fail(kerr.UnknownMemberID.Code, id)
	}
}

// addMemberAndRebalance adds a new member parked in its JoinGroup.
func (c *Coordinator) addMemberAndRebalance(g *group, j joinRequest, id string) {
	if t, ok := g.pending[id]; ok {
		c.timers.Cancel(t)
	}
	m := &member{
		id:                 id,
		instanceID:         j.instanceID,
		clientID:           j.client.ID,
		clientHost:         j.client.Host,
		rebalanceTimeoutMs: j.rebalance,
		sessionTimeoutMs:   j.session,
		protocolType:       j.req.ProtocolType,
		protocols:          cloneProtocols(j.req.Protocols),
		isNew:              true,
		seq:                c.nextSeq(),
	}
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true // extends the initial rebalance delay
	}
	g.add(m, j.w)
	// A parked new member cannot heartbeat; it expires after
	// NewMemberJoinTimeout if the rebalance does not complete.
	c.rescheduleHeartbeat(g, m, c.cfg.NewMemberJoinTimeout)
	c.logGroup(g).Info("member joined", "member_id", clip.String(id), "instance_id", clip.String(derefOr(j.instanceID, "")), "client_id", clip.String(j.client.ID))
	c.maybePrepareRebalanceOrCompleteJoin(g, "new member joined")
}

// updateMember sets m's protocols and timeouts and parks it with w (nil: not
// parked). A JoinGroup it replaces gets REBALANCE_IN_PROGRESS.
func (g *group) updateMember(m *member, ps []protocol, rebalance, session int32, w *joinWaiter) {
	g.addSupported(m, -1)
	m.protocols = ps
	g.addSupported(m, 1)
	m.rebalanceTimeoutMs = rebalance
	m.sessionTimeoutMs = session
	if w != nil && m.join != nil && m.join != w {
		completeJoin(m, errJoinResponse(m.join, kerr.RebalanceInProgress.Code, m.id))
	}
	m.join = w
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, j joinRequest, reason string) {
	g.updateMember(m, cloneProtocols(j.req.Protocols), j.rebalance, j.session, j.w)
	c.maybePrepareRebalanceOrCompleteJoin(g, reason)
}

// replaceStaticMember gives the member of instanceID the new id newID,
// keeping its assignment; requests parked under the old id get
// FENCED_INSTANCE_ID. The old member object is retired, so that callbacks
// holding it find it gone.
func (c *Coordinator) replaceStaticMember(g *group, instanceID, oldID, newID string) *member {
	old := g.members[oldID]
	delete(g.members, oldID)
	c.timers.Cancel(old.heartbeat)
	old.heartbeat = nil
	fenced := errJoinResponse(old.join, kerr.FencedInstanceID.Code, oldID)
	completeJoin(old, fenced)
	completeSync(old, kerr.FencedInstanceID.Code, nil, nil)

	m := &member{
		id:                 newID,
		instanceID:         old.instanceID,
		clientID:           old.clientID,
		clientHost:         old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs,
		sessionTimeoutMs:   old.sessionTimeoutMs,
		protocolType:       old.protocolType,
		protocols:          old.protocols,
		assignment:         old.assignment,
		seq:                old.seq,
	}
	g.members[newID] = m
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.static[instanceID] = newID
	return m
}

// replaceStaticMemberAndRebalance handles a static member that joins with
// no member id while its group.instance.id is known (KIP-345): it takes the
// place of the old member id. In a Stable group whose protocol would not
// change, it gets the current generation back without a rebalance.
func (c *Coordinator) replaceStaticMemberAndRebalance(g *group, j joinRequest, oldID, newID string) {
	instanceID := *j.instanceID
	currentLeader := g.leader
	m := c.replaceStaticMember(g, instanceID, oldID, newID)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeoutMs, m.sessionTimeoutMs
	oldClient := Client{ID: m.clientID, Host: m.clientHost}
	// The restarted client's timeouts and client id replace the old ones
	// (Kafka's classicGroupJoinExistingStaticMember): they are persisted
	// with the group below and the session timer runs on the new timeout.
	g.updateMember(m, cloneProtocols(j.req.Protocols), j.rebalance, j.session, j.w)
	m.clientID, m.clientHost = j.client.ID, j.client.Host
	c.rescheduleHeartbeat(g, m, m.sessionTimeout())
	c.logGroup(g).Info("static member rejoined", "instance_id", clip.String(instanceID), "old_member_id", clip.String(oldID), "member_id", clip.String(newID), "state", g.state.String())

	switch g.state {
	case stateStable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			c.maybePrepareRebalanceOrCompleteJoin(g, "static member rejoined with other protocols")
			return
		}
		part := g.part
		rec := g.metadataRecord(g.assignments())
		c.appendRecords(part, []Record{rec}, func(err error) {
			if err != nil {
				code := appendErrorCode(err)
				if g.members[newID] == m && g.state != stateDead {
					// Revert to the old member id.
					g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
					m.clientID, m.clientHost = oldClient.ID, oldClient.Host
					back := c.replaceStaticMember(g, instanceID, newID, oldID)
					c.rescheduleHeartbeat(g, back, back.sessionTimeout())
				}
				m.join = nil
				r := errJoinResponse(j.w, code, "")
				r.Generation = g.generation
				r.ProtocolType = strPtrOrNil(g.protocolType)
				r.Protocol = g.protocolName
				r.LeaderID = currentLeader
				j.w.reply(r)
				return
			}
			if j.req.Version >= 9 {
				// KIP-814: the leader learns it leads but must not
				// compute a new assignment.
				isLeader := g.leader == newID
				r := g.joinResponse(m, isLeader)
				r.SkipAssignment = isLeader
				completeJoin(m, r)
				return
			}
			// Before v9, answer with the old leader id so that a
			// restarted leader does not assign (its assignment would
			// not be propagated in a Stable group).
			r := g.joinResponse(m, false)
			r.LeaderID = currentLeader
			completeJoin(m, r)
		})
	case stateCompletingRebalance:
		// The leader may have been sent the old member id: rebalance.
		c.prepareRebalance(g, "static member rejoined while completing a rebalance")
	case statePreparingRebalance:
		c.maybeCompleteJoinPhase(g)
	}
}

// rescheduleHeartbeat sets m's session deadline to now+d.
func (c *Coordinator) rescheduleHeartbeat(g *group, m *member, d time.Duration) {
	c.timers.Cancel(m.heartbeat)
	m.heartbeat = c.timers.Schedule(time.Now().Add(d), func() { c.expireHeartbeat(g, m) })
}

// expireHeartbeat runs at m's session deadline.
func (c *Coordinator) expireHeartbeat(g *group, m *member) {
	m.heartbeat = nil
	if g.state == stateDead || g.members[m.id] != m || m.hasSatisfiedHeartbeat() {
		return
	}
	c.logGroup(g).Info("member session expired", "member_id", clip.String(m.id), "session_timeout", m.sessionTimeout())
	c.removeMemberAndUpdateGroup(g, m)
}

// expirePending drops a member id given out by MEMBER_ID_REQUIRED that did
// not come back within its session timeout.
func (c *Coordinator) expirePending(g *group, id string) {
	if g.state == stateDead {
		return
	}
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	c.logGroup(g).Info("pending member expired", "member_id", clip.String(id))
	if g.state == statePreparingRebalance && g.hasAllMembersJoined() {
		c.completeJoinPhase(g)
	}
	c.maybeDropUnused(g)
}

// maybeDropUnused forgets a group that never got further than handing out
// member ids: never persisted, nothing to keep.
func (c *Coordinator) maybeDropUnused(g *group) {
	if g.state == stateEmpty && g.generation == 0 && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.pendingCommits) == 0 && g.part.groups[g.id] == g {
		delete(g.part.groups, g.id)
	}
}

// removeMember drops m, answering its parked requests with code.
func (c *Coordinator) removeMember(g *group, m *member, code int16) {
	c.timers.Cancel(m.heartbeat)
	m.heartbeat = nil
	completeJoin(m, errJoinResponse(m.join, code, ""))
	completeSync(m, code, nil, nil)
	g.remove(m.id)
}

// removeMemberAndUpdateGroup removes a failed member and rebalances.
func (c *Coordinator) removeMemberAndUpdateGroup(g *group, m *member) {
	c.removeMember(g, m, kerr.UnknownMemberID.Code)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g, "member removed")
	case statePreparingRebalance:
		if g.hasAllMembersJoined() {
			c.completeJoinPhase(g)
		}
	}
}

func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *group, reason string) {
	if g.canRebalance() {
		c.prepareRebalance(g, reason)
	} else {
		c.maybeCompleteJoinPhase(g)
	}
}

// maybeCompleteJoinPhase completes the join phase once every member joined,
// except in the initial rebalance, which waits for its delay.
func (c *Coordinator) maybeCompleteJoinPhase(g *group) {
	if g.state == statePreparingRebalance && g.prevState != stateEmpty && g.hasAllMembersJoined() {
		c.completeJoinPhase(g)
	}
}

// prepareRebalance moves g to PreparingRebalance: members parked in
// SyncGroup get REBALANCE_IN_PROGRESS, and the join phase ends when all
// members rejoined or the rebalance timeout passes (an empty group first
// waits group.initial.rebalance.delay.ms).
func (c *Coordinator) prepareRebalance(g *group, reason string) {
	if g.state == stateCompletingRebalance {
		c.resetAndPropagateAssignmentError(g, kerr.RebalanceInProgress.Code)
	}
	c.removeSyncExpiration(g)
	c.timers.Cancel(g.joinTimer)
	g.joinTimer = nil
	now := time.Now()
	initial := g.state == stateEmpty
	if initial {
		delay := c.cfg.InitialRebalanceDelay
		remaining := maxOf(g.rebalanceTimeout()-delay, 0)
		g.joinTimer = c.timers.Schedule(now.Add(delay), func() { c.tryCompleteInitialRebalance(g, delay, remaining) })
	}
	c.logGroup(g).Info("preparing to rebalance", "old_state", g.state.String(), "generation", g.generation, "reason", clip.String(reason))
	g.transition(statePreparingRebalance, now)
	if !initial {
		c.completeJoinElseSchedule(g)
	}
}

func (c *Coordinator) completeJoinElseSchedule(g *group) {
	if g.hasAllMembersJoined() {
		c.completeJoinPhase(g)
		return
	}
	g.joinTimer = c.timers.Schedule(time.Now().Add(g.rebalanceTimeout()), func() {
		g.joinTimer = nil
		c.completeJoinPhase(g)
	})
}

// tryCompleteInitialRebalance ends the initial delay, extending it while
// new members keep joining, up to the rebalance timeout.
func (c *Coordinator) tryCompleteInitialRebalance(g *group, delay, remaining time.Duration) {
	g.joinTimer = nil
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		newDelay := min(c.cfg.InitialRebalanceDelay, remaining)
		newRemaining := maxOf(remaining-delay, 0)
		g.joinTimer = c.timers.Schedule(time.Now().Add(newDelay), func() { c.tryCompleteInitialRebalance(g, newDelay, newRemaining) })
		return
	}
	c.completeJoinPhase(g)
}

// completeJoinPhase ends the join phase: dynamic members that did not
// rejoin are removed, the generation advances, and the parked JoinGroup
// requests are answered (the leader gets the member list).
func (c *Coordinator) completeJoinPhase(g *group) {
	c.timers.Cancel(g.joinTimer)
	g.joinTimer = nil
	if g.state != statePreparingRebalance {
		return
	}
	for _, m := range g.sortedMembers() {
		if m.join == nil && m.instanceID == nil {
			c.logGroup(g).Info("member did not rejoin in time", "member_id", clip.String(m.id))
			c.removeMember(g, m, kerr.UnknownMemberID.Code)
		}
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// No member rejoined (only static members that have not yet):
		// wait for their sessions to expire.
		c.logGroup(g).Warn("could not complete rebalance: no member rejoined")
		g.joinTimer = c.timers.Schedule(time.Now().Add(g.rebalanceTimeout()), func() {
			g.joinTimer = nil
			c.completeJoinPhase(g)
		})
		return
	}
	now := time.Now()
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocolName = &p
		g.subscribed = g.computeSubscribed()
		g.transition(stateCompletingRebalance, now)
	} else {
		g.protocolName = nil
		g.subscribed = g.computeSubscribed()
		g.transition(stateEmpty, now)
	}
	clear(g.pendingSync)

	if g.state == stateEmpty {
		c.logGroup(g).Info("group is now empty", "generation", g.generation)
		gen := g.generation
		c.appendRecords(g.part, []Record{g.metadataRecord(nil)}, func(err error) {
			if err != nil {
				c.logGroup(g).Warn("failed to write empty group metadata", "generation", gen, "err", err)
			}
		})
		return
	}
	c.logGroup(g).Info("rebalance: join phase complete", "generation", g.generation, "protocol", *g.protocolName, "leader", clip.String(g.leader), "members", len(g.members))
	for _, m := range g.sortedMembers() {
		completeJoin(m, g.joinResponse(m, m.id == g.leader))
		c.rescheduleHeartbeat(g, m, m.sessionTimeout())
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	gen := g.generation
	g.syncTimer = c.timers.Schedule(now.Add(g.rebalanceTimeout()), func() { c.expirePendingSync(g, gen) })
}

// expirePendingSync removes the members that joined generation gen but did
// not send SyncGroup within the rebalance timeout, and rebalances.
func (c *Coordinator) expirePendingSync(g *group, gen int32) {
	g.syncTimer = nil
	if gen != g.generation || (g.state != stateCompletingRebalance && g.state != stateStable) || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range g.sortedMembers() {
		if g.pendingSync[m.id] {
			c.logGroup(g).Info("member did not sync in time", "member_id", clip.String(m.id))
			c.removeMember(g, m, kerr.UnknownMemberID.Code)
		}
	}
	clear(g.pendingSync)
	c.prepareRebalance(g, "members did not sync in time")
}

func (c *Coordinator) removeSyncExpiration(g *group) {
	clear(g.pendingSync)
	c.timers.Cancel(g.syncTimer)
	g.syncTimer = nil
}

func (c *Coordinator) removePendingSync(g *group, id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		c.timers.Cancel(g.syncTimer)
		g.syncTimer = nil
	}
}

// resetAndPropagateAssignmentError clears the assignments and answers the
// parked SyncGroup requests with code.
func (c *Coordinator) resetAndPropagateAssignmentError(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = []byte{}
	}
	c.propagateAssignment(g, code)
}

// setAndPropagateAssignment installs the leader's assignment (members it
// left out get empty bytes) and answers the parked SyncGroup requests.
func (c *Coordinator) setAndPropagateAssignment(g *group, assignment map[string][]byte) {
	for id, m := range g.members {
		m.assignment = assignment[id]
		if m.assignment == nil {
			m.assignment = []byte{}
		}
	}
	c.propagateAssignment(g, 0)
}

func (c *Coordinator) propagateAssignment(g *group, code int16) {
	var pt, pn *string
	if code == 0 {
		pt, pn = strPtrOrNil(g.protocolType), g.protocolName
	}
	for _, m := range g.sortedMembers() {
		if completeSync(m, code, pt, pn) {
			// Expirations ignored while it waited are rescheduled.
			c.rescheduleHeartbeat(g, m, m.sessionTimeout())
		}
	}
}

// syncGroup handles SyncGroup v0-v5.
func (c *Coordinator) syncGroup(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	v := req.Version
	fail := func(code int16) {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = v
		r.ErrorCode = code
		r.MemberAssignment = []byte{}
		reply(r)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		fail(code)
		return
	}
	g := part.groups[req.Group]
	var instanceID *string
	if v >= 3 {
		instanceID = req.InstanceID
	}
	if g != nil && g.cg != nil && g.state != stateDead {
		c.classicSyncToConsumer(g, req, instanceID, reply)
		return
	}
	if g == nil || g.state == stateEmpty {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if code := g.validateMember(req.MemberID, instanceID); code != 0 {
		fail(code)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if v >= 5 {
		if req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
			req.Protocol != nil && (g.protocolName == nil || *req.Protocol != *g.protocolName) {
			fail(kerr.InconsistentGroupProtocol.Code)
			return
		}
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		if m.sync != nil {
			completeSync(m, kerr.RebalanceInProgress.Code, nil, nil)
		}
		m.sync = &syncWaiter{version: v, answer: reply}
		c.removePendingSync(g, m.id)
		if g.leader != m.id {
			return
		}
		assignment := make(map[string][]byte, len(g.members))
		for _, a := range req.GroupAssignment {
			if _, ok := g.members[a.MemberID]; ok {
				assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
			}
		}
		missing := 0
		for id := range g.members {
			if assignment[id] == nil {
				assignment[id] = []byte{}
				missing++
			}
		}
		lg := c.logGroup(g)
		if missing > 0 {
			lg.Info("leader left members out of the assignment; they get empty assignments", "generation", g.generation, "members", missing)
		}
		gen := g.generation
		c.appendRecords(part, []Record{g.metadataRecord(assignment)}, func(err error) {
			if g.state != stateCompletingRebalance || g.generation != gen {
				return // another rebalance started meanwhile
			}
			if err != nil {
				code := appendErrorCode(err)
				lg.Warn("failed to write group assignment", "generation", gen, "err", err)
				c.resetAndPropagateAssignmentError(g, code)
				c.maybePrepareRebalanceOrCompleteJoin(g, "failed to write the assignment")
				return
			}
			c.setAndPropagateAssignment(g, assignment)
			g.transition(stateStable, time.Now())
			lg.Info("group stable", "generation", gen, "members", len(g.members))
		})
	case stateStable:
		c.removePendingSync(g, m.id)
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = v
		r.ProtocolType = strPtrOrNil(g.protocolType)
		r.Protocol = g.protocolName
		r.MemberAssignment = m.assignment
		if r.MemberAssignment == nil {
			r.MemberAssignment = []byte{}
		}
		reply(r)
	}
}

// heartbeat handles Heartbeat v0-v4.
func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		return code
	}
	g := part.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	if g.cg != nil {
		return c.classicHeartbeatToConsumer(g, req, instanceID)
	}
	if code := g.validateMember(req.MemberID, instanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		c.rescheduleHeartbeat(g, m, m.sessionTimeout())
		return kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		c.rescheduleHeartbeat(g, m, m.sessionTimeout())
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// leaveGroup handles LeaveGroup v0-v5 (batched from v3, KIP-345); reply
// is called once, at once for a classic group, after the write for a
// consumer group's classic members.
func (c *Coordinator) leaveGroup(req *kmsg.LeaveGroupRequest, reply func(*kmsg.LeaveGroupResponse)) {
	if r := c.leaveGroupSync(req, reply); r != nil {
		reply(r)
	}
}

// leaveGroupSync is leaveGroup; it returns nil when it will call reply
// itself later.
func (c *Coordinator) leaveGroupSync(req *kmsg.LeaveGroupRequest, reply func(*kmsg.LeaveGroupResponse)) *kmsg.LeaveGroupResponse {
	v := req.Version
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = v
	idents := req.Members
	if v < 3 {
		idents = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	finish := func() *kmsg.LeaveGroupResponse {
		if v < 3 && resp.ErrorCode == 0 && len(resp.Members) > 0 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		if v < 3 {
			resp.Members = nil
		}
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return finish()
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return finish()
	}
	g := part.groups[req.Group]
	add := func(ident kmsg.LeaveGroupRequestMember, code int16) {
		mr := kmsg.NewLeaveGroupResponseMember()
		mr.MemberID = ident.MemberID
		mr.InstanceID = ident.InstanceID
		mr.ErrorCode = code
		resp.Members = append(resp.Members, mr)
	}
	if g == nil {
		for _, ident := range idents {
			add(ident, kerr.UnknownMemberID.Code)
		}
		return finish()
	}
	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return finish()
	}
	if g.cg != nil {
		c.classicLeaveFromConsumer(g, req, idents, resp, finish, reply)
		return nil
	}
	left := 0
	for _, ident := range idents {
		reason := derefOr(ident.Reason, "not provided")
		switch {
		case ident.MemberID == "":
			// Removal by group.instance.id (an admin's, KIP-345).
			if ident.InstanceID == nil {
				add(ident, kerr.UnknownMemberID.Code)
				continue
			}
			id, ok := g.static[*ident.InstanceID]
			if !ok {
				add(ident, kerr.UnknownMemberID.Code)
				continue
			}
			c.logGroup(g).Info("member left", "member_id", clip.String(id), "instance_id", clip.String(*ident.InstanceID), "reason", clip.String(reason))
			c.removeMember(g, g.members[id], kerr.UnknownMemberID.Code)
			add(ident, 0)
			left++
		case g.pending[ident.MemberID] != nil:
			c.timers.Cancel(g.pending[ident.MemberID])
			delete(g.pending, ident.MemberID)
			c.logGroup(g).Info("pending member left", "member_id", clip.String(ident.MemberID), "reason", clip.String(reason))
			add(ident, 0)
			left++
		default:
			if code := g.validateMember(ident.MemberID, ident.InstanceID); code != 0 {
				add(ident, code)
				continue
			}
			c.logGroup(g).Info("member left", "member_id", clip.String(ident.MemberID), "instance_id", clip.String(derefOr(ident.InstanceID, "")), "reason", clip.String(reason))
			c.removeMember(g, g.members[ident.MemberID], kerr.UnknownMemberID.Code)
			add(ident, 0)
			left++
		}
	}
	if left > 0 {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoin(g, "members left")
		case statePreparingRebalance:
			c.maybeCompleteJoinPhase(g)
		}
	}
	return finish()
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
