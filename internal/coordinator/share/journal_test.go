package share

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	gcoord "github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// memJournal is a Journal over an in-memory log that fails its writes
// while fail is set.
type memJournal struct {
	log      []gcoord.Record
	fail     bool
	maxBytes int   // MaxBatchBytes; zero: no limit
	appends  []int // the length of log after each Append
}

func (j *memJournal) Partition(string) int32 { return 0 }

func (j *memJournal) MaxBatchBytes(string) int { return j.maxBytes }

func (j *memJournal) Append(_ string, recs []gcoord.Record, done func(error)) {
	if j.fail {
		done(kerr.NotEnoughReplicas)
		return
	}
	if j.maxBytes > 0 {
		// The batch the group coordinator's store would write; too
		// large fails as it does (MESSAGE_TOO_LARGE, mapped to
		// UNKNOWN_SERVER_ERROR for clients).
		rs := make([]record.Record, len(recs))
		for i, r := range recs {
			rs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		}
		batch, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence}, rs)
		if err != nil || len(batch) > j.maxBytes {
			done(kerr.UnknownServerError)
			return
		}
	}
	j.log = append(j.log, recs...)
	j.appends = append(j.appends, len(j.log))
	done(nil)
}

// replay decodes the log as the group coordinator's load does: the latest
// record of each key, tombstones removing it.
func (j *memJournal) replay(t *testing.T) []gcoord.ShareRecord {
	t.Helper()
	return replayLog(t, j.log)
}

// replayLog is replay of log.
func replayLog(t *testing.T, log []gcoord.Record) []gcoord.ShareRecord {
	t.Helper()
	latest := map[string]gcoord.ShareRecord{}
	var order []string
	for _, r := range log {
		d, err := gcoord.Decode(r)
		if err != nil || d.Share == nil {
			t.Fatalf("record %v: %v", r.Key, err)
		}
		k := string(r.Key)
		if _, ok := latest[k]; !ok {
			order = append(order, k)
		}
		latest[k] = *d.Share
	}
	var out []gcoord.ShareRecord
	for _, k := range order {
		if sr := latest[k]; !sr.Tombstone {
			out = append(out, sr)
		}
	}
	return out
}

// TestJournal: a share group's records replayed by a new Coordinator give
// the same group (epochs, members, initialized topics); a failed write
// answers the client with its error, keeps the change, and the next write
// rewrites the whole group with the tombstones of a member whose removal
// was lost, so the log catches up.
func TestJournal(t *testing.T) {
	topics := fakeTopics{"a": 2}
	j := &memJournal{}
	c := New(topics, nil)
	c.SetJournal(j)
	if r := heartbeat(c, "m1", 0, []string{"a"}); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("before the partition loads: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.LoadPartition(0, nil)
	heartbeat(c, "m1", 0, []string{"a"})
	heartbeat(c, "m2", 0, []string{"a"})
	j.fail = true
	if r := heartbeat(c, "m2", -1, nil); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("leave with a failing write: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	j.fail = false
	if r := heartbeat(c, "m1", 1, nil); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("m1 after the failed write: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}

	c2 := New(topics, nil)
	c2.SetJournal(j)
	c2.LoadPartition(0, j.replay(t))
	d := c2.Describe("g")
	if d.ErrorCode != 0 || d.GroupEpoch != 3 || d.AssignmentEpoch != 3 || len(d.Members) != 1 || d.Members[0].MemberID != "m1" || d.Members[0].MemberEpoch != 3 {
		t.Fatalf("replayed: %v epoch %d/%d members %+v", kerr.ErrorForCode(d.ErrorCode), d.GroupEpoch, d.AssignmentEpoch, d.Members)
	}
	if r := heartbeat(c2, "m1", 3, nil); r.ErrorCode != 0 || r.MemberEpoch != 3 {
		t.Fatalf("m1 at the new coordinator: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := heartbeat(c2, "m1", 1, nil); r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("m1 with its previous epoch: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Assignment)
	}
	if got := c2.InitializedTopics("g"); len(got) != 1 || got[0].Name != "a" || len(got[0].Partitions) != 2 {
		t.Fatalf("initialized topics: %+v", got)
	}
	heartbeat(c2, "m1", 3, []string{}) // unsubscribes: epoch 4
	heartbeat(c2, "m1", -1, nil)
	if err := c2.Delete(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
	if left := j.replay(t); len(left) != 0 {
		t.Fatalf("records left after the group's deletion: %+v", left)
	}
}

// TestClaim: a claimed id counts as a share group for the group
// coordinator (Holds) until every claim is released, and not as an
// existing share group (IsShareGroup); the group, once created, holds it.
func TestClaim(t *testing.T) {
	c := New(fakeTopics{"a": 1}, nil)
	r1, r2 := c.Claim("g"), c.Claim("g")
	if !c.Holds("g") || c.IsShareGroup("g") || c.Holds("h") {
		t.Fatalf("claimed: Holds %v IsShareGroup %v, other id Holds %v", c.Holds("g"), c.IsShareGroup("g"), c.Holds("h"))
	}
	r1()
	r1() // a second call does nothing
	if !c.Holds("g") {
		t.Fatal("one of two claims released: not held")
	}
	r2()
	if c.Holds("g") {
		t.Fatal("held after every claim was released")
	}
	heartbeat(c, "m1", 0, []string{"a"})
	if !c.Holds("g") {
		t.Fatal("a share group with a member is not held")
	}
}

// anyTopics resolves every name, the empty one included.
type anyTopics struct{}

func (anyTopics) Lookup(name string) ([16]byte, int32, bool) {
	var id [16]byte
	copy(id[:], name)
	return id, 3, true
}

// FuzzLoadPartition: any records of __consumer_offsets that decode as
// share group records, replayed in the group coordinator's order, load
// without panic, and the groups they make answer heartbeats and
// descriptions without panic. The input is a sequence of records, each a uint16 key
// length, key, int16 value length (-1: tombstone), value.
func FuzzLoadPartition(f *testing.F) {
	var seed []byte
	for _, sr := range []gcoord.ShareRecord{
		{Type: gcoord.ShareMetadataType, Group: "g", Epoch: 3},
		{Type: gcoord.ShareMemberMetadataType, Group: "g", MemberID: "m1", Topics: []string{"a"}},
		{Type: gcoord.ShareTargetMetadataType, Group: "g", Epoch: 3},
		{Type: gcoord.ShareTargetMemberType, Group: "g", MemberID: "m1", Assignment: map[[16]byte][]int32{{'a'}: {0, 1}}},
		{Type: gcoord.ShareCurrentMemberType, Group: "g", MemberID: "m1", Epoch: 3, PrevEpoch: 2, Assignment: map[[16]byte][]int32{{'a'}: {0, 1}}},
		{Type: gcoord.ShareStatePartitionsType, Group: "g", Initialized: []gcoord.ShareTopic{{ID: [16]byte{'a'}, Name: "a", Partitions: []int32{0, 1}}}},
		{Type: gcoord.ShareCurrentMemberType, Group: "h", MemberID: "x", Epoch: 1},
		{Type: gcoord.ShareMemberMetadataType, Group: "g", MemberID: "gone", Tombstone: true},
	} {
		r := sr.Record()
		seed = testutil.AppendKV(seed, r.Key, r.Value)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []gcoord.ShareRecord
		groups := map[string]bool{}
		testutil.SplitKV(data, func(key, value []byte) {
			if d, err := gcoord.Decode(gcoord.Record{Key: key, Value: value}); err == nil && d.Share != nil && !d.Share.Tombstone {
				recs = append(recs, *d.Share)
				groups[d.Share.Group] = true
			}
		})
		slices.SortFunc(recs, func(a, b gcoord.ShareRecord) int {
			return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Type, b.Type), cmp.Compare(a.MemberID, b.MemberID))
		})
		c := New(anyTopics{}, nil)
		c.SetJournal(&memJournal{})
		c.LoadPartition(0, recs)
		defer c.UnloadPartition(0)
		for g := range groups {
			c.Describe(g)
			c.InitializedTopics(g)
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, g, "m1", 0, []string{"a"}
			c.Heartbeat(context.Background(), req, Client{}, nil)
		}
	})
}

// TestJournalRepairInChunks: a dirty group whose rewrite is larger than
// max.message.bytes (MaxBatchBytes) writes it in Appends that each fit:
// the next heartbeat succeeds and the log replays to the group. Before,
// the rewrite went in one Append that failed at every heartbeat. A crash
// after any of those Appends leaves a log that loads and serves.
func TestJournalRepairInChunks(t *testing.T) {
	const members = 40
	topics := fakeTopics{"a": 64}
	j := &memJournal{maxBytes: 4 << 10}
	c := New(topics, nil)
	c.SetJournal(j)
	c.LoadPartition(0, nil)
	for i := range members {
		if r := heartbeat(c, fmt.Sprintf("member-%02d", i), 0, []string{"a"}); r.ErrorCode != 0 {
			t.Fatalf("member %d joins: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	j.fail = true
	heartbeat(c, "member-00", -1, nil) // leaves; its write fails: the group is dirty
	j.fail = false
	before := len(j.appends)
	var r *kmsg.ShareGroupHeartbeatResponse
	for range 3 {
		if r = heartbeat(c, "member-01", 0, []string{"a"}); r.ErrorCode == 0 {
			break
		}
	}
	if r.ErrorCode != 0 {
		t.Fatalf("heartbeats after the failed write: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	chunks := j.appends[before:]
	if len(chunks) < 2 {
		t.Fatalf("the rewrite took %d Appends, want it cut in several", len(chunks))
	}
	c2 := New(topics, nil)
	c2.SetJournal(j)
	c2.LoadPartition(0, j.replay(t))
	if d := c2.Describe("g"); d.ErrorCode != 0 || len(d.Members) != members-1 {
		t.Fatalf("replayed: %v, %d members, want %d (member-00 left)", kerr.ErrorForCode(d.ErrorCode), len(d.Members), members-1)
	}
	// A crash after each Append of the rewrite but the last.
	for _, end := range chunks[:len(chunks)-1] {
		c3 := New(topics, nil)
		c3.SetJournal(&memJournal{})
		c3.LoadPartition(0, replayLog(t, j.log[:end]))
		if d := c3.Describe("g"); d.ErrorCode != 0 || len(d.Members) == 0 {
			t.Fatalf("log cut at %d: %v, %d members", end, kerr.ErrorForCode(d.ErrorCode), len(d.Members))
		}
		if r := heartbeat(c3, "member-05", 0, []string{"a"}); r.ErrorCode != 0 {
			t.Fatalf("log cut at %d: a member rejoins: %v", end, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
