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
}

// assignFunc computes a target assignment: every partition of a
// subscribed topic goes to exactly one member subscribed to its topic.
// members are sorted by id; partitions gives each topic's partition count.
type assignFunc func(members []assignMember, partitions map[topicID]int32) map[string]assignment

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
// together.
func assignRange(members []assignMember, partitions map[topicID]int32) map[string]assignment {
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	for _, id := range sortedTopicIDs(partitions) {
		var subs []string
		for _, m := range members {
			if m.topics[id] {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := partitions[id]
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, mid := range subs {
			count := per
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[mid][id] = append(out[mid][id], p)
			}
			next += count
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
func assignUniform(members []assignMember, partitions map[topicID]int32) map[string]assignment {
	out := make(map[string]assignment, len(members))
	count := make(map[string]int, len(members))
	for _, m := range members {
		out[m.id] = assignment{}
	}
	if len(members) == 0 {
		return out
	}
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
				if p >= partitions[id] || owner[k] != "" {
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
	for _, id := range sortedTopicIDs(partitions) {
		for p := range partitions[id] {
			k := part{id, p}
			if owner[k] != "" {
				continue
			}
			best := ""
			for _, m := range members {
				if !m.topics[id] {
					continue
				}
				if homogeneous && count[m.id] >= base && !(count[m.id] == base && extra > 0) {
					continue
				}
				if best == "" || count[m.id] < count[best] {
					best = m.id
				}
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
