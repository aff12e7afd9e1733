package share

// groupIndex is the Store's index of its states by group: for each group,
// the keys it has a state for and the partition of __share_group_state
// holding each. It makes the deletion of a group's state
// (DeleteShareGroupState of a deleted group) cost what the group has, not
// what the store has. Guarded by the Store's lock.
type groupIndex map[string]map[StateKey]int32

func (ix groupIndex) put(p int32, k StateKey) {
	m := ix[k.Group]
	if m == nil {
		m = map[StateKey]int32{}
		ix[k.Group] = m
	}
	m[k] = p
}

func (ix groupIndex) remove(k StateKey) {
	if m := ix[k.Group]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(ix, k.Group)
		}
	}
}

// add indexes the states of partition p (loaded); sh may be nil.
func (ix groupIndex) add(p int32, sh *Shard) {
	if sh == nil {
		return
	}
	for k := range sh.m {
		ix.put(p, k)
	}
}

// drop forgets the keys of partition p (unloaded, or replaced by a load);
// sh may be nil.
func (ix groupIndex) drop(p int32, sh *Shard) {
	if sh == nil {
		return
	}
	for k := range sh.m {
		if ix[k.Group][k] == p {
			ix.remove(k)
		}
	}
}

// GroupKeys returns the keys of groupID's states held by the loaded
// partitions of the store, by partition of __share_group_state; nil when
// there are none. Its cost is proportional to the group's share-partitions.
func (s *Store) GroupKeys(groupID string) map[int32][]StateKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.groups[groupID]
	if len(m) == 0 {
		return nil
	}
	out := map[int32][]StateKey{}
	for k, p := range m {
		out[p] = append(out[p], k)
	}
	return out
}
