package share

// DropGroups forgets the membership of the share groups for which moved
// reports true: their coordinator moved to another broker (this one no
// longer leads their partition of __consumer_offsets). Their members are
// not reported as leaving (OnMemberLeave): they rejoin at the new
// coordinator and keep the records they hold. The share-partitions this
// broker leads for them stay. Costs one call of moved per share group
// this coordinator holds.
func (c *Coordinator) DropGroups(moved func(groupID string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, g := range c.groups {
		if !moved(id) {
			continue
		}
		for _, m := range g.members {
			m.stopTimer()
		}
		delete(c.groups, id)
	}
}
