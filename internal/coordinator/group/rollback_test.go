package group

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A write of consumer group state that fails leaves the group as it was:
// the joining member is not in it, the group epoch and target assignment
// did not move, the members already in it keep their partitions; the
// client gets Kafka's error for the failure (COORDINATOR_NOT_AVAILABLE
// for NOT_ENOUGH_REPLICAS, NOT_COORDINATOR for NOT_LEADER_OR_FOLLOWER).
// A group the failed write would have created does not exist; a leave and
// a session expiry that cannot be written leave the member in the group,
// and the memory matches the log after a reload.
func TestConsumerGroupRollbackOnFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer func() { h.close() }()
		a := &cm{id: "a"}
		checkCode(t, "a joins", h.hb("g", a, true).ErrorCode, 0)
		if a.epoch != 1 || a.owned.size() != 4 {
			t.Fatalf("a: epoch %d owns %v", a.epoch, a.owned)
		}
		before := mustJSON(t, h.consumerDescribe("g"))

		// b's join cannot be written.
		h.store.setFail(kerr.NotEnoughReplicas)
		b := &cm{id: "b"}
		checkCode(t, "b joins, write fails", h.hb("g", b, true).ErrorCode, kerr.CoordinatorNotAvailable.Code)
		if after := mustJSON(t, h.consumerDescribe("g")); after != before {
			t.Fatalf("after a failed join:\n%s\nbefore:\n%s", after, before)
		}
		// a is not asked to revoke anything.
		h.store.setFail(nil)
		checkCode(t, "a heartbeats", h.hb("g", a, false).ErrorCode, 0)
		if a.epoch != 1 || a.owned.size() != 4 {
			t.Fatalf("a after the failed join: epoch %d owns %v", a.epoch, a.owned)
		}

		// A new group whose first write fails does not exist.
		h.store.setFail(kerr.NotLeaderForPartition)
		checkCode(t, "new group, write fails", h.hb("g2", &cm{id: "x"}, true).ErrorCode, kerr.NotCoordinator.Code)
		if d := h.consumerDescribe("g2"); d.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("g2 after a failed first write: %+v", d)
		}
		if lg := h.listGroupsTyped("consumer"); len(lg) != 1 {
			t.Fatalf("groups after a failed creation: %v", lg)
		}

		// a's leave cannot be written: a stays.
		checkCode(t, "a leaves, write fails", h.hb("g", &cm{id: "a", epoch: leaveEpoch}, false).ErrorCode, kerr.NotCoordinator.Code)
		if after := mustJSON(t, h.consumerDescribe("g")); after != before {
			t.Fatalf("after a failed leave:\n%s\nbefore:\n%s", after, before)
		}

		// a's session expires while writes fail: it stays, with a new
		// session, and is removed once the removal can be written.
		time.Sleep(46 * time.Second)
		synctest.Wait()
		if d := h.consumerDescribe("g"); len(d.Members) != 1 {
			t.Fatalf("members after an expiry that could not be written: %d", len(d.Members))
		}
		h.store.setFail(nil)
		checkCode(t, "b joins", h.hb("g", b, true).ErrorCode, 0)
		if d := h.consumerDescribe("g"); d.Epoch != 2 || len(d.Members) != 2 {
			t.Fatalf("after b joined: epoch %d, %d members (want 2, 2: the failed join left no trace)", d.Epoch, len(d.Members))
		}
		time.Sleep(46 * time.Second)
		synctest.Wait()
		if d := h.consumerDescribe("g"); len(d.Members) != 0 {
			t.Fatalf("members after the sessions expired with writes working: %d", len(d.Members))
		}
		// What is in memory is what the log holds.
		mem := mustJSON(t, h.consumerDescribe("g"))
		h.restart()
		if got := mustJSON(t, h.consumerDescribe("g")); got != mem {
			t.Fatalf("after reload:\n%s\nin memory before:\n%s", got, mem)
		}
	})
}

// Writes in flight when one fails are rolled back with it: the first
// change's write fails, the second (issued on top of it) lands, and both
// clients get an error; the group is as before the first.
func TestConsumerGroupRollbackPipelined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a := &cm{id: "a"}
		checkCode(t, "a joins", h.hb("g", a, true).ErrorCode, 0)
		before := mustJSON(t, h.consumerDescribe("g"))
		b, c := &cm{id: "b"}, &cm{id: "c"}
		// The first write fails, the second lands.
		cb, cc := h.failFirstOfTwo(
			func() int16 { return h.hb("g", b, true).ErrorCode },
			func() int16 { return h.hb("g", c, true).ErrorCode })
		checkCode(t, "b", cb, kerr.CoordinatorNotAvailable.Code)
		checkCode(t, "c", cc, kerr.CoordinatorNotAvailable.Code)
		if after := mustJSON(t, h.consumerDescribe("g")); after != before {
			t.Fatalf("after the failed writes:\n%s\nbefore:\n%s", after, before)
		}
		checkCode(t, "c joins again", h.hb("g", c, true).ErrorCode, 0)
		if d := h.consumerDescribe("g"); len(d.Members) != 2 {
			t.Fatalf("members: %d", len(d.Members))
		}
	})
}

// A ConsumerGroupHeartbeat whose change cannot be written is answered as
// Kafka's GroupCoordinatorService answers a failed write: the error alone,
// no member id, member epoch 0, no heartbeat interval, no assignment, not
// the epoch and assignment of the change that was rolled back (a join, a
// subscription change, a leave).
func TestConsumerGroupHeartbeatErrorAfterRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4, "u": 2}))
		defer h.close()
		a := &cm{id: "a"}
		checkCode(t, "a joins", h.hb("g", a, true).ErrorCode, 0)
		h.store.setFail(kerr.NotEnoughReplicas)
		for _, tc := range []struct {
			what string
			m    *cm
			full bool
			subs []string
		}{
			{"b joins", &cm{id: "b"}, true, nil},
			{"a subscribes to u too", a, true, []string{"t", "u"}},
			{"a leaves", &cm{id: "a", epoch: leaveEpoch}, false, nil},
		} {
			r := h.hb("g", tc.m, tc.full, tc.subs...)
			checkCode(t, tc.what, r.ErrorCode, kerr.CoordinatorNotAvailable.Code)
			if r.MemberID != nil || r.MemberEpoch != 0 || r.HeartbeatIntervalMillis != 0 || r.Assignment != nil {
				t.Errorf("%s, write fails: member id %v, epoch %d, heartbeat interval %d, assignment %v; want only the error",
					tc.what, derefOr(r.MemberID, "<nil>"), r.MemberEpoch, r.HeartbeatIntervalMillis, r.Assignment)
			}
		}
		h.store.setFail(nil)
		if d := h.consumerDescribe("g"); d.Epoch != 1 || len(d.Members) != 1 || d.Members[0].MemberEpoch != 1 {
			t.Fatalf("after the failed writes: epoch %d, %d members", d.Epoch, len(d.Members))
		}
	})
}

// A heartbeat that changes no membership (a member reporting its
// revocation) shares the group's maps with its snapshot; a join issued on
// top of it copies them before adding its member. When the heartbeat's
// write fails, both are rolled back: the group is as before, without the
// joining member, and goes on from there.
func TestConsumerGroupRollbackSharedSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := consumerHarness(t, newFakeTopics(map[string]int32{"t": 4}))
		defer h.close()
		a, b := &cm{id: "a"}, &cm{id: "b"}
		checkCode(t, "a joins", h.hb("g", a, true).ErrorCode, 0)
		checkCode(t, "b joins", h.hb("g", b, true).ErrorCode, 0)
		checkCode(t, "a is told to revoke", h.hb("g", a, false).ErrorCode, 0)
		if a.owned.size() != 2 {
			t.Fatalf("a owns %v, want 2 partitions after revoking", a.owned)
		}
		before := mustJSON(t, h.consumerDescribe("g"))
		c := &cm{id: "c"}
		ca, cc := h.failFirstOfTwo(
			func() int16 { return h.hb("g", &cm{id: "a", epoch: a.epoch, owned: a.owned}, false).ErrorCode },
			func() int16 { return h.hb("g", c, true).ErrorCode })
		checkCode(t, "a reports its revocation, write fails", ca, kerr.CoordinatorNotAvailable.Code)
		checkCode(t, "c joins on top of it", cc, kerr.CoordinatorNotAvailable.Code)
		if after := mustJSON(t, h.consumerDescribe("g")); after != before {
			t.Fatalf("after the failed writes:\n%s\nbefore:\n%s", after, before)
		}
		c = &cm{id: "c"}
		for range 3 {
			for _, m := range []*cm{a, b, c} {
				checkCode(t, "heartbeat "+m.id, h.hb("g", m, false).ErrorCode, 0)
			}
		}
		d := h.consumerDescribe("g")
		if d.State != "Stable" || len(d.Members) != 3 || d.Members[2].MemberID != "c" {
			t.Fatalf("after c joined again: %s, %d members", d.State, len(d.Members))
		}
		checkExclusive(t, a, b, c)
	})
}

// failFirstOfTwo issues first, then second while first's write is held,
// fails first's write (NOT_ENOUGH_REPLICAS) and lets second's land, and
// returns both error codes. Call inside a synctest bubble.
func (h *harness) failFirstOfTwo(first, second func() int16) (int16, int16) {
	h.t.Helper()
	gate := make(chan struct{})
	h.store.setGate(gate)
	h.store.setFailOnce(kerr.NotEnoughReplicas)
	r1 := async(first)
	synctest.Wait()
	r2 := async(second)
	synctest.Wait()
	h.store.setGate(nil)
	close(gate)
	return mustReady(h.t, r1, "first"), mustReady(h.t, r2, "second")
}
