package samsa_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// The share-partition state write path (KIP-932): acknowledgements rolled
// back when their write fails, and the share coordinator's checks of
// leader epochs and initialization.

// shareAck sends a ShareAcknowledge of [first, last] with type typ for
// partition 0 of topicID in member's share session at epoch, to node 1,
// and returns the partition's error.
func shareAck(t *testing.T, cl *kgo.Client, group, member string, topicID [16]byte, epoch int32, first, last int64, typ int8) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{typ}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatalf("share acknowledge: %v", err)
	}
	resp := kresp.(*kmsg.ShareAcknowledgeResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("share acknowledge: %v", err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// TestShareAckRollbackOnWriteFailure: an acknowledgement whose write to
// __share_group_state fails (its disk full: the real storage path, through
// the node's filesystem) is answered with the error and rolled back, as
// Kafka's SharePartition does: the records stay with the member, which
// acknowledges them again once the disk has room. Before, the failed
// acknowledgement stayed applied in memory (the second one was
// INVALID_RECORD_STATE) while the durable state had none of it, so a
// restart delivered records the member had been told were acknowledged,
// or the start offset moved past records never written. After a restart
// the acknowledged records are not delivered again, the others are.
func TestShareAckRollbackOnWriteFailure(t *testing.T) {
	disk := errorfs.NewDiskFull(1 << 40)
	onState := errorfs.Func(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, share.StateTopic) {
			return nil
		}
		return disk.MaybeError(op)
	})
	dir := t.TempDir()
	n := startConfig(t, samsa.Config{Dir: dir, FS: errorfs.Wrap(vfs.Default, onState), Properties: groupProps})
	cl := newClient(t, n)
	const topic, group, member, total = "jobs", "workers", "member-a-0000000000001", 10
	createTopic(t, cl, topic, 1, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, cl, topic, total)
	id := describe(t, kadm.NewClient(cl), topic).ID

	got := shareFetchOnce(t, cl, 1, group, member, id, 0, 5*time.Second)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != total-1 {
		t.Fatalf("acquired %+v", got)
	}
	disk.SetFree(0)
	if err := shareAck(t, cl, group, member, id, 1, 0, 4, 1); err == nil {
		t.Fatal("an acknowledgement whose write failed was answered without error")
	} else {
		t.Logf("acknowledgement with the state's disk full: %v", err)
	}
	if disk.Refused() == 0 {
		t.Fatal("no write to __share_group_state was refused")
	}
	disk.SetFree(1 << 40)
	if err := shareAck(t, cl, group, member, id, 2, 0, 4, 1); err != nil {
		t.Fatalf("acknowledging again after the failed write: %v (the failed one stayed applied)", err)
	}
	if start, _, ok := shareStateBatches(cl, []int32{1}, group, id); !ok || start != 5 {
		t.Fatalf("durable start offset %d (%v), want 5", start, ok)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, groupProps)
	cl = newClient(t, n)
	var again []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	waitFor(t, 30*time.Second, "the records after the restart", func() bool {
		again = shareFetchOnce(t, cl, 1, group, "member-b-0000000000002", id, 0, time.Second)
		return len(again) > 0
	})
	if len(again) != 1 || again[0].FirstOffset != 5 || again[0].LastOffset != total-1 {
		t.Fatalf("after the restart: %+v, want offsets 5-%d only", again, total-1)
	}
}

// shareStateRequest sends a ReadShareGroupState (write false) or
// WriteShareGroupState for group's partition 0 of topicID at leaderEpoch to
// node 1 and returns the partition's error and, for a read, its start
// offset.
func shareStateRequest(t *testing.T, cl *kgo.Client, write bool, group string, topicID [16]byte, leaderEpoch int32) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if write {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = group
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.LeaderEpoch, rp.StartOffset = leaderEpoch, 0
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = 0, 3, 0, 1
		rp.StateBatches = append(rp.StateBatches, sb)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return -1, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.LeaderEpoch = leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.StartOffset, kerr.ErrorForCode(p.ErrorCode)
}

// TestShareStateLeaderEpochs: the share coordinator answers as Kafka's
// ShareCoordinatorShard: a WriteShareGroupState or ReadShareGroupState of a
// share-partition never initialized is INVALID_REQUEST (it created a
// snapshot before); after InitializeShareGroupState a read records the
// reader's leader epoch, so that a write or read of an older one is
// FENCED_LEADER_EPOCH, also after a restart (the epoch is written to
// __share_group_state); a read at -1 neither checks nor records.
func TestShareStateLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupProps)
	cl := newClient(t, n)
	const topic, group = "jobs", "workers"
	createTopic(t, cl, topic, 1, nil)
	id := describe(t, kadm.NewClient(cl), topic).ID
	// A share fetch of another group creates __share_group_state.
	shareFetchOnce(t, cl, 1, "other", "member-x-0000000000001", id, 0, 0)

	step := func(what string, write bool, epoch int32, want error) {
		t.Helper()
		if _, err := shareStateRequest(t, cl, write, group, id, epoch); err != want {
			t.Fatalf("%s (leader epoch %d): %v, want %v", what, epoch, err, want)
		}
	}
	step("write before initialization", true, 3, kerr.InvalidRequest)
	step("read before initialization", false, 3, kerr.InvalidRequest)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ireq := kmsg.NewPtrInitializeShareGroupStateRequest()
	ireq.GroupID = group
	it := kmsg.NewInitializeShareGroupStateRequestTopic()
	it.TopicID = id
	ip := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	ip.StartOffset = 0
	it.Partitions = append(it.Partitions, ip)
	ireq.Topics = append(ireq.Topics, it)
	iresp, err := ireq.RequestWith(ctx, cl.Broker(1))
	if err != nil || iresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("initialize: %v %+v", err, iresp)
	}
	step("read", false, 3, nil)
	step("write of an older leader", true, 2, kerr.FencedLeaderEpoch)
	step("read of an older leader", false, 2, kerr.FencedLeaderEpoch)
	step("write", true, 3, nil)
	step("read without a leader epoch", false, -1, nil)
	step("read of a new leader", false, 5, nil)
	step("write of the leader it replaced", true, 3, kerr.FencedLeaderEpoch)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, groupProps)
	cl = newClient(t, n)
	waitFor(t, 30*time.Second, "the share coordinator loaded", func() bool {
		_, err := shareStateRequest(t, cl, false, group, id, -1)
		return err == nil
	})
	step("write of the replaced leader after a restart", true, 4, kerr.FencedLeaderEpoch)
	step("write", true, 5, nil)
}
