package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

// byID is an assignor's answer by member id.
func byID(members []assignMember, got []assignment) map[string]assignment {
	out := map[string]assignment{}
	for i, m := range members {
		out[m.id] = got[i]
	}
	return out
}

// checkAssignment: every partition of a topic someone subscribes to goes
// to exactly one member subscribed to it.
func checkAssignment(t *testing.T, members []assignMember, partitions map[topicID]int32, got map[string]assignment) {
	t.Helper()
	owner := map[tpKey]string{}
	for _, m := range members {
		for id, ps := range got[m.id] {
			if !m.topics[id] && len(ps) > 0 {
				t.Fatalf("member %s got topic %v it does not subscribe to", m.id, id[0])
			}
			for _, p := range ps {
				if p < 0 || p >= partitions[id] {
					t.Fatalf("member %s got partition %d of %v (%d partitions)", m.id, p, id[0], partitions[id])
				}
				if o, dup := owner[tpKey{id, p}]; dup {
					t.Fatalf("partition %d of %v given to %s and %s", p, id[0], o, m.id)
				}
				owner[tpKey{id, p}] = m.id
			}
		}
	}
	for id, n := range partitions {
		subscribed := false
		for _, m := range members {
			subscribed = subscribed || m.topics[id]
		}
		for p := range n {
			if _, ok := owner[tpKey{id, p}]; subscribed && !ok {
				t.Fatalf("partition %d of %v unassigned", p, id[0])
			}
		}
	}
}

func spread(members []assignMember, got map[string]assignment) (lo, hi int) {
	lo = 1 << 30
	for _, m := range members {
		n := got[m.id].size()
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

func TestAssignRange(t *testing.T) {
	a, b := topicID{1}, topicID{2}
	ms := []assignMember{
		{id: "m1", topics: map[topicID]bool{a: true, b: true}},
		{id: "m2", topics: map[topicID]bool{a: true, b: true}},
		{id: "m3", topics: map[topicID]bool{a: true}},
	}
	parts := map[topicID]int32{a: 7, b: 3}
	got := byID(ms, assignRange(ms, parts, nil))
	checkAssignment(t, ms, parts, got)
	want := map[string]assignment{
		"m1": {a: {0, 1, 2}, b: {0, 1}},
		"m2": {a: {3, 4}, b: {2}},
		"m3": {a: {5, 6}},
	}
	for id, w := range want {
		if !got[id].equal(w) {
			t.Errorf("%s: %v, want %v", id, got[id], w)
		}
	}
}

// Uniform: balanced within one partition with the same subscriptions, and
// sticky: adding a member moves only what it takes.
func TestAssignUniformSticky(t *testing.T) {
	tid := topicID{1}
	parts := map[topicID]int32{tid: 10}
	sub := map[topicID]bool{tid: true}
	ms := []assignMember{{id: "a", topics: sub}, {id: "b", topics: sub}}
	first := byID(ms, assignUniform(ms, parts, nil))
	checkAssignment(t, ms, parts, first)
	if lo, hi := spread(ms, first); hi-lo > 1 {
		t.Fatalf("unbalanced %v", first)
	}
	ms = []assignMember{{id: "a", topics: sub, prev: first["a"]}, {id: "b", topics: sub, prev: first["b"]}, {id: "c", topics: sub}}
	second := byID(ms, assignUniform(ms, parts, nil))
	checkAssignment(t, ms, parts, second)
	if lo, hi := spread(ms, second); hi-lo > 1 {
		t.Fatalf("unbalanced %v", second)
	}
	moved := 0
	for _, id := range []string{"a", "b"} {
		for _, p := range first[id][tid] {
			if !second[id].has(tid, p) {
				moved++
			}
		}
	}
	if moved != second["c"].size() {
		t.Fatalf("%d partitions moved, c got %d: not sticky (%v -> %v)", moved, second["c"].size(), first, second)
	}
}

// Random subscriptions, previous assignments and racks (half the cases):
// every partition is assigned once to a subscriber; with the same
// subscriptions, balanced, racks or not.
func TestAssignUniformRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			parts := map[topicID]int32{}
			for j := range 1 + r.IntN(4) {
				parts[topicID{byte(j + 1)}] = int32(r.IntN(12))
			}
			homogeneous := r.IntN(2) == 0
			useRacks := r.IntN(2) == 0
			var ms []assignMember
			all := map[topicID]bool{}
			for id := range parts {
				all[id] = true
			}
			for j := range 1 + r.IntN(6) {
				sub := all
				if !homogeneous {
					sub = map[topicID]bool{}
					for id := range parts {
						if r.IntN(2) == 0 {
							sub[id] = true
						}
					}
				}
				prev := assignment{}
				for id, n := range parts {
					for p := range n {
						if r.IntN(3) == 0 {
							prev.add(id, p)
						}
					}
				}
				rack := ""
				if useRacks {
					rack = fmt.Sprintf("r%d", r.IntN(3))
				}
				ms = append(ms, assignMember{id: fmt.Sprintf("m%d", j), topics: sub, prev: prev, rack: rack})
			}
			slices.SortFunc(ms, func(a, b assignMember) int { return strings.Compare(a.id, b.id) })
			var racks rackFunc
			if useRacks {
				racks = func(id topicID, p int32) []string {
					return []string{fmt.Sprintf("r%d", (int(id[0])+int(p))%4)}
				}
			}
			got := byID(ms, assignUniform(ms, parts, racks))
			checkAssignment(t, ms, parts, got)
			if homogeneous {
				if lo, hi := spread(ms, got); hi-lo > 1 {
					t.Fatalf("unbalanced: %v", got)
				}
			}
			checkAssignment(t, ms, parts, byID(ms, assignRange(ms, parts, racks)))
		})
	}
}

// Rack-aware assignment: with members in racks r0, r1, r2 and each
// partition's replica in one rack, every member gets the partitions of its
// rack (uniform and range), balance unchanged; where racks cannot all be
// honoured (every replica in r0) balance wins; a member without a rack,
// or no rack information, gives the assignment without racks.
func TestAssignRackAware(t *testing.T) {
	tid := topicID{1}
	parts := map[topicID]int32{tid: 6}
	sub := map[topicID]bool{tid: true}
	byMod := func(_ topicID, p int32) []string { return []string{fmt.Sprintf("r%d", p%3)} }
	ms := []assignMember{
		{id: "a", topics: sub, rack: "r0"},
		{id: "b", topics: sub, rack: "r1"},
		{id: "c", topics: sub, rack: "r2"},
	}
	for name, fn := range map[string]assignFunc{"uniform": assignUniform, "range": assignRange} {
		got := byID(ms, fn(ms, parts, byMod))
		checkAssignment(t, ms, parts, got)
		for i, m := range ms {
			want := []int32{int32(i), int32(i + 3)}
			if !slices.Equal(got[m.id][tid], want) {
				t.Errorf("%s: %s (rack %s) got %v, want %v", name, m.id, m.rack, got[m.id][tid], want)
			}
		}
		// Without racks: range gives contiguous ranges.
		plain := byID(ms, fn(ms, parts, nil))
		if name == "range" && !slices.Equal(plain["a"][tid], []int32{0, 1}) {
			t.Errorf("range without racks: a got %v", plain["a"][tid])
		}
		// Every replica in r0: balance, two each.
		allR0 := byID(ms, fn(ms, parts, func(topicID, int32) []string { return []string{"r0"} }))
		checkAssignment(t, ms, parts, allR0)
		if lo, hi := spread(ms, allR0); lo != 2 || hi != 2 {
			t.Errorf("%s with every replica in r0: %v", name, allR0)
		}
	}
	// Uniform, sticky: a member keeps what it had unless another member's
	// rack holds it.
	prev := []assignMember{
		{id: "a", topics: sub, rack: "r0", prev: assignment{tid: {0, 1}}},
		{id: "b", topics: sub, rack: "r1", prev: assignment{tid: {2, 3}}},
		{id: "c", topics: sub, rack: "r2", prev: assignment{tid: {4, 5}}},
	}
	got := byID(prev, assignUniform(prev, parts, byMod))
	for i, m := range prev {
		if want := []int32{int32(i), int32(i + 3)}; !slices.Equal(got[m.id][tid], want) {
			t.Errorf("uniform from a rack-blind assignment: %s got %v, want %v", m.id, got[m.id][tid], want)
		}
	}
	if got := byID(prev, assignUniform(prev, parts, nil)); !slices.Equal(got["a"][tid], []int32{0, 1}) {
		t.Errorf("uniform without racks is not sticky: %v", got)
	}
}

// Through the coordinator: members that send their RackId get the
// partitions whose replicas are in their rack.
func TestConsumerGroupRackAware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topics := newFakeTopics(map[string]int32{"t": 6})
		topics.setRacks(func(_ [16]byte, p int32) []string { return []string{fmt.Sprintf("r%d", p%3), "r9"} })
		h := consumerHarness(t, topics)
		defer h.close()
		ms := []*cm{{id: "a", rack: strp("r0")}, {id: "b", rack: strp("r1")}, {id: "c", rack: strp("r2")}}
		for range 3 {
			for _, m := range ms {
				checkCode(t, "heartbeat "+m.id, h.hb("g", m, false).ErrorCode, 0)
			}
		}
		checkExclusive(t, ms...)
		for i, m := range ms {
			if got, want := m.owned[topicID{1}], []int32{int32(i), int32(i + 3)}; !slices.Equal(got, want) {
				t.Errorf("%s in rack %s owns %v, want %v", m.id, *m.rack, got, want)
			}
		}
		if d := h.consumerDescribe("g"); *d.Members[0].RackID != "r0" {
			t.Errorf("described rack: %v", d.Members[0].RackID)
		}
	})
}

// The uniform assignor's fast path for members with the same subscription
// gives what the general path gives, partition for partition, on random
// groups: topics of 0 to 40 partitions (some subscribed that do not exist,
// some existing that nobody subscribes to), 1 to 60 members whose previous
// assignments are an earlier answer, perturbed: partitions dropped, added,
// claimed by two members, out of range or of other topics. Each case also
// runs rounds of members joining and leaving, feeding each answer back as
// the previous assignment, as the coordinator does.
func TestAssignUniformFastPathSame(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 400 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			parts := map[topicID]int32{}
			sub := map[topicID]bool{}
			for j := range 1 + r.IntN(5) {
				id := topicID{byte(j + 1), byte(r.IntN(256))}
				if r.IntN(6) > 0 {
					parts[id] = int32(r.IntN(41))
				}
				if r.IntN(4) > 0 {
					sub[id] = true
				}
			}
			ids := slices.SortedFunc(maps.Keys(parts), func(a, b topicID) int { return slices.Compare(a[:], b[:]) })
			var ms []assignMember
			var prev []assignment
			for round := range 6 {
				// Members leave and join; the rest keep their previous
				// target, perturbed.
				next := ms[:0:0]
				for j, m := range ms {
					if r.IntN(5) > 0 {
						m.prev = prev[j].clone()
						next = append(next, m)
					}
				}
				for range r.IntN(20) + 1 {
					next = append(next, assignMember{id: fmt.Sprintf("m%03d-%d", r.IntN(1000), round), prev: assignment{}})
				}
				slices.SortFunc(next, func(a, b assignMember) int { return strings.Compare(a.id, b.id) })
				next = slices.CompactFunc(next, func(a, b assignMember) bool { return a.id == b.id })
				for j := range next {
					next[j].topics = sub
					if r.IntN(3) == 0 {
						next[j].topics = maps.Clone(sub) // equal, not shared
					}
					if len(ids) > 0 && r.IntN(3) == 0 {
						id := ids[r.IntN(len(ids))]
						next[j].prev.add(id, int32(r.IntN(int(parts[id])+3))-1)
					}
					if r.IntN(4) == 0 && next[j].prev.size() > 0 {
						for id, ps := range next[j].prev {
							next[j].prev[id] = ps[1:]
							break
						}
					}
				}
				ms = next
				fast := assignUniformHomogeneous(ms, parts)
				general := assignUniformGeneral(ms, parts, nil)
				for j, m := range ms {
					if !fast[j].equal(general[j]) {
						t.Fatalf("round %d: member %s (prev %v): fast path %v, general path %v", round, m.id, m.prev, fast[j], general[j])
					}
					for _, ps := range fast[j] {
						if !slices.IsSorted(ps) {
							t.Fatalf("round %d: member %s: unsorted %v", round, m.id, fast[j])
						}
					}
				}
				got := byID(ms, fast)
				checkAssignment(t, ms, parts, got)
				if lo, hi := spread(ms, got); hi-lo > 1 {
					t.Fatalf("round %d: unbalanced %v", round, got)
				}
				if a := assignUniform(ms, parts, nil); !slices.EqualFunc(a, fast, assignment.equal) {
					t.Fatalf("round %d: assignUniform did not take the fast path's answer", round)
				}
				prev = fast
			}
		})
	}
}
