package share

import (
	"maps"
	"slices"
	"testing"
)

// TestStoreGroupKeys: the store's index by group follows loads, writes,
// tombstones and unloads, so that a deleted group's keys are found
// without scanning every state.
func TestStoreGroupKeys(t *testing.T) {
	s := NewStore()
	k := func(g string, p int32) StateKey { return StateKey{Group: g, TopicID: [16]byte{1}, Partition: p} }
	st := &State{StartOffset: 1}
	shard := func(ks ...StateKey) *Shard {
		sh := NewShard()
		for _, k := range ks {
			sh.Apply(StateRecord{Key: k, Kind: KindSnapshot, State: st})
		}
		return sh
	}
	put := func(p int32, k StateKey, st *State) { s.Apply(p, StateRecord{Key: k, Kind: KindSnapshot, State: st}) }
	s.Load(3, shard(k("a", 0), k("b", 0)))
	s.Load(4, shard())
	put(4, k("a", 1), st)
	put(5, k("a", 2), st) // partition 5 not loaded: ignored
	want := func(g string, exp map[int32][]StateKey) {
		t.Helper()
		got := s.GroupKeys(g)
		for _, ks := range got {
			slices.SortFunc(ks, func(a, b StateKey) int { return int(a.Partition - b.Partition) })
		}
		if !maps.EqualFunc(got, exp, slices.Equal) {
			t.Fatalf("GroupKeys(%s) = %v, want %v", g, got, exp)
		}
	}
	want("a", map[int32][]StateKey{3: {k("a", 0)}, 4: {k("a", 1)}})
	want("b", map[int32][]StateKey{3: {k("b", 0)}})
	put(4, k("a", 1), nil) // tombstone
	want("a", map[int32][]StateKey{3: {k("a", 0)}})
	s.Unload(3)
	want("a", nil)
	want("b", nil)
	s.Load(3, shard(k("b", 0)))
	want("b", map[int32][]StateKey{3: {k("b", 0)}})
	s.Load(3, shard()) // reloaded without it
	want("b", nil)
}
