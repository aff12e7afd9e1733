package group

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is committed offsets: OffsetCommit, OffsetFetch, OffsetDelete
// and their expiration, after Kafka's OffsetMetadataManager. Offsets become
// visible once their records are written (Store.Append returned), in the
// order of the log.

// validateOffsetCommit is Kafka's ClassicGroup.validateOffsetCommit.
func (g *group) validateOffsetCommit(memberID string, instanceID *string, generation int32) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0 // offsets only: admin clients, consumers without a group
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code // only members commit in a live group
	}
	if g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// offsetCommit handles OffsetCommit v0-v10 by topic name (for v10 the
// broker fills in the names of the ids).
func (c *Coordinator) offsetCommit(req *kmsg.OffsetCommitRequest, reply func(*kmsg.OffsetCommitResponse)) {
	v := req.Version
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = v
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	failAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		reply(resp)
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		failAll(code)
		return
	}
	var instanceID *string
	if v >= 7 {
		instanceID = req.InstanceID
	}
	now := time.Now()
	g := part.groups[req.Group]
	if g == nil && c.isShareGroup(req.Group) {
		// As Kafka's ShareGroup.validateOffsetCommit: no simple group
		// beside a share group.
		failAll(kerr.GroupIDNotFound.Code)
		return
	}
	if g == nil {
		if req.Generation >= 0 {
			if v >= 9 {
				failAll(kerr.GroupIDNotFound.Code)
			} else {
				failAll(kerr.IllegalGeneration.Code)
			}
			return
		}
		// A simple group, only storing offsets.
		g = newGroup(part, req.Group, now)
		part.groups[g.id] = g
	}
	code = 0
	if g.state == stateDead {
		code = kerr.CoordinatorNotAvailable.Code
	} else if g.cg != nil {
		code = g.cg.validateOffsetCommit(req.MemberID, req.Generation, v, false)
	} else {
		code = g.validateOffsetCommit(req.MemberID, instanceID, req.Generation)
	}
	if code != 0 {
		failAll(code)
		return
	}
	if g.state == stateStable || g.state == statePreparingRebalance {
		if m := g.members[req.MemberID]; m != nil {
			c.rescheduleHeartbeat(g, m, m.sessionTimeout()) // commits keep the session
		}
	}

	expire := int64(-1)
	if v >= 2 && v <= 4 && req.RetentionTimeMillis != -1 {
		expire = now.UnixMilli() + req.RetentionTimeMillis
	}
	type commit struct {
		tp    tp
		entry offsetEntry
	}
	var commits []commit
	var recs []Record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			md := derefOr(p.Metadata, "")
			if utf16Len(md) > int(c.cfg.OffsetMetadataMaxBytes) {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			e := offsetEntry{
				offset:          p.Offset,
				leaderEpoch:     -1,
				metadata:        md,
				commitTimestamp: now.UnixMilli(),
				expireTimestamp: expire,
			}
			if v >= 6 {
				e.leaderEpoch = p.LeaderEpoch
			}
			k := tp{t.Topic, p.Partition}
			commits = append(commits, commit{k, e})
			recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition), Value: offsetValue(e)})
		}
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	for _, cm := range commits {
		g.pendingCommits[cm.tp]++
	}
	c.appendRecords(part, recs, func(err error) {
		for _, cm := range commits {
			if g.pendingCommits[cm.tp]--; g.pendingCommits[cm.tp] <= 0 {
				delete(g.pendingCommits, cm.tp)
			}
		}
		if code := commitErrorCode(err); code != 0 {
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if resp.Topics[i].Partitions[j].ErrorCode == 0 {
						resp.Topics[i].Partitions[j].ErrorCode = code
					}
				}
			}
			reply(resp)
			return
		}
		for _, cm := range commits {
			g.offsets[cm.tp] = cm.entry
		}
		reply(resp)
	})
}

// fetchedTopic is the offsets of one topic for OffsetFetch.
type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition   int32
	offset      int64 // -1: none
	leaderEpoch int32
	metadata    string
	code        int16
}

// fetchOffsets reads the offsets of groupID for topics, or all of its
// offsets when all. A group that does not exist has no offsets (-1 each).
func (c *Coordinator) fetchOffsets(groupID string, topics []kmsg.OffsetFetchRequestTopic, all, requireStable bool) ([]fetchedTopic, int16) {
	part, code := c.partitionOf(groupID)
	if code != 0 {
		return nil, code
	}
	g := part.groups[groupID]
	if g != nil && g.state == stateDead {
		g = nil
	}
	get := func(k tp) fetchedPartition {
		if g != nil && requireStable && g.hasPendingTxnOffset(k) {
			// KIP-447: an open transaction committed an offset here.
			return fetchedPartition{partition: k.partition, offset: -1, leaderEpoch: -1, code: kerr.UnstableOffsetCommit.Code}
		}
		if g != nil {
			if e, ok := g.offsets[k]; ok {
				return fetchedPartition{partition: k.partition, offset: e.offset, leaderEpoch: e.leaderEpoch, metadata: e.metadata}
			}
		}
		return fetchedPartition{partition: k.partition, offset: -1, leaderEpoch: -1}
	}
	if !all {
		out := make([]fetchedTopic, 0, len(topics))
		for _, t := range topics {
			ft := fetchedTopic{topic: t.Topic}
			for _, p := range t.Partitions {
				ft.partitions = append(ft.partitions, get(tp{t.Topic, p}))
			}
			out = append(out, ft)
		}
		return out, 0
	}
	if g == nil {
		return nil, 0
	}
	var out []fetchedTopic
	for _, k := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
		if len(out) == 0 || out[len(out)-1].topic != k.topic {
			out = append(out, fetchedTopic{topic: k.topic})
		}
		out[len(out)-1].partitions = append(out[len(out)-1].partitions, get(k))
	}
	return out, 0
}

// fetchOffsetsOf is fetchOffsets for one group of OffsetFetch v8+; from v9
// a member of a consumer group fetches with its member epoch
// (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), as Kafka's validateOffsetFetch.
func (c *Coordinator) fetchOffsetsOf(rg kmsg.OffsetFetchRequestGroup, v int16, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) ([]fetchedTopic, int16) {
	if v >= 9 {
		if part, code := c.partitionOf(rg.Group); code == 0 {
			if g := part.groups[rg.Group]; g != nil && g.cg != nil && g.state != stateDead {
				if code := g.cg.validateOffsetFetch(rg.MemberID, rg.MemberEpoch); code != 0 {
					return nil, code
				}
			}
		}
	}
	return c.fetchOffsets(rg.Group, topics, rg.Topics == nil, requireStable)
}

// offsetFetch handles OffsetFetch v0-v10 by topic name (v8+: several
// groups; for v10 the broker fills in the names of the ids).
func (c *Coordinator) offsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	v := req.Version
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = v
	if v >= 8 {
		for _, rg := range req.Groups {
			topics := make([]kmsg.OffsetFetchRequestTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			fts, code := c.fetchOffsetsOf(rg, v, topics, req.RequireStable)
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group = rg.Group
			og.ErrorCode = code
			for _, ft := range fts {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = ft.topic
				for _, fp := range ft.partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition = fp.partition
					op.Offset = fp.offset
					op.LeaderEpoch = fp.leaderEpoch
					op.Metadata = kmsg.StringPtr(fp.metadata)
					op.ErrorCode = fp.code
					ot.Partitions = append(ot.Partitions, op)
				}
				og.Topics = append(og.Topics, ot)
			}
			resp.Groups = append(resp.Groups, og)
		}
		return resp
	}
	all := req.Topics == nil && v >= 2
	fts, code := c.fetchOffsets(req.Group, req.Topics, all, v >= 7 && req.RequireStable)
	if code != 0 {
		if v >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v0-v1 have no top-level error: each partition carries it.
		for _, t := range req.Topics {
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetFetchResponseTopicPartition()
				op.Partition = p
				op.Offset = -1
				op.Metadata = kmsg.StringPtr("")
				op.ErrorCode = code
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	}
	for _, ft := range fts {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = ft.topic
		for _, fp := range ft.partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition = fp.partition
			op.Offset = fp.offset
			op.LeaderEpoch = fp.leaderEpoch
			op.Metadata = kmsg.StringPtr(fp.metadata)
			op.ErrorCode = fp.code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// offsetDelete handles OffsetDelete v0 (KIP-496): offsets of topics the
// group does not subscribe to are deleted with tombstones.
func (c *Coordinator) offsetDelete(req *kmsg.OffsetDeleteRequest, reply func(*kmsg.OffsetDeleteResponse)) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	fail := func(code int16) {
		resp.ErrorCode = code
		resp.Topics = nil
		reply(resp)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		fail(code)
		return
	}
	g := part.groups[req.Group]
	if g == nil || g.state == stateDead {
		fail(kerr.GroupIDNotFound.Code)
		return
	}
	if g.cg == nil && g.state != stateEmpty && g.protocolType != ConsumerProtocolType {
		fail(kerr.NonEmptyGroup.Code)
		return
	}
	var deleted []tp
	var recs []Record
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		subscribed := g.isSubscribedToTopic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			k := tp{t.Topic, p.Partition}
			if subscribed {
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if _, ok := g.offsets[k]; ok || g.pendingCommits[k] > 0 {
				deleted = append(deleted, k)
				recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	c.appendRecords(part, recs, func(err error) {
		if code := appendErrorCode(err); code != 0 {
			fail(code)
			return
		}
		for _, k := range deleted {
			g.removeOffset(k)
		}
		c.logGroup(g).Info("deleted offsets", "partitions", len(deleted))
		reply(resp)
	})
}

// removeOffset forgets the committed offset of k and what open
// transactions committed for it, as Kafka's replay of a tombstone.
func (g *group) removeOffset(k tp) {
	delete(g.offsets, k)
	for _, pending := range g.pendingTxnOffsets {
		delete(pending, k)
	}
}

// expirationBase returns, for a group whose offsets may expire, the
// timestamp from which an offset's retention counts; nil when none of its
// offsets may expire (a consumer group that is rebalancing, or whose
// subscriptions are unknown, or a non-consumer group with members).
func (g *group) expirationBase() func(offsetEntry) int64 {
	switch {
	case g.cg != nil && len(g.cg.members) > 0:
		// Kafka's ConsumerGroup: offsets of topics no member subscribes
		// to expire after their last commit.
		return func(e offsetEntry) int64 { return e.commitTimestamp }
	case g.protocolType == "":
		return func(e offsetEntry) int64 { return e.commitTimestamp }
	case g.state == stateEmpty:
		return func(e offsetEntry) int64 {
			if g.stateTimestamp >= 0 {
				return g.stateTimestamp
			}
			return e.commitTimestamp
		}
	case g.protocolType == ConsumerProtocolType && g.subscribed != nil && g.state == stateStable:
		return func(e offsetEntry) int64 { return e.commitTimestamp }
	}
	return nil
}

// scheduleRetentionCheck arms the periodic expiration of offsets
// (offsets.retention.check.interval.ms).
func (c *Coordinator) scheduleRetentionCheck() {
	c.timers.Schedule(time.Now().Add(c.cfg.OffsetsRetentionCheckInterval), func() {
		c.expireOffsets(time.Now())
		c.scheduleRetentionCheck()
	})
}

// expireOffsets writes tombstones for the offsets whose retention passed,
// and deletes the empty groups left with no offsets, as Kafka's
// cleanupGroupMetadata. Offsets with a commit being written stay.
func (c *Coordinator) expireOffsets(now time.Time) {
	nowMs := now.UnixMilli()
	retention := c.cfg.OffsetsRetention.Milliseconds()
	for _, part := range c.sortedPartitions() {
		if !part.loaded {
			continue
		}
		for _, g := range part.sortedGroups() {
			if g.state == stateDead {
				continue
			}
			var expired []tp
			allExpired := true
			if base := g.expirationBase(); base == nil {
				allExpired = len(g.offsets) == 0
			} else {
				for _, k := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
					e := g.offsets[k]
					isExpired := false
					if !g.isSubscribedToTopic(k.topic) && g.pendingCommits[k] == 0 && !g.hasPendingTxnOffset(k) {
						if e.expireTimestamp >= 0 {
							isExpired = nowMs >= e.expireTimestamp
						} else {
							isExpired = nowMs-base(e) >= retention
						}
					}
					if isExpired {
						expired = append(expired, k)
					} else {
						allExpired = false
					}
				}
			}
			deleteGroup := allExpired && g.state == stateEmpty && len(g.pending) == 0 && len(g.pendingCommits) == 0 && len(g.pendingTxnOffsets) == 0 &&
				(g.cg == nil || len(g.cg.members) == 0)

			if len(expired) == 0 && !deleteGroup {
				continue
			}
			recs := make([]Record, 0, len(expired)+1)
			for _, k := range expired {
				recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition)})
			}
			if deleteGroup {
				recs = append(recs, g.deletionTombstones()...)
				g.transition(stateDead, now) // until the tombstones are written
			}
			c.logGroup(g).Info("expiring offsets", "offsets", len(expired), "delete_group", deleteGroup)
			c.appendRecords(part, recs, func(err error) {
				if err != nil {
					c.logGroup(g).Warn("failed to write expired offsets tombstones", "err", err)
					if deleteGroup && g.state == stateDead && c.owns(part) {
						g.state, g.prevState = stateEmpty, stateDead
					}
					return
				}
				for _, k := range expired {
					delete(g.offsets, k)
				}
				if deleteGroup && part.groups[g.id] == g && g.state == stateDead {
					delete(part.groups, g.id)
				}
			})
		}
	}
}
