package group

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cc is a classic consumer driven by hand: cooperative, it reports what
// it owns when it rejoins and drops at once what a SyncGroup no longer
// gives it.
type cc struct {
	id         string
	generation int32
	owned      []int32 // partitions of topic "t"
}

func (m *cc) protocols() []kmsg.JoinGroupRequestProtocol {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 1
	md.Topics = []string{"t"}
	if len(m.owned) > 0 {
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: slices.Clone(m.owned)}}
	}
	return []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}}
}

// join sends a JoinGroup v9 and returns the response once answered.
func (h *harness) ccJoin(m *cc) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r := mustReady(h.t, h.join(joinReq("g", m.id, nil, 9, m.protocols())), "join of "+m.id)
	if r.ErrorCode == kerr.MemberIDRequired.Code {
		m.id = r.MemberID
		r = mustReady(h.t, h.join(joinReq("g", m.id, nil, 9, m.protocols())), "join of "+m.id)
	}
	if r.ErrorCode == 0 {
		m.generation = r.Generation
	}
	return r
}

// ccSync sends SyncGroup with plan (the leader's, else nil) and applies
// the assignment.
func (h *harness) ccSync(m *cc, plan map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = "g", m.id, m.generation
	req.ProtocolType, req.Protocol = strp(ConsumerProtocolType), strp("cooperative-sticky")
	for id, a := range plan {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	ch := async(func() *kmsg.SyncGroupResponse { return h.c.SyncGroup(context.Background(), req) })
	synctest.Wait()
	return ch
}

func (m *cc) apply(t *testing.T, r *kmsg.SyncGroupResponse) {
	t.Helper()
	checkCode(t, "sync of "+m.id, r.ErrorCode, 0)
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(r.MemberAssignment); err != nil {
		t.Fatalf("assignment of %s: %v", m.id, err)
	}
	m.owned = nil
	for _, tp := range a.Topics {
		if tp.Topic == "t" {
			m.owned = slices.Sorted(slices.Values(tp.Partitions))
		}
	}
}

func classicAssignment(ps ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
	return a.AppendTo(nil)
}

// checkOwners fails if a partition of "t" is owned twice; it returns how
// many are owned.
func checkOwners(t *testing.T, classic []*cc, modern []*cm) int {
	t.Helper()
	seen := map[int32]string{}
	add := func(who string, p int32) {
		if o, ok := seen[p]; ok {
			t.Fatalf("partition %d owned by %s and %s", p, o, who)
		}
		seen[p] = who
	}
	for _, m := range classic {
		for _, p := range m.owned {
			add(m.id, p)
		}
	}
	for _, m := range modern {
		for _, p := range m.owned[topicID{1}] {
			add(m.id, p)
		}
	}
	return len(seen)
}

// classicPair makes a Stable classic group "g" of two cooperative members
// owning partitions 0-1 and 2-3 of "t"; it returns them and the
// generation.
func (h *harness) classicPair() (a, b *cc, gen int32) {
	t := h.t
	t.Helper()
	a, b = &cc{}, &cc{}
	ja := h.join(joinReq("g", "", nil, 9, a.protocols()))
	r := mustReady(t, ja, "a's first join")
	a.id = r.MemberID
	r = mustReady(t, h.join(joinReq("g", "", nil, 9, b.protocols())), "b's first join")
	b.id = r.MemberID
	cha := h.join(joinReq("g", a.id, nil, 9, a.protocols()))
	chb := h.join(joinReq("g", b.id, nil, 9, b.protocols()))
	time.Sleep(7 * time.Second) // the initial rebalance delay
	ra, rb := mustReady(t, cha, "a joins"), mustReady(t, chb, "b joins")
	a.generation, b.generation = ra.Generation, rb.Generation
	leader, follower := a, b
	if rb.LeaderID == b.id {
		leader, follower = b, a
	}
	fs := h.ccSync(follower, nil)
	ls := h.ccSync(leader, map[string][]byte{leader.id: classicAssignment(0, 1), follower.id: classicAssignment(2, 3)})
	leader.apply(t, mustReady(t, ls, "leader sync"))
	follower.apply(t, mustReady(t, fs, "follower sync"))
	if h.state("g") != "Stable" || checkOwners(t, []*cc{a, b}, nil) != 4 {
		t.Fatalf("classic group: %s, a %v b %v", h.state("g"), a.owned, b.owned)
	}
	return a, b, a.generation
}

// Online migration, scripted: a classic group of two cooperative members
// (a, b) is upgraded when a KIP-848 member (k) joins; the classic members
// rejoin, revoke and sync through the classic APIs until the three share
// the partitions, never one partition owned twice; the classic members'
// metadata survives a reload; when k leaves the group is classic again at
// the generation the classic members hold (their heartbeats get
// REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION), and rebalances.
func TestGroupMigrationStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer func() { h.close() }()
		a, b, gen := h.classicPair()
		// k joins with the consumer protocol: the group is upgraded.
		k := &cm{id: "k"}
		checkCode(t, "k joins", h.hb("g", k, true).ErrorCode, 0)
		d := h.consumerDescribe("g")
		if d.ErrorCode != 0 || len(d.Members) != 3 || d.Epoch != gen+1 {
			t.Fatalf("after the upgrade: %+v", d)
		}
		for _, dm := range d.Members {
			if want := int8(0); dm.MemberID != "k" && dm.MemberType != want {
				t.Errorf("member %s type %d, want classic", dm.MemberID, dm.MemberType)
			}
		}
		checkOwners(t, []*cc{a, b}, []*cm{k})
		// Classic members catch up through JoinGroup and SyncGroup.
		for round := 0; ; round++ {
			if round > 10 {
				t.Fatalf("not reconciled after 10 rounds: a %v b %v k %v", a.owned, b.owned, k.owned)
			}
			busy := false
			for _, m := range []*cc{a, b} {
				switch code := h.heartbeat("g", &tm{id: m.id, generation: m.generation}); code {
				case 0:
				case kerr.RebalanceInProgress.Code:
					busy = true
					checkCode(t, "rejoin of "+m.id, h.ccJoin(m).ErrorCode, 0)
					m.apply(t, mustReady(t, h.ccSync(m, nil), "sync of "+m.id))
				default:
					t.Fatalf("heartbeat of %s: %v", m.id, kerr.ErrorForCode(code))
				}
				checkOwners(t, []*cc{a, b}, []*cm{k})
			}
			checkCode(t, "k", h.hb("g", k, false).ErrorCode, 0)
			checkOwners(t, []*cc{a, b}, []*cm{k})
			if !busy && checkOwners(t, []*cc{a, b}, []*cm{k}) == 4 && len(k.owned[topicID{1}]) > 0 {
				break
			}
		}
		// Offsets: a classic member commits with its generation.
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.MemberID, oc.Generation = 8, "g", a.id, a.generation
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: a.owned[0], Offset: 5}}}}
		checkCode(t, "classic commit", h.c.OffsetCommit(context.Background(), oc).Topics[0].Partitions[0].ErrorCode, 0)
		oc.Generation = a.generation - 1
		checkCode(t, "classic commit, old generation", h.c.OffsetCommit(context.Background(), oc).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration.Code)

		// The classic members' metadata is in the log.
		before := mustJSON(t, h.consumerDescribe("g"))
		h.restart()
		if after := mustJSON(t, h.consumerDescribe("g")); after != before {
			t.Fatalf("after reload:\n%s\nbefore:\n%s", after, before)
		}
		checkCode(t, "a after reload", h.heartbeat("g", &tm{id: a.id, generation: a.generation}), 0)

		// k leaves: the group is classic again and rebalances.
		checkCode(t, "k leaves", h.hb("g", &cm{id: "k", epoch: leaveEpoch}, false).ErrorCode, 0)
		if d := h.consumerDescribe("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("ConsumerGroupDescribe after the downgrade: %+v", d)
		}
		if dg := h.describe("g"); dg.State != "PreparingRebalance" || len(dg.Members) != 0 && len(dg.Members) != 2 {
			t.Fatalf("DescribeGroups after the downgrade: %+v", dg)
		}
		for _, m := range []*cc{a, b} {
			checkCode(t, fmt.Sprintf("heartbeat of %s after the downgrade", m.id), h.heartbeat("g", &tm{id: m.id, generation: m.generation}), kerr.RebalanceInProgress.Code)
		}
		cha, chb := h.join(joinReq("g", a.id, nil, 9, a.protocols())), h.join(joinReq("g", b.id, nil, 9, b.protocols()))
		ra, rb := mustReady(t, cha, "a rejoins the classic group"), mustReady(t, chb, "b rejoins the classic group")
		checkCode(t, "a rejoins", ra.ErrorCode, 0)
		checkCode(t, "b rejoins", rb.ErrorCode, 0)
		if ra.Generation <= a.generation || rb.Generation != ra.Generation || (ra.LeaderID != a.id && ra.LeaderID != b.id) {
			t.Fatalf("classic rebalance after the downgrade: %+v", ra)
		}
		// The downgrade is in the log: a reload finds a classic group.
		h.restart()
		if lg := h.listGroupsTyped("classic"); lg["g"] == "" {
			t.Fatalf("after reload: classic groups %v", lg)
		}
	})
}

// A classic member of a consumer group that goes silent is removed after
// its own session.timeout.ms (not the consumer protocol's), and its
// partitions go to the others; a ConsumerGroupHeartbeat naming it is
// refused.
func TestGroupMigrationClassicSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 2}))
		defer h.close()
		k := &cm{id: "k"}
		checkCode(t, "k joins", h.hb("g", k, true).ErrorCode, 0)
		a := &cc{}
		r := h.ccJoin(a)
		checkCode(t, "classic a joins the consumer group", r.ErrorCode, 0)
		a.apply(t, mustReady(t, h.ccSync(a, nil), "a syncs"))
		checkCode(t, "consumer heartbeat naming a", h.hb("g", &cm{id: a.id, epoch: a.generation}, false).ErrorCode, kerr.UnknownMemberID.Code)
		if d := h.consumerDescribe("g"); len(d.Members) != 2 {
			t.Fatalf("members: %d", len(d.Members))
		}
		// k heartbeats every 5 s; a says nothing past its 10 s session.
		for range 3 {
			time.Sleep(5 * time.Second)
			checkCode(t, "k", h.hb("g", k, false).ErrorCode, 0)
		}
		synctest.Wait()
		checkCode(t, "k", h.hb("g", k, false).ErrorCode, 0)
		if d := h.consumerDescribe("g"); len(d.Members) != 1 || len(k.owned[topicID{1}]) != 2 {
			t.Fatalf("after a's session: %d members, k owns %v", len(d.Members), k.owned)
		}
		checkCode(t, "a after its session", h.heartbeat("g", &tm{id: a.id, generation: a.generation}), kerr.UnknownMemberID.Code)
	})
}

// An upgrade whose records cannot be written leaves the classic group,
// which rebalances (its members rejoin); the joining member gets
// COORDINATOR_NOT_AVAILABLE and no consumer group exists.
func TestGroupMigrationUpgradeRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a, b, gen := h.classicPair()
		h.store.setFail(kerr.NotEnoughReplicas)
		checkCode(t, "k joins, write fails", h.hb("g", &cm{id: "k"}, true).ErrorCode, kerr.CoordinatorNotAvailable.Code)
		h.store.setFail(nil)
		if lg := h.listGroupsTyped("consumer"); len(lg) != 0 {
			t.Fatalf("consumer groups after a failed upgrade: %v", lg)
		}
		if dg := h.describe("g"); dg.State != "PreparingRebalance" {
			t.Fatalf("classic group after a failed upgrade: %+v", dg)
		}
		for _, m := range []*cc{a, b} {
			checkCode(t, "heartbeat of "+m.id, h.heartbeat("g", &tm{id: m.id, generation: gen}), kerr.RebalanceInProgress.Code)
		}
		cha, chb := h.join(joinReq("g", a.id, nil, 9, a.protocols())), h.join(joinReq("g", b.id, nil, 9, b.protocols()))
		ra, rb := mustReady(t, cha, "a rejoins"), mustReady(t, chb, "b rejoins")
		checkCode(t, "a rejoins", ra.ErrorCode, 0)
		checkCode(t, "b rejoins", rb.ErrorCode, 0)
		if ra.Generation != gen+1 {
			t.Fatalf("generation after the failed upgrade: %d, want %d", ra.Generation, gen+1)
		}
	})
}
