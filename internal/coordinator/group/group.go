package group

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/deadline"
)

// state is a classic group's state, as Kafka's ClassicGroupState.
type state int8

const (
	// stateEmpty: no members; the group may still have committed offsets.
	stateEmpty state = iota
	// statePreparingRebalance: members must (re)join; JoinGroup requests
	// are parked until all known members joined or the rebalance timeout.
	statePreparingRebalance
	// stateCompletingRebalance: the join responses went out; waiting for
	// the leader's SyncGroup with the assignment.
	stateCompletingRebalance
	// stateStable: assignment propagated; members heartbeat.
	stateStable
	// stateDead: removed (unloaded, or being deleted until its tombstones
	// are written).
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String returns Kafka's name of the state, as DescribeGroups and
// ListGroups report it.
func (s state) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// tp is a topic partition whose offset a group committed.
type tp struct {
	topic     string
	partition int32
}

func compareTP(a, b tp) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// offsetEntry is a committed offset (OffsetCommitValue).
type offsetEntry struct {
	offset          int64
	leaderEpoch     int32  // -1: none
	metadata        string //
	commitTimestamp int64  // milliseconds since the epoch
	expireTimestamp int64  // milliseconds since the epoch; -1: none (v2+ semantics)
}

// protocol is one (name, metadata) a member supports, in preference order.
type protocol struct {
	name     string
	metadata []byte
}

// joinWaiter is a parked JoinGroup request.
type joinWaiter struct {
	version int16
	answer  func(*kmsg.JoinGroupResponse)
}

// reply answers the request with r in the request's version, whatever
// path built r: librdkafka decodes by the version it sent.
func (w *joinWaiter) reply(r *kmsg.JoinGroupResponse) {
	r.Version = w.version
	w.answer(r)
}

// syncWaiter is a parked SyncGroup request.
type syncWaiter struct {
	version int16
	answer  func(*kmsg.SyncGroupResponse)
}

// reply answers the request with r in the request's version.
func (w *syncWaiter) reply(r *kmsg.SyncGroupResponse) {
	r.Version = w.version
	w.answer(r)
}

// member is one member of a classic group.
type member struct {
	id                 string
	instanceID         *string // static membership (KIP-345)
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	assignment         []byte // never nil once assigned

	join *joinWaiter // non-nil while a JoinGroup is parked
	sync *syncWaiter // non-nil while a SyncGroup is parked

	// isNew: joined in the current rebalance and not yet past it; such a
	// member expires after NewMemberJoinTimeout even while parked.
	isNew     bool
	heartbeat *deadline.Timer
	seq       uint64 // order of joining, for deterministic iteration
}

func (m *member) sessionTimeout() time.Duration {
	return time.Duration(m.sessionTimeoutMs) * time.Millisecond
}

// matches reports whether ps equals the member's protocols, names and
// metadata in order.
func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].name || !bytes.Equal(p.Metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// metadata returns the member's metadata for protocol name, or an empty
// non-nil slice.
func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			if p.metadata == nil {
				return []byte{}
			}
			return p.metadata
		}
	}
	return []byte{}
}

// hasSatisfiedHeartbeat is Kafka's rule at a heartbeat deadline: a member
// parked in JoinGroup or SyncGroup is alive, unless it is new.
func (m *member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return false
	}
	return m.join != nil || m.sync != nil
}

func cloneProtocols(ps []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		out[i] = protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)}
		if out[i].metadata == nil {
			out[i].metadata = []byte{}
		}
	}
	return out
}

// group is a classic group and its committed offsets. All fields are owned
// by the coordinator's run goroutine.
type group struct {
	id   string
	part *partition

	state, prevState state
	stateTimestamp   int64 // milliseconds of the last transition; -1: unknown
	generation       int32
	protocolType     string  // "": none (offsets-only group)
	protocolName     *string // selected protocol; nil outside a generation
	leader           string  // "": none

	members     map[string]*member
	static      map[string]string          // group.instance.id -> member id
	pending     map[string]*deadline.Timer // KIP-394 member ids given out, not yet joined
	pendingSync map[string]bool            // members that joined and have not synced
	supported   map[string]int             // protocol name -> members supporting it

	newMemberAdded bool            // a member joined during the initial rebalance delay
	joinTimer      *deadline.Timer // rebalance timeout, or initial delay
	syncTimer      *deadline.Timer // pending sync expiry

	// subscribed is the union of the members' subscribed topics for the
	// consumer protocol; nil when not known.
	subscribed map[string]bool

	offsets        map[tp]offsetEntry
	pendingCommits map[tp]int // commits being written, per partition
	// pendingTxnOffsets are the offsets committed by open transactions, by
	// producer id, applied by their COMMIT marker (txn.go).
	pendingTxnOffsets map[int64]map[tp]offsetEntry

	// cg is set for a KIP-848 consumer group (consumer.go): the classic
	// fields above then describe an empty group holding its offsets.
	cg *consumerGroup
	// writeEpoch is bumped when a failed write rolls the consumer group
	// back (rollback.go).
	writeEpoch uint64
}

func newGroup(part *partition, id string, now time.Time) *group {
	return &group{
		id:             id,
		part:           part,
		state:          stateEmpty,
		prevState:      stateEmpty,
		stateTimestamp: now.UnixMilli(),
		members:        map[string]*member{},
		static:         map[string]string{},
		pending:        map[string]*deadline.Timer{},
		pendingSync:    map[string]bool{},
		supported:      map[string]int{},
		offsets:        map[tp]offsetEntry{},
		pendingCommits: map[tp]int{},
	}
}

func (g *group) transition(s state, now time.Time) {
	g.prevState = g.state
	g.state = s
	g.stateTimestamp = now.UnixMilli()
}

// sortedMembers returns the members in joining order.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var max int32
	for _, m := range g.members {
		max = maxOf(max, m.rebalanceTimeoutMs)
	}
	return time.Duration(max) * time.Millisecond
}

func maxOf[T cmp.Ordered](a, b T) T {
	if a > b {
		return a
	}
	return b
}

// canRebalance: the states from which PreparingRebalance may be entered.
func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

func (g *group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.join != nil {
			n++
		}
	}
	return n
}

// hasAllMembersJoined: every member is parked in JoinGroup and no member id
// given out by MEMBER_ID_REQUIRED is still outstanding.
func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaitingJoin() && len(g.pending) == 0
}

// supportsProtocols is Kafka's check that a joining member can be part of
// the group: any type and protocols for an empty group, else the group's
// protocol type and a protocol that all members support.
func (g *group) supportsProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == stateEmpty {
		return protocolType != "" && len(ps) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range ps {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols all members support, the one
// most members prefer (each votes for its first candidate); ties go to the
// earliest member's preference. The group must have members.
func (g *group) selectProtocol() string {
	candidates := map[string]bool{}
	for name, n := range g.supported {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	ms := g.sortedMembers()
	for _, m := range ms {
		for _, p := range m.protocols {
			if candidates[p.name] {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	if len(ms) > 0 {
		for _, p := range ms[0].protocols {
			if v, ok := votes[p.name]; ok && v > bestVotes {
				best, bestVotes = p.name, v
			}
		}
	}
	// Every candidate is supported by every member, so the first member
	// lists all the voted names.
	return best
}

func (g *group) addSupported(m *member, delta int) {
	seen := map[string]bool{}
	for _, p := range m.protocols {
		if seen[p.name] { // a name listed twice counts once
			continue
		}
		seen[p.name] = true
		g.supported[p.name] += delta
		if g.supported[p.name] == 0 {
			delete(g.supported, p.name)
		}
	}
}

// add makes m a member, parked with w if non-nil.
func (g *group) add(m *member, w *joinWaiter) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.addSupported(m, 1)
	m.join = w
	delete(g.pending, m.id)
}

// remove drops member id from the group, electing the earliest remaining
// member leader if it led. The caller cancels timers and answers waiters.
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		delete(g.members, id)
		g.addSupported(m, -1)
		if m.instanceID != nil && g.static[*m.instanceID] == id {
			delete(g.static, *m.instanceID)
		}
	}
	if g.leader == id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

// validateMember is Kafka's check of a member id and group.instance.id:
// the instance id must map to the member id (else FENCED_INSTANCE_ID, or
// UNKNOWN_MEMBER_ID if unknown), and the member must exist.
func (g *group) validateMember(id string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if existing != id {
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := g.members[id]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// maybeElectNewJoinedLeader keeps the leader if it rejoined, else elects
// the earliest member that did. False when no member rejoined or there is
// no leader.
func (g *group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// computeSubscribed returns the topics the members subscribe to under the
// consumer protocol, parsed with the version-0 prefix of its schema as
// Kafka does; nil when not the consumer protocol, no protocol is selected,
// or a subscription does not parse.
func (g *group) computeSubscribed() map[string]bool {
	if g.protocolType != ConsumerProtocolType {
		return nil
	}
	if len(g.members) == 0 {
		return map[string]bool{}
	}
	if g.protocolName == nil {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		ts, ok := parseSubscriptionTopics(m.metadata(*g.protocolName))
		if !ok {
			return nil
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	return topics
}

// isSubscribedToTopic: when the topics are not known, a consumer group is
// assumed subscribed to every topic, any other group to none.
func (g *group) isSubscribedToTopic(topic string) bool {
	if g.cg != nil {
		return g.cg.isSubscribedToTopic(topic)
	}
	if g.subscribed != nil {
		return g.subscribed[topic]
	}
	return g.protocolType == ConsumerProtocolType
}

// parseSubscriptionTopics reads the topics of a ConsumerProtocolSubscription
// (version int16, then an array of int16-length strings; every version
// starts so). Lengths are checked against the bytes left.
func parseSubscriptionTopics(b []byte) ([]string, bool) {
	if len(b) < 2+4 {
		return nil, false
	}
	if int16(binary.BigEndian.Uint16(b)) < 0 {
		return nil, false
	}
	b = b[2:]
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 || int(n) > len(b)/2 {
		return nil, false
	}
	topics := make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, false
		}
		l := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if l < 0 || int(l) > len(b) {
			return nil, false
		}
		topics = append(topics, string(b[:l]))
		b = b[l:]
	}
	return topics, true
}

// assignments returns every member's current assignment.
func (g *group) assignments() map[string][]byte {
	a := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		a[id] = m.assignment
	}
	return a
}

// metadataRecord encodes the group's metadata (GroupMetadataValue v3) with
// the given assignment per member.
func (g *group) metadataRecord(assignment map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = g.protocolName
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTimestamp
	proto := ""
	if g.protocolName != nil {
		proto = *g.protocolName
	}
	for _, m := range g.sortedMembers() {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID = m.clientID
		mv.ClientHost = m.clientHost
		mv.RebalanceTimeoutMillis = m.rebalanceTimeoutMs
		mv.SessionTimeoutMillis = m.sessionTimeoutMs
		mv.Subscription = m.metadata(proto)
		mv.Assignment = assignment[m.id]
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return Record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// newMemberID returns Kafka's member id: the group.instance.id, or else the
// client id, a dash and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return prefix + "-" + string(s[:])
}

// utf16Len is the length of s in UTF-16 code units, as Java's
// String.length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
