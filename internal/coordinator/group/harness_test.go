package group

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testGroup   = "g1"
	testSession = 10000 // ms
	testRebal   = 30000 // ms
)

// harness runs a Coordinator over a memStore inside a synctest bubble.
type harness struct {
	t      *testing.T
	c      *Coordinator
	store  *memStore
	cfg    Config
	topics Topics // for consumer groups; nil: none
}

// newHarness starts a Coordinator with one __consumer_offsets partition
// (unless cfg says otherwise) and loads every partition.
func newHarness(t *testing.T, cfg Config, store *memStore) *harness {
	t.Helper()
	return newHarnessTopics(t, cfg, store, nil)
}

// newHarnessTopics is newHarness with the Coordinator given topics.
func newHarnessTopics(t *testing.T, cfg Config, store *memStore, topics Topics) *harness {
	t.Helper()
	if cfg.OffsetsTopicNumPartitions == 0 {
		cfg.OffsetsTopicNumPartitions = 1
	}
	if store == nil {
		store = newMemStore()
	}
	h := &harness{t: t, store: store, cfg: cfg, c: New(cfg, store, testLogger(t)), topics: topics}
	if topics != nil {
		h.c.SetTopics(topics)
	}
	for p := range cfg.OffsetsTopicNumPartitions {
		if err := h.c.LoadPartition(t.Context(), p); err != nil {
			t.Fatalf("LoadPartition(%d): %v", p, err)
		}
	}
	return h
}

func (h *harness) close() { h.c.Close() }

// restart closes the Coordinator and starts a new one over the same Store.
func (h *harness) restart() {
	h.t.Helper()
	h.c.Close()
	nh := newHarnessTopics(h.t, h.cfg, h.store, h.topics)
	h.c = nh.c
}

// consumerMeta encodes a ConsumerMemberMetadata subscribing to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

func protocols(names ...string) []kmsg.JoinGroupRequestProtocol {
	var ps []kmsg.JoinGroupRequestProtocol
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = n
		p.Metadata = consumerMeta("t")
		ps = append(ps, p)
	}
	return ps
}

func joinReq(group, memberID string, instanceID *string, version int16, ps []kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group = group
	r.MemberID = memberID
	r.InstanceID = instanceID
	r.SessionTimeoutMillis = testSession
	r.RebalanceTimeoutMillis = testRebal
	r.ProtocolType = ConsumerProtocolType
	r.Protocols = ps
	return r
}

func strp(s string) *string { return &s }

// async runs fn on its own goroutine and returns its result channel.
func async[T any](fn func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	return ch
}

// ready returns the value of ch if it has one now (after synctest.Wait).
func ready[T any](t *testing.T, ch <-chan T) (T, bool) {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		return v, true
	default:
		var zero T
		return zero, false
	}
}

func mustReady[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	v, ok := ready(t, ch)
	if !ok {
		t.Fatalf("%s: still waiting", what)
	}
	return v
}

func mustWait[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	if _, ok := ready(t, ch); ok {
		t.Fatalf("%s: answered, want parked", what)
	}
}

func checkCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
	}
}

// tm is a test member of a group.
type tm struct {
	id         string
	instanceID *string
	generation int32
	leader     bool
	assignment []byte
	join       *kmsg.JoinGroupResponse
}

// join sends req on its own goroutine and returns once the Coordinator
// handled it (answered or parked it), so that requests arrive in order.
func (h *harness) join(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), Client{ID: "client", Host: "/127.0.0.1"}, req)
	})
	synctest.Wait()
	return ch
}

// memberID does the first JoinGroup of KIP-394 and returns the id given.
func (h *harness) memberID(group string, names ...string) string {
	h.t.Helper()
	if len(names) == 0 {
		names = []string{"range"}
	}
	r := mustReady(h.t, h.join(joinReq(group, "", nil, 9, protocols(names...))), "first join")
	checkCode(h.t, "first join", r.ErrorCode, kerr.MemberIDRequired.Code)
	if !strings.HasPrefix(r.MemberID, "client-") {
		h.t.Fatalf("member id %q: want prefix client-", r.MemberID)
	}
	return r.MemberID
}

func (h *harness) sync(group string, m *tm, assignments map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = group
	req.MemberID = m.id
	req.InstanceID = m.instanceID
	req.Generation = m.generation
	req.ProtocolType = strp(ConsumerProtocolType)
	req.Protocol = strp("range")
	for id, a := range assignments {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID = id
		ga.MemberAssignment = a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	ch := async(func() *kmsg.SyncGroupResponse { return h.c.SyncGroup(context.Background(), req) })
	synctest.Wait()
	return ch
}

func (h *harness) heartbeat(group string, m *tm) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = group
	req.MemberID = m.id
	req.InstanceID = m.instanceID
	req.Generation = m.generation
	return h.c.Heartbeat(context.Background(), req).ErrorCode
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	r := h.c.DescribeGroups(context.Background(), req)
	if len(r.Groups) != 1 {
		h.t.Fatalf("describe: %d groups", len(r.Groups))
	}
	return r.Groups[0]
}

func (h *harness) state(group string) string { return h.describe(group).State }

// completeJoins collects the join responses of members, checks they agree
// on one generation and leader, and returns the test members.
func completeJoins(t *testing.T, chs []<-chan *kmsg.JoinGroupResponse, instanceIDs []*string) []*tm {
	t.Helper()
	var ms []*tm
	leaders := 0
	for i, ch := range chs {
		r := mustReady(t, ch, fmt.Sprintf("join %d", i))
		checkCode(t, fmt.Sprintf("join %d", i), r.ErrorCode, 0)
		m := &tm{id: r.MemberID, generation: r.Generation, leader: r.LeaderID == r.MemberID, join: r}
		if instanceIDs != nil {
			m.instanceID = instanceIDs[i]
		}
		if m.leader {
			leaders++
			if len(r.Members) != len(chs) {
				t.Fatalf("leader got %d members, want %d", len(r.Members), len(chs))
			}
		} else if len(r.Members) != 0 {
			t.Fatalf("follower got %d members", len(r.Members))
		}
		if r.Generation != ms0(ms, r).generation || r.LeaderID != ms0(ms, r).join.LeaderID {
			t.Fatalf("join %d: generation %d leader %s disagree with %d %s", i, r.Generation, r.LeaderID, ms[0].generation, ms[0].join.LeaderID)
		}
		ms = append(ms, m)
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	return ms
}

func ms0(ms []*tm, r *kmsg.JoinGroupResponse) *tm {
	if len(ms) == 0 {
		return &tm{generation: r.Generation, join: r}
	}
	return ms[0]
}

// syncAll has every member sync, the leader last with a plan giving each
// member its index as assignment, and returns once all are answered.
func (h *harness) syncAll(group string, ms []*tm) {
	h.t.Helper()
	plan := map[string][]byte{}
	for i, m := range ms {
		plan[m.id] = []byte{byte('a' + i)}
	}
	var leader *tm
	var chs []<-chan *kmsg.SyncGroupResponse
	var who []*tm
	for _, m := range ms {
		if m.leader {
			leader = m
			continue
		}
		chs = append(chs, h.sync(group, m, nil))
		who = append(who, m)
	}
	for i, ch := range chs {
		mustWait(h.t, ch, fmt.Sprintf("follower %d sync", i))
	}
	chs = append(chs, h.sync(group, leader, plan))
	who = append(who, leader)
	for i, ch := range chs {
		r := mustReady(h.t, ch, fmt.Sprintf("sync %d", i))
		checkCode(h.t, "sync", r.ErrorCode, 0)
		if string(r.MemberAssignment) != string(plan[who[i].id]) {
			h.t.Fatalf("member %s got assignment %q, want %q", who[i].id, r.MemberAssignment, plan[who[i].id])
		}
		who[i].assignment = r.MemberAssignment
	}
}

// stableGroup makes a Stable group of n dynamic members (or static ones,
// named s0, s1, …, when static), through the initial rebalance delay of 3s
// (extended once to 6s as members keep joining).
func (h *harness) stableGroup(group string, n int, static bool) []*tm {
	h.t.Helper()
	var chs []<-chan *kmsg.JoinGroupResponse
	var insts []*string
	for i := range n {
		if static {
			inst := strp(fmt.Sprintf("s%d", i))
			insts = append(insts, inst)
			chs = append(chs, h.join(joinReq(group, "", inst, 9, protocols("range"))))
			continue
		}
		id := h.memberID(group)
		chs = append(chs, h.join(joinReq(group, id, nil, 9, protocols("range"))))
	}
	if !static {
		insts = nil
	}
	for i, ch := range chs {
		mustWait(h.t, ch, fmt.Sprintf("join %d", i))
	}
	time.Sleep(h.c.cfg.InitialRebalanceDelay * 2) // past the initial rebalance delay (synctest's clock: the harness runs in bubbles only)
	ms := completeJoins(h.t, chs, insts)
	h.syncAll(group, ms)
	if s := h.state(group); s != "Stable" {
		h.t.Fatalf("state %s, want Stable", s)
	}
	return ms
}

// rejoin has members rejoin with their ids and returns the channels.
func (h *harness) rejoin(group string, ms ...*tm) []<-chan *kmsg.JoinGroupResponse {
	var chs []<-chan *kmsg.JoinGroupResponse
	for _, m := range ms {
		chs = append(chs, h.join(joinReq(group, m.id, m.instanceID, 9, protocols("range"))))
	}
	return chs
}

func (h *harness) commit(group string, m *tm, offsets map[tp]int64) *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = group
	if m != nil {
		req.MemberID = m.id
		req.Generation = m.generation
		req.InstanceID = m.instanceID
	}
	byTopic := map[string]int{}
	for k, o := range offsets {
		i, ok := byTopic[k.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[k.topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = k.topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = k.partition
		p.Offset = o
		p.LeaderEpoch = 7
		p.Metadata = strp("md")
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return h.c.OffsetCommit(context.Background(), req)
}

func commitCodes(r *kmsg.OffsetCommitResponse) map[tp]int16 {
	out := map[tp]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[tp{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	return out
}

func (h *harness) checkCommitted(what string, r *kmsg.OffsetCommitResponse, want int16) {
	h.t.Helper()
	for k, code := range commitCodes(r) {
		checkCode(h.t, fmt.Sprintf("%s %v", what, k), code, want)
	}
}

// fetch returns the committed offsets of group (all of them when tps is
// empty), with OffsetFetch v8.
func (h *harness) fetch(group string, tps ...tp) map[tp]int64 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	for _, k := range tps {
		var t *kmsg.OffsetFetchRequestGroupTopic
		for i := range rg.Topics {
			if rg.Topics[i].Topic == k.topic {
				t = &rg.Topics[i]
			}
		}
		if t == nil {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: k.topic})
			t = &rg.Topics[len(rg.Topics)-1]
		}
		t.Partitions = append(t.Partitions, k.partition)
	}
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	r := h.c.OffsetFetch(context.Background(), req)
	if len(r.Groups) != 1 {
		h.t.Fatalf("fetch: %d groups", len(r.Groups))
	}
	checkCode(h.t, "fetch", r.Groups[0].ErrorCode, 0)
	out := map[tp]int64{}
	for _, t := range r.Groups[0].Topics {
		for _, p := range t.Partitions {
			checkCode(h.t, "fetch partition", p.ErrorCode, 0)
			out[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	return out
}

func (h *harness) listGroups(states ...string) map[string]string {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	req.StatesFilter = states
	r := h.c.ListGroups(context.Background(), req)
	out := map[string]string{}
	for _, g := range r.Groups {
		out[g.Group] = g.GroupState
	}
	return out
}

func (h *harness) leave(group string, ms ...*tm) *kmsg.LeaveGroupResponse {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = group
	for _, m := range ms {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.id
		lm.InstanceID = m.instanceID
		lm.Reason = strp("test")
		req.Members = append(req.Members, lm)
	}
	return h.c.LeaveGroup(context.Background(), req)
}

var timeZero = time.Unix(0, 0)
