package group

import (
	"cmp"
	"slices"
)

// This file is the server-side assignors of KIP-848 consumer groups
// (group.consumer.assignors): "uniform" and "range", after Kafka's
// UniformAssignor and RangeAssignor. They run on the coordinator's
// goroutine; their cost is proportional to the group's members times the
// partitions of the topics they subscribe to.

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
// rack-aware assignment.
type assignFunc func(members []assignMember, partitions map[topicID]int32, racks rackFunc) map[string]assignment

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
func assignRange(members []assignMember, partitions map[topicID]int32, racks rackFunc) map[string]assignment {
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	ri := newRackInfo(members, racks)
	for _, id := range sortedTopicIDs(partitions) {
		var subs []*assignMember
		for i := range members {
			if members[i].topics[id] {
				subs = append(subs, &members[i])
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
					out[m.id][id] = append(out[m.id][id], p)
				}
				next += quota[i]
			}
			continue
		}
		given := make([]bool, n)
		for p := range n {
			for i, m := range subs {
				if quota[i] > 0 && ri.match(m, id, p) {
					out[m.id].add(id, p)
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
			out[subs[i].id].add(id, p)
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
func assignUniform(members []assignMember, partitions map[topicID]int32, racks rackFunc) map[string]assignment {
	out := make(map[string]assignment, len(members))
	count := make(map[string]int, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	if len(members) == 0 {
		return out
	}
	ri := newRackInfo(members, racks)
	type part struct {
		id topicID
		p  int32
	}
	owner := map[part]string{}
	homogeneous := true
	for _, m := range members[1:] {
		homogeneous = homogeneous && len(m.topics) == len(members[0].topics)
		for id := range m.topics {
			homogeneous = homogeneous && members[0].topics[id]
		}
	}
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
	keep := func(m assignMember, limit int) {
		for _, id := range m.prev.topics() {
			if !m.topics[id] {
				continue
			}
			for _, p := range m.prev[id] {
				if count[m.id] >= limit {
					return
				}
				k := part{id, p}
				if p >= partitions[id] || owner[k] != "" || ri.mismatch(&m, members, id, p) {
					continue
				}
				owner[k] = m.id
				out[m.id][id] = append(out[m.id][id], p)
				count[m.id]++
			}
		}
	}
	if homogeneous {
		for _, m := range members {
			keep(m, base)
		}
		for _, m := range members { // then one more for those that had it
			if extra > 0 && count[m.id] == base && m.prev.size() > base {
				before := count[m.id]
				keep(m, base+1)
				if count[m.id] > before {
					extra--
				}
			}
		}
	} else {
		for _, m := range members {
			keep(m, base+1)
		}
	}
	// The partitions left go to the least loaded member subscribed to
	// their topic (ties: member id order); with the same subscriptions,
	// within the quotas.
	if homogeneous && ri == nil {
		// Every member may take any partition: the least loaded is
		// the top of a heap of (count, member order), O(log members)
		// a partition instead of a scan of the members.
		h := &loadHeap{count: count}
		for i := range members {
			h.push(loadEntry{id: members[i].id, i: i})
		}
		for _, id := range sortedTopicIDs(partitions) {
			if !members[0].topics[id] {
				continue // nobody subscribes to it
			}
			for p := range partitions[id] {
				k := part{id, p}
				if owner[k] != "" {
					continue
				}
				best := h.s[0]
				if n := count[best.id]; n > base || n == base && extra <= 0 {
					continue // nobody has room
				}
				if count[best.id] == base {
					extra--
				}
				owner[k] = best.id
				out[best.id].add(id, p)
				count[best.id]++
				h.fix()
			}
		}
		return out
	}
	for _, id := range sortedTopicIDs(partitions) {
		for p := range partitions[id] {
			k := part{id, p}
			if owner[k] != "" {
				continue
			}
			best, bestRack := "", ""
			for i := range members {
				m := &members[i]
				if !m.topics[id] {
					continue
				}
				if homogeneous && count[m.id] >= base && !(count[m.id] == base && extra > 0) {
					continue
				}
				if best == "" || count[m.id] < count[best] {
					best = m.id
				}
				if count[m.id] <= base && ri.match(m, id, p) && (bestRack == "" || count[m.id] < count[bestRack]) {
					bestRack = m.id
				}
			}
			if bestRack != "" {
				best = bestRack
			}
			if best == "" {
				continue
			}
			if homogeneous && count[best] == base {
				extra--
			}
			owner[k] = best
			out[best].add(id, p)
			count[best]++
		}
	}
	if homogeneous {
		return out
	}
	// Moves for balance, bounded by the number of partitions.
	keys := make([]part, 0, len(owner))
	for k := range owner {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b part) int {
		if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.p, b.p)
	})
	for range len(keys) {
		moved := false
		for _, k := range keys {
			from := owner[k]
			to := ""
			for _, m := range members {
				if m.topics[k.id] && count[m.id] < count[from]-1 && (to == "" || count[m.id] < count[to]) {
					to = m.id
				}
			}
			if to == "" {
				continue
			}
			ps := out[from][k.id]
			i, _ := slices.BinarySearch(ps, k.p)
			out[from][k.id] = slices.Delete(ps, i, i+1)
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

// loadHeap orders members by their count of partitions, then by their
// order in the member list, least first: assignUniform's least loaded
// member.
type loadHeap struct {
	count map[string]int
	s     []loadEntry
}

type loadEntry struct {
	id string
	i  int // order among the members
}

func (h *loadHeap) less(a, b loadEntry) bool {
	if ca, cb := h.count[a.id], h.count[b.id]; ca != cb {
		return ca < cb
	}
	return a.i < b.i
}

func (h *loadHeap) push(e loadEntry) {
	h.s = append(h.s, e)
	for j := len(h.s) - 1; j > 0; {
		parent := (j - 1) / 2
		if !h.less(h.s[j], h.s[parent]) {
			break
		}
		h.s[j], h.s[parent] = h.s[parent], h.s[j]
		j = parent
	}
}

// fix restores the order after the top's count grew.
func (h *loadHeap) fix() {
	n := len(h.s)
	for j := 0; ; {
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
