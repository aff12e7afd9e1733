package group

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
)

// This file is the server-side assignors of KIP-848 consumer groups
// (group.consumer.assignors): "uniform" and "range", after Kafka's
// UniformAssignor and RangeAssignor. They run on the coordinator's
// goroutine, once per group epoch bump. "uniform" with every member
// subscribed to the same topics and no racks (the common case) costs
// O(members + partitions log members); "range" O(members x topics +
// partitions); "uniform" with different subscriptions or racks up to
// members x partitions.

// Names of the server-side assignors, in Kafka's default order of
// group.consumer.assignors (the first is used when no member names one).
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// DefaultAssignors is group.consumer.assignors' default.
var DefaultAssignors = []string{AssignorUniform, AssignorRange}

// assignMember is a member as the assignors see it.
type assignMember struct {
	id     string
	topics map[topicID]bool // subscribed topics that exist
	prev   assignment       // its current target assignment, for stickiness
	rack   string           // the member's RackId; "": unknown
}

// rackFunc returns the racks of the brokers holding replicas of a
// partition (nil: unknown).
type rackFunc func(id topicID, p int32) []string

// assignFunc computes a target assignment: every partition of a
// subscribed topic goes to exactly one member subscribed to its topic.
// members are sorted by id; partitions gives each topic's partition count;
// racks, when not nil, gives the racks of each partition's replicas, for
// rack-aware assignment. The answer is parallel to members: the i-th
// member's assignment, nil when it gets nothing.
type assignFunc func(members []assignMember, partitions map[topicID]int32, racks rackFunc) []assignment

// rackInfo answers whether a member's rack holds a replica of a
// partition, for rack-aware assignment as Kafka's assignors do it when
// racks are known (KIP-881): only when some member has a rack and racks
// is set; the racks of each partition are asked once.
type rackInfo struct {
	racks rackFunc
	cache map[tpKey][]string
}

// newRackInfo returns nil when no member has a rack or racks is nil:
// assignment then ignores racks.
func newRackInfo(members []assignMember, racks rackFunc) *rackInfo {
	if racks == nil {
		return nil
	}
	for _, m := range members {
		if m.rack != "" {
			return &rackInfo{racks: racks, cache: map[tpKey][]string{}}
		}
	}
	return nil
}

func (ri *rackInfo) partitionRacks(id topicID, p int32) []string {
	k := tpKey{id, p}
	rs, ok := ri.cache[k]
	if !ok {
		rs = ri.racks(id, p)
		ri.cache[k] = rs
	}
	return rs
}

// match reports whether m's rack holds a replica of partition p of id;
// false without rack information.
func (ri *rackInfo) match(m *assignMember, id topicID, p int32) bool {
	return ri != nil && m.rack != "" && slices.Contains(ri.partitionRacks(id, p), m.rack)
}

// mismatch reports whether giving partition p of id to m would miss a
// rack that holds it where another member subscribed to id sits: m has a
// rack without a replica and some such member has one.
func (ri *rackInfo) mismatch(m *assignMember, members []assignMember, id topicID, p int32) bool {
	if ri == nil || m.rack == "" || ri.match(m, id, p) {
		return false
	}
	for i := range members {
		if members[i].topics[id] && ri.match(&members[i], id, p) {
			return true
		}
	}
	return false
}

var assignors = map[string]assignFunc{
	AssignorUniform: assignUniform,
	AssignorRange:   assignRange,
}

func sortedTopicIDs(m map[topicID]int32) []topicID {
	ids := make([]topicID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b topicID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

// assignRange gives each topic's partitions in contiguous ranges to the
// members subscribed to it, sorted by member id: with n partitions and m
// members each gets n/m, the first n%m one more, as Kafka's RangeAssignor
// (and the classic range assignor), so that co-partitioned topics land
// together. When members have racks, as the rack-aware RangeAssignor of
// KIP-881, each partition first goes to the first member with room in its
// quota whose rack holds a replica; the rest then fill the quotas in
// order. The quotas, hence the balance, are the same either way.
func assignRange(members []assignMember, partitions map[topicID]int32, racks rackFunc) []assignment {
	out := make([]assignment, len(members))
	give := func(i int, id topicID, p int32) {
		if out[i] == nil {
			out[i] = assignment{}
		}
		out[i].add(id, p)
	}
	ri := newRackInfo(members, racks)
	var subs []int // members subscribed to the topic, by index
	for _, id := range sortedTopicIDs(partitions) {
		subs = subs[:0]
		for i := range members {
			if members[i].topics[id] {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := partitions[id]
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		quota := make([]int32, len(subs))
		for i := range subs {
			quota[i] = per
			if int32(i) < extra {
				quota[i]++
			}
		}
		if ri == nil {
			next := int32(0)
			for i, m := range subs {
				for p := next; p < next+quota[i]; p++ {
					give(m, id, p)
				}
				next += quota[i]
			}
			continue
		}
		given := make([]bool, n)
		for p := range n {
			for i, m := range subs {
				if quota[i] > 0 && ri.match(&members[m], id, p) {
					give(m, id, p)
					quota[i]--
					given[p] = true
					break
				}
			}
		}
		i := 0
		for p := range n {
			if given[p] {
				continue
			}
			for quota[i] == 0 {
				i++
			}
			give(subs[i], id, p)
			quota[i]--
		}
	}
	return out
}

// assignUniform spreads the partitions evenly over the members, keeping
// each member's previous partitions where balance allows, as Kafka's
// UniformAssignor: when every member subscribes to the same topics, each
// gets n/m or n/m+1 partitions and moves are as few as that allows; with
// different subscriptions a partition goes to the least loaded member
// subscribed to its topic, then partitions move from a member to one
// subscribed to their topic with two fewer, until none can.
//
// When members have racks (rack-aware assignment, as Kafka's assignors
// when racks are known): a member does not keep a partition none of whose
// replicas is in its rack while another member subscribed to its topic
// has such a replica in its rack, and a partition left goes to the least
// loaded member in a rack holding a replica when one has room within the
// even spread, else to the least loaded member. Balance comes first: the
// counts are those of the assignment without racks.
//
// With the same subscriptions and no racks it is assignUniformHomogeneous,
// which gives the same answer as assignUniformGeneral in O(members +
// partitions log members) instead of O(members x partitions).
func assignUniform(members []assignMember, partitions map[topicID]int32, racks rackFunc) []assignment {
	if homogeneous(members) && newRackInfo(members, racks) == nil {
		return assignUniformHomogeneous(members, partitions)
	}
	return assignUniformGeneral(members, partitions, racks)
}

// homogeneous reports whether every member subscribes to the same topics.
func homogeneous(members []assignMember) bool {
	for i := 1; i < len(members); i++ {
		if !sameTopics(members[i].topics, members[0].topics) {
			return false
		}
	}
	return true
}

// sameTopics reports whether a and b hold the same topics; the members of
// a group with one subscription share one map, which answers at once.
func sameTopics(a, b map[topicID]bool) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || sameMap(a, b) {
		return true
	}
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

// sameMap reports whether a and b are the same map (not only equal ones).
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// assignUniformGeneral is assignUniform for any subscriptions and racks.
func assignUniformGeneral(members []assignMember, partitions map[topicID]int32, racks rackFunc) []assignment {
	out := make([]assignment, len(members))
	for i := range out {
		out[i] = assignment{}
	}
	if len(members) == 0 {
		return out
	}
	count := make([]int, len(members))
	ri := newRackInfo(members, racks)
	owner := map[tpKey]int{} // partition -> member index
	same := homogeneous(members)
	total := 0
	for id, n := range partitions {
		for _, m := range members {
			if m.topics[id] {
				total += int(n)
				break
			}
		}
	}
	// Quotas: with the same subscriptions, base each and extra members
	// one more; otherwise no cap for the sticky pass beyond the base+1
	// of an even spread, corrected by the moves below.
	base, extra := total/len(members), total%len(members)
	keep := func(i, limit int) {
		m := &members[i]
		for _, id := range m.prev.topics() {
			if !m.topics[id] {
				continue
			}
			for _, p := range m.prev[id] {
				if count[i] >= limit {
					return
				}
				k := tpKey{id, p}
				if _, taken := owner[k]; taken || p < 0 || p >= partitions[id] || ri.mismatch(m, members, id, p) {
					continue
				}
				owner[k] = i
				out[i][id] = append(out[i][id], p)
				count[i]++
			}
		}
	}
	if same {
		for i := range members {
			keep(i, base)
		}
		for i := range members { // then one more for those that had it
			if extra > 0 && count[i] == base && members[i].prev.size() > base {
				before := count[i]
				keep(i, base+1)
				if count[i] > before {
					extra--
				}
			}
		}
	} else {
		for i := range members {
			keep(i, base+1)
		}
	}
	// The partitions left go to the least loaded member subscribed to
	// their topic (ties: member id order); with the same subscriptions,
	// within the quotas.
	for _, id := range sortedTopicIDs(partitions) {
		for p := range partitions[id] {
			k := tpKey{id, p}
			if _, taken := owner[k]; taken {
				continue
			}
			best, bestRack := -1, -1
			for i := range members {
				m := &members[i]
				if !m.topics[id] {
					continue
				}
				if same && count[i] >= base && !(count[i] == base && extra > 0) {
					continue
				}
				if best < 0 || count[i] < count[best] {
					best = i
				}
				if count[i] <= base && ri.match(m, id, p) && (bestRack < 0 || count[i] < count[bestRack]) {
					bestRack = i
				}
			}
			if bestRack >= 0 {
				best = bestRack
			}
			if best < 0 {
				continue
			}
			if same && count[best] == base {
				extra--
			}
			owner[k] = best
			out[best].add(id, p)
			count[best]++
		}
	}
	if same {
		return out
	}
	// Moves for balance, bounded by the number of partitions.
	keys := slices.SortedFunc(maps.Keys(owner), func(a, b tpKey) int {
		if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.p, b.p)
	})
	for range len(keys) {
		moved := false
		for _, k := range keys {
			from := owner[k]
			to := -1
			for i := range members {
				if members[i].topics[k.id] && count[i] < count[from]-1 && (to < 0 || count[i] < count[to]) {
					to = i
				}
			}
			if to < 0 {
				continue
			}
			ps := out[from][k.id]
			j, _ := slices.BinarySearch(ps, k.p)
			out[from][k.id] = slices.Delete(ps, j, j+1)
			out[to].add(k.id, k.p)
			owner[k] = to
			count[from]--
			count[to]++
			moved = true
		}
		if !moved {
			break
		}
	}
	return out
}

// assignUniformHomogeneous is assignUniformGeneral for members that all
// subscribe to the same topics, without racks, in O(members + partitions
// log members): partitions are numbered densely (topics in id order, then
// partition order), a member's load is an index into a slice, and the
// least loaded member (ties: member order) is the top of a heap. It keeps
// the general path's order of decisions, so that both give the same
// assignment (TestAssignUniformFastPathSame): each member keeps up to n/m
// of its previous partitions (topic id order, then its order), members
// that had more keep one more while n%m such places are left, and the
// partitions left go one by one to the least loaded member with room.
func assignUniformHomogeneous(members []assignMember, partitions map[topicID]int32) []assignment {
	out := make([]assignment, len(members))
	if len(members) == 0 {
		return out
	}
	sub := members[0].topics
	var ids []topicID       // subscribed topics that exist, in id order
	var first []int         // dense number of each topic's partition 0
	at := map[topicID]int{} // index in ids
	total := 0
	for _, id := range sortedTopicIDs(partitions) {
		if !sub[id] || partitions[id] <= 0 {
			continue
		}
		at[id] = len(ids)
		ids = append(ids, id)
		first = append(first, total)
		total += int(partitions[id])
	}
	owner := make([]int32, total) // dense partition -> member index + 1; 0: free
	count := make([]int32, len(members))
	base, extra := int32(total/len(members)), total%len(members)
	keepTopic := func(i int, limit int32, id topicID) {
		t, ok := at[id]
		if !ok {
			return
		}
		for _, p := range members[i].prev[id] {
			if count[i] >= limit {
				return
			}
			if p < 0 || p >= partitions[id] || owner[first[t]+int(p)] != 0 {
				continue
			}
			owner[first[t]+int(p)] = int32(i) + 1
			count[i]++
		}
	}
	keep := func(i int, limit int32) {
		prev := members[i].prev
		if len(prev) == 1 { // the common case: no list of topics to sort
			for id := range prev {
				keepTopic(i, limit, id)
			}
			return
		}
		for _, id := range prev.topics() {
			keepTopic(i, limit, id)
		}
	}
	if base > 0 {
		for i := range members {
			keep(i, base)
		}
	}
	for i := range members { // then one more for those that had it
		if extra == 0 {
			break
		}
		if count[i] == base && members[i].prev.size() > int(base) {
			keep(i, base+1)
			if count[i] > base {
				extra--
			}
		}
	}
	// The partitions left, in order, to the top of a heap of members by
	// (load, order), while it has room: below base, or at base while
	// places for base+1 are left. Loads only grow, so once the top has
	// no room nobody has.
	h := loadHeap{count: count, s: make([]int32, len(members))}
	for i := range h.s {
		h.s[i] = int32(i)
	}
	h.init()
	for k := range owner {
		if owner[k] != 0 {
			continue
		}
		top := h.s[0]
		if n := count[top]; n > base || n == base && extra == 0 {
			break
		}
		if count[top] == base {
			extra--
		}
		owner[k] = top + 1
		count[top]++
		h.down(0)
	}
	// A member that keeps exactly its previous partitions gets its
	// previous assignment back, not a copy (no allocation for a member
	// whose target does not change). The others get their partitions in
	// dense order, which is topic then partition order: sorted lists.
	kept := make([]bool, len(members))
	for i := range members {
		prev := members[i].prev
		if count[i] == 0 || len(prev) == 0 {
			continue
		}
		same := true
		n := int32(0)
		for id, ps := range prev {
			t, ok := at[id]
			if len(ps) == 0 {
				same = false
				break
			}
			for j, p := range ps {
				if !ok || p < 0 || p >= partitions[id] || owner[first[t]+int(p)] != int32(i)+1 || j > 0 && p <= ps[j-1] {
					same = false
					break
				}
				n++
			}
			if !same {
				break
			}
		}
		if same && n == count[i] {
			out[i], kept[i] = prev, true
		}
	}
	for t, id := range ids {
		for p := range partitions[id] {
			o := owner[first[t]+int(p)]
			if o == 0 || kept[o-1] {
				continue
			}
			if out[o-1] == nil {
				out[o-1] = assignment{}
			}
			out[o-1][id] = append(out[o-1][id], p)
		}
	}
	return out
}

// loadHeap is a binary min-heap of member indices ordered by their load
// (count), then by index: assignUniformHomogeneous's least loaded member.
type loadHeap struct {
	count []int32
	s     []int32
}

func (h *loadHeap) less(a, b int32) bool {
	if ca, cb := h.count[a], h.count[b]; ca != cb {
		return ca < cb
	}
	return a < b
}

// init orders s, in O(len(s)).
func (h *loadHeap) init() {
	for j := len(h.s)/2 - 1; j >= 0; j-- {
		h.down(j)
	}
}

// down restores the order below j after its load grew.
func (h *loadHeap) down(j int) {
	n := len(h.s)
	for {
		l, r, m := 2*j+1, 2*j+2, j
		if l < n && h.less(h.s[l], h.s[m]) {
			m = l
		}
		if r < n && h.less(h.s[r], h.s[m]) {
			m = r
		}
		if m == j {
			return
		}
		h.s[j], h.s[m] = h.s[m], h.s[j]
		j = m
	}
}
