package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offsets-only ("simple") groups: commit with generation -1, fetch some or
// all, delete some with OffsetDelete, delete the group.
func TestOffsetsCommitFetchDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		r := h.commit("simple", nil, map[tp]int64{{"t", 0}: 10, {"t", 1}: 20, {"u", 0}: 5})
		h.checkCommitted("commit", r, 0)
		got := h.fetch("simple", tp{"t", 0}, tp{"t", 1}, tp{"t", 2}, tp{"x", 0})
		want := map[tp]int64{{"t", 0}: 10, {"t", 1}: 20, {"t", 2}: -1, {"x", 0}: -1}
		checkOffsets(t, got, want)
		checkOffsets(t, h.fetch("simple"), map[tp]int64{{"t", 0}: 10, {"t", 1}: 20, {"u", 0}: 5})
		checkOffsets(t, h.fetch("nobody", tp{"t", 0}), map[tp]int64{{"t", 0}: -1})
		checkOffsets(t, h.fetch("nobody"), map[tp]int64{})

		// Metadata and leader epoch are kept; v7 single-group fetch.
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group = "simple"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		fr := h.c.OffsetFetch(context.Background(), req)
		p := fr.Topics[0].Partitions[0]
		if fr.ErrorCode != 0 || p.Offset != 10 || p.LeaderEpoch != 7 || p.Metadata == nil || *p.Metadata != "md" {
			t.Fatalf("fetch v7: %+v", fr)
		}

		// Too-long metadata fails only its partition.
		cr := kmsg.NewPtrOffsetCommitRequest()
		cr.Version = 8
		cr.Group = "simple"
		cr.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 11, LeaderEpoch: -1, Metadata: strp(strings.Repeat("x", 4097))},
			{Partition: 1, Offset: 21, LeaderEpoch: -1},
		}}}
		codes := commitCodes(h.c.OffsetCommit(context.Background(), cr))
		checkCode(t, "long metadata", codes[tp{"t", 0}], kerr.OffsetMetadataTooLarge.Code)
		checkCode(t, "short metadata", codes[tp{"t", 1}], 0)
		checkOffsets(t, h.fetch("simple", tp{"t", 0}, tp{"t", 1}), map[tp]int64{{"t", 0}: 10, {"t", 1}: 21})

		// OffsetDelete: a group without protocol subscribes to nothing.
		dr := kmsg.NewPtrOffsetDeleteRequest()
		dr.Group = "simple"
		dr.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 9}}}}
		odr := h.c.OffsetDelete(context.Background(), dr)
		if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != 0 || odr.Topics[0].Partitions[1].ErrorCode != 0 {
			t.Fatalf("offset delete %+v", odr)
		}
		checkOffsets(t, h.fetch("simple"), map[tp]int64{{"t", 1}: 21, {"u", 0}: 5})
		dr.Group = "nobody"
		checkCode(t, "offset delete of unknown group", h.c.OffsetDelete(context.Background(), dr).ErrorCode, kerr.GroupIDNotFound.Code)

		// DeleteGroups.
		checkCode(t, "delete group", h.deleteGroup("simple"), 0)
		checkOffsets(t, h.fetch("simple"), map[tp]int64{})
		checkCode(t, "delete again", h.deleteGroup("simple"), kerr.GroupIDNotFound.Code)
		if gs := h.listGroups(); len(gs) != 0 {
			t.Fatalf("groups after delete: %v", gs)
		}
		// Tombstones were written for the group and its offsets.
		var tombstones []string
		for _, rec := range h.store.records(0) {
			if rec.Value != nil {
				continue
			}
			d, err := Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if d.OffsetKey != nil {
				tombstones = append(tombstones, d.OffsetKey.Topic)
			} else {
				tombstones = append(tombstones, "group:"+d.GroupKey.Group)
			}
		}
		if strings.Join(tombstones, ",") != "t,t,u,group:simple" {
			t.Fatalf("tombstones %v", tombstones)
		}
	})
}

func (h *harness) deleteGroup(group string) int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{group}
	r := h.c.DeleteGroups(context.Background(), req)
	return r.Groups[0].ErrorCode
}

func checkOffsets(t *testing.T, got, want map[tp]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("offsets %v, want %v", got, want)
		}
	}
}

// Members commit with their generation; the coordinator checks it.
func TestOffsetsCommitByMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup(testGroup, 2, false)
		h.checkCommitted("member commit", h.commit(testGroup, ms[0], map[tp]int64{{"t", 0}: 3}), 0)
		stale := *ms[1]
		stale.generation--
		h.checkCommitted("stale generation", h.commit(testGroup, &stale, map[tp]int64{{"t", 1}: 3}), kerr.IllegalGeneration.Code)
		h.checkCommitted("unknown member", h.commit(testGroup, &tm{id: "nope", generation: ms[0].generation}, map[tp]int64{{"t", 1}: 3}), kerr.UnknownMemberID.Code)
		h.checkCommitted("no member in a live group", h.commit(testGroup, nil, map[tp]int64{{"t", 1}: 3}), kerr.UnknownMemberID.Code)
		h.checkCommitted("generation of an unknown group", h.commit("nope", &tm{id: "x", generation: 3}, map[tp]int64{{"t", 1}: 3}), kerr.GroupIDNotFound.Code)
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 3})
		checkCode(t, "delete live group", h.deleteGroup(testGroup), kerr.NonEmptyGroup.Code)

		// OffsetDelete of a consumer group: subscribed topics are kept.
		h.checkCommitted("commit other topic", h.commit(testGroup, ms[0], map[tp]int64{{"old", 0}: 1}), 0)
		dr := kmsg.NewPtrOffsetDeleteRequest()
		dr.Group = testGroup
		dr.Topics = []kmsg.OffsetDeleteRequestTopic{
			{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
			{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		}
		odr := h.c.OffsetDelete(context.Background(), dr)
		checkCode(t, "delete subscribed", odr.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic.Code)
		checkCode(t, "delete unsubscribed", odr.Topics[1].Partitions[0].ErrorCode, 0)
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 3})

		// Commits keep the session like heartbeats.
		for range 5 {
			time.Sleep(4 * time.Second)
			h.checkCommitted("commit as heartbeat", h.commit(testGroup, ms[0], map[tp]int64{{"t", 0}: 4}), 0)
			checkCode(t, "heartbeat", h.heartbeat(testGroup, ms[1]), 0)
		}
		// During a rebalance, commits of the old generation still work
		// in PreparingRebalance, not in CompletingRebalance.
		chs := h.rejoin(testGroup, ms[1]) // not the leader: no rebalance
		mustReady(t, chs[0], "follower rejoin")
		chs = h.rejoin(testGroup, ms[0]) // the leader: rebalance
		h.checkCommitted("commit while preparing", h.commit(testGroup, ms[1], map[tp]int64{{"t", 1}: 9}), 0)
		chs = append(chs, h.rejoin(testGroup, ms[1])...)
		ms2 := completeJoins(t, chs, nil)
		h.checkCommitted("commit while completing", h.commit(testGroup, ms2[0], map[tp]int64{{"t", 1}: 10}), kerr.RebalanceInProgress.Code)
		h.syncAll(testGroup, ms2)
		h.checkCommitted("commit when stable", h.commit(testGroup, ms2[0], map[tp]int64{{"t", 1}: 10}), 0)
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 4, {"t", 1}: 10})
	})
}

// A commit is answered, and visible, only once its records are written.
func TestCommitWaitsForAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		h.checkCommitted("commit", h.commit("g", nil, map[tp]int64{{"t", 0}: 1}), 0)
		gate := make(chan struct{})
		h.store.setGate(gate)
		cr := async(func() *kmsg.OffsetCommitResponse { return h.commit("g", nil, map[tp]int64{{"t", 0}: 2}) })
		mustWait(t, cr, "commit while the append blocks")
		checkOffsets(t, h.fetch("g"), map[tp]int64{{"t", 0}: 1})
		close(gate)
		h.checkCommitted("commit", mustReady(t, cr, "commit"), 0)
		checkOffsets(t, h.fetch("g"), map[tp]int64{{"t", 0}: 2})

		// A write slower than offsets.commit.timeout.ms fails.
		gate = make(chan struct{})
		h.store.setGate(gate)
		cr = async(func() *kmsg.OffsetCommitResponse { return h.commit("g", nil, map[tp]int64{{"t", 0}: 3}) })
		time.Sleep(5 * time.Second)
		h.checkCommitted("timed out commit", mustReady(t, cr, "commit"), kerr.CoordinatorNotAvailable.Code)
		close(gate)
		checkOffsets(t, h.fetch("g"), map[tp]int64{{"t", 0}: 2})
	})
}

// Store errors map to Kafka's client errors.
func TestAppendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		for _, tc := range []struct {
			err  error
			want int16
		}{
			{kerr.NotLeaderForPartition, kerr.NotCoordinator.Code},
			{kerr.KafkaStorageError, kerr.NotCoordinator.Code},
			{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
			{kerr.MessageTooLarge, kerr.InvalidCommitOffsetSize.Code},
			{errors.New("disk on fire"), kerr.CoordinatorNotAvailable.Code},
		} {
			h.store.setFail(tc.err)
			h.checkCommitted(tc.err.Error(), h.commit("g", nil, map[tp]int64{{"t", 0}: 1}), tc.want)
		}
		h.store.setFail(nil)
		checkOffsets(t, h.fetch("g"), map[tp]int64{})

		// The leader's assignment fails to be written: members get the
		// error and the group rebalances.
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
		fs := h.sync(testGroup, follower, nil)
		h.store.setFail(kerr.NotLeaderForPartition)
		ls := h.sync(testGroup, leader, map[string][]byte{leader.id: []byte("x")})
		checkCode(t, "leader sync", mustReady(t, ls, "leader sync").ErrorCode, kerr.NotCoordinator.Code)
		checkCode(t, "follower sync", mustReady(t, fs, "follower sync").ErrorCode, kerr.NotCoordinator.Code)
		if s := h.state(testGroup); s != "PreparingRebalance" {
			t.Fatalf("state %s", s)
		}
		h.store.setFail(nil)
	})
}

// Offsets and groups survive a restart of the coordinator: reloading the
// partition gives the same groups, members, assignments and offsets.
func TestReloadRebuildsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer func() { h.close() }()
		ms := h.stableGroup(testGroup, 2, false)
		statics := h.stableGroup("static", 1, true)
		h.checkCommitted("member commit", h.commit(testGroup, ms[0], map[tp]int64{{"t", 0}: 100, {"t", 1}: 200}), 0)
		h.checkCommitted("simple commit", h.commit("simple", nil, map[tp]int64{{"u", 3}: 7}), 0)
		h.checkCommitted("doomed commit", h.commit("doomed", nil, map[tp]int64{{"u", 3}: 7}), 0)
		checkCode(t, "delete doomed", h.deleteGroup("doomed"), 0)
		req := kmsg.NewPtrOffsetCommitRequest() // v2 with an explicit retention: value v1
		req.Version = 2
		req.Group = "retained"
		req.RetentionTimeMillis = 60000
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "r", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		h.checkCommitted("v2 commit", h.c.OffsetCommit(context.Background(), req), 0)
		before := h.describe(testGroup)
		beforeStatic := h.describe("static")

		h.restart()
		after := h.describe(testGroup)
		if after.State != "Stable" || after.Protocol != before.Protocol || len(after.Members) != 2 {
			t.Fatalf("reloaded group %+v", after)
		}
		for i := range before.Members {
			b, a := before.Members[i], after.Members[i]
			if b.MemberID != a.MemberID || string(b.MemberAssignment) != string(a.MemberAssignment) ||
				string(b.ProtocolMetadata) != string(a.ProtocolMetadata) || b.ClientID != a.ClientID || b.ClientHost != a.ClientHost {
				t.Fatalf("reloaded member %+v, was %+v", a, b)
			}
		}
		if as := h.describe("static"); as.Members[0].InstanceID == nil || *as.Members[0].InstanceID != *beforeStatic.Members[0].InstanceID {
			t.Fatalf("reloaded static member %+v", as.Members)
		}
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 100, {"t", 1}: 200})
		checkOffsets(t, h.fetch("simple"), map[tp]int64{{"u", 3}: 7})
		checkOffsets(t, h.fetch("doomed"), map[tp]int64{})
		checkOffsets(t, h.fetch("retained"), map[tp]int64{{"r", 0}: 1})
		want := map[string]string{testGroup: "Stable", "static": "Stable", "simple": "Empty", "retained": "Empty"}
		if gs := h.listGroups(); len(gs) != len(want) {
			t.Fatalf("groups %v, want %v", gs, want)
		}
		// Members continue with their ids and generation.
		for _, m := range ms {
			checkCode(t, "heartbeat after reload", h.heartbeat(testGroup, m), 0)
		}
		checkCode(t, "static heartbeat after reload", h.heartbeat("static", statics[0]), 0)
		h.checkCommitted("commit after reload", h.commit(testGroup, ms[1], map[tp]int64{{"t", 1}: 201}), 0)
		// Members that do not come back expire, and the group empties.
		time.Sleep(11 * time.Second)
		if s := h.state("static"); s != "Empty" {
			t.Fatalf("static group %s after its member's session", s)
		}
		if s := h.state(testGroup); s != "Empty" {
			t.Fatalf("group %s after its members' sessions", s)
		}
		h.restart()
		if d := h.describe(testGroup); d.State != "Empty" || len(d.Members) != 0 {
			t.Fatalf("reloaded empty group %+v", d)
		}
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 100, {"t", 1}: 201})
	})
}

// Offsets of an empty group expire offsets.retention.minutes after it
// became empty; then the group is deleted. Offsets of groups without a
// protocol expire after their last commit; explicit retention (v2-v4)
// wins.
func TestOffsetExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Minute}
		h := newHarness(t, cfg, nil)
		defer h.close()
		start := time.Now()
		until := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
		h.checkCommitted("simple", h.commit("simple", nil, map[tp]int64{{"t", 0}: 1, {"t", 1}: 1}), 0)
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 2
		req.Group = "short"
		req.RetentionTimeMillis = (10 * time.Minute).Milliseconds()
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		h.checkCommitted("short", h.c.OffsetCommit(context.Background(), req), 0)

		ms := h.stableGroup(testGroup, 1, false)
		h.checkCommitted("member", h.commit(testGroup, ms[0], map[tp]int64{{"t", 0}: 5}), 0)
		for time.Since(start) < 30*time.Minute { // a live group's offsets stay
			time.Sleep(5 * time.Second)
			checkCode(t, "heartbeat", h.heartbeat(testGroup, ms[0]), 0)
		}
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 5})
		checkCode(t, "leave", h.leave(testGroup, ms[0]).ErrorCode, 0) // Empty from 30m
		if _, ok := h.listGroups()["short"]; ok {
			t.Fatal("offsets committed with a 10 minute retention still there after 30m")
		}
		h.checkCommitted("simple again", h.commit("simple", nil, map[tp]int64{{"t", 1}: 2}), 0)

		until(61 * time.Minute) // simple t/0 expired; t/1 was recommitted at 30m
		checkOffsets(t, h.fetch("simple"), map[tp]int64{{"t", 1}: 2})
		until(90 * time.Minute) // the group has been empty for less than an hour
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{{"t", 0}: 5})
		until(91 * time.Minute)
		checkOffsets(t, h.fetch(testGroup), map[tp]int64{})
		if _, ok := h.listGroups()[testGroup]; ok {
			t.Fatal("expired group still listed")
		}
		// simple's last offset, committed at 30m, expired at the same check.
		if gs := h.listGroups(); len(gs) != 0 {
			t.Fatalf("groups %v after all expired", gs)
		}
		// The expirations are tombstones: a reload agrees, once the
		// writer appended them (they are written after the groups go
		// from memory, as Kafka's cleanupGroupMetadata does).
		synctest.Wait()
		h.restart()
		if gs := h.listGroups(); len(gs) != 0 {
			t.Fatalf("groups %v after reload", gs)
		}
	})
}

// ListGroups filters by state and type; DescribeGroups reports unknown
// groups as Dead and foreign ones as NOT_COORDINATOR.
func TestListDescribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{OffsetsTopicNumPartitions: 2}
		store := newMemStore()
		c := New(cfg, store, testLogger(t))
		defer c.Close()
		h := &harness{t: t, c: c, store: store, cfg: cfg}
		// Find two groups in different partitions; load only one.
		mine, foreign := "g-0", ""
		for i := 1; foreign == ""; i++ {
			if g := "g-" + string(rune('0'+i)); c.Partition(g) != c.Partition(mine) {
				foreign = g
			}
		}
		if err := c.LoadPartition(context.Background(), c.Partition(mine)); err != nil {
			t.Fatal(err)
		}
		h.stableGroup(mine, 1, false)
		simple, unknown := "", ""
		for i := 0; simple == "" || unknown == ""; i++ {
			g := fmt.Sprintf("other-%d", i)
			if c.Partition(g) != c.Partition(mine) {
				continue
			}
			if simple == "" {
				simple = g
			} else {
				unknown = g
			}
		}
		h.checkCommitted("simple", h.commit(simple, nil, map[tp]int64{{"t", 0}: 1}), 0)
		all := h.listGroups()
		if all[mine] != "Stable" || all[simple] != "Empty" || len(all) != 2 {
			t.Fatalf("list %v", all)
		}
		if st := h.listGroups("stable"); len(st) != 1 || st[mine] != "Stable" {
			t.Fatalf("list stable %v", st)
		}
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.TypesFilter = []string{"consumer"}
		if r := c.ListGroups(context.Background(), req); len(r.Groups) != 0 {
			t.Fatalf("type filter consumer: %+v", r.Groups)
		}
		req.TypesFilter = []string{"Classic"}
		if r := c.ListGroups(context.Background(), req); len(r.Groups) != 2 || r.Groups[0].GroupType != "classic" {
			t.Fatalf("type filter classic: %+v", r.Groups)
		}
		dr := kmsg.NewPtrDescribeGroupsRequest()
		dr.Version = 5
		dr.Groups = []string{unknown, foreign}
		r := c.DescribeGroups(context.Background(), dr)
		if r.Groups[0].ErrorCode != 0 || r.Groups[0].State != "Dead" {
			t.Fatalf("unknown group %+v", r.Groups[0])
		}
		checkCode(t, "foreign group", r.Groups[1].ErrorCode, kerr.NotCoordinator.Code)
		checkCode(t, "foreign delete", h.deleteGroup(foreign), kerr.NotCoordinator.Code)
	})
}
