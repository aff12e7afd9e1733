package group

import (
	"github.com/samsahq/samsa/internal/clip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the online migration between the classic and the consumer
// protocol (KIP-848's group.consumer.migration.policy), after Kafka's
// GroupMetadataManager:
//
//   - Upgrade: a ConsumerGroupHeartbeat joining a classic group with
//     members (of protocol type "consumer") converts it to a consumer
//     group: each classic member becomes a member with its subscription
//     and its assignment, at member epoch = the generation, which is also
//     the group epoch and the target assignment epoch; parked JoinGroup
//     and SyncGroup requests get REBALANCE_IN_PROGRESS. The joining member
//     then bumps the group epoch as any join does.
//   - Classic members of a consumer group are served through JoinGroup,
//     SyncGroup, Heartbeat and LeaveGroup: a JoinGroup updates the
//     member's subscription and reconciles it with the partitions its
//     subscription says it owns (an eager member owns none by then), and
//     answers at once with generation = the member epoch, no leader and no
//     member list; SyncGroup returns the member's assigned partitions as a
//     ConsumerProtocolAssignment; Heartbeat answers REBALANCE_IN_PROGRESS
//     while the member is not reconciled with the group's target (it
//     rejoins, revoking what it must, and gets the rest once others
//     released it). Their session is the JoinGroup's session.timeout.ms.
//   - Downgrade: when the last member using the consumer protocol leaves
//     (or its session expires) and classic members remain, the group
//     becomes a classic group at generation = the assignment epoch with the
//     members' protocols and assignments, and prepares a rebalance.

// Values of group.consumer.migration.policy.
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// classicMeta is what a consumer group keeps of a member using the
// classic protocol (Kafka's ClassicMemberMetadata).
type classicMeta struct {
	sessionTimeoutMs int32
	protocols        []protocol
}

func (cfg *Config) upgradeEnabled() bool {
	return cfg.ConsumerMigrationPolicy == MigrationBidirectional || cfg.ConsumerMigrationPolicy == MigrationUpgrade
}

func (cfg *Config) downgradeEnabled() bool {
	return cfg.ConsumerMigrationPolicy == MigrationBidirectional || cfg.ConsumerMigrationPolicy == MigrationDowngrade
}

// canUpgrade reports whether a ConsumerGroupHeartbeat may convert classic
// group g, which has members, to a consumer group.
func (c *Coordinator) canUpgrade(g *group) bool {
	return c.cfg.upgradeEnabled() && g.protocolType == ConsumerProtocolType && g.state != stateDead &&
		len(g.members) < int(c.cfg.ConsumerMaxSize)
}

// subscription decodes a classic member's subscription from its first
// protocol's metadata, as Kafka's deserializeSubscription.
func subscription(ps []protocol) (*kmsg.ConsumerMemberMetadata, bool) {
	if len(ps) == 0 {
		return nil, false
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(ps[0].metadata); err != nil {
		return nil, false
	}
	return &md, true
}

// ownedFromSubscription maps the owned partitions of a subscription to
// topic ids; never nil.
func (c *Coordinator) ownedFromSubscription(md *kmsg.ConsumerMemberMetadata) assignment {
	a := assignment{}
	if c.topics == nil {
		return a
	}
	for _, t := range md.OwnedPartitions {
		if id, _, ok := c.topics.Topic(t.Topic); ok {
			for _, p := range t.Partitions {
				a.add(id, p)
			}
		}
	}
	return a
}

// encodeAssignment is a ConsumerProtocolAssignment of a, topics by name.
func (c *Coordinator) encodeAssignment(a assignment, version int16) []byte {
	ma := kmsg.NewConsumerMemberAssignment()
	ma.Version = min(max(version, 0), 3)
	for _, id := range a.topics() {
		name, ok := "", false
		if c.topics != nil {
			name, ok = c.topics.TopicName(id)
		}
		if !ok {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, slices.Clone(a[id])
		ma.Topics = append(ma.Topics, t)
	}
	return ma.AppendTo(nil)
}

// upgradeToConsumer converts classic group g to a consumer group, adding
// the records of the conversion to recs.
func (c *Coordinator) upgradeToConsumer(g *group, recs *[]Record) {
	lg := c.logGroup(g)
	// Whatever is parked is told to rejoin; classic timers stop.
	c.timers.Cancel(g.joinTimer)
	c.timers.Cancel(g.syncTimer)
	g.joinTimer, g.syncTimer = nil, nil
	for id, t := range g.pending {
		c.timers.Cancel(t)
		delete(g.pending, id)
	}
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			completeJoin(m, errJoinResponse(m.join, kerr.RebalanceInProgress.Code, m.id))
		}
		if m.sync != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode, r.MemberAssignment = kerr.RebalanceInProgress.Code, []byte{}
			m.sync.reply(r)
			m.sync = nil
		}
		c.timers.Cancel(m.heartbeat)
		m.heartbeat = nil
		cm := &cmember{
			id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeoutMs: m.rebalanceTimeoutMs, epoch: g.generation, prevEpoch: g.generation,
			assigned: assignment{}, revoking: assignment{},
			classic: &classicMeta{sessionTimeoutMs: m.sessionTimeoutMs, protocols: m.protocols},
		}
		if md, ok := subscription(m.protocols); ok {
			cm.topics = slices.Compact(slices.Sorted(slices.Values(md.Topics)))
			cm.rackID = md.Rack
		}
		var ma kmsg.ConsumerMemberAssignment
		if len(m.assignment) > 0 && ma.ReadFrom(m.assignment) == nil && c.topics != nil {
			for _, t := range ma.Topics {
				if id, n, ok := c.topics.Topic(t.Topic); ok {
					for _, p := range t.Partitions {
						if p >= 0 && p < n && cg.owners[tpKey{id, p}] == "" {
							cm.assigned.add(id, p)
							cg.owners[tpKey{id, p}] = cm.id
						}
					}
				}
			}
		}
		cg.members[cm.id] = cm
		if cm.instanceID != nil {
			cg.static[*cm.instanceID] = cm.id
		}
		cg.target[cm.id] = cm.assigned.clone()
	}
	*recs = append(*recs, Record{Key: groupKey(g.id)})
	for _, cm := range cg.sortedMembers() {
		*recs = append(*recs, cgMemberRecord(g.id, cm), cgTargetMemberRecord(g.id, cm.id, cg.target[cm.id]), cgCurrentRecord(g.id, cm))
	}
	*recs = append(*recs, cgMetadataRecord(g.id, cg.epoch), cgTargetMetadataRecord(g.id, cg.assignmentEpoch))
	lg.Info("classic group upgraded to a consumer group", "generation", g.generation, "members", len(cg.members))
	// The classic side is now an empty group holding the offsets.
	g.members, g.static, g.pendingSync, g.supported = map[string]*member{}, map[string]string{}, map[string]bool{}, map[string]int{}
	g.leader, g.protocolName, g.generation, g.subscribed = "", nil, 0, nil
	g.protocolType = ConsumerProtocolType
	g.transition(stateEmpty, time.Now())
	g.cg = cg
	for _, cm := range cg.members {
		c.scheduleConsumerSession(g, cm)
	}
}

// classicMember finds the classic member of consumer group g a classic
// request names: by instance id when given (FENCED_INSTANCE_ID if it maps
// to another member), else by member id; UNKNOWN_MEMBER_ID when missing
// or when the member uses the consumer protocol.
func (g *group) classicMember(memberID string, instanceID *string) (*cmember, int16) {
	cg := g.cg
	if instanceID != nil {
		id, ok := cg.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := cg.members[memberID]
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// classicJoinToConsumer handles a JoinGroup to consumer group g with
// members (Kafka's classicGroupJoinToConsumerGroup).
func (c *Coordinator) classicJoinToConsumer(g *group, j joinRequest) {
	req := j.req
	cg := g.cg
	ps := cloneProtocols(req.Protocols)
	md, ok := subscription(ps)
	if req.ProtocolType != ConsumerProtocolType || !ok {
		j.fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newConsumerMemberID()
		if req.Version >= 4 && j.instanceID == nil {
			j.fail(kerr.MemberIDRequired.Code, memberID)
			return
		}
	}
	snap := c.snapshotConsumer(g.part, g.id)
	refuse := func(code int16) {
		c.rollback(snap, false)
		j.fail(code, req.MemberID)
	}
	var recs []Record
	var m *cmember
	if j.instanceID != nil {
		if oldID := cg.static[*j.instanceID]; oldID != "" && oldID != memberID {
			old := cg.members[oldID]
			if !unknown || old.classic == nil {
				j.fail(kerr.FencedInstanceID.Code, req.MemberID)
				return
			}
			snap.save(old)
			m = c.replaceConsumerMember(g, old, memberID, &recs)
		}
	}
	if m == nil {
		m = cg.members[memberID]
	}
	if m != nil && m.classic == nil {
		j.fail(kerr.UnknownMemberID.Code, req.MemberID)
		return
	}
	snap.save(m)
	bump := false
	isNew := m == nil
	if isNew {
		if len(cg.members) >= int(c.cfg.ConsumerMaxSize) {
			refuse(kerr.GroupMaxSizeReached.Code)
			return
		}
		m = &cmember{id: memberID, assigned: assignment{}, revoking: assignment{}}
		cg.addMember(m)
		bump = true
		c.logGroup(g).Info("classic member joined the consumer group", "member_id", clip.String(memberID), "instance_id", clip.String(derefOr(j.instanceID, "")), "client_id", clip.String(j.client.ID))
	}
	before := cgMemberRecord(g.id, m)
	if j.instanceID != nil {
		m.instanceID = j.instanceID
		cg.setStatic(*j.instanceID, m.id)
	}
	if md.Rack != nil && *md.Rack != "" {
		m.rackID = md.Rack
	}
	m.rebalanceTimeoutMs = j.rebalance
	m.clientID, m.clientHost = j.client.ID, j.client.Host
	m.classic = &classicMeta{sessionTimeoutMs: j.session, protocols: ps}
	if topics := slices.Compact(slices.Sorted(slices.Values(md.Topics))); !slices.Equal(topics, m.topics) {
		m.topics, m.sub, bump = topics, nil, true
	}
	if m.regex != nil {
		m.sub = nil
	}
	m.regex, m.re, m.assignor = nil, nil, nil
	if after := cgMemberRecord(g.id, m); bump || string(after.Value) != string(before.Value) {
		recs = append(recs, after)
	}
	c.maybeBumpAndAssign(g, bump, &recs)
	beforeCur := cgCurrentRecord(g.id, m)
	c.reconcile(g, m, c.ownedFromSubscription(md))
	if cur := cgCurrentRecord(g.id, m); isNew || string(cur.Value) != string(beforeCur.Value) {
		recs = append(recs, cur)
	}
	c.scheduleConsumerSession(g, m)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = m.epoch
	resp.ProtocolType = kmsg.StringPtr(ConsumerProtocolType)
	resp.Protocol = kmsg.StringPtr(ps[0].name)
	resp.MemberID = m.id
	c.writeThenReply(g, snap, recs, func(code int16) {
		if code != 0 {
			j.fail(code, req.MemberID)
			return
		}
		j.w.reply(resp)
	})
}

// classicSyncToConsumer handles a SyncGroup to consumer group g (Kafka's
// classicGroupSyncToConsumerGroup): the member's assigned partitions.
func (c *Coordinator) classicSyncToConsumer(g *group, req *kmsg.SyncGroupRequest, instanceID *string, reply func(*kmsg.SyncGroupResponse)) {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = req.Version
	r.MemberAssignment = []byte{}
	m, code := g.classicMember(req.MemberID, instanceID)
	switch {
	case code != 0:
	case req.Generation != m.epoch:
		code = kerr.IllegalGeneration.Code
	case req.ProtocolType != nil && *req.ProtocolType != ConsumerProtocolType,
		req.Protocol != nil && !slices.ContainsFunc(m.classic.protocols, func(p protocol) bool { return p.name == *req.Protocol }):
		code = kerr.InconsistentGroupProtocol.Code
	case g.cg.assignmentEpoch > m.epoch && m.state != memberUnrevoked:
		code = kerr.RebalanceInProgress.Code // it must rejoin first
	}
	if code != 0 {
		r.ErrorCode = code
		reply(r)
		return
	}
	c.scheduleConsumerSession(g, m)
	version := int16(0)
	if md, ok := subscription(m.classic.protocols); ok {
		version = md.Version
	}
	name := m.classic.protocols[0].name
	if req.Protocol != nil {
		name = *req.Protocol
	}
	r.ProtocolType, r.Protocol = kmsg.StringPtr(ConsumerProtocolType), kmsg.StringPtr(name)
	r.MemberAssignment = c.encodeAssignment(m.assigned, version)
	reply(r)
}

// classicHeartbeatToConsumer handles a Heartbeat to consumer group g
// (Kafka's classicGroupHeartbeatToConsumerGroup): REBALANCE_IN_PROGRESS
// while the member is not reconciled, so that it rejoins.
func (c *Coordinator) classicHeartbeatToConsumer(g *group, req *kmsg.HeartbeatRequest, instanceID *string) int16 {
	m, code := g.classicMember(req.MemberID, instanceID)
	if code != 0 {
		return code
	}
	if req.Generation != m.epoch {
		return kerr.IllegalGeneration.Code
	}
	c.scheduleConsumerSession(g, m)
	if m.state != memberStable || m.epoch != g.cg.assignmentEpoch {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// classicLeaveFromConsumer handles a LeaveGroup from consumer group g:
// the members named leave, and the group may then downgrade. The answer
// waits for the write.
func (c *Coordinator) classicLeaveFromConsumer(g *group, req *kmsg.LeaveGroupRequest, idents []kmsg.LeaveGroupRequestMember, resp *kmsg.LeaveGroupResponse, finish func() *kmsg.LeaveGroupResponse, reply func(*kmsg.LeaveGroupResponse)) {
	snap := c.snapshotConsumer(g.part, g.id)
	var recs []Record
	for _, ident := range idents {
		mr := kmsg.NewLeaveGroupResponseMember()
		mr.MemberID, mr.InstanceID = ident.MemberID, ident.InstanceID
		id := ident.MemberID
		if id == "" && ident.InstanceID != nil {
			id = g.cg.static[*ident.InstanceID]
		}
		m, code := g.classicMember(id, ident.InstanceID)
		if code == 0 {
			snap.save(m)
			recs = append(recs, c.removeConsumerMember(g, m)...)
			c.logGroup(g).Info("classic member left the consumer group", "member_id", clip.String(m.id), "reason", clip.String(derefOr(ident.Reason, "not provided")))
		}
		mr.ErrorCode = code
		resp.Members = append(resp.Members, mr)
	}
	c.writeThenReply(g, snap, recs, func(code int16) {
		if code != 0 {
			resp.ErrorCode = code
		}
		reply(finish())
	})
}

// maybeDowngrade converts consumer group g to a classic group when the
// policy allows it and every member left uses the classic protocol (Kafka's
// validateOnlineDowngrade and convertToClassicGroup), adding the records
// to recs; it reports whether it did.
func (c *Coordinator) maybeDowngrade(g *group, recs *[]Record) bool {
	cg := g.cg
	if cg == nil || len(cg.members) == 0 || !c.cfg.downgradeEnabled() || len(cg.members) > int(c.cfg.MaxSize) {
		return false
	}
	for _, m := range cg.members {
		if m.classic == nil {
			return false
		}
	}
	members := cg.sortedMembers()
	for _, cm := range members {
		c.timers.Cancel(cm.session)
		c.timers.Cancel(cm.revocation)
		cm.session, cm.revocation = nil, nil
		*recs = append(*recs, memberTombstones(g.id, cm.id)...)
	}
	*recs = append(*recs, Record{Key: cgKey(cgTargetMetadataType, g.id)}, Record{Key: cgKey(cgMetadataType, g.id)})
	g.cg = nil
	g.protocolType = ConsumerProtocolType
	// The generation is the target assignment epoch, the member epoch of
	// the members reconciled: their heartbeats match it and get
	// REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION (Kafka converts before
	// bumping the epoch for the member leaving).
	g.generation = cg.assignmentEpoch
	g.leader = ""
	for _, cm := range members {
		version := int16(0)
		if md, ok := subscription(cm.classic.protocols); ok {
			version = md.Version
		}
		m := &member{
			id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			rebalanceTimeoutMs: cm.rebalanceTimeoutMs, sessionTimeoutMs: cm.classic.sessionTimeoutMs,
			protocolType: ConsumerProtocolType, protocols: cm.classic.protocols,
			assignment: c.encodeAssignment(cm.assigned, version), seq: c.nextSeq(),
		}
		if m.rebalanceTimeoutMs <= 0 {
			m.rebalanceTimeoutMs = m.sessionTimeoutMs
		}
		g.add(m, nil)
		c.rescheduleHeartbeat(g, m, m.sessionTimeout())
	}
	name := g.selectProtocol()
	g.protocolName = &name
	g.transition(stateStable, time.Now())
	*recs = append(*recs, g.metadataRecord(g.assignments()))
	c.logGroup(g).Info("consumer group downgraded to a classic group", "generation", g.generation, "members", len(g.members))
	c.prepareRebalance(g, "downgraded from the consumer protocol")
	return true
}

// undoDowngrade drops the classic state maybeDowngrade set up, for a
// rollback that restores the consumer group.
func (c *Coordinator) undoDowngrade(g *group) {
	for _, m := range g.members {
		c.timers.Cancel(m.heartbeat)
		m.heartbeat = nil
		if m.join != nil {
			completeJoin(m, errJoinResponse(m.join, kerr.RebalanceInProgress.Code, m.id))
		}
	}
	c.timers.Cancel(g.joinTimer)
	c.timers.Cancel(g.syncTimer)
	g.joinTimer, g.syncTimer = nil, nil
	g.members, g.static, g.pendingSync, g.supported = map[string]*member{}, map[string]string{}, map[string]bool{}, map[string]int{}
	g.leader, g.protocolName, g.generation = "", nil, 0
	g.transition(stateEmpty, time.Now())
}
