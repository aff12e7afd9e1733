package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// APIVersion is a range of versions of one Kafka API this package answers.
type APIVersion struct {
	Key      int16 // the API key (kmsg.JoinGroup, …)
	Min, Max int16
}

// APIVersions lists the versions of the group APIs the Coordinator
// implements, for the broker's ApiVersions table. OffsetCommit and
// OffsetFetch v10 name topics by id: the broker resolves the ids and
// fills in the names the Coordinator keys offsets by (it reads Topic at
// every version). DeleteGroups stops at v2.
// FindCoordinator is the broker's.
var APIVersions = []APIVersion{
	{Key: int16(kmsg.OffsetCommit), Min: 0, Max: 10},
	{Key: int16(kmsg.OffsetFetch), Min: 0, Max: 10},
	{Key: int16(kmsg.JoinGroup), Min: 0, Max: 9},
	{Key: int16(kmsg.Heartbeat), Min: 0, Max: 4},
	{Key: int16(kmsg.LeaveGroup), Min: 0, Max: 5},
	{Key: int16(kmsg.SyncGroup), Min: 0, Max: 5},
	{Key: int16(kmsg.DescribeGroups), Min: 0, Max: 6},
	{Key: int16(kmsg.ListGroups), Min: 0, Max: 5},
	{Key: int16(kmsg.DeleteGroups), Min: 0, Max: 2},
	{Key: int16(kmsg.OffsetDelete), Min: 0, Max: 0},
	{Key: int16(kmsg.TxnOffsetCommit), Min: 0, Max: 5},
	{Key: int16(kmsg.ConsumerGroupHeartbeat), Min: 0, Max: 1},
	{Key: int16(kmsg.ConsumerGroupDescribe), Min: 0, Max: 1},
}

var codeUnavailable = kerr.CoordinatorNotAvailable.Code

// JoinGroup handles a JoinGroup request (v0-v9) from client cl. It returns
// when the join phase of the rebalance completes (or at once: errors,
// MEMBER_ID_REQUIRED from v4 on, KIP-394), with the response built for
// req.Version. Errors are in the response: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL,
// GROUP_MAX_SIZE_REACHED, REBALANCE_IN_PROGRESS, and
// COORDINATOR_NOT_AVAILABLE when ctx ends or the Coordinator closes first.
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.JoinGroupResponse)) { c.joinGroup(cl, req, reply) })
	if !ok {
		r = newJoinResponse(req.Version)
		r.ErrorCode = codeUnavailable
		r.MemberID = req.MemberID
	}
	return r
}

// SyncGroup handles a SyncGroup request (v0-v5). The leader's request
// carries the assignment, which is written to __consumer_offsets before
// anyone's SyncGroup is answered; members the leader left out get empty
// assignment bytes. Errors are in the response: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
// ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.SyncGroupResponse)) { c.syncGroup(req, reply) })
	if !ok {
		r = kmsg.NewPtrSyncGroupResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat handles a Heartbeat request (v0-v4): it keeps the member's
// session and reports REBALANCE_IN_PROGRESS while the group rebalances.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	code, ok := call(c, ctx, func(reply func(int16)) { reply(c.heartbeat(req)) })
	if !ok {
		code = codeUnavailable
	}
	r.ErrorCode = code
	return r
}

// LeaveGroup handles a LeaveGroup request (v0-v5; from v3 several members,
// by member id or by group.instance.id, KIP-345). Per-member errors from
// v3; before, the member's error is the top-level one.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.LeaveGroupResponse)) { c.leaveGroup(req, reply) })
	if !ok {
		r = kmsg.NewPtrLeaveGroupResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
	}
	return r
}

// DescribeGroups handles a DescribeGroups request (v0-v6). A group unknown
// to a loaded partition, or a KIP-848 consumer group, is reported in state
// Dead without error before v6, and with GROUP_ID_NOT_FOUND and a message
// from v6, as Kafka; groups of partitions not owned get NOT_COORDINATOR. Member
// metadata is given only for Stable groups. AuthorizedOperations (v3+) is
// left at its default for the broker to set.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.DescribeGroupsResponse)) { reply(c.describeGroups(req)) })
	if !ok {
		r = kmsg.NewPtrDescribeGroupsResponse()
		r.Version = req.Version
		for _, id := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group = id
			g.ErrorCode = codeUnavailable
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// ListGroups handles a ListGroups request (v0-v5) over the groups of the
// partitions this Coordinator has loaded, sorted by partition then id.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.ListGroupsResponse)) { reply(c.listGroups(req)) })
	if !ok {
		r = kmsg.NewPtrListGroupsResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
	}
	return r
}

// DeleteGroups handles a DeleteGroups request (v0-v2). Only Empty groups
// are deleted (else NON_EMPTY_GROUP; unknown: GROUP_ID_NOT_FOUND), with
// tombstones for the group and all its offsets; it returns once written.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.DeleteGroupsResponse)) { c.deleteGroups(req, reply) })
	if !ok {
		r = kmsg.NewPtrDeleteGroupsResponse()
		r.Version = req.Version
		for _, id := range req.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group = id
			g.ErrorCode = codeUnavailable
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// OffsetCommit handles an OffsetCommit request (v0-v9) and returns once the
// offsets are written to __consumer_offsets (or failed); they are visible
// to OffsetFetch from then on. A commit with generation -1 to an unknown or
// empty group stores offsets only. The response mirrors the request's
// topics and partitions. The broker checks topic existence and
// authorization (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED)
// before calling, as Kafka's KafkaApis does.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.OffsetCommitResponse)) { c.offsetCommit(req, reply) })
	if !ok {
		r = kmsg.NewPtrOffsetCommitResponse()
		r.Version = req.Version
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codeUnavailable
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}
	return r
}

// OffsetFetch handles an OffsetFetch request (v0-v9; v8+ several groups,
// each with its own error code). Partitions without a committed offset get
// offset -1. A nil topic list (v2+) asks for every offset of the group.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.OffsetFetchResponse)) { reply(c.offsetFetch(req)) })
	if !ok {
		r = kmsg.NewPtrOffsetFetchResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			g.ErrorCode = codeUnavailable
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// OffsetDelete handles an OffsetDelete request (v0, KIP-496): offsets of
// topics the group is not subscribed to are deleted with tombstones
// (GROUP_SUBSCRIBED_TO_TOPIC for the others; NON_EMPTY_GROUP for a live
// group that is not a consumer group; GROUP_ID_NOT_FOUND).
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.OffsetDeleteResponse)) { c.offsetDelete(req, reply) })
	if !ok {
		r = kmsg.NewPtrOffsetDeleteResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
	}
	return r
}

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat request (v0-v1,
// KIP-848) from client cl: it joins, keeps or leaves (epoch -1; -2 for a
// static member leaving for now) a member of a consumer group, and answers
// with the member's epoch and, when it changed or the request was a full
// one, its assignment; it returns once the records of the change are
// written to __consumer_offsets. v1 members choose their own member id
// (v0: the coordinator's when empty) and may subscribe by regex. Errors are
// in the response: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
// INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (a classic group with
// members), GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
// FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.ConsumerGroupHeartbeatResponse)) { c.consumerHeartbeat(cl, req, reply) })
	if !ok {
		r = kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.Version = req.Version
		r.ErrorCode = codeUnavailable
	}
	return r
}

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request (v0-v1,
// KIP-848): each consumer group's state, epochs, assignor and members with
// their current and target assignments (topic names from the Topics given
// to SetTopics). Classic groups and unknown ones get GROUP_ID_NOT_FOUND,
// groups of partitions not owned NOT_COORDINATOR. AuthorizedOperations is
// left for the broker to set.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.ConsumerGroupDescribeResponse)) { reply(c.consumerDescribe(req)) })
	if !ok {
		r = kmsg.NewPtrConsumerGroupDescribeResponse()
		r.Version = req.Version
		for _, id := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.ErrorCode = codeUnavailable
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// isShareGroup reports whether a share group holds id (Config.ShareGroup).
func (c *Coordinator) isShareGroup(id string) bool {
	return c.cfg.ShareGroup != nil && c.cfg.ShareGroup(id)
}

// AppendShare writes recs, records of the share group groupID (KIP-932,
// ShareRecord.Record), to its partition of __consumer_offsets after the
// writes issued before, and calls done once with nil when they are
// durable, or with the error clients get (a *kerr.Error:
// NOT_COORDINATOR when the partition is not loaded here or is unloaded
// before the write, COORDINATOR_LOAD_IN_PROGRESS while it loads,
// COORDINATOR_NOT_AVAILABLE when the write fails or the Coordinator
// closes). done runs on the coordinator's goroutine (or the caller's when
// the Coordinator is closed): it must not block nor call into the
// Coordinator. AppendShare itself blocks only while the coordinator's
// queue of events is full.
func (c *Coordinator) AppendShare(groupID string, recs []Record, done func(error)) {
	if !c.post(func() {
		part, code := c.partitionOf(groupID)
		if code != 0 {
			done(kerr.ErrorForCode(code))
			return
		}
		c.appendRecords(part, recs, func(err error) {
			if err != nil {
				err = kerr.ErrorForCode(appendErrorCode(err))
			}
			done(err)
		})
	}) {
		done(kerr.CoordinatorNotAvailable)
	}
}

// GroupType returns the type of the group groupID as ListGroups v5 shows
// it ("classic" or "consumer"; "" when this coordinator holds no live
// group under the id), and 0; or NOT_COORDINATOR when the group's
// partition of __consumer_offsets is not loaded here,
// COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE
// when ctx ends or the Coordinator closes first. The share coordinator
// calls it when a share group joins, so that a share group does not take
// the id of another kind of group (GROUP_ID_NOT_FOUND); it costs one map
// lookup on the coordinator's goroutine.
func (c *Coordinator) GroupType(ctx context.Context, groupID string) (typ string, code int16) {
	type result struct {
		typ  string
		code int16
	}
	r, ok := call(c, ctx, func(reply func(result)) {
		part, code := c.partitionOf(groupID)
		if code != 0 {
			reply(result{code: code})
			return
		}
		switch g := part.groups[groupID]; {
		case g == nil || g.state == stateDead:
			reply(result{})
		case g.cg != nil:
			reply(result{typ: ConsumerProtocolType})
		default:
			reply(result{typ: groupType})
		}
	})
	if !ok {
		return "", codeUnavailable
	}
	return r.typ, r.code
}
