package group

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

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
					time.Sleep(time.Millisecond) // a JoinGroup completes its rebalance (no delay)
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
