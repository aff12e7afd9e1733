package group

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a Topics of fixed topics, ids {i+1}.
type fakeTopics struct {
	mu      sync.Mutex
	topics  map[string]topicMeta
	version int64
	racks   func(id [16]byte, p int32) []string
}

func newFakeTopics(partitions map[string]int32) *fakeTopics {
	ft := &fakeTopics{topics: map[string]topicMeta{}}
	for i, name := range slices.Sorted(maps.Keys(partitions)) {
		ft.topics[name] = topicMeta{id: topicID{byte(i + 1)}, partitions: partitions[name]}
	}
	return ft
}

func (ft *fakeTopics) set(name string, id byte, partitions int32) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.topics[name] = topicMeta{id: topicID{id}, partitions: partitions}
	ft.version++
}

func (ft *fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	t, ok := ft.topics[name]
	return t.id, t.partitions, ok
}

func (ft *fakeTopics) TopicName(id [16]byte) (string, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for name, t := range ft.topics {
		if t.id == id {
			return name, true
		}
	}
	return "", false
}

func (ft *fakeTopics) Version() int64 {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.version
}

// Racks answers the racks set with setRacks.
func (ft *fakeTopics) Racks(id [16]byte, p int32) []string {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.racks == nil {
		return nil
	}
	return ft.racks(id, p)
}

func (ft *fakeTopics) setRacks(fn func(id [16]byte, p int32) []string) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.racks = fn
	ft.version++
}

func (ft *fakeTopics) Names() []string {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return slices.Sorted(maps.Keys(ft.topics))
}

// cm is a test consumer: what it was told and what it owns.
type cm struct {
	id       string
	instance *string
	epoch    int32
	owned    assignment
	topics   []string // subscription sent in full requests; nil: t
	regex    *string  // subscription regex sent in full requests instead of topics
	rack     *string  // RackId sent on joining
}

// hb sends a ConsumerGroupHeartbeat v1 for m; a full request (subscription
// and owned partitions) when full. It applies the response to m: epoch,
// and owned := the assignment given (the client revokes at once).
func (h *harness) hb(group string, m *cm, full bool, topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = group, m.id, m.epoch, m.instance
	if m.epoch == 0 {
		req.RackID = m.rack
	}
	req.RebalanceTimeoutMillis = -1
	if full || m.epoch == 0 {
		req.RebalanceTimeoutMillis = testRebal
		switch {
		case topics != nil:
			req.SubscribedTopicNames = topics
		case m.regex != nil:
			req.SubscribedTopicRegex = m.regex
		case m.topics != nil:
			req.SubscribedTopicNames = m.topics
		default:
			req.SubscribedTopicNames = []string{"t"}
		}
	}
	if m.epoch == 0 {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else if full || m.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, id := range m.owned.topics() {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: m.owned[id]})
		}
	}
	r := h.c.ConsumerGroupHeartbeat(context.Background(), Client{ID: "client-" + m.id, Host: "/127.0.0.1"}, req)
	if r.ErrorCode == 0 {
		m.epoch = r.MemberEpoch
		if r.Assignment != nil {
			m.owned = assignment{}
			for _, t := range r.Assignment.Topics {
				for _, p := range t.Partitions {
					m.owned.add(t.TopicID, p)
				}
			}
		}
	}
	return r
}

// checkExclusive fails if two members own one partition.
func checkExclusive(t *testing.T, ms ...*cm) {
	t.Helper()
	seen := map[tpKey]string{}
	for _, m := range ms {
		for id, ps := range m.owned {
			for _, p := range ps {
				if other, ok := seen[tpKey{id, p}]; ok {
					t.Fatalf("partition %d of %v owned by %s and %s", p, id[0], other, m.id)
				}
				seen[tpKey{id, p}] = m.id
			}
		}
	}
}

func owns(ms ...*cm) int {
	n := 0
	for _, m := range ms {
		n += m.owned.size()
	}
	return n
}

func consumerHarness(t *testing.T, topics *fakeTopics) *harness {
	return newHarnessTopics(t, Config{ConsumerSessionTimeout: 45 * time.Second}, nil, topics)
}

// A second member gets partitions only once the first revoked them: the
// first keeps its epoch until it reports the revocation, the second waits
// in its new epoch without them (UNRELEASED_PARTITIONS); no partition is
// ever owned twice.
func TestConsumerGroupIncrementalReconciliation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a, b := &cm{id: "a"}, &cm{id: "b"}
		checkCode(t, "a joins", h.hb("g", a, true).ErrorCode, 0)
		if a.epoch != 1 || a.owned.size() != 4 {
			t.Fatalf("a: epoch %d owns %v", a.epoch, a.owned)
		}
		checkCode(t, "b joins", h.hb("g", b, true).ErrorCode, 0)
		if b.epoch != 2 || b.owned.size() != 0 {
			t.Fatalf("b: epoch %d owns %v, want epoch 2 and nothing yet", b.epoch, b.owned)
		}
		checkExclusive(t, a, b)
		// a is told to give up two partitions, staying in epoch 1.
		keep := h.hb("g", a, false)
		checkCode(t, "a revokes", keep.ErrorCode, 0)
		if a.epoch != 1 || a.owned.size() != 2 {
			t.Fatalf("a: epoch %d owns %v, want epoch 1 with 2 partitions", a.epoch, a.owned)
		}
		if d := h.consumerDescribe("g"); d.State != "Reconciling" {
			t.Fatalf("state %s while reconciling", d.State)
		}
		// Until a reports the revocation, b waits.
		checkCode(t, "b waits", h.hb("g", b, false).ErrorCode, 0)
		if b.owned.size() != 0 {
			t.Fatalf("b owns %v before a revoked", b.owned)
		}
		checkCode(t, "a reports the revocation", h.hb("g", a, false).ErrorCode, 0)
		if a.epoch != 2 {
			t.Fatalf("a: epoch %d after revoking, want 2", a.epoch)
		}
		checkCode(t, "b", h.hb("g", b, false).ErrorCode, 0)
		checkExclusive(t, a, b)
		if b.owned.size() != 2 {
			t.Fatalf("b owns %v after a revoked", b.owned)
		}
		d := h.consumerDescribe("g")
		if d.State != "Stable" || d.Epoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 || d.AssignorName != AssignorUniform {
			t.Fatalf("describe %+v", d)
		}
		// a leaves: b gets everything.
		leave := &cm{id: "a", epoch: leaveEpoch}
		r := h.hb("g", leave, false)
		checkCode(t, "a leaves", r.ErrorCode, 0)
		if r.MemberEpoch != leaveEpoch {
			t.Fatalf("leave answered epoch %d", r.MemberEpoch)
		}
		checkCode(t, "b", h.hb("g", b, false).ErrorCode, 0)
		if b.epoch != 3 || b.owned.size() != 4 {
			t.Fatalf("b: epoch %d owns %v after a left", b.epoch, b.owned)
		}
	})
}

// A member revoking keeps its partitions until it reports them gone: a
// heartbeat that still lists them changes nothing for the others.
func TestConsumerGroupWaitsForRevocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 2}))
		defer h.close()
		a, b := &cm{id: "a"}, &cm{id: "b"}
		h.hb("g", a, true)
		h.hb("g", b, true)
		all := a.owned.clone()
		h.hb("g", a, false) // told to revoke one
		a.owned = all       // … but still owns both
		for range 3 {
			checkCode(t, "a still owns", h.hb("g", a, true).ErrorCode, 0)
			a.owned = all
			checkCode(t, "b waits", h.hb("g", b, false).ErrorCode, 0)
			if b.owned.size() != 0 {
				t.Fatalf("b got %v while a still owns it", b.owned)
			}
		}
		// Past the rebalance timeout a is removed and b gets both.
		time.Sleep(durationMs(testRebal))
		checkCode(t, "b", h.hb("g", b, false).ErrorCode, 0)
		if b.owned.size() != 2 {
			t.Fatalf("b owns %v after a's rebalance timeout", b.owned)
		}
		checkCode(t, "a after removal", h.hb("g", a, false).ErrorCode, kerr.UnknownMemberID.Code)
	})
}

// Epochs: ahead or behind is FENCED_MEMBER_EPOCH, except one bump behind
// owning no more than the assignment (a lost response); a fenced member
// rejoins with epoch 0; a member silent past the session timeout is
// removed and its partitions go to the others.
func TestConsumerGroupFencingAndSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a, b := &cm{id: "a"}, &cm{id: "b"}
		h.hb("g", a, true)
		h.hb("g", b, true)
		h.hb("g", a, false)
		h.hb("g", b, false)
		h.hb("g", a, false)
		if a.epoch != 2 || b.epoch != 2 {
			t.Fatalf("epochs %d %d", a.epoch, b.epoch)
		}
		ahead := &cm{id: "a", epoch: 5, owned: a.owned}
		checkCode(t, "ahead", h.hb("g", ahead, false).ErrorCode, kerr.FencedMemberEpoch.Code)
		lost := &cm{id: "a", epoch: 1, owned: a.owned} // the response of epoch 2 was lost
		checkCode(t, "previous epoch, subset", h.hb("g", lost, false).ErrorCode, 0)
		stale := &cm{id: "a", epoch: 1, owned: assignment{{1}: {0, 1, 2, 3}}}
		checkCode(t, "previous epoch, more partitions", h.hb("g", stale, false).ErrorCode, kerr.FencedMemberEpoch.Code)
		checkCode(t, "unknown member", h.hb("g", &cm{id: "x", epoch: 2}, false).ErrorCode, kerr.UnknownMemberID.Code)
		// Fenced, a drops everything and rejoins with epoch 0.
		a.epoch, a.owned = 0, nil
		checkCode(t, "rejoin after fencing", h.hb("g", a, true).ErrorCode, 0)
		checkExclusive(t, a, b)
		if a.epoch != 2 || a.owned.size() != 2 {
			t.Fatalf("rejoined a: epoch %d owns %v", a.epoch, a.owned)
		}
		// b goes silent; a heartbeats through b's session timeout.
		for range 10 {
			time.Sleep(5 * time.Second)
			checkCode(t, "a", h.hb("g", a, false).ErrorCode, 0)
		}
		if a.owned.size() != 4 {
			t.Fatalf("a owns %v after b's session expired", a.owned)
		}
		checkCode(t, "b after expiry", h.hb("g", b, false).ErrorCode, kerr.UnknownMemberID.Code)
	})
}

// Static members: a temporary leave (epoch -2) keeps the partitions; the
// restarted instance (new member id, epoch 0) gets them back without the
// others moving; while the instance is in use another gets
// UNRELEASED_INSTANCE_ID, and the old member id FENCED_INSTANCE_ID.
func TestConsumerGroupStaticMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a := &cm{id: "a1", instance: strp("ia")}
		b := &cm{id: "b"}
		h.hb("g", a, true)
		h.hb("g", b, true)
		h.hb("g", a, false)
		h.hb("g", b, false)
		h.hb("g", a, false)
		checkExclusive(t, a, b)
		mine, epoch := a.owned.clone(), h.consumerDescribe("g").Epoch
		checkCode(t, "second instance", h.hb("g", &cm{id: "a2", instance: strp("ia")}, true).ErrorCode, kerr.UnreleasedInstanceID.Code)
		r := h.hb("g", &cm{id: "a1", instance: strp("ia"), epoch: staticLeaveEpoch}, false)
		checkCode(t, "static leave", r.ErrorCode, 0)
		if r.MemberEpoch != staticLeaveEpoch {
			t.Fatalf("static leave answered epoch %d", r.MemberEpoch)
		}
		restarted := &cm{id: "a2", instance: strp("ia")}
		checkCode(t, "restart", h.hb("g", restarted, true).ErrorCode, 0)
		if !restarted.owned.equal(mine) || restarted.epoch != epoch {
			t.Fatalf("restarted owns %v at epoch %d, want %v at %d", restarted.owned, restarted.epoch, mine, epoch)
		}
		if d := h.consumerDescribe("g"); d.Epoch != epoch || len(d.Members) != 2 {
			t.Fatalf("the restart changed the group: %+v", d)
		}
		checkCode(t, "old member id", h.hb("g", a, false).ErrorCode, kerr.FencedInstanceID.Code)
	})
}

// Requests that can never succeed get the error that says why.
func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarnessTopics(t, Config{ConsumerMaxSize: 1}, nil, newFakeTopics(map[string]int32{"t": 1}))
		defer h.close()
		base := func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", "m", 1000
			r.SubscribedTopicNames = []string{"t"}
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}
		for _, tc := range []struct {
			name string
			mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
			want int16
		}{
			{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
			{"no member id (v1)", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
			{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
			{"owned when joining", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
			}, kerr.InvalidRequest.Code},
			{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
			{"bad epoch", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
			{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = staticLeaveEpoch }, kerr.InvalidRequest.Code},
			{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strp("sticky") }, kerr.UnsupportedAssignor.Code},
			{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strp("t(") }, kerr.InvalidRegularExpression.Code},
			{"unknown group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group, r.MemberEpoch = "none", 3 }, kerr.GroupIDNotFound.Code},
		} {
			req := base()
			tc.mod(req)
			checkCode(t, tc.name, h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req).ErrorCode, tc.want)
		}
		checkCode(t, "first member", h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, base()).ErrorCode, 0)
		second := base()
		second.MemberID = "m2"
		checkCode(t, "past group.consumer.max.size", h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, second).ErrorCode, kerr.GroupMaxSizeReached.Code)
		// A classic group with members is not upgraded past
		// group.consumer.max.size, and a classic member joining a full
		// consumer group is refused likewise.
		ch := h.join(joinReq("classic", "", nil, 3, protocols("range")))
		time.Sleep(4 * time.Second) // the initial rebalance delay
		checkCode(t, "classic join", mustReady(t, ch, "classic join").ErrorCode, 0)
		classic := base()
		classic.Group = "classic"
		checkCode(t, "heartbeat to a classic group", h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, classic).ErrorCode, kerr.GroupIDNotFound.Code)
		checkCode(t, "classic join to a consumer group", mustReady(t, h.join(joinReq("g", "", nil, 3, protocols("range"))), "join").ErrorCode,
			kerr.GroupMaxSizeReached.Code)
	})
}

// Topics matched by a regex subscription (whole names, internal topics
// never) are assigned, and a topic created later that matches joins the
// assignment with a new group epoch.
func TestConsumerGroupRegexSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTopics(map[string]int32{"orders-eu": 2, "orders-us": 1, "xorders-eu": 5, "__consumer_offsets": 3})
		h := consumerHarness(t, ft)
		defer h.close()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "m", 1000
		req.SubscribedTopicRegex = strp("orders-.*")
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req)
		checkCode(t, "join by regex", r.ErrorCode, 0)
		if n := len(r.Assignment.Topics); n != 2 {
			t.Fatalf("assigned %d topics, want orders-eu and orders-us", n)
		}
		ft.set("orders-apac", 9, 3)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = 1, "g", "m", r.MemberEpoch, -1
		r2 := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, hb)
		checkCode(t, "heartbeat", r2.ErrorCode, 0)
		if r2.MemberEpoch != r.MemberEpoch+1 || r2.Assignment == nil || len(r2.Assignment.Topics) != 3 {
			t.Fatalf("after a matching topic was created: epoch %d, assignment %+v", r2.MemberEpoch, r2.Assignment)
		}
	})
}

// The group comes back from __consumer_offsets: epochs, members and their
// partitions; a member goes on heartbeating with its epoch.
func TestConsumerGroupReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer func() { h.close() }()
		a, b := &cm{id: "a"}, &cm{id: "b", instance: strp("ib")}
		h.hb("g", a, true)
		h.hb("g", b, true)
		h.hb("g", a, false)
		h.hb("g", b, false)
		before := h.consumerDescribe("g")
		h.restart()
		after := h.consumerDescribe("g")
		if jb, ja := mustJSON(t, before), mustJSON(t, after); jb != ja {
			t.Fatalf("describe before restart:\n%+v\nafter:\n%+v", before, after)
		}
		for _, m := range []*cm{a, b} {
			r := h.hb("g", m, false)
			checkCode(t, "heartbeat after reload", r.ErrorCode, 0)
		}
		h.hb("g", a, false)
		checkExclusive(t, a, b)
		if owns(a, b) != 4 || a.epoch != 2 || b.epoch != 2 {
			t.Fatalf("after reload: a %d %v, b %d %v", a.epoch, a.owned, b.epoch, b.owned)
		}
		if lg := h.listGroupsTyped("consumer"); lg["g"] != "Stable" {
			t.Fatalf("ListGroups consumer: %v", lg)
		}
		if lg := h.listGroupsTyped("classic"); len(lg) != 0 {
			t.Fatalf("ListGroups classic: %v", lg)
		}
		if d := h.describe("g"); d.State != "Dead" || d.ErrorCode != 0 {
			t.Fatalf("DescribeGroups v5 of a consumer group: %+v", d)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = 6
		dg.Groups = []string{"g"}
		if d := h.c.DescribeGroups(context.Background(), dg).Groups[0]; d.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("DescribeGroups v6 of a consumer group: %+v", d)
		}
		// Both leave and the group is deleted with its records.
		for _, m := range []*cm{a, b} {
			h.hb("g", &cm{id: m.id, epoch: leaveEpoch}, false)
		}
		checkCode(t, "delete", h.deleteGroup("g"), 0)
		h.restart()
		if d := h.consumerDescribe("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("deleted group after reload: %+v", d)
		}
	})
}

// Offsets of consumer groups: members commit and fetch with their member
// epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); others only to an empty
// group.
func TestConsumerGroupOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 1}))
		defer h.close()
		a := &cm{id: "a"}
		h.hb("g", a, true)
		commit := func(member string, epoch int32) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, epoch
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
			return h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
		}
		checkCode(t, "member commit", commit("a", a.epoch), 0)
		checkCode(t, "stale epoch", commit("a", a.epoch+1), kerr.StaleMemberEpoch.Code)
		checkCode(t, "unknown member", commit("x", 1), kerr.UnknownMemberID.Code)
		checkCode(t, "admin commit to a live group", commit("", -1), kerr.UnknownMemberID.Code)
		fetch := func(member *string, epoch int32) int16 {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version = 9
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: member, MemberEpoch: epoch}}
			return h.c.OffsetFetch(context.Background(), req).Groups[0].ErrorCode
		}
		checkCode(t, "member fetch", fetch(strp("a"), a.epoch), 0)
		checkCode(t, "stale fetch", fetch(strp("a"), a.epoch-1), kerr.StaleMemberEpoch.Code)
		checkCode(t, "admin fetch", fetch(nil, -1), 0)
		checkOffsets(t, h.fetch("g"), map[tp]int64{{"t", 0}: 5})
		h.hb("g", &cm{id: "a", epoch: leaveEpoch}, false)
		checkCode(t, "admin commit to an empty group", commit("", -1), 0)
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (h *harness) consumerDescribe(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	return h.c.ConsumerGroupDescribe(context.Background(), req).Groups[0]
}

func (h *harness) listGroupsTyped(types ...string) map[string]string {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	req.TypesFilter = types
	out := map[string]string{}
	for _, g := range h.c.ListGroups(context.Background(), req).Groups {
		out[g.Group] = g.GroupState
	}
	return out
}

// Random joins, heartbeats, leaves, crashes and topic growth: at every
// step no partition is owned by two live members (each drops at once what
// a response no longer lists, and reports what it owns), and once the
// survivors keep heartbeating the group settles Stable with every
// partition owned.
func TestConsumerGroupRandomReconciliation(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				ft := newFakeTopics(map[string]int32{"t": 6, "u": 3})
				h := consumerHarness(t, ft)
				defer h.close()
				var live []*cm
				next := 0
				for range 200 {
					switch n := r.IntN(10); {
					case n == 0 && len(live) < 6:
						m := &cm{id: fmt.Sprintf("m%d", next), topics: []string{"t", "u"}}
						next++
						checkCode(t, "join", h.hb("g", m, true).ErrorCode, 0)
						live = append(live, m)
					case n == 1 && len(live) > 0:
						i := r.IntN(len(live))
						h.hb("g", &cm{id: live[i].id, epoch: leaveEpoch}, false)
						live = slices.Delete(live, i, i+1)
					case n == 2 && len(live) > 0:
						// A crash: it never heartbeats again; the
						// others must outlive its session.
						i := r.IntN(len(live))
						live = slices.Delete(live, i, i+1)
						for range 10 {
							time.Sleep(5 * time.Second)
							for _, m := range live {
								if code := h.hb("g", m, false).ErrorCode; code != 0 {
									t.Fatalf("heartbeat of %s: %v", m.id, kerr.ErrorForCode(code))
								}
								checkExclusive(t, live...)
							}
						}
					case n == 3:
						ft.set("u", 2, 3+int32(r.IntN(3))) // partitions may grow
					default:
						if len(live) > 0 {
							m := live[r.IntN(len(live))]
							if code := h.hb("g", m, r.IntN(4) == 0).ErrorCode; code != 0 {
								t.Fatalf("heartbeat of %s: %v", m.id, kerr.ErrorForCode(code))
							}
						}
					}
					checkExclusive(t, live...)
				}
				if len(live) == 0 {
					return
				}
				for range 10 {
					for _, m := range live {
						checkCode(t, "settle", h.hb("g", m, false).ErrorCode, 0)
						checkExclusive(t, live...)
					}
				}
				_, up, _ := ft.Topic("u")
				if d := h.consumerDescribe("g"); d.State != "Stable" || owns(live...) != 6+int(up) {
					t.Fatalf("after settling: state %s, %d partitions owned of %d", d.State, owns(live...), 6+up)
				}
			})
		})
	}
}

// A member joining a consumer group while DeleteGroups writes its
// tombstones is told to retry, not added to a group about to vanish.
func TestConsumerGroupJoinWhileDeleting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		h := newHarnessTopics(t, Config{}, store, newFakeTopics(map[string]int32{"t": 1}))
		defer h.close()
		a := &cm{id: "a"}
		h.hb("g", a, true)
		h.hb("g", &cm{id: "a", epoch: leaveEpoch}, false)
		gate := make(chan struct{})
		store.setGate(gate)
		del := async(func() int16 { return h.deleteGroup("g") })
		synctest.Wait()
		checkCode(t, "join while deleting", h.hb("g", &cm{id: "b"}, true).ErrorCode, kerr.CoordinatorNotAvailable.Code)
		close(gate)
		checkCode(t, "delete", mustReady(t, del, "delete"), 0)
		checkCode(t, "join after", h.hb("g", &cm{id: "b"}, true).ErrorCode, 0)
	})
}

// stats reads the coordinator's work counters.
func (h *harness) stats() consumerStats {
	h.t.Helper()
	s, ok := call(h.c, context.Background(), func(reply func(consumerStats)) { reply(h.c.stats) })
	if !ok {
		h.t.Fatal("coordinator closed")
	}
	return s
}

// The coordinator recomputes only what changed: each join computes one
// target assignment; the members' subscriptions (ten by the names "t",
// ten by the regex "t|u") are resolved once each per metadata version and
// the regex matched against the topic names once per version, however
// many members share them; heartbeats that change nothing, also full ones
// repeating the subscription, compute nothing; a new topic that nobody
// subscribes to makes the next heartbeat resolve the two subscriptions
// again (and the regex), but computes no assignment; partitions added to
// t, and a member changing its subscription, compute exactly one each.
func TestConsumerGroupRecomputeOnlyOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topics := newFakeTopics(map[string]int32{"t": 8, "u": 4, "v": 2})
		h := consumerHarness(t, topics)
		defer h.close()
		var ms []*cm
		for i := range 20 {
			m := &cm{id: fmt.Sprintf("m%02d", i)}
			if i%2 == 1 {
				m.regex = strp("t|u")
			}
			ms = append(ms, m)
			checkCode(t, m.id+" joins", h.hb("g", m, false).ErrorCode, 0)
		}
		want := consumerStats{assignments: 20, resolves: 2, regexMatches: 1}
		if got := h.stats(); got != want {
			t.Fatalf("after 20 joins: %+v, want %+v", got, want)
		}
		heartbeats := func(what string, full bool) {
			t.Helper()
			for range 3 {
				for _, m := range ms {
					checkCode(t, what+" "+m.id, h.hb("g", m, full).ErrorCode, 0)
				}
			}
		}
		heartbeats("heartbeat", false)
		heartbeats("full heartbeat", true)
		if got := h.stats(); got != want {
			t.Fatalf("after heartbeats that change nothing: %+v, want %+v", got, want)
		}
		if d := h.consumerDescribe("g"); d.State != "Stable" || d.Epoch != 20 {
			t.Fatalf("group %s at epoch %d, want Stable at 20", d.State, d.Epoch)
		}
		topics.set("w", 9, 3) // matches neither subscription
		heartbeats("heartbeat after w was created", false)
		want.resolves, want.regexMatches = 4, 2
		if got := h.stats(); got != want {
			t.Fatalf("after a topic nobody subscribes to: %+v, want %+v", got, want)
		}
		topics.set("t", 1, 12)
		heartbeats("heartbeat after t grew", false)
		want.assignments, want.resolves, want.regexMatches = 21, 6, 3
		if got := h.stats(); got != want {
			t.Fatalf("after t grew: %+v, want %+v", got, want)
		}
		ms[0].topics = []string{"t", "v"}
		checkCode(t, "m00 subscribes to v too", h.hb("g", ms[0], true).ErrorCode, 0)
		heartbeats("heartbeat", false)
		want.assignments, want.resolves = 22, 7
		if got := h.stats(); got != want {
			t.Fatalf("after a subscription changed: %+v, want %+v", got, want)
		}
		if d := h.consumerDescribe("g"); d.State != "Stable" || d.Epoch != 22 {
			t.Fatalf("group %s at epoch %d, want Stable at 22", d.State, d.Epoch)
		}
		checkExclusive(t, ms...)
	})
}
