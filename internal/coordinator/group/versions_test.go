package group

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dispatch sends req to the Coordinator's method for its key.
func (h *harness) dispatch(ctx context.Context, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return h.c.JoinGroup(ctx, Client{ID: "client", Host: "/127.0.0.1"}, r)
	case *kmsg.SyncGroupRequest:
		return h.c.SyncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return h.c.Heartbeat(ctx, r)
	case *kmsg.LeaveGroupRequest:
		return h.c.LeaveGroup(ctx, r)
	case *kmsg.DescribeGroupsRequest:
		return h.c.DescribeGroups(ctx, r)
	case *kmsg.ListGroupsRequest:
		return h.c.ListGroups(ctx, r)
	case *kmsg.DeleteGroupsRequest:
		return h.c.DeleteGroups(ctx, r)
	case *kmsg.OffsetCommitRequest:
		return h.c.OffsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		return h.c.OffsetFetch(ctx, r)
	case *kmsg.OffsetDeleteRequest:
		return h.c.OffsetDelete(ctx, r)
	case *kmsg.TxnOffsetCommitRequest:
		return h.c.TxnOffsetCommit(ctx, r)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return h.c.ConsumerGroupHeartbeat(ctx, Client{ID: "client", Host: "/127.0.0.1"}, r)
	case *kmsg.ConsumerGroupDescribeRequest:
		return h.c.ConsumerGroupDescribe(ctx, r)
	}
	panic(fmt.Sprintf("no method for %T", req))
}

// fill sets the fields a request of key needs to do something.
func fill(req kmsg.Request, group string) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		r.Group = group
		r.SessionTimeoutMillis = testSession
		r.RebalanceTimeoutMillis = testRebal
		r.ProtocolType = ConsumerProtocolType
		r.Protocols = protocols("range")
		r.Reason = strp("test")
	case *kmsg.SyncGroupRequest:
		r.Group, r.MemberID = group, "m"
	case *kmsg.HeartbeatRequest:
		r.Group, r.MemberID = group, "m"
	case *kmsg.LeaveGroupRequest:
		r.Group, r.MemberID = group, "m"
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}, {InstanceID: strp("i")}}
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{group, "other"}
		r.IncludeAuthorizedOperations = true
	case *kmsg.ListGroupsRequest:
		r.StatesFilter = []string{"Empty"}
		r.TypesFilter = []string{"classic"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{group + "-none"}
	case *kmsg.OffsetCommitRequest:
		r.Group = group
		r.RetentionTimeMillis = 60000
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: 1, Timestamp: -1, Metadata: strp("m")}}}}
	case *kmsg.OffsetFetchRequest:
		r.Group = group
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}, {Group: "other", MemberEpoch: -1}}
	case *kmsg.OffsetDeleteRequest:
		r.Group = group
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = group+"-cg", "member-"+group, 30000
		r.SubscribedTopicNames = []string{"t"}
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups = []string{group + "-cg", group}
	case *kmsg.TxnOffsetCommitRequest:
		r.Group, r.TransactionalID, r.ProducerID, r.ProducerEpoch = group, "tx", 7, 0
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	}
}

// Every API at every version it claims is answered with a response of
// that version that encodes and decodes back, for a loaded partition and
// for one not owned.
func TestEveryVersionEncodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{InitialRebalanceDelay: -1, OffsetsTopicNumPartitions: 2}, nil)
		defer h.close()
		h.c.UnloadPartition(1)
		next := 0
		groupIn := func(p int32) string { // a new group of partition p
			for {
				next++
				if g := fmt.Sprintf("g%d", next); h.c.Partition(g) == p {
					return g
				}
			}
		}
		for _, av := range APIVersions {
			for v := av.Min; v <= av.Max; v++ {
				for _, group := range []string{groupIn(0), groupIn(1)} {
					req := kmsg.RequestForKey(av.Key)
					req.SetVersion(v)
					fill(req, group)
					name := fmt.Sprintf("%s v%d %s", kmsg.NameForKey(av.Key), v, group)
					ch := async(func() kmsg.Response { return h.dispatch(context.Background(), req) })
					resp := mustReady(t, ch, name)
					if resp.GetVersion() != v || resp.Key() != av.Key {
						t.Fatalf("%s: response key %d version %d", name, resp.Key(), resp.GetVersion())
					}
					b := resp.AppendTo(nil)
					back := kmsg.ResponseForKey(av.Key)
					back.SetVersion(v)
					if err := back.ReadFrom(b); err != nil {
						t.Fatalf("%s: response does not decode: %v", name, err)
					}
				}
			}
		}
	})
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, cfg := range []Config{
		{OffsetsTopicNumPartitions: -1},
		{MinSessionTimeout: time.Minute, MaxSessionTimeout: time.Second},
		{MaxSize: -3},
		{OffsetsRetention: -time.Hour},
		{OffsetsRetentionCheckInterval: -time.Second},
		{OffsetMetadataMaxBytes: -1},
		{OffsetCommitTimeout: -time.Second},
		{NewMemberJoinTimeout: -time.Second},
		{MaxAppendBytes: -1},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	d := Config{InitialRebalanceDelay: -1}.withDefaults()
	if d.InitialRebalanceDelay != 0 || d.OffsetsTopicNumPartitions != 50 || d.MaxSessionTimeout != 30*time.Minute {
		t.Errorf("defaults %+v", d)
	}
}

// checkWireVersion fails unless resp is of version v and its encoding in v
// decodes back in v, the way a client reads the response of its request.
func checkWireVersion(t *testing.T, what string, resp kmsg.Response, v int16) {
	t.Helper()
	if resp.GetVersion() != v {
		t.Fatalf("%s: response version %d, want %d", what, resp.GetVersion(), v)
	}
	back := kmsg.ResponseForKey(resp.Key())
	back.SetVersion(v)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%s: v%d response does not decode: %v", what, v, err)
	}
}

// Every path of the classic protocol answers JoinGroup and SyncGroup in
// the request's version: first join, MEMBER_ID_REQUIRED, a rejoin while
// CompletingRebalance (the response sent again), a follower rejoining a
// Stable group, a static member rejoining in place, and the errors.
func TestEveryPathAnswersInRequestVersion(t *testing.T) {
	for v := int16(0); v <= 9; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{InitialRebalanceDelay: -1}, nil)
				defer h.close()
				sv := min(v, 5) // SyncGroup version sent with JoinGroup v
				join := func(what, memberID string, inst *string) *kmsg.JoinGroupResponse {
					t.Helper()
					r := mustReady(t, h.join(joinReq(testGroup, memberID, inst, v, protocols("range"))), what)
					checkWireVersion(t, what, r, v)
					return r
				}
				newMember := func(what string, inst *string) *kmsg.JoinGroupResponse {
					t.Helper()
					r := join(what, "", inst)
					if r.ErrorCode == kerr.MemberIDRequired.Code {
						r = join(what+" with id", r.MemberID, inst)
					}
					return r
				}
				sync := func(what string, r *kmsg.JoinGroupResponse, inst *string, plan map[string][]byte) <-chan *kmsg.SyncGroupResponse {
					req := kmsg.NewPtrSyncGroupRequest()
					req.Version = sv
					req.Group, req.MemberID, req.Generation, req.InstanceID = testGroup, r.MemberID, r.Generation, inst
					for id, a := range plan {
						req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
					}
					ch := async(func() *kmsg.SyncGroupResponse { return h.c.SyncGroup(context.Background(), req) })
					synctest.Wait()
					return ch
				}
				syncNow := func(what string, r *kmsg.JoinGroupResponse, inst *string, plan map[string][]byte) *kmsg.SyncGroupResponse {
					t.Helper()
					s := mustReady(t, sync(what, r, inst, plan), what)
					checkWireVersion(t, what, s, sv)
					return s
				}
				var inst *string
				if v >= 5 {
					inst = strp("static")
				}

				a := newMember("first join", inst)
				checkCode(t, "first join", a.ErrorCode, 0)
				again := join("rejoin while completing", a.MemberID, inst)
				checkCode(t, "rejoin while completing", again.ErrorCode, 0)
				if again.Generation != a.Generation || again.LeaderID != a.MemberID {
					t.Fatalf("rejoin while completing: generation %d leader %s", again.Generation, again.LeaderID)
				}
				checkCode(t, "leader sync", syncNow("leader sync", a, inst, map[string][]byte{a.MemberID: {1}}).ErrorCode, 0)

				// A second member: the leader is told to rejoin.
				var bCh <-chan *kmsg.JoinGroupResponse
				if v >= 4 {
					id := join("second member", "", nil)
					checkCode(t, "second member", id.ErrorCode, kerr.MemberIDRequired.Code)
					bCh = h.join(joinReq(testGroup, id.MemberID, nil, v, protocols("range")))
				} else {
					bCh = h.join(joinReq(testGroup, "", nil, v, protocols("range")))
				}
				mustWait(t, bCh, "second member")
				a2Ch := h.join(joinReq(testGroup, a.MemberID, inst, v, protocols("range")))
				a2 := mustReady(t, a2Ch, "leader rejoin")
				b := mustReady(t, bCh, "second member")
				checkWireVersion(t, "leader rejoin", a2, v)
				checkWireVersion(t, "second member", b, v)
				leader, follower, leaderInst := a2, b, inst
				if b.LeaderID == b.MemberID {
					leader, follower, leaderInst = b, a2, nil
				}
				followerInst := inst
				if leaderInst == inst {
					followerInst = nil
				}
				fs := sync("follower sync", follower, followerInst, nil)
				mustWait(t, fs, "follower sync")
				checkCode(t, "leader sync", syncNow("leader sync 2", leader, leaderInst, map[string][]byte{leader.MemberID: {1}, follower.MemberID: {2}}).ErrorCode, 0)
				s := mustReady(t, fs, "follower sync")
				checkWireVersion(t, "follower sync", s, sv)
				checkCode(t, "follower sync", s.ErrorCode, 0)
				checkCode(t, "stable sync", syncNow("stable sync", follower, followerInst, nil).ErrorCode, 0)

				// The follower rejoins the Stable group unchanged.
				fr := join("follower rejoin while stable", follower.MemberID, followerInst)
				checkCode(t, "follower rejoin while stable", fr.ErrorCode, 0)
				if fr.Generation != follower.Generation {
					t.Fatalf("follower rejoin: generation %d, want %d", fr.Generation, follower.Generation)
				}
				if v >= 5 {
					// The static member restarts: a join without member id.
					sr := join("static rejoin", "", inst)
					checkCode(t, "static rejoin", sr.ErrorCode, 0)
				}
				checkCode(t, "unknown member", join("unknown member", "nobody", nil).ErrorCode, kerr.UnknownMemberID.Code)
				bad := joinReq(testGroup, "", nil, v, protocols("range"))
				bad.SessionTimeoutMillis = 1
				r := mustReady(t, h.join(bad), "bad session timeout")
				checkWireVersion(t, "bad session timeout", r, v)
				checkCode(t, "bad session timeout", r.ErrorCode, kerr.InvalidSessionTimeout.Code)
			})
		})
	}
}
