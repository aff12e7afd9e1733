package group

import (
	"context"
	"slices"
	"strings"
)

// CommittedOffset is one committed offset of a group, for the consumer lag
// metrics.
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommittedOffsets returns the committed offsets of the groups of the
// partitions this coordinator has loaded, ordered by group, topic and
// partition, the first limit of them in that order (truncated reports
// whether some were left out; limit <= 0 means no limit), so that a capped
// set stays the same from one call to the next. Offsets of open transactions are
// not included. ok is false when ctx ended or the Coordinator closed
// first. It costs one pass over the loaded groups' offsets on the
// coordinator's goroutine.
func (c *Coordinator) CommittedOffsets(ctx context.Context, limit int) (out []CommittedOffset, truncated bool, ok bool) {
	offs, ok := call(c, ctx, func(reply func([]CommittedOffset)) {
		var res []CommittedOffset
		for _, part := range c.partitions {
			if !part.loaded {
				continue
			}
			for id, g := range part.groups {
				if g.state == stateDead {
					continue
				}
				for k, e := range g.offsets {
					res = append(res, CommittedOffset{Group: id, Topic: k.topic, Partition: k.partition, Offset: e.offset})
				}
			}
		}
		reply(res)
	})
	if !ok {
		return nil, false, false
	}
	slices.SortFunc(offs, func(a, b CommittedOffset) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	if limit > 0 && len(offs) > limit {
		return offs[:limit], true, true
	}
	return offs, false, true
}
