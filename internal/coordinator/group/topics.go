package group

import (
	"maps"
	"slices"
)

// This file removes the offsets of deleted topics, after Kafka's
// GroupCoordinator.onPartitionsDeleted.

// DeleteTopicOffsets removes the committed offsets of topics (by name)
// from every group of the partitions this Coordinator has loaded, with
// tombstones in __consumer_offsets, as Kafka's onPartitionsDeleted: a
// topic created again under the same name starts without the old offsets,
// also after a restart. Offsets committed by open transactions for those
// topics are dropped too. Partitions still loading apply it once loaded;
// partitions not owned are the business of their leader, which is told
// the same. It returns at once (the work is queued on the run goroutine),
// so it may be called with the broker's metadata lock held. Safe for
// concurrent use; a no-op after Close.
func (c *Coordinator) DeleteTopicOffsets(topics []string) {
	if len(topics) == 0 {
		return
	}
	set := make(map[string]bool, len(topics))
	for _, t := range topics {
		set[t] = true
	}
	c.post(func() {
		for _, part := range c.sortedPartitions() {
			if !part.loaded {
				part.deletedTopics = append(part.deletedTopics, topics...)
				continue
			}
			c.deleteTopicOffsets(part, set)
		}
	})
}

// deleteTopicOffsets writes tombstones for the offsets of topics in part's
// groups. Offsets leave the cache at once, as Kafka's replay of its
// tombstones does; a failed write is logged (the partition's next leader
// reloads them: the deletion is best effort across failovers, as Kafka's).
func (c *Coordinator) deleteTopicOffsets(part *partition, topics map[string]bool) {
	var recs []Record
	n := 0
	for _, g := range part.sortedGroups() {
		if g.state == stateDead {
			continue
		}
		keys := map[tp]bool{}
		for k := range g.offsets {
			if topics[k.topic] {
				keys[k] = true
			}
		}
		for _, pending := range g.pendingTxnOffsets {
			for k := range pending {
				if topics[k.topic] {
					keys[k] = true
				}
			}
		}
		for _, k := range slices.SortedFunc(maps.Keys(keys), compareTP) {
			g.removeOffset(k)
			recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition)})
		}
		n += len(keys)
	}
	if len(recs) == 0 {
		return
	}
	part.log.Info("deleting offsets of deleted topics", "topics", len(topics), "offsets", n)
	c.appendRecords(part, recs, func(err error) {
		if err != nil {
			part.log.Warn("failed to write tombstones for the offsets of deleted topics", "offsets", n, "err", err)
		}
	})
}
