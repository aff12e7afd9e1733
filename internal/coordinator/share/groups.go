package share

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	gcoord "github.com/samsahq/samsa/internal/coordinator/group"
)

// Defaults of the broker configs of share groups (Kafka 4.2's
// ShareGroupConfig and GroupCoordinatorConfig).
const (
	DefaultLockDuration      = 30 * time.Second // group.share.record.lock.duration.ms
	DefaultDeliveryLimit     = 5                // group.share.delivery.count.limit
	DefaultMaxLocks          = 2000             // group.share.partition.max.record.locks
	DefaultSessionTimeout    = 45 * time.Second // group.share.session.timeout.ms
	DefaultHeartbeatInterval = 5 * time.Second  // group.share.heartbeat.interval.ms
)

// Settings are the configs in effect for one share group (the broker's
// group.share.* properties with the group's share.* overrides); zero
// fields mean Kafka's defaults.
type Settings struct {
	LockDuration      time.Duration // share.record.lock.duration.ms
	DeliveryLimit     int16         // share.delivery.count.limit
	MaxLocks          int           // group.share.partition.max.record.locks
	SessionTimeout    time.Duration // share.session.timeout.ms
	HeartbeatInterval time.Duration // share.heartbeat.interval.ms
}

func (s Settings) withDefaults() Settings {
	if s.LockDuration <= 0 {
		s.LockDuration = DefaultLockDuration
	}
	if s.DeliveryLimit <= 0 {
		s.DeliveryLimit = DefaultDeliveryLimit
	}
	if s.MaxLocks <= 0 {
		s.MaxLocks = DefaultMaxLocks
	}
	if s.SessionTimeout <= 0 {
		s.SessionTimeout = DefaultSessionTimeout
	}
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = DefaultHeartbeatInterval
	}
	return s
}

func (s Settings) partitionConfig() PartitionConfig {
	return PartitionConfig{LockDuration: s.LockDuration, DeliveryLimit: s.DeliveryLimit, MaxLocks: s.MaxLocks}
}

// Topics resolves subscribed topic names for the assignor.
type Topics interface {
	// Lookup returns a topic's id and partition count; ok false when the
	// topic does not exist.
	Lookup(name string) (id [16]byte, partitions int32, ok bool)
}

type member struct {
	id         string
	epoch      int32
	prevEpoch  int32 // the epoch before the last bump, accepted too (a lost response)
	rack       *string
	clientID   string
	clientHost string
	topics     []string // subscribed, sorted
	assigned   map[[16]byte][]int32
	names      map[[16]byte]string // topic names of assigned
	lastSeen   time.Time
	timer      *time.Timer // removes the member when its session times out
}

type group struct {
	id          string
	epoch       int32
	assignEpoch int32 // the group epoch of the latest assignment given
	members     map[string]*member
	// initialized are the topics whose share-partitions the group
	// started (ShareGroupStatePartitionMetadata), by topic id.
	initialized map[[16]byte]*gcoord.ShareTopic
	// dirty: a write of the group's records failed; the next one
	// rewrites them all (journal.go), with tombstones for gone.
	dirty bool
	gone  map[string]bool // members removed by writes that failed
}

func newGroup(id string) *group {
	return &group{id: id, members: map[string]*member{}, initialized: map[[16]byte]*gcoord.ShareTopic{}, gone: map[string]bool{}}
}

// Client identifies the connection a heartbeat came from.
type Client struct{ ID, Host string }

// Coordinator keeps share groups: their members and assignments
// (ShareGroupHeartbeat, ShareGroupDescribe), the share
// sessions of this broker and the share-partitions it leads. Membership is
// kept on the broker the client's FindCoordinator named and, with a
// Journal (SetJournal), written to __consumer_offsets in Kafka's records
// and loaded by the group's next coordinator (journal.go). Safe for
// concurrent use.
type Coordinator struct {
	topics   Topics
	settings func(group string) Settings

	mu       sync.Mutex // guards the fields below
	groups   map[string]*group
	parts    map[partKey]*Partition
	sessions map[sessionKey]*Session
	owners   map[sessionKey]any // the connection a member's share session was opened on
	onLeave  func(group, member string)
	journal  Journal
	loaded   map[int32]bool  // partitions of __consumer_offsets loaded (with a journal)
	queue    []*pendingWrite // writes not yet handed to the journal, in order
	flushing bool            // a flush is handing the queue to the journal
	claims   map[string]int  // group ids claimed by requests that may create them (Claim)
}

// OnMemberLeave sets f to be called, on a goroutine of its own, for each
// member that leaves its group (a heartbeat with epoch -1) or is removed
// when its session times out, so that what it holds is released.
func (c *Coordinator) OnMemberLeave(f func(group, member string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLeave = f
}

// leftLocked reports member's departure to the OnMemberLeave function.
func (c *Coordinator) leftLocked(group, member string) {
	if f := c.onLeave; f != nil {
		go f(group, member)
	}
}

type partKey struct {
	group, topic string
	partition    int32
}

// New returns a coordinator; topics resolves subscriptions, settings
// gives the configs in effect for a group (nil: Kafka's defaults for all);
// settings is called with the coordinator's lock held and must not call
// back into it.
func New(topics Topics, settings func(group string) Settings) *Coordinator {
	if settings == nil {
		settings = func(string) Settings { return Settings{} }
	}
	return &Coordinator{topics: topics, settings: settings, groups: map[string]*group{},
		parts: map[partKey]*Partition{}, sessions: map[sessionKey]*Session{}, owners: map[sessionKey]any{},
		loaded: map[int32]bool{}}
}

// Settings returns the configs in effect for groupID, defaults applied.
func (c *Coordinator) Settings(groupID string) Settings { return c.settings(groupID).withDefaults() }

// Partition returns the share-partition of groupID for topic/partition,
// creating it when create is set (nil otherwise when missing).
// Its limits are refreshed from the group's settings.
func (c *Coordinator) Partition(groupID, topic string, partition int32, create bool) *Partition {
	pc := c.Settings(groupID).partitionConfig()
	c.mu.Lock()
	k := partKey{groupID, topic, partition}
	p := c.parts[k]
	if p == nil && create {
		p = NewPartition(pc)
		c.parts[k] = p
	}
	c.mu.Unlock()
	if p != nil {
		p.SetConfig(pc)
	}
	return p
}

// PartitionRef names a share-partition.
type PartitionRef struct {
	Group, Topic string
	Partition    int32
}

// Partitions returns the share-partitions of groupID this broker keeps
// (all groups when groupID is ""), sorted.
func (c *Coordinator) Partitions(groupID string) []PartitionRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PartitionRef
	for k := range c.parts {
		if groupID == "" || k.group == groupID {
			out = append(out, PartitionRef{k.group, k.topic, k.partition})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// DropPartition forgets a share-partition (DeleteShareGroupOffsets,
// DeleteGroups, a topic deleted).
func (c *Coordinator) DropPartition(groupID, topic string, partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, partKey{groupID, topic, partition})
}

// DropGroupPartitions forgets every share-partition of groupID this
// broker keeps (the group deleted on its coordinator).
func (c *Coordinator) DropGroupPartitions(groupID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.parts {
		if k.group == groupID {
			delete(c.parts, k)
		}
	}
}

// newMemberID returns a random 22-character member id (a base64 UUID, as
// Kafka's).
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// expireLocked removes the members of g whose session timed out, and
// queues the write of their removal (flushed by the caller).
func (c *Coordinator) expireLocked(g *group, now time.Time) {
	timeout := c.Settings(g.id).SessionTimeout
	var recs []gcoord.ShareRecord
	var removed []string
	for id, m := range g.members {
		if now.Sub(m.lastSeen) > timeout {
			recs = append(recs, c.removeLocked(g, m)...)
			removed = append(removed, id)
		}
	}
	c.writeLocked(g, recs, removed)
}

// removeLocked removes m from g (it left or timed out), bumps the group
// epoch and returns the records of the change: m's tombstones and the
// group's epoch, as Kafka's shareGroupFenceMember.
func (c *Coordinator) removeLocked(g *group, m *member) []gcoord.ShareRecord {
	m.stopTimer()
	delete(g.members, m.id)
	g.epoch++
	c.leftLocked(g.id, m.id)
	return append(memberTombstones(g.id, m.id), metadataRecord(g))
}

// expireGroup removes the members of groupID whose session timed out.
func (c *Coordinator) expireGroup(groupID string) {
	c.mu.Lock()
	defer c.unlockFlush()
	if g := c.groups[groupID]; g != nil {
		c.expireLocked(g, time.Now())
	}
}

func (m *member) stopTimer() {
	if m.timer != nil {
		m.timer.Stop()
	}
}

// assignLocked returns the target assignment of m: every partition of
// every topic it subscribes to, as Kafka's SimpleAssignor gives a share
// group whose members all subscribe to the same topics.
func (c *Coordinator) assignLocked(m *member) (map[[16]byte][]int32, map[[16]byte]string) {
	out := map[[16]byte][]int32{}
	names := map[[16]byte]string{}
	for _, t := range m.topics {
		id, n, ok := c.topics.Lookup(t)
		if !ok {
			continue
		}
		names[id] = t
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		out[id] = ps
	}
	return out, names
}

func sameAssignment(a, b map[[16]byte][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// IsShareGroup reports whether groupID is a share group this coordinator
// knows (with members, or configs set).
func (c *Coordinator) IsShareGroup(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.groups[groupID]
	return ok
}

// Claim makes Holds(groupID) true until release is called (once; later
// calls do nothing), for a request that may create share group groupID:
// claimed before it asks the group coordinator whether a classic or
// consumer group holds the id, so that the group coordinator, which asks
// Holds before it creates such a group, cannot create one between that
// answer and the share group's creation. One id is one group, as in
// Kafka, whose group coordinator checks and creates on one thread. Claims
// of one id nest.
func (c *Coordinator) Claim(groupID string) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claims == nil {
		c.claims = map[string]int{}
	}
	c.claims[groupID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.claims[groupID]--; c.claims[groupID] <= 0 {
				delete(c.claims, groupID)
			}
		})
	}
}

// Holds reports whether groupID is a share group here or claimed by a
// request that may create it (Claim): what the group coordinator asks
// before it creates a classic or consumer group (group.Config.ShareGroup).
func (c *Coordinator) Holds(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.groups[groupID]
	return ok || c.claims[groupID] > 0
}

// Heartbeat answers ShareGroupHeartbeat (API 76, v0-1, KIP-932): epoch 0
// joins (v1: with the member id the client chose; v0: the coordinator
// chooses), -1 leaves, a positive epoch heartbeats and may change the
// subscription. Errors: INVALID_REQUEST for a missing group id or member
// id (of any length otherwise, as Kafka), an empty rack id, or no
// subscribed topic on join; UNKNOWN_MEMBER_ID; FENCED_MEMBER_EPOCH for an
// epoch other than the member's or its previous one (a response lost, as
// Kafka accepts it); GROUP_ID_NOT_FOUND when isOther reports a group of
// another type under the id; with a Journal, COORDINATOR_LOAD_IN_PROGRESS
// while the group's partition loads and the write's error
// (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) when the records of a
// change cannot be written; the answer waits for them. A member that
// leaves is reported to the function set by OnMemberLeave (its records are
// released there).
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest, cl Client, isOther func(string) bool) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	// Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, in its order.
	switch {
	case req.Version >= 1 && req.MemberID == "":
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.GroupID == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest, "RackId can't be empty.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	if isOther != nil && isOther(req.GroupID) {
		return fail(kerr.GroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
	}
	c.mu.Lock()
	done, code := c.heartbeatLocked(req, cl, resp)
	c.unlockFlush()
	if code != 0 {
		return fail(kerr.ErrorForCode(code).(*kerr.Error), "")
	}
	if err := wait(ctx, done); err != nil {
		resp = req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		return fail(kerr.ErrorForCode(errorCode(err)).(*kerr.Error), "")
	}
	return resp
}

// heartbeatLocked applies a heartbeat to its group and fills resp; it
// returns the channel of the write of its records, or an error code.
func (c *Coordinator) heartbeatLocked(req *kmsg.ShareGroupHeartbeatRequest, cl Client, resp *kmsg.ShareGroupHeartbeatResponse) (chan error, int16) {
	if err := c.loadingLocked(req.GroupID); err != nil {
		return nil, err.Code
	}
	now := time.Now()
	var recs []gcoord.ShareRecord
	var removed []string
	joined := false // m joins with this heartbeat
	g := c.groups[req.GroupID]
	if g == nil {
		if req.MemberEpoch != 0 {
			return nil, kerr.UnknownMemberID.Code
		}
		g = newGroup(req.GroupID)
		c.groups[req.GroupID] = g
		recs = append(recs, metadataRecord(g))
	}
	c.expireLocked(g, now)
	resp.HeartbeatIntervalMillis = int32(c.Settings(g.id).HeartbeatInterval.Milliseconds())
	m := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == -1:
		if m == nil {
			// Kafka's shareGroupLeave: getOrMaybeCreateMember(id, false).
			return nil, kerr.UnknownMemberID.Code
		}
		recs = append(recs, c.removeLocked(g, m)...)
		removed = append(removed, m.id)
		resp.MemberID, resp.MemberEpoch = &req.MemberID, -1
		return c.writeLocked(g, recs, removed), 0
	case req.MemberEpoch == 0:
		id := req.MemberID
		if id == "" {
			id = newMemberID()
		}
		if m = g.members[id]; m == nil {
			m = &member{id: id} // its subscription, required on join, bumps the group epoch
			g.members[id] = m
			joined = !g.gone[id]
			delete(g.gone, id)
		}
		m.assigned = nil // a rejoin gets the full assignment
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
		return nil, kerr.FencedMemberEpoch.Code
	}
	before := memberRecord(g.id, m)
	m.lastSeen, m.rack, m.clientID, m.clientHost = now, req.RackID, cl.ID, cl.Host
	// A member that stops heartbeating is removed when its session
	// times out, even if nothing else calls on the group, so that what it
	// holds is released (OnMemberLeave).
	timeout := c.Settings(g.id).SessionTimeout + time.Millisecond
	if m.timer == nil {
		gid := g.id
		m.timer = time.AfterFunc(timeout, func() { c.expireGroup(gid) })
	} else {
		m.timer.Reset(timeout)
	}
	bumped := false
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			g.epoch++
			bumped = true
		}
	}
	if after := memberRecord(g.id, m); !sameMemberRecord(before, after) {
		recs = append(recs, after)
	}
	if bumped {
		recs = append(recs, metadataRecord(g))
	}
	target, names := c.assignLocked(m)
	if m.assigned == nil || !sameAssignment(target, m.assigned) || m.epoch != g.epoch {
		if m.epoch != g.epoch {
			m.prevEpoch = m.epoch
		}
		m.assigned, m.names, m.epoch = target, names, g.epoch
		ar := assignmentRecords(g, m)
		recs = append(recs, ar[0])
		if g.assignEpoch != g.epoch {
			g.assignEpoch = g.epoch
			recs = append(recs, gcoord.ShareRecord{Type: gcoord.ShareTargetMetadataType, Group: g.id, Epoch: g.assignEpoch})
		}
		recs = append(recs, ar[1])
		recs = append(recs, c.initializeLocked(g, target, names)...)
		resp.Assignment = assignmentOf(target)
	} else if req.MemberEpoch != m.epoch {
		resp.Assignment = assignmentOf(target) // its last response was lost
	}
	resp.MemberID, resp.MemberEpoch = &m.id, m.epoch
	done := c.writeLocked(g, recs, removed)
	if done != nil {
		w := c.queue[len(c.queue)-1]
		w.member, w.joined = m, joined
	}
	return done, 0
}

// assignmentOf is the assignment of a ShareGroupHeartbeat response.
func assignmentOf(target map[[16]byte][]int32) *kmsg.ShareGroupHeartbeatResponseAssignment {
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	ids := make([][16]byte, 0, len(target))
	for id := range target {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	for _, id := range ids {
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = id, target[id]
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return &a
}

// sameMemberRecord reports whether two member metadata records hold the
// same values.
func sameMemberRecord(a, b gcoord.ShareRecord) bool {
	return (a.RackID == nil) == (b.RackID == nil) && (a.RackID == nil || *a.RackID == *b.RackID) &&
		a.ClientID == b.ClientID && a.ClientHost == b.ClientHost && slices.Equal(a.Topics, b.Topics)
}

// Describe answers one group of ShareGroupDescribe (API 77, v0-1):
// GROUP_ID_NOT_FOUND for a group this coordinator does not know. names
// maps topic ids to names for the subscriptions shown.
func (c *Coordinator) Describe(groupID string) kmsg.ShareGroupDescribeResponseGroup {
	g := kmsg.NewShareGroupDescribeResponseGroup()
	g.GroupID = groupID
	c.mu.Lock()
	defer c.unlockFlush()
	if err := c.loadingLocked(groupID); err != nil {
		g.ErrorCode = err.Code
		return g
	}
	sg := c.groups[groupID]
	if sg == nil {
		g.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + groupID + " not found."
		g.ErrorMessage = &msg
		return g
	}
	c.expireLocked(sg, time.Now())
	g.GroupState = "Empty"
	if len(sg.members) > 0 {
		g.GroupState = "Stable"
	}
	g.GroupEpoch, g.AssignmentEpoch, g.Assignor = sg.epoch, sg.assignEpoch, "simple"
	ids := make([]string, 0, len(sg.members))
	for id := range sg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := sg.members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.rack, m.epoch, m.clientID, m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.topics)
		for tid, ps := range m.assigned {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = tid, m.names[tid], slices.Clone(ps)
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		g.Members = append(g.Members, dm)
	}
	return g
}

// Listing is a share group as ListGroups shows it.
type Listing struct {
	Group string
	State string // Empty or Stable
}

// List returns the share groups of this coordinator, sorted.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	defer c.unlockFlush()
	now := time.Now()
	out := make([]Listing, 0, len(c.groups))
	for id, g := range c.groups {
		c.expireLocked(g, now)
		st := "Empty"
		if len(g.members) > 0 {
			st = "Stable"
		}
		out = append(out, Listing{id, st})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Delete deletes a share group with no members (DeleteGroups) and the
// share-partitions this broker keeps for it (its group configs stay in the
// metadata image), writing the tombstones of its records as Kafka's
// ShareGroup.createGroupTombstoneRecords: GROUP_ID_NOT_FOUND when
// unknown, NON_EMPTY_GROUP with members, COORDINATOR_LOAD_IN_PROGRESS
// while its partition loads, the write's error (the group then stays).
func (c *Coordinator) Delete(ctx context.Context, groupID string) error {
	g, err := c.lockGroup(groupID)
	if err != nil {
		return err
	}
	c.expireLocked(g, time.Now())
	if len(g.members) > 0 {
		c.unlockFlush()
		return kerr.NonEmptyGroup
	}
	var recs []gcoord.ShareRecord
	for _, id := range slices.Sorted(maps.Keys(g.gone)) {
		recs = append(recs, memberTombstones(g.id, id)...)
	}
	recs = append(recs,
		gcoord.ShareRecord{Type: gcoord.ShareTargetMetadataType, Group: g.id, Tombstone: true},
		gcoord.ShareRecord{Type: gcoord.ShareStatePartitionsType, Group: g.id, Tombstone: true},
		gcoord.ShareRecord{Type: gcoord.ShareMetadataType, Group: g.id, Tombstone: true})
	g.dirty = false // the tombstones are what the log must hold
	done := c.writeLocked(g, recs, nil)
	delete(c.groups, groupID)
	parts := map[partKey]*Partition{}
	for k, p := range c.parts {
		if k.group == groupID {
			parts[k] = p
			delete(c.parts, k)
		}
	}
	c.unlockFlush()
	if err := wait(ctx, done); err != nil {
		c.mu.Lock()
		if c.groups[groupID] == nil {
			c.groups[groupID] = g
			g.dirty = true
			for k, p := range parts {
				if c.parts[k] == nil {
					c.parts[k] = p
				}
			}
		}
		c.mu.Unlock()
		return err
	}
	return nil
}

// HasMembers reports whether groupID has live members (offsets can be
// altered only without).
func (c *Coordinator) HasMembers(groupID string) bool {
	c.mu.Lock()
	defer c.unlockFlush()
	g := c.groups[groupID]
	if g == nil {
		return false
	}
	c.expireLocked(g, time.Now())
	return len(g.members) > 0
}
