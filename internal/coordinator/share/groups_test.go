package share

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fakeTopics map[string]int32

func (f fakeTopics) Lookup(name string) ([16]byte, int32, bool) {
	n, ok := f[name]
	return [16]byte{name[0]}, n, ok
}

func heartbeat(c *Coordinator, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, "g", member, epoch, topics
	return c.Heartbeat(context.Background(), req, Client{}, nil)
}

// TestHeartbeat: joining, fencing, subscription changes, leaving and the
// session timeout, scripted.
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(fakeTopics{"a": 2, "b": 3}, func(string) Settings { return Settings{SessionTimeout: 10 * time.Second} })
		r := heartbeat(c, "m1", 0, []string{"a"})
		if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Fatalf("join: %+v", r)
		}
		r2 := heartbeat(c, "m2", 0, []string{"a"})
		if r2.MemberEpoch != 2 || len(r2.Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Fatalf("second member gets every partition too: %+v", r2)
		}
		if r := heartbeat(c, "m1", 1, nil); r.MemberEpoch != 2 || r.Assignment == nil {
			t.Fatalf("m1 catches up with the group epoch: %+v", r)
		}
		if r := heartbeat(c, "m1", 2, nil); r.Assignment != nil {
			t.Fatalf("an unchanged assignment is not resent: %+v", r)
		}
		if r := heartbeat(c, "m1", 7, nil); r.ErrorCode != kerr.FencedMemberEpoch.Code {
			t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if r := heartbeat(c, "nobody", 3, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		r = heartbeat(c, "m1", 2, []string{"a", "b"})
		if r.MemberEpoch != 3 || len(r.Assignment.TopicPartitions) != 2 {
			t.Fatalf("subscription change: %+v", r)
		}
		if r := heartbeat(c, "m2", -1, nil); r.MemberEpoch != -1 {
			t.Fatalf("leave: %+v", r)
		}
		if err := c.Delete(context.Background(), "g"); !errors.Is(err, kerr.NonEmptyGroup) {
			t.Fatalf("delete with a member: %v", err)
		}
		time.Sleep(11 * time.Second) // m1's session times out
		if d := c.Describe("g"); d.GroupState != "Empty" || len(d.Members) != 0 {
			t.Fatalf("after the session timeout: %+v", d)
		}
		if err := c.Delete(context.Background(), "g"); err != nil {
			t.Fatal(err)
		}
		if d := c.Describe("g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("deleted group: %+v", d)
		}
	})
}

// TestSessionEpochs: share session epochs as ShareFetch and ShareAcknowledge
// use them.
func TestSessionEpochs(t *testing.T) {
	c := New(fakeTopics{}, nil)
	tp := TopicPartition{Partition: 1}
	if _, _, err := c.OpenSession("g", "m", 1, nil, nil, false); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("epoch 1 without a session: %v", err)
	}
	if _, _, err := c.OpenSession("g", "m", 0, nil, nil, true); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("ShareAcknowledge at epoch 0: %v", err)
	}
	if tps, _, err := c.OpenSession("g", "m", 0, []TopicPartition{tp}, nil, false); err != nil || len(tps) != 1 {
		t.Fatalf("open: %v %v", tps, err)
	}
	if _, _, err := c.OpenSession("g", "m", 2, nil, nil, false); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("skipped epoch: %v", err)
	}
	if tps, _, err := c.OpenSession("g", "m", 1, nil, []TopicPartition{tp}, false); err != nil || len(tps) != 0 {
		t.Fatalf("forget: %v %v", tps, err)
	}
	if _, closed, err := c.OpenSession("g", "m", -1, nil, nil, true); err != nil || !closed {
		t.Fatalf("close: %v %v", closed, err)
	}
	if _, _, err := c.OpenSession("g", "m", 3, nil, nil, false); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("after close: %v", err)
	}
}

// TestMemberLeaveReported: a member that leaves, and one that stops
// heartbeating (removed by its session timer, though nothing else calls on
// the group), are reported to OnMemberLeave, so their records are released.
func TestMemberLeaveReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(fakeTopics{"a": 1}, func(string) Settings { return Settings{SessionTimeout: 10 * time.Second} })
		left := make(chan string, 4)
		c.OnMemberLeave(func(g, m string) { left <- g + "/" + m })
		heartbeat(c, "m1", 0, []string{"a"})
		heartbeat(c, "m2", 0, []string{"a"})
		heartbeat(c, "m1", -1, nil)
		synctest.Wait()
		if got := <-left; got != "g/m1" {
			t.Fatalf("left %q, want g/m1", got)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if len(left) != 0 {
			t.Fatalf("m2 removed before its session timed out: %q", <-left)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case got := <-left:
			if got != "g/m2" {
				t.Fatalf("left %q, want g/m2", got)
			}
		default:
			t.Fatal("m2's session timed out but it was not removed")
		}
	})
}
