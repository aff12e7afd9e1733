package group

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Three members join; the first rebalance waits for the initial delay,
// extended once while members keep arriving; the leader's assignment is
// relayed, and a member it left out gets empty bytes.
func TestJoinSyncThreeMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		start := time.Now()
		var ids []string
		var chs []<-chan *kmsg.JoinGroupResponse
		for range 3 {
			ids = append(ids, h.memberID(testGroup))
		}
		for _, id := range ids {
			chs = append(chs, h.join(joinReq(testGroup, id, nil, 9, protocols("range", "cooperative-sticky"))))
		}
		time.Sleep(3*time.Second - time.Millisecond)
		for _, ch := range chs {
			mustWait(t, chs[0], "join before the initial delay")
			_ = ch
		}
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("state %s", s)
		}
		time.Sleep(time.Millisecond) // 3s: new members arrived during the delay: extended
		mustWait(t, chs[0], "join at 3s")
		time.Sleep(3 * time.Second)
		ms := completeJoins(t, chs, nil)
		if d := time.Since(start); d != 6*time.Second {
			t.Fatalf("join phase took %v, want 6s", d)
		}
		for i, m := range ms {
			if m.id != ids[i] {
				t.Fatalf("member %d id %s, want %s", i, m.id, ids[i])
			}
			r := m.join
			if r.Generation != 1 || r.Protocol == nil || *r.Protocol != "range" || r.ProtocolType == nil || *r.ProtocolType != "consumer" {
				t.Fatalf("join response %+v", r)
			}
		}
		var leader *tm
		var followers []*tm
		for _, m := range ms {
			if m.leader {
				leader = m
			} else {
				followers = append(followers, m)
			}
		}
		if leader.id != ids[0] {
			t.Fatalf("leader %s, want the first member %s", leader.id, ids[0])
		}
		for _, jm := range leader.join.Members {
			if string(jm.ProtocolMetadata) != string(consumerMeta("t")) {
				t.Fatalf("member metadata %q", jm.ProtocolMetadata)
			}
		}
		if s := h.state(testGroup); s != "CompletingRebalance" {
			t.Fatalf("state %s", s)
		}

		// Followers sync first and wait for the leader.
		f0 := h.sync(testGroup, followers[0], nil)
		f1 := h.sync(testGroup, followers[1], nil)
		mustWait(t, f0, "follower sync")
		mustWait(t, f1, "follower sync")
		plan := map[string][]byte{leader.id: []byte("L"), followers[0].id: []byte("F0")} // followers[1] left out
		lr := mustReady(t, h.sync(testGroup, leader, plan), "leader sync")
		r0 := mustReady(t, f0, "follower 0 sync")
		r1 := mustReady(t, f1, "follower 1 sync")
		for _, r := range []*kmsg.SyncGroupResponse{lr, r0, r1} {
			checkCode(t, "sync", r.ErrorCode, 0)
			if r.Protocol == nil || *r.Protocol != "range" || r.ProtocolType == nil || *r.ProtocolType != "consumer" {
				t.Fatalf("sync protocol %v %v", r.ProtocolType, r.Protocol)
			}
		}
		if string(lr.MemberAssignment) != "L" || string(r0.MemberAssignment) != "F0" {
			t.Fatalf("assignments %q %q", lr.MemberAssignment, r0.MemberAssignment)
		}
		if r1.MemberAssignment == nil || len(r1.MemberAssignment) != 0 {
			t.Fatalf("left-out member got %v, want empty non-nil bytes", r1.MemberAssignment)
		}

		d := h.describe(testGroup)
		if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 3 {
			t.Fatalf("describe %+v", d)
		}
		for _, m := range d.Members {
			if m.ClientID != "client" || m.ClientHost != "/127.0.0.1" || len(m.ProtocolMetadata) == 0 {
				t.Fatalf("described member %+v", m)
			}
		}
		// A Stable group's SyncGroup returns the current assignment.
		again := mustReady(t, h.sync(testGroup, followers[0], nil), "sync again")
		if string(again.MemberAssignment) != "F0" {
			t.Fatalf("sync again: %q", again.MemberAssignment)
		}
		// The assignment was written as group metadata before the answers.
		var gv *kmsg.GroupMetadataValue
		for _, rec := range h.store.records(0) {
			d, err := Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if d.GroupValue != nil {
				gv = d.GroupValue
			}
		}
		if gv == nil || gv.Version != 3 || gv.Generation != 1 || len(gv.Members) != 3 || gv.Leader == nil || *gv.Leader != leader.id {
			t.Fatalf("group metadata record %+v", gv)
		}
		for _, m := range gv.Members {
			if m.MemberID == followers[1].id && (m.Assignment == nil || len(m.Assignment) != 0) {
				t.Fatalf("left-out member's stored assignment %v", m.Assignment)
			}
		}
	})
}

// A member leaving makes the others rejoin; the join phase ends as soon as
// all remaining members rejoined.
func TestLeaveTriggersRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 3, false)
		var leaving *tm
		var stay []*tm
		for _, m := range ms {
			if m.leader || leaving != nil {
				stay = append(stay, m)
			} else {
				leaving = m
			}
		}
		lr := h.leave(testGroup, leaving)
		checkCode(t, "leave", lr.ErrorCode, 0)
		if len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0 || lr.Members[0].MemberID != leaving.id {
			t.Fatalf("leave response %+v", lr.Members)
		}
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("state %s", s)
		}
		for _, m := range stay {
			checkCode(t, "heartbeat", h.heartbeat(testGroup, m), kerr.RebalanceInProgress.Code)
		}
		checkCode(t, "heartbeat of the member that left", h.heartbeat(testGroup, leaving), kerr.UnknownMemberID.Code)
		c0 := h.rejoin(testGroup, stay[0])[0]
		mustWait(t, c0, "first rejoin")
		c1 := h.rejoin(testGroup, stay[1])[0]
		ms2 := completeJoins(t, []<-chan *kmsg.JoinGroupResponse{c0, c1}, nil)
		if ms2[0].generation != 2 {
			t.Fatalf("generation %d, want 2", ms2[0].generation)
		}
		h.syncAll(testGroup, ms2)
		// Leaving an unknown group or with an unknown member.
		lr = h.leave("nope", leaving)
		if len(lr.Members) != 1 || lr.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("leave of unknown group: %+v", lr)
		}
		// LeaveGroup v0 reports the member's error at the top level.
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 0
		req.Group = testGroup
		req.MemberID = leaving.id
		checkCode(t, "leave v0", h.c.LeaveGroup(context.Background(), req).ErrorCode, kerr.UnknownMemberID.Code)
		// The last members leaving leave the group Empty.
		checkCode(t, "leave all", h.leave(testGroup, ms2...).ErrorCode, 0)
		if s := h.state(testGroup); s != "Empty" {
			t.Fatalf("state %s, want Empty", s)
		}
	})
}

// A member that stops heartbeating is removed after session.timeout.ms and
// the others rebalance.
func TestSessionExpiryEvicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 3, false)
		silent := ms[2]
		alive := ms[:2]
		start := time.Now()
		for time.Since(start) < 9*time.Second {
			time.Sleep(3 * time.Second)
			for _, m := range alive {
				checkCode(t, "heartbeat", h.heartbeat(testGroup, m), 0)
			}
		}
		if s := h.state(testGroup); s != "Stable" {
			t.Fatalf("state %s before the session timeout", s)
		}
		time.Sleep(2 * time.Second) // 11s since the silent member's last sync
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("state %s after the session timeout", s)
		}
		for _, m := range alive {
			checkCode(t, "heartbeat", h.heartbeat(testGroup, m), kerr.RebalanceInProgress.Code)
		}
		checkCode(t, "evicted heartbeat", h.heartbeat(testGroup, silent), kerr.UnknownMemberID.Code)
		ms2 := completeJoins(t, h.rejoin(testGroup, alive...), nil)
		if len(ms2[0].join.Members)+len(ms2[1].join.Members) != 2 {
			t.Fatal("want 2 members after eviction")
		}
		h.syncAll(testGroup, ms2)

		// A member that rejoins but not all: the rebalance timeout
		// removes the one that did not.
		var leader, follower *tm
		for _, m := range ms2 {
			if m.leader {
				leader = m
			} else {
				follower = m
			}
		}
		ch := h.rejoin(testGroup, leader)[0] // the leader rejoining forces a rebalance
		mustWait(t, ch, "leader rejoin")
		// The follower keeps heartbeating but does not rejoin (a
		// consumer stuck past max.poll.interval.ms).
		for range 9 {
			time.Sleep(3 * time.Second)
			checkCode(t, "follower heartbeat", h.heartbeat(testGroup, follower), kerr.RebalanceInProgress.Code)
		}
		time.Sleep(3*time.Second - time.Millisecond)
		mustWait(t, ch, "leader rejoin before the rebalance timeout")
		time.Sleep(time.Millisecond)
		r := mustReady(t, ch, "leader rejoin at the rebalance timeout")
		if r.Generation != 3 || len(r.Members) != 1 {
			t.Fatalf("after rebalance timeout: generation %d, %d members", r.Generation, len(r.Members))
		}
		checkCode(t, "heartbeat of the removed follower", h.heartbeat(testGroup, follower), kerr.UnknownMemberID.Code)
	})
}

// Members must send SyncGroup within the rebalance timeout after the join
// phase, or they are removed.
func TestPendingSyncExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 2, false)
		chs := h.rejoin(testGroup, ms...)
		ms2 := completeJoins(t, chs, nil)
		var leader, follower *tm
		for _, m := range ms2 {
			if m.leader {
				leader = m
			} else {
				follower = m
			}
		}
		ls := h.sync(testGroup, leader, map[string][]byte{leader.id: []byte("x"), follower.id: []byte("y")})
		checkCode(t, "leader sync", mustReady(t, ls, "leader sync").ErrorCode, 0)
		// The follower never syncs; its heartbeats don't save it.
		for range 9 {
			time.Sleep(3 * time.Second)
			checkCode(t, "leader heartbeat", h.heartbeat(testGroup, leader), 0)
			checkCode(t, "follower heartbeat", h.heartbeat(testGroup, follower), 0)
		}
		time.Sleep(3*time.Second - time.Millisecond)
		if s := h.state(testGroup); s != "Stable" {
			t.Fatalf("state %s before the sync timeout", s)
		}
		time.Sleep(time.Millisecond)
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("state %s, want a rebalance after the sync timeout", s)
		}
		checkCode(t, "follower heartbeat", h.heartbeat(testGroup, follower), kerr.UnknownMemberID.Code)
	})
}

// KIP-394: from JoinGroup v4 a new dynamic member first gets its id with
// MEMBER_ID_REQUIRED; an id never used expires after the session timeout,
// and the rebalance waits for it until then.
func TestMemberIDRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		// v3: no id required, the member joins at once.
		chA := h.join(joinReq(testGroup, "", nil, 3, protocols("range")))
		time.Sleep(3 * time.Second)
		a := completeJoins(t, []<-chan *kmsg.JoinGroupResponse{chA}, nil)
		if !strings.HasPrefix(a[0].id, "client-") {
			t.Fatalf("member id %s", a[0].id)
		}
		h.syncAll(testGroup, a)

		// v4: MEMBER_ID_REQUIRED; B takes an id and never comes back.
		bID := h.memberID(testGroup)
		pendingAt := time.Now()
		if s := h.state(testGroup); s != "Stable" {
			t.Fatalf("a pending member must not rebalance: %s", s)
		}
		// C joins with its id: rebalance; A rejoins; the join phase
		// waits for the pending B.
		cID := h.memberID(testGroup)
		chC := h.join(joinReq(testGroup, cID, nil, 9, protocols("range")))
		checkCode(t, "A heartbeat", h.heartbeat(testGroup, a[0]), kerr.RebalanceInProgress.Code)
		chA = h.rejoin(testGroup, a[0])[0]
		mustWait(t, chA, "join with a pending member")
		time.Sleep(testSession*time.Millisecond - time.Since(pendingAt) - time.Millisecond)
		mustWait(t, chA, "join just before the pending member expires")
		time.Sleep(time.Millisecond)
		ms := completeJoins(t, []<-chan *kmsg.JoinGroupResponse{chA, chC}, nil)
		if ms[0].generation != 2 {
			t.Fatalf("generation %d", ms[0].generation)
		}
		// B's id is no longer valid.
		r := mustReady(t, h.join(joinReq(testGroup, bID, nil, 9, protocols("range"))), "late B")
		checkCode(t, "late B", r.ErrorCode, kerr.UnknownMemberID.Code)

		// A group that only handed out an id is forgotten when it
		// expires; one refused at once is not created.
		h.memberID("ghost")
		checkCode(t, "refused", mustReady(t, h.join(joinReq("ghost2", "", nil, 9, nil)), "refused").ErrorCode, kerr.InconsistentGroupProtocol.Code)
		if gs := h.listGroups(); gs["ghost"] != "Empty" || gs["ghost2"] != "" {
			t.Fatalf("groups %v", gs)
		}
		time.Sleep(testSession * time.Millisecond)
		if gs := h.listGroups(); gs["ghost"] != "" {
			t.Fatalf("groups %v after the pending member expired", gs)
		}
	})
}

// KIP-345: a static member that restarts within its session gets its
// assignment back without a rebalance; the old member id is fenced.
func TestStaticMemberRestart(t *testing.T) {
	for _, v := range []int16{8, 9} {
		t.Run(map[int16]string{8: "v8", 9: "v9"}[v], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{}, nil)
				defer h.close()
				ms := h.stableGroup(testGroup, 3, true)
				gen := ms[0].generation
				for _, restarting := range []*tm{ms[1], ms[0]} { // a follower, then the leader
					r := mustReady(t, h.join(joinReq(testGroup, "", restarting.instanceID, v, protocols("range"))), "static rejoin")
					checkCode(t, "static rejoin", r.ErrorCode, 0)
					if r.MemberID == restarting.id || !strings.HasPrefix(r.MemberID, *restarting.instanceID+"-") {
						t.Fatalf("new member id %q (old %q)", r.MemberID, restarting.id)
					}
					if r.Generation != gen {
						t.Fatalf("generation %d, want %d (no rebalance)", r.Generation, gen)
					}
					switch {
					case !restarting.leader && (r.LeaderID == r.MemberID || len(r.Members) != 0 || r.SkipAssignment):
						t.Fatalf("follower restart: %+v", r)
					case restarting.leader && v >= 9 && (r.LeaderID != r.MemberID || len(r.Members) != 3 || !r.SkipAssignment):
						t.Fatalf("leader restart v9: leader %s members %d skip %v", r.LeaderID, len(r.Members), r.SkipAssignment)
					case restarting.leader && v < 9 && (r.LeaderID != restarting.id || len(r.Members) != 0):
						t.Fatalf("leader restart v8: leader %s (old id %s), members %d", r.LeaderID, restarting.id, len(r.Members))
					}
					if s := h.state(testGroup); s != "Stable" {
						t.Fatalf("state %s after a static restart", s)
					}
					old := *restarting
					restarting.id = r.MemberID
					sr := mustReady(t, h.sync(testGroup, restarting, nil), "sync after restart")
					checkCode(t, "sync after restart", sr.ErrorCode, 0)
					if string(sr.MemberAssignment) != string(restarting.assignment) {
						t.Fatalf("assignment after restart %q, want %q", sr.MemberAssignment, restarting.assignment)
					}
					checkCode(t, "old id heartbeat", h.heartbeat(testGroup, &old), kerr.FencedInstanceID.Code)
					checkCode(t, "new id heartbeat", h.heartbeat(testGroup, restarting), 0)
				}
				if d := h.describe(testGroup); d.State != "Stable" || len(d.Members) != 3 {
					t.Fatalf("describe %+v", d)
				}
				for _, m := range ms {
					checkCode(t, "heartbeat", h.heartbeat(testGroup, m), 0)
				}
				// The replaced member ids were written as group metadata.
				found := false
				for _, rec := range h.store.records(0) {
					if d, _ := Decode(rec); d.GroupValue != nil {
						for _, m := range d.GroupValue.Members {
							if m.MemberID == ms[0].id && m.InstanceID != nil && *m.InstanceID == "s0" {
								found = true
							}
						}
					}
				}
				if !found {
					t.Fatal("the static member's new id was not persisted")
				}
			})
		})
	}
}

// A static member that restarts with another session timeout, rebalance
// timeout and client id: the new values are used from then on, persisted,
// and in force again after the partition is reloaded.
func TestStaticMemberRestartNewTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 2, true)
		restarting := ms[1]
		req := joinReq(testGroup, "", restarting.instanceID, 9, protocols("range"))
		req.SessionTimeoutMillis = 4 * testSession
		req.RebalanceTimeoutMillis = 2 * testRebal
		r := mustReady(t, async(func() *kmsg.JoinGroupResponse {
			return h.c.JoinGroup(context.Background(), Client{ID: "restarted", Host: "/127.0.0.2"}, req)
		}), "static rejoin")
		checkCode(t, "static rejoin", r.ErrorCode, 0)
		restarting.id = r.MemberID
		checkCode(t, "sync", mustReady(t, h.sync(testGroup, restarting, nil), "sync").ErrorCode, 0)

		check := func(when string) {
			t.Helper()
			// Past the old session timeout, within the new one: only the
			// other member heartbeats, the restarted one stays.
			for range 3 {
				time.Sleep(durationMs(testSession) / 2)
				checkCode(t, when+": heartbeat", h.heartbeat(testGroup, ms[0]), 0)
			}
			d := h.describe(testGroup)
			var got *kmsg.DescribeGroupsResponseGroupMember
			for i := range d.Members {
				if d.Members[i].MemberID == restarting.id {
					got = &d.Members[i]
				}
			}
			if d.State != "Stable" || got == nil {
				t.Fatalf("%s: the restarted member expired on its old session timeout: %+v", when, d)
			}
			if got.ClientID != "restarted" || got.ClientHost != "/127.0.0.2" {
				t.Fatalf("%s: client %q %q, want the restarted client's", when, got.ClientID, got.ClientHost)
			}
		}
		check("after restart")
		var persisted bool
		for _, rec := range h.store.records(0) {
			if d, _ := Decode(rec); d.GroupValue != nil {
				for _, m := range d.GroupValue.Members {
					persisted = persisted || m.MemberID == restarting.id &&
						m.SessionTimeoutMillis == 4*testSession && m.RebalanceTimeoutMillis == 2*testRebal && m.ClientID == "restarted"
				}
			}
		}
		if !persisted {
			t.Fatal("the new timeouts and client id were not written to __consumer_offsets")
		}
		h.restart()
		check("after reload")
		// The new session timeout still ends the session.
		time.Sleep(durationMs(4 * testSession))
		if n := len(h.describe(testGroup).Members); n != 0 {
			t.Fatalf("%d members after both sessions ended", n)
		}
	})
}

// A second instance with the same group.instance.id fences the first: its
// requests, including one parked, get FENCED_INSTANCE_ID.
func TestStaticMemberFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 2, true)
		old := ms[1]
		// A dynamic member joins: rebalance; the old s1 rejoins (parked).
		newID := h.memberID(testGroup)
		chN := h.join(joinReq(testGroup, newID, nil, 9, protocols("range")))
		chOld := h.rejoin(testGroup, old)[0]
		mustWait(t, chOld, "old instance rejoin")
		// The new instance of s1 joins: the parked join is fenced.
		chNew := h.join(joinReq(testGroup, "", old.instanceID, 9, protocols("range")))
		r := mustReady(t, chOld, "fenced join")
		checkCode(t, "fenced join", r.ErrorCode, kerr.FencedInstanceID.Code)
		checkCode(t, "fenced heartbeat", h.heartbeat(testGroup, old), kerr.FencedInstanceID.Code)
		cr := h.commit(testGroup, old, map[tp]int64{{"t", 0}: 1})
		h.checkCommitted("fenced commit", cr, kerr.FencedInstanceID.Code)
		lr := h.leave(testGroup, old)
		if lr.Members[0].ErrorCode != kerr.FencedInstanceID.Code {
			t.Fatalf("fenced leave: %v", kerr.ErrorForCode(lr.Members[0].ErrorCode))
		}
		// s0 rejoins; the rebalance completes with s0, s1 (new) and the
		// dynamic member.
		chs := append(h.rejoin(testGroup, ms[0]), chN, chNew)
		ms2 := completeJoins(t, chs, []*string{ms[0].instanceID, nil, old.instanceID})
		if ms2[0].generation != ms[0].generation+1 {
			t.Fatalf("generation %d", ms2[0].generation)
		}
		h.syncAll(testGroup, ms2)
		// Admin removal by instance id (member id empty, KIP-345).
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 5
		req.Group = testGroup
		req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: strp("s1")}, {InstanceID: strp("nope")}}
		lr = h.c.LeaveGroup(context.Background(), req)
		if lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("leave by instance id: %+v", lr.Members)
		}
		if d := h.describe(testGroup); len(d.Members) != 2 || d.State != "PreparingRebalance" {
			t.Fatalf("after removal by instance id: %s with %d members", d.State, len(d.Members))
		}
	})
}

// The protocol is one every member supports, by vote of preference; a
// member supporting none of them, or another protocol type, is refused.
func TestProtocolSelection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		lists := [][]string{{"range", "roundrobin", "sticky"}, {"roundrobin", "sticky"}, {"sticky", "roundrobin"}}
		var chs []<-chan *kmsg.JoinGroupResponse
		for _, l := range lists {
			id := h.memberID(testGroup, l...)
			chs = append(chs, h.join(joinReq(testGroup, id, nil, 9, protocols(l...))))
		}
		time.Sleep(6 * time.Second)
		ms := completeJoins(t, chs, nil)
		// range is not supported by all; roundrobin has 2 votes (1 and 2's first candidate).
		if p := ms[0].join.Protocol; p == nil || *p != "roundrobin" {
			t.Fatalf("protocol %v, want roundrobin", p)
		}
		r := mustReady(t, h.join(joinReq(testGroup, "", nil, 9, protocols("range"))), "join with an unsupported protocol")
		checkCode(t, "unsupported protocol", r.ErrorCode, kerr.InconsistentGroupProtocol.Code)
		req := joinReq(testGroup, "", nil, 9, protocols("roundrobin"))
		req.ProtocolType = "connect"
		r = mustReady(t, h.join(req), "join with another protocol type")
		checkCode(t, "other protocol type", r.ErrorCode, kerr.InconsistentGroupProtocol.Code)
		req = joinReq(testGroup, "", nil, 9, nil)
		r = mustReady(t, h.join(req), "join without protocols")
		checkCode(t, "no protocols", r.ErrorCode, kerr.InconsistentGroupProtocol.Code)
	})
}

// JoinGroup validation: group id, session timeout bounds, group.max.size,
// unknown member ids.
func TestJoinValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{MaxSize: 2}, nil)
		defer h.close()
		r := mustReady(t, h.join(joinReq("", "", nil, 9, protocols("range"))), "empty group id")
		checkCode(t, "empty group id", r.ErrorCode, kerr.InvalidGroupID.Code)
		for _, st := range []int32{5999, 1800001} {
			req := joinReq(testGroup, "", nil, 9, protocols("range"))
			req.SessionTimeoutMillis = st
			r = mustReady(t, h.join(req), "session timeout")
			checkCode(t, "session timeout", r.ErrorCode, kerr.InvalidSessionTimeout.Code)
		}
		r = mustReady(t, h.join(joinReq("other", "made-up", nil, 9, protocols("range"))), "unknown member")
		checkCode(t, "unknown member of unknown group", r.ErrorCode, kerr.UnknownMemberID.Code)
		h.stableGroup(testGroup, 2, false)
		r = mustReady(t, h.join(joinReq(testGroup, "", nil, 3, protocols("range"))), "third member")
		checkCode(t, "third member", r.ErrorCode, kerr.GroupMaxSizeReached.Code)
	})
}

// Requests for partitions not loaded get NOT_COORDINATOR; while loading,
// COORDINATOR_LOAD_IN_PROGRESS; unloading answers parked joins with
// NOT_COORDINATOR.
func TestLoadUnload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		cfg := Config{OffsetsTopicNumPartitions: 4}
		c := New(cfg, store, testLogger(t))
		defer c.Close()
		h := &harness{t: t, c: c, store: store, cfg: cfg}
		p := c.Partition(testGroup)
		r := mustReady(t, h.join(joinReq(testGroup, "", nil, 9, protocols("range"))), "join before load")
		checkCode(t, "not loaded", r.ErrorCode, kerr.NotCoordinator.Code)

		loadGate := make(chan struct{})
		store.setLoadGate(loadGate)
		loaded := async(func() error { return c.LoadPartition(context.Background(), p) })
		mustWait(t, loaded, "load")
		r = mustReady(t, h.join(joinReq(testGroup, "", nil, 9, protocols("range"))), "join while loading")
		checkCode(t, "loading", r.ErrorCode, kerr.CoordinatorLoadInProgress.Code)
		lr := h.listGroups()
		if len(lr) != 0 {
			t.Fatalf("list while loading: %v", lr)
		}
		if err := c.LoadPartition(context.Background(), p); err != nil {
			t.Fatalf("second load: %v", err)
		}
		close(loadGate)
		if err := mustReady(t, loaded, "load"); err != nil {
			t.Fatal(err)
		}
		if err := c.LoadPartition(context.Background(), 4); err == nil {
			t.Fatal("partition 4 of 4 loaded")
		}
		id := h.memberID(testGroup)
		ch := h.join(joinReq(testGroup, id, nil, 9, protocols("range")))
		mustWait(t, ch, "join")
		c.UnloadPartition(p)
		checkCode(t, "parked join after unload", mustReady(t, ch, "join").ErrorCode, kerr.NotCoordinator.Code)
		checkCode(t, "heartbeat after unload", h.heartbeat(testGroup, &tm{id: id}), kerr.NotCoordinator.Code)

		// Unloading while loading cancels the load.
		loadGate = make(chan struct{})
		store.setLoadGate(loadGate)
		loaded = async(func() error { return c.LoadPartition(context.Background(), p) })
		mustWait(t, loaded, "load")
		c.UnloadPartition(p)
		close(loadGate)
		if err := mustReady(t, loaded, "load"); err != ErrPartitionUnloaded {
			t.Fatalf("load unloaded meanwhile: %v", err)
		}
		checkCode(t, "after unloaded load", h.heartbeat(testGroup, &tm{id: id}), kerr.NotCoordinator.Code)
	})
}

// Close answers parked requests and stops every goroutine.
func TestCloseAnswersWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		id := h.memberID(testGroup)
		ch := h.join(joinReq(testGroup, id, nil, 9, protocols("range")))
		mustWait(t, ch, "join")
		gate := make(chan struct{})
		h.store.setGate(gate)
		cr := async(func() *kmsg.OffsetCommitResponse { return h.commit("simple", nil, map[tp]int64{{"t", 0}: 1}) })
		mustWait(t, cr, "commit")
		h.close()
		checkCode(t, "join after close", mustReady(t, ch, "join").ErrorCode, kerr.CoordinatorNotAvailable.Code)
		h.checkCommitted("commit after close", mustReady(t, cr, "commit"), kerr.CoordinatorNotAvailable.Code)
		r := mustReady(t, h.join(joinReq(testGroup, "", nil, 9, protocols("range"))), "join after close")
		checkCode(t, "closed", r.ErrorCode, kerr.CoordinatorNotAvailable.Code)
		if err := h.c.LoadPartition(context.Background(), 0); err != ErrClosed {
			t.Fatalf("load after close: %v", err)
		}
	})
}

// A static member's restart that cannot be written keeps the old member
// id; one during CompletingRebalance starts another rebalance.
func TestStaticMemberRestartEdgeCases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 2, true)
		follower := ms[1]
		if follower.leader {
			follower = ms[0]
		}
		h.store.setFail(kerr.NotLeaderForPartition)
		r := mustReady(t, h.join(joinReq(testGroup, "", follower.instanceID, 9, protocols("range"))), "static rejoin")
		checkCode(t, "static rejoin that cannot be written", r.ErrorCode, kerr.NotCoordinator.Code)
		h.store.setFail(nil)
		checkCode(t, "old id after the failed restart", h.heartbeat(testGroup, follower), 0)
		if s := h.state(testGroup); s != "Stable" {
			t.Fatalf("state %s", s)
		}

		// Both rejoin: CompletingRebalance; then the follower restarts.
		chs := h.rejoin(testGroup, ms...)
		completeJoins(t, chs, []*string{ms[0].instanceID, ms[1].instanceID})
		if s := h.state(testGroup); s != "CompletingRebalance" {
			t.Fatalf("state %s", s)
		}
		r2 := h.join(joinReq(testGroup, "", follower.instanceID, 9, protocols("range")))
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("static rejoin while completing: state %s", s)
		}
		mustWait(t, r2, "restarted member's join")
	})
}
