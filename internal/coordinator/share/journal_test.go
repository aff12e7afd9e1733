package share

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	gcoord "github.com/samsahq/samsa/internal/coordinator/group"
)

// memJournal is a Journal over an in-memory log that fails its writes
// while fail is set.
type memJournal struct {
	log  []gcoord.Record
	fail bool
}

func (j *memJournal) Partition(string) int32 { return 0 }

func (j *memJournal) Append(_ string, recs []gcoord.Record, done func(error)) {
	if j.fail {
		done(kerr.NotEnoughReplicas)
		return
	}
	j.log = append(j.log, recs...)
	done(nil)
}

// replay decodes the log as the group coordinator's load does: the latest
// record of each key, tombstones removing it.
func (j *memJournal) replay(t *testing.T) []gcoord.ShareRecord {
	t.Helper()
	latest := map[string]gcoord.ShareRecord{}
	var order []string
	for _, r := range j.log {
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
