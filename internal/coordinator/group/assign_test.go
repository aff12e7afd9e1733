package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

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
	got := assignRange(ms, parts)
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
	first := assignUniform(ms, parts)
	checkAssignment(t, ms, parts, first)
	if lo, hi := spread(ms, first); hi-lo > 1 {
		t.Fatalf("unbalanced %v", first)
	}
	ms = []assignMember{{id: "a", topics: sub, prev: first["a"]}, {id: "b", topics: sub, prev: first["b"]}, {id: "c", topics: sub}}
	second := assignUniform(ms, parts)
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

// Random subscriptions and previous assignments: every partition is
// assigned once to a subscriber; with the same subscriptions, balanced.
func TestAssignUniformRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			parts := map[topicID]int32{}
			for j := range 1 + r.IntN(4) {
				parts[topicID{byte(j + 1)}] = int32(r.IntN(12))
			}
			homogeneous := r.IntN(2) == 0
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
				ms = append(ms, assignMember{id: fmt.Sprintf("m%d", j), topics: sub, prev: prev})
			}
			slices.SortFunc(ms, func(a, b assignMember) int { return strings.Compare(a.id, b.id) })
			got := assignUniform(ms, parts)
			checkAssignment(t, ms, parts, got)
			if homogeneous {
				if lo, hi := spread(ms, got); hi-lo > 1 {
					t.Fatalf("unbalanced: %v", got)
				}
			}
			checkAssignment(t, ms, parts, assignRange(ms, parts))
		})
	}
}
