package group

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/deadline"
)

// This file is the consumer group protocol of KIP-848
// (ConsumerGroupHeartbeat): the coordinator computes a target assignment
// for the group with a server-side assignor and moves each member towards
// it one heartbeat at a time, after Kafka's GroupMetadataManager and
// CurrentAssignmentBuilder. Everything runs on the run goroutine.
//
// Epochs: the group epoch is bumped when a member joins, leaves or changes
// its subscription, or when the subscribed topics' metadata changes; the
// target assignment is recomputed when the group epoch passes the
// assignment epoch; a member reaches the assignment epoch once it revoked
// what it must give up. A partition goes to its new owner only after its
// previous owner revoked it (the member's assigned set, its partitions
// pending revocation, and the partitions it waits for: UNRELEASED).

// memberState is Kafka's MemberState, persisted as an int8.
type memberState int8

const (
	memberStable     memberState = 0 // has its target assignment
	memberUnrevoked  memberState = 1 // must revoke partitions before moving on
	memberUnreleased memberState = 2 // waits for partitions others still hold
)

// Member epochs of ConsumerGroupHeartbeat with a meaning of their own.
const (
	leaveEpoch       = -1 // the member leaves the group
	staticLeaveEpoch = -2 // a static member leaves for now, keeping its partitions
)

// cmember is a member of a consumer group.
type cmember struct {
	id                   string
	instanceID, rackID   *string
	clientID, clientHost string
	topics               []string // subscribed topic names, sorted
	regex                *string  // subscribed topic regex (v1, RE2 syntax)
	re                   *regexp.Regexp
	rebalanceTimeoutMs   int32
	assignor             *string

	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	revoking         assignment // pending revocation

	session    *deadline.Timer
	revocation *deadline.Timer // rebalance timeout while revoking

	// sub is the group's shared entry for the member's subscription
	// (topics and regex), resolved by resolve; nil until then, and set
	// to nil whenever topics or regex change.
	sub *resolvedSub

	// classic is set for a member using the classic protocol
	// (JoinGroup/SyncGroup/Heartbeat, migrate.go).
	classic *classicMeta
}

// topicMeta is a subscribed topic as the last assignment saw it.
type topicMeta struct {
	id         topicID
	partitions int32
}

type tpKey struct {
	id topicID
	p  int32
}

// consumerGroup is the KIP-848 state of a group of type "consumer"; its
// offsets live in the enclosing group.
type consumerGroup struct {
	epoch, assignmentEpoch int32
	members                map[string]*cmember
	sorted                 []*cmember            // members by id; nil: to sort (sortedMembers). Replaced, never modified in place (snapshots share it)
	static                 map[string]string     // group.instance.id -> member id
	target                 map[string]assignment // member id -> target assignment
	owners                 map[tpKey]string      // partition -> member holding it (assigned or revoking)
	subscribed             map[string]topicMeta  // subscribed topics that exist, by name
	metaVersion            int64                 // Topics.Version when subscribed was computed
	assignorName           string                // of the last target assignment

	// frozen: a snapshot (rollback.go) shares members, static and
	// target; they are copied before the next change (thaw), so that a
	// snapshot costs O(1) and a change O(members) at most once.
	frozen bool

	// subs are the distinct subscriptions of the members, by
	// subscriptionKey, each resolved at most once per metadata version;
	// a cache (a rollback may leave entries no member uses; the next
	// recompute of subscribed drops them).
	subs map[string]*resolvedSub
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members:     map[string]*cmember{},
		static:      map[string]string{},
		target:      map[string]assignment{},
		owners:      map[tpKey]string{},
		subscribed:  map[string]topicMeta{},
		metaVersion: -1,
		subs:        map[string]*resolvedSub{},
	}
}

// Topics is the coordinator's view of the cluster's topics, which the
// partitions of consumer groups come from (the broker's metadata image).
// Safe for concurrent use.
type Topics interface {
	// Topic returns the id and partition count of the named topic; ok is
	// false if there is none.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// TopicName returns the name of the topic with id.
	TopicName(id [16]byte) (string, bool)
	// Version changes whenever the topics may have changed (the metadata
	// offset).
	Version() int64
	// Names returns every topic name, for regex subscriptions.
	Names() []string
	// Racks returns the racks (broker.rack) of the brokers holding
	// replicas of partition p of the topic with id, for rack-aware
	// assignment; nil when unknown or none is set.
	Racks(id [16]byte, p int32) []string
}

// SetTopics gives the Coordinator its view of the topics; without it every
// consumer group subscription resolves to no partition. Call before the
// first ConsumerGroupHeartbeat.
func (c *Coordinator) SetTopics(t Topics) {
	call(c, c.loop.Ctx(), func(reply func(struct{})) {
		c.topics = t
		reply(struct{}{})
	})
}

// state is the consumer group's state as Kafka reports it.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// sortedMembers returns the members by id, sorted once per change of the
// membership (addMember, removeMember keep it sorted); callers must not
// modify it.
func (cg *consumerGroup) sortedMembers() []*cmember {
	if cg.sorted == nil || len(cg.sorted) != len(cg.members) {
		cg.sorted = slices.SortedFunc(maps.Values(cg.members), compareMembers)
	}
	return cg.sorted
}

func compareMembers(a, b *cmember) int { return cmp.Compare(a.id, b.id) }

// thaw copies the maps a snapshot shares before they change.
func (cg *consumerGroup) thaw() {
	if cg.frozen {
		cg.members, cg.static, cg.target = maps.Clone(cg.members), maps.Clone(cg.static), maps.Clone(cg.target)
		cg.frozen = false
	}
}

// setTarget sets member id's target assignment.
func (cg *consumerGroup) setTarget(id string, a assignment) {
	cg.thaw()
	cg.target[id] = a
}

// setStatic records that instance is member id's group.instance.id.
func (cg *consumerGroup) setStatic(instance, id string) {
	if cg.static[instance] != id {
		cg.thaw()
		cg.static[instance] = id
	}
}

// addMember puts m in the group under m.id, in O(members) for the sorted
// list (a copy: snapshots share the old one).
func (cg *consumerGroup) addMember(m *cmember) {
	cg.thaw()
	cg.members[m.id] = m
	if cg.sorted == nil {
		return
	}
	i, _ := slices.BinarySearchFunc(cg.sorted, m, compareMembers)
	next := make([]*cmember, 0, len(cg.sorted)+1)
	next = append(append(append(next, cg.sorted[:i]...), m), cg.sorted[i:]...)
	cg.sorted = next
}

// removeMember drops m from the group's members (not its target or
// static entry).
func (cg *consumerGroup) removeMember(m *cmember) {
	cg.thaw()
	delete(cg.members, m.id)
	if cg.sorted == nil {
		return
	}
	i, ok := slices.BinarySearchFunc(cg.sorted, m, compareMembers)
	if !ok || cg.sorted[i] != m {
		cg.sorted = nil
		return
	}
	cg.sorted = slices.Concat(cg.sorted[:i], cg.sorted[i+1:])
}

// newConsumerMemberID is a random UUID in Kafka's Uuid.toString form
// (22 characters of URL-safe base64), for ConsumerGroupHeartbeat v0
// members that come without one.
func newConsumerMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// maxSubscriptionRegex is the longest subscribed topic regex, in bytes.
// Beyond Kafka, which takes any length: compiling and matching cost time
// in proportion to the pattern's length, on the coordinator's goroutine
// that every group of the node waits for (a 600 KB pattern took 15 s to
// compile and match 300 topics, while no other group was served), and a
// pattern longer than this is no topic name's (249 bytes at most).
const maxSubscriptionRegex = 4096

// compileSubscription compiles a subscribed topic regex, matched against
// whole topic names as Kafka's Pattern.matches. Go's regexp is RE2; Kafka
// uses RE2/J, whose syntax is the same but for a few Java-only classes.
// A regex longer than maxSubscriptionRegex bytes is an error.
func compileSubscription(re string) (*regexp.Regexp, error) {
	if len(re) > maxSubscriptionRegex {
		return nil, fmt.Errorf("regex of %d bytes, longer than %d", len(re), maxSubscriptionRegex)
	}
	return regexp.Compile("^(?:" + re + ")$")
}

// internalTopics are never matched by regex subscriptions.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true}

// consumerHeartbeat handles ConsumerGroupHeartbeat v0-v1.
func (c *Coordinator) consumerHeartbeat(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		reply(resp)
	}
	invalid := func(msg string) { fail(kerr.InvalidRequest.Code, msg) }
	v, epoch := req.Version, req.MemberEpoch
	switch {
	case req.Group == "":
		invalid("GroupId can't be empty.")
		return
	case req.InstanceID != nil && *req.InstanceID == "":
		invalid("InstanceId can't be empty.")
		return
	case req.RackID != nil && *req.RackID == "":
		invalid("RackId can't be empty.")
		return
	case epoch > 0 || epoch == leaveEpoch || (epoch == 0 && v >= 1):
		if req.MemberID == "" {
			invalid("MemberId can't be empty.")
			return
		}
	case epoch == staticLeaveEpoch:
		if req.MemberID == "" || req.InstanceID == nil {
			invalid("MemberId and InstanceId must be set to leave as a static member.")
			return
		}
	case epoch != 0:
		invalid("MemberEpoch is invalid.")
		return
	}
	if epoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			invalid("RebalanceTimeoutMs must be provided in first request.")
			return
		case len(req.Topics) != 0:
			invalid("TopicPartitions must be empty when (re-)joining.")
			return
		case req.SubscribedTopicRegex == nil && len(req.SubscribedTopicNames) == 0 && (v == 0 || req.SubscribedTopicNames == nil):
			invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
			return
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		fail(kerr.UnsupportedAssignor.Code, "ServerAssignor "+*req.ServerAssignor+" is not supported.")
		return
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = compileSubscription(*req.SubscribedTopicRegex); err != nil {
			fail(kerr.InvalidRegularExpression.Code, err.Error())
			return
		}
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		fail(code, "")
		return
	}
	g := part.groups[req.Group]
	if g != nil && g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code, "") // being deleted
		return
	}
	var recs []Record
	upgrade := false
	if g != nil && g.cg == nil && (g.state != stateEmpty || len(g.members) > 0 || len(g.pending) > 0 || epoch != 0) {
		if epoch != 0 || len(g.members) == 0 || !c.canUpgrade(g) {
			fail(kerr.GroupIDNotFound.Code, "Group "+g.id+" is not a consumer group.")
			return
		}
		upgrade = true // online migration from the classic protocol
	}
	if epoch == leaveEpoch || epoch == staticLeaveEpoch {
		if g == nil || g.cg == nil {
			fail(kerr.GroupIDNotFound.Code, "")
			return
		}
		c.consumerLeave(g, req, resp, reply)
		return
	}
	if g == nil && epoch != 0 {
		fail(kerr.GroupIDNotFound.Code, "")
		return
	}
	if g == nil && c.isShareGroup(req.Group) {
		fail(kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group.")
		return
	}
	// Everything below changes the group in memory before its records are
	// written; a failed write puts it back (rollback.go).
	snap := c.snapshotConsumer(part, req.Group)
	refuse := func(code int16, msg string) {
		c.rollback(snap, false)
		fail(code, msg)
	}
	if upgrade {
		c.upgradeToConsumer(g, &recs)
	} else if g != nil && g.cg == nil {
		// An empty classic group (or offsets only) becomes a consumer
		// group, as Kafka upgrades it; its classic record goes.
		if g.generation > 0 || g.protocolType != "" {
			recs = append(recs, Record{Key: groupKey(g.id)})
		}
		g.cg = newConsumerGroup()
		g.protocolType, g.protocolName, g.generation = ConsumerProtocolType, nil, 0
	}
	if g == nil {
		g = newGroup(part, req.Group, time.Now())
		g.cg = newConsumerGroup()
		g.protocolType = ConsumerProtocolType
		part.groups[g.id] = g
	}
	cg := g.cg
	memberID := req.MemberID
	if memberID == "" {
		memberID = newConsumerMemberID()
	}
	isNew := cg.members[memberID] == nil && (req.InstanceID == nil || cg.static[*req.InstanceID] == "")
	if isNew && len(cg.members) >= int(c.cfg.ConsumerMaxSize) {
		refuse(kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity.")
		return
	}
	owned := ownedAssignment(req.Topics)
	var m *cmember
	if req.InstanceID != nil {
		old := cg.members[cg.static[*req.InstanceID]]
		snap.save(old)
		switch {
		case epoch == 0 && old == nil:
			m = cg.members[memberID]
		case epoch == 0:
			if old.epoch != staticLeaveEpoch {
				refuse(kerr.UnreleasedInstanceID.Code, "Instance id "+*req.InstanceID+" is still owned by member "+old.id+".")
				return
			}
			if old.id != memberID {
				// The restarted instance takes the old member's place
				// and partitions under its new member id.
				m = c.replaceConsumerMember(g, old, memberID, &recs)
			} else {
				m = old
			}
			m.epoch, m.prevEpoch = 0, 0
		case old == nil:
			refuse(kerr.UnknownMemberID.Code, "Instance id "+*req.InstanceID+" is unknown.")
			return
		case old.id != memberID:
			refuse(kerr.FencedInstanceID.Code, "Static member "+memberID+" was fenced by member "+old.id+".")
			return
		default:
			m = old
		}
	} else {
		m = cg.members[memberID]
		if epoch != 0 && m == nil {
			refuse(kerr.UnknownMemberID.Code, "Member "+memberID+" is not a member of group "+g.id+".")
			return
		}
	}
	snap.save(m)
	if m != nil && m.classic != nil {
		// A member of the classic protocol speaks JoinGroup/Heartbeat.
		refuse(kerr.UnknownMemberID.Code, "Member "+m.id+" uses the classic protocol.")
		return
	}
	if m != nil && epoch != 0 {
		if code, msg := m.checkEpoch(epoch, owned); code != 0 {
			refuse(code, msg)
			return
		}
	}
	bump := false
	prevAssigned := assignment(nil)
	if m == nil {
		m = &cmember{id: memberID, assigned: assignment{}, revoking: assignment{}, rebalanceTimeoutMs: -1}
		cg.addMember(m)
		bump = true
		c.logGroup(g).Info("consumer group member joined", "member_id", clip.String(memberID), "instance_id", clip.String(derefOr(req.InstanceID, "")), "client_id", clip.String(cl.ID))
	} else {
		prevAssigned = m.assigned.clone()
		if epoch == 0 && req.InstanceID == nil && m.epoch != 0 {
			// A dynamic member rejoining (after being fenced) owns
			// nothing any more: it starts over.
			c.releaseAll(cg, m)
			m.assigned, m.revoking = assignment{}, assignment{}
			m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
		}
	}
	if req.InstanceID != nil {
		cg.setStatic(*req.InstanceID, m.id)
	}
	// The member's metadata.
	before := cgMemberRecord(g.id, m)
	m.instanceID = cmp.Or(req.InstanceID, m.instanceID)
	m.rackID = cmp.Or(req.RackID, m.rackID)
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	m.assignor = cmp.Or(req.ServerAssignor, m.assignor)
	m.clientID, m.clientHost = cl.ID, cl.Host
	if req.SubscribedTopicNames != nil {
		topics := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if !slices.Equal(topics, m.topics) {
			m.topics, m.sub, bump = topics, nil, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		var next *string
		if *req.SubscribedTopicRegex != "" {
			next = req.SubscribedTopicRegex
		}
		if derefOr(next, "") != derefOr(m.regex, "") || (next == nil) != (m.regex == nil) {
			m.regex, m.re, m.sub, bump = next, re, nil, true
		}
	}
	if after := cgMemberRecord(g.id, m); bump || string(after.Value) != string(before.Value) {
		recs = append(recs, after)
	}
	c.maybeBumpAndAssign(g, bump, &recs)
	// Reconcile the member towards its target.
	beforeCur := cgCurrentRecord(g.id, m)
	c.reconcile(g, m, owned)
	if cur := cgCurrentRecord(g.id, m); string(cur.Value) != string(beforeCur.Value) || epoch == 0 {
		recs = append(recs, cur)
	}
	c.scheduleConsumerSession(g, m)

	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	_, hb := c.cfg.consumerTimeouts(g.id)
	resp.HeartbeatIntervalMillis = int32(hb.Milliseconds())
	full := epoch == 0 || (req.RebalanceTimeoutMillis != -1 && req.SubscribedTopicNames != nil && req.Topics != nil)
	if full || prevAssigned == nil || !prevAssigned.equal(m.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, id := range m.assigned.topics() {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: id, Partitions: slices.Clone(m.assigned[id])})
		}
		resp.Assignment = &a
	}
	c.writeThenReply(g, snap, recs, func(code int16) {
		if code != 0 {
			reply(heartbeatError(req.Version, code))
			return
		}
		reply(resp)
	})
}

// heartbeatError is the ConsumerGroupHeartbeat response to a change whose
// records could not be written (rolled back): the error alone, as Kafka's
// GroupCoordinatorService answers a failed write operation: no member id,
// member epoch 0, no heartbeat interval, no assignment. The member's
// epoch and assignment the change computed were undone.
func heartbeatError(version int16, code int16) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = version
	resp.ErrorCode = code
	return resp
}

// writeThenReply writes recs (if any) and calls done with the error code
// for the client once written. When the write fails, the group is rolled
// back to snap; a write that lands after an earlier one failed is
// answered COORDINATOR_NOT_AVAILABLE, its change having been rolled back
// with the earlier one.
func (c *Coordinator) writeThenReply(g *group, snap *cgSnapshot, recs []Record, done func(code int16)) {
	if len(recs) == 0 {
		done(0)
		return
	}
	c.appendRecords(g.part, recs, func(err error) {
		code := appendErrorCode(err)
		switch {
		case err != nil:
			c.logGroup(g).Warn("failed to write consumer group records; rolled back", "records", len(recs), "err", err)
			c.rollback(snap, true)
		case !snap.current():
			code = kerr.CoordinatorNotAvailable.Code
		}
		done(code)
	})
}

// ownedAssignment converts the partitions a member reports owning; nil
// when it did not report them.
func ownedAssignment(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	if ts == nil {
		return nil
	}
	a := assignment{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member
// ahead of the coordinator is fenced; one behind too, unless it is one
// bump behind and owns no more than its assignment (the response with the
// new epoch was lost).
func (m *cmember) checkEpoch(epoch int32, owned assignment) (int16, string) {
	switch {
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch.Code, "The consumer group member has a greater member epoch than the one known by the group coordinator."
	case epoch < m.epoch:
		if epoch != m.prevEpoch || !owned.subsetOf(m.assigned) {
			return kerr.FencedMemberEpoch.Code, "The consumer group member has a smaller member epoch than the one known by the group coordinator."
		}
	}
	return 0, ""
}

// subsetOf reports whether every partition of a is in b; a nil a (not
// reported) is.
func (a assignment) subsetOf(b assignment) bool {
	for id, ps := range a {
		for _, p := range ps {
			if !b.has(id, p) {
				return false
			}
		}
	}
	return true
}

// replaceConsumerMember moves the static member old to member id newID,
// keeping its partitions and target, with tombstones for the old id.
func (c *Coordinator) replaceConsumerMember(g *group, old *cmember, newID string, recs *[]Record) *cmember {
	cg := g.cg
	c.timers.Cancel(old.session)
	c.timers.Cancel(old.revocation)
	old.session, old.revocation = nil, nil
	*recs = append(*recs, memberTombstones(g.id, old.id)...)
	m := *old
	m.id = newID
	c.releaseAll(cg, old)
	cg.removeMember(old)
	cg.addMember(&m)
	c.holdAll(cg, &m)
	if t, ok := cg.target[old.id]; ok {
		cg.thaw()
		delete(cg.target, old.id)
		cg.target[newID] = t
		*recs = append(*recs, cgTargetMemberRecord(g.id, newID, t))
	}
	c.logGroup(g).Info("consumer group static member rejoined", "instance_id", clip.String(derefOr(old.instanceID, "")), "old_member_id", clip.String(old.id), "member_id", clip.String(newID))
	return &m
}

// memberTombstones are the tombstones of a member's records, in Kafka's
// order: current assignment, target assignment, metadata.
func memberTombstones(group, memberID string) []Record {
	return []Record{
		{Key: cgKey(cgCurrentAssignmentTyp, group, memberID)},
		{Key: cgKey(cgTargetMemberType, group, memberID)},
		{Key: cgKey(cgMemberMetadataType, group, memberID)},
	}
}

func (c *Coordinator) releaseAll(cg *consumerGroup, m *cmember) {
	for _, a := range []assignment{m.assigned, m.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				if cg.owners[tpKey{id, p}] == m.id {
					delete(cg.owners, tpKey{id, p})
				}
			}
		}
	}
}

func (c *Coordinator) holdAll(cg *consumerGroup, m *cmember) {
	for _, a := range []assignment{m.assigned, m.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				cg.owners[tpKey{id, p}] = m.id
			}
		}
	}
}

// topicsVersion is Topics.Version, -1 without Topics.
func (c *Coordinator) topicsVersion() int64 {
	if c.topics == nil {
		return -1
	}
	return c.topics.Version()
}

// resolvedSub is what the members of a group with the same subscribed
// topic names and regex share: that subscription resolved against the
// topics at one metadata version. A group epoch bump resolves each
// distinct subscription once per version, not each member.
type resolvedSub struct {
	key    string   // subscriptionKey
	topics []string // sorted, as the members' topics
	regex  string   // "": none
	re     *regexp.Regexp

	version  int64 // Topics.Version of byName and ids
	resolved bool
	byName   map[string]topicMeta // the subscribed topics that exist
	ids      map[topicID]bool     // the same by id; read only: shared with the assignors
}

// subscriptionKey identifies a subscription: each topic name's length and
// bytes, then the regex.
func subscriptionKey(topics []string, regex string) string {
	b := make([]byte, 0, 64)
	for _, t := range topics {
		b = strconv.AppendInt(b, int64(len(t)), 10)
		b = append(b, ':')
		b = append(b, t...)
	}
	b = append(b, '/')
	return string(append(b, regex...))
}

// regexCache holds the non-internal topic names each subscribed regex
// matches at one metadata version, for every group of the coordinator: a
// regex is matched against the topic names once per version.
type regexCache struct {
	version int64
	names   []string // Topics.Names at version, when listed
	listed  bool
	matches map[string][]string // by regex
}

// regexMatches returns the non-internal topics re matches at version;
// callers must not modify the answer.
func (c *Coordinator) regexMatches(re *regexp.Regexp, version int64) []string {
	rc := &c.regexes
	if rc.matches == nil || rc.version != version {
		*rc = regexCache{version: version, matches: map[string][]string{}}
	}
	key := re.String()
	if ms, ok := rc.matches[key]; ok {
		return ms
	}
	if !rc.listed {
		rc.names, rc.listed = c.topics.Names(), true
	}
	c.stats.regexMatches++
	var ms []string
	for _, t := range rc.names {
		if !internalTopics[t] && re.MatchString(t) {
			ms = append(ms, t)
		}
	}
	rc.matches[key] = ms
	return ms
}

// resolve returns member m's subscription resolved at topic metadata
// version: its topic names and its regex's matches among non-internal
// topics that exist. Members with the same subscription share the answer,
// computed once per version; callers must not modify it.
func (c *Coordinator) resolve(cg *consumerGroup, m *cmember, version int64) *resolvedSub {
	s := m.sub
	if s == nil {
		regex := ""
		if m.re != nil {
			regex = m.re.String()
		}
		key := subscriptionKey(m.topics, regex)
		if s = cg.subs[key]; s == nil {
			s = &resolvedSub{key: key, topics: m.topics, regex: regex, re: m.re}
			cg.subs[key] = s
		}
		m.sub = s
	}
	if s.resolved && s.version == version {
		return s
	}
	c.stats.resolves++
	s.version, s.resolved = version, true
	s.byName, s.ids = map[string]topicMeta{}, map[topicID]bool{}
	if c.topics == nil {
		return s
	}
	add := func(name string) {
		if id, n, ok := c.topics.Topic(name); ok {
			s.byName[name] = topicMeta{id, n}
			s.ids[id] = true
		}
	}
	for _, t := range s.topics {
		add(t)
	}
	if s.re != nil {
		for _, t := range c.regexMatches(s.re, version) {
			add(t)
		}
	}
	return s
}

// resolveSubscribed recomputes cg.subscribed, the topics the members
// subscribe to that exist, at version: O(members) to find the distinct
// subscriptions, each resolved once per version. It drops the cached
// subscriptions no member uses, and reports whether subscribed changed.
func (c *Coordinator) resolveSubscribed(cg *consumerGroup, version int64) bool {
	sub := make(map[string]topicMeta, len(cg.subscribed))
	live := make(map[*resolvedSub]bool, len(cg.subs))
	var last *resolvedSub
	for _, m := range cg.sortedMembers() {
		s := c.resolve(cg, m, version)
		if s == last || live[s] {
			continue
		}
		last, live[s] = s, true
		maps.Copy(sub, s.byName)
	}
	if len(live) < len(cg.subs) {
		subs := make(map[string]*resolvedSub, len(live))
		for s := range live {
			subs[s.key] = s
		}
		cg.subs = subs
	}
	cg.metaVersion = version
	if maps.Equal(sub, cg.subscribed) {
		return false
	}
	cg.subscribed = sub
	return true
}

// maybeBumpAndAssign bumps the group epoch when bump is set or the
// subscribed topics' metadata changed, and recomputes the target
// assignment when the group epoch passed the assignment epoch: once per
// bump, in O(members) besides the assignor's cost. A heartbeat that
// changes nothing, at the metadata version the group last saw, costs
// nothing here.
func (c *Coordinator) maybeBumpAndAssign(g *group, bump bool, recs *[]Record) {
	cg := g.cg
	version := c.topicsVersion()
	if (bump || version != cg.metaVersion) && c.resolveSubscribed(cg, version) {
		bump = true
	}
	if bump {
		cg.epoch++
		*recs = append(*recs, cgMetadataRecord(g.id, cg.epoch))
	}
	if cg.epoch <= cg.assignmentEpoch {
		return
	}
	c.stats.assignments++
	partitions := map[topicID]int32{}
	for _, t := range cg.subscribed {
		partitions[t.id] = t.partitions
	}
	members := cg.sortedMembers()
	ams := slices.Grow(c.scratch.ams[:0], len(members))[:len(members)]
	had := slices.Grow(c.scratch.had[:0], len(members))[:len(members)]
	defer func() {
		clear(ams) // no references kept until the next assignment
		c.scratch.ams, c.scratch.had = ams[:0], had[:0]
	}()
	var votes map[string]int
	for i, m := range members {
		// cg.subscribed is the union of these at this version.
		ams[i] = assignMember{id: m.id, topics: c.resolve(cg, m, version).ids, rack: derefOr(m.rackID, "")}
		ams[i].prev, had[i] = cg.target[m.id]
		if m.assignor != nil {
			if votes == nil {
				votes = map[string]int{}
			}
			votes[*m.assignor]++
		}
	}
	// The assignor most members name, else the first configured.
	name := c.cfg.ConsumerAssignors[0]
	for _, a := range c.cfg.ConsumerAssignors {
		if votes[a] > votes[name] {
			name = a
		}
	}
	var racks rackFunc
	if c.topics != nil {
		racks = func(id topicID, p int32) []string { return c.topics.Racks(id, p) }
	}
	next := assignors[name](ams, partitions, racks)
	for i, am := range ams {
		a := next[i]
		if had[i] && am.prev.equal(a) {
			continue // unchanged: no record
		}
		if a == nil {
			a = assignment{}
		}
		*recs = append(*recs, cgTargetMemberRecord(g.id, am.id, a))
		cg.setTarget(am.id, a)
	}
	cg.assignmentEpoch = cg.epoch
	cg.assignorName = name
	*recs = append(*recs, cgTargetMetadataRecord(g.id, cg.assignmentEpoch))
	c.logGroup(g).Info("consumer group target assignment", "epoch", cg.epoch, "assignor", name, "members", len(cg.members), "topics", len(partitions))
}

// reconcile moves m towards its target assignment, as Kafka's
// CurrentAssignmentBuilder; owned is what the member reported owning (nil:
// not reported).
func (c *Coordinator) reconcile(g *group, m *cmember, owned assignment) {
	cg := g.cg
	if m.epoch == staticLeaveEpoch {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == cg.assignmentEpoch {
			return
		}
	case memberUnrevoked:
		if owned == nil || owned.overlaps(m.revoking) {
			return // still revoking
		}
	}
	c.releaseAll(cg, m)
	target := cg.target[m.id]
	assigned, revoke, pending := assignment{}, assignment{}, assignment{}
	unreleased := false
	for id, ps := range m.assigned {
		for _, p := range ps {
			if target.has(id, p) {
				assigned.add(id, p)
			} else {
				revoke.add(id, p)
			}
		}
	}
	for id, ps := range target {
		for _, p := range ps {
			if m.assigned.has(id, p) {
				continue
			}
			if holder := cg.owners[tpKey{id, p}]; holder != "" && holder != m.id {
				unreleased = true
				continue
			}
			pending.add(id, p)
		}
	}
	m.revoking = assignment{}
	switch {
	case revoke.size() > 0:
		m.state = memberUnrevoked
		m.prevEpoch = m.epoch
		m.assigned, m.revoking = assigned, revoke
	default:
		for id, ps := range pending {
			for _, p := range ps {
				assigned.add(id, p)
			}
		}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
		m.assigned = assigned
	}
	c.holdAll(cg, m)
	c.scheduleRevocation(g, m)
}

// scheduleRevocation gives a member revoking its rebalance timeout to do
// so, and cancels that timer once it is not revoking.
func (c *Coordinator) scheduleRevocation(g *group, m *cmember) {
	cg := g.cg
	if m.state != memberUnrevoked {
		c.timers.Cancel(m.revocation)
		m.revocation = nil
		return
	}
	if m.revocation != nil || m.rebalanceTimeoutMs <= 0 {
		return
	}
	epoch := m.epoch
	m.revocation = c.timers.Schedule(time.Now().Add(durationMs(m.rebalanceTimeoutMs)), func() {
		m.revocation = nil
		if g.cg == cg && cg.members[m.id] == m && m.state == memberUnrevoked && m.epoch == epoch {
			c.logGroup(g).Info("consumer group member did not revoke in time", "member_id", clip.String(m.id), "rebalance_timeout_ms", m.rebalanceTimeoutMs)
			c.fenceConsumerMember(g, m)
		}
	})
}

func (a assignment) overlaps(b assignment) bool {
	for id, ps := range b {
		for _, p := range ps {
			if a.has(id, p) {
				return true
			}
		}
	}
	return false
}

// scheduleConsumerSession restarts m's session
// (group.consumer.session.timeout.ms, or the group's
// consumer.session.timeout.ms).
func (c *Coordinator) scheduleConsumerSession(g *group, m *cmember) {
	c.timers.Cancel(m.session)
	cg := g.cg
	session, _ := c.cfg.consumerTimeouts(g.id)
	if m.classic != nil {
		session = durationMs(m.classic.sessionTimeoutMs)
	}
	m.session = c.timers.Schedule(time.Now().Add(session), func() {
		m.session = nil
		if g.cg == cg && cg.members[m.id] == m && c.owns(g.part) {
			c.logGroup(g).Info("consumer group member session expired", "member_id", clip.String(m.id), "session_timeout", session)
			c.fenceConsumerMember(g, m)
		}
	})
}

// removeConsumerMember drops m, frees its partitions and bumps the group
// epoch; it returns the records to write.
func (c *Coordinator) removeConsumerMember(g *group, m *cmember) []Record {
	cg := g.cg
	c.timers.Cancel(m.session)
	c.timers.Cancel(m.revocation)
	m.session, m.revocation = nil, nil
	c.releaseAll(cg, m)
	cg.removeMember(m) // thaws
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	cg.epoch++
	recs := memberTombstones(g.id, m.id)
	recs = append(recs, cgMetadataRecord(g.id, cg.epoch))
	if len(cg.members) == 0 {
		g.stateTimestamp = time.Now().UnixMilli() // offsets expire from here
	}
	return recs
}

// fenceConsumerMember removes m after its session or rebalance timeout.
// If the removal cannot be written the member is put back, with a new
// session: it is removed again when that expires.
func (c *Coordinator) fenceConsumerMember(g *group, m *cmember) {
	snap := c.snapshotConsumer(g.part, g.id)
	snap.save(m)
	recs := c.removeConsumerMember(g, m)
	if m.classic == nil {
		c.maybeDowngrade(g, &recs)
	}
	c.appendRecords(g.part, recs, func(err error) {
		if err != nil {
			c.logGroup(g).Warn("failed to write the removal of a consumer group member; rolled back", "member_id", clip.String(m.id), "err", err)
			c.rollback(snap, true)
		}
	})
}

// consumerLeave handles a heartbeat with epoch -1 (leave) or -2 (a static
// member leaving for now: it keeps its partitions until its session
// expires or its instance rejoins).
func (c *Coordinator) consumerLeave(g *group, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	cg := g.cg
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		reply(resp)
	}
	m := cg.members[req.MemberID]
	if req.InstanceID != nil {
		old := cg.members[cg.static[*req.InstanceID]]
		switch {
		case old == nil:
			fail(kerr.UnknownMemberID.Code, "Instance id "+*req.InstanceID+" is unknown.")
			return
		case old.id != req.MemberID:
			fail(kerr.FencedInstanceID.Code, "Static member "+req.MemberID+" was fenced by member "+old.id+".")
			return
		}
		m = old
	}
	if m == nil || m.classic != nil {
		fail(kerr.UnknownMemberID.Code, "Member "+req.MemberID+" is not a member of group "+g.id+".")
		return
	}
	resp.MemberID = &m.id
	resp.MemberEpoch = req.MemberEpoch
	snap := c.snapshotConsumer(g.part, g.id)
	snap.save(m)
	var recs []Record
	if req.MemberEpoch == staticLeaveEpoch && m.instanceID != nil {
		m.prevEpoch, m.epoch = m.epoch, staticLeaveEpoch
		c.timers.Cancel(m.revocation)
		m.revocation = nil
		recs = append(recs, cgCurrentRecord(g.id, m))
		c.logGroup(g).Info("consumer group static member left for now", "member_id", clip.String(m.id), "instance_id", clip.String(*m.instanceID))
	} else {
		recs = c.removeConsumerMember(g, m)
		c.logGroup(g).Info("consumer group member left", "member_id", clip.String(m.id))
		c.maybeDowngrade(g, &recs)
	}
	c.writeThenReply(g, snap, recs, func(code int16) {
		if code != 0 {
			reply(heartbeatError(req.Version, code))
			return
		}
		reply(resp)
	})
}

// isSubscribedToTopic reports whether a member of cg subscribes to topic
// (as resolved at the last metadata check).
func (cg *consumerGroup) isSubscribedToTopic(topic string) bool {
	_, ok := cg.subscribed[topic]
	return ok
}

// validateOffsetCommit is Kafka's ConsumerGroup.validateOffsetCommit:
// generation is the member epoch. A commit with a negative epoch to an
// empty group stores offsets only; members must commit with their current
// epoch (STALE_MEMBER_EPOCH otherwise; before OffsetCommit v9, which
// members of the consumer protocol do not use, UNSUPPORTED_VERSION).
func (cg *consumerGroup) validateOffsetCommit(memberID string, epoch int32, version int16, txn bool) int16 {
	if epoch < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.classic != nil {
		// A classic member commits with its generation, the member
		// epoch its last JoinGroup gave it.
		if epoch != m.epoch {
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	if !txn && version < 9 {
		return kerr.UnsupportedVersion.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateOffsetFetch is Kafka's ConsumerGroup.validateOffsetFetch (v9+):
// a fetch without member id and with a negative epoch is accepted.
func (cg *consumerGroup) validateOffsetFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	m := cg.members[derefOr(memberID, "")]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerDescribe handles ConsumerGroupDescribe v0-v1.
func (c *Coordinator) consumerDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = req.Version
	toKmsg := func(a assignment) kmsg.Assignment {
		out := kmsg.NewAssignment()
		for _, id := range a.topics() {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID = id
			if c.topics != nil {
				tp.Topic, _ = c.topics.TopicName(id)
			}
			tp.Partitions = slices.Clone(a[id])
			out.TopicPartitions = append(out.TopicPartitions, tp)
		}
		return out
	}
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		part, code := c.partitionOf(id)
		if code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g := part.groups[id]
		if g == nil || g.cg == nil || g.state == stateDead {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " not found."
			if g != nil && g.cg == nil && g.state != stateDead {
				msg = "Group " + id + " is not a consumer group."
			}
			dg.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		cg := g.cg
		dg.State = cg.state()
		dg.Epoch = cg.epoch
		dg.AssignmentEpoch = cg.assignmentEpoch
		dg.AssignorName = cmp.Or(cg.assignorName, c.cfg.ConsumerAssignors[0])
		for _, m := range cg.sortedMembers() {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID = m.id
			dm.InstanceID = m.instanceID
			dm.RackID = m.rackID
			dm.MemberEpoch = m.epoch
			dm.ClientID = m.clientID
			dm.ClientHost = m.clientHost
			dm.SubscribedTopics = slices.Clone(m.topics)
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.SubscribedTopicRegex = m.regex
			dm.Assignment = toKmsg(m.assigned)
			dm.TargetAssignment = toKmsg(cg.target[m.id])
			dm.MemberType = 1 // v1: the consumer protocol (0: classic)
			if m.classic != nil {
				dm.MemberType = 0
			}
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
