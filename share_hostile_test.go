package samsa_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareAcknowledgeHostileBatches: ShareAcknowledge batches that Kafka's
// KafkaApis.validateAcknowledgementBatches refuses get INVALID_REQUEST for
// their partition before anything applies (overlapping or unsorted
// batches, negative offsets, first past last, a types list of the wrong
// length, a type out of range, Renew in v1); a partition the topic does not
// have is UNKNOWN_TOPIC_OR_PARTITION (was the retriable
// NOT_LEADER_OR_FOLLOWER); a Gap from math.MinInt64 no longer spins under
// the share-partition's lock. After them the member still accepts its
// records one by one.
func TestShareAcknowledgeHostileBatches(t *testing.T) {
	const topic, group, total = "jobs", "workers", 10
	n, _ := startShareNode(t, topic, 1, group, total)
	m := newRawShareMember(t, n, group, "member-hostile-000000001", topic)
	if got := m.fetch(t, 5*time.Second); got != total {
		t.Fatalf("acquired %d, want %d", got, total)
	}

	epoch := int32(1)
	type batch struct {
		first, last int64
		types       []int8
	}
	ack := func(partition int32, bs ...batch) int16 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = 1
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, epoch
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = m.topicID
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = partition
		for _, b := range bs {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.first, b.last, b.types
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			t.Fatalf("ShareAcknowledge: %v", err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ShareAcknowledge: %v, %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
		}
		epoch++
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	accept, release, renew := []int8{1}, []int8{2}, []int8{4}
	for _, c := range []struct {
		name      string
		partition int32
		batches   []batch
		want      error
	}{
		{"first past last", 0, []batch{{5, 3, accept}}, kerr.InvalidRequest},
		{"no types", 0, []batch{{0, 0, nil}}, kerr.InvalidRequest},
		{"types of the wrong length", 0, []batch{{0, 2, []int8{1, 1}}}, kerr.InvalidRequest},
		{"type 9", 0, []batch{{0, 0, []int8{9}}}, kerr.InvalidRequest},
		{"type -1", 0, []batch{{0, 0, []int8{-1}}}, kerr.InvalidRequest},
		{"renew in v1", 0, []batch{{0, 0, renew}}, kerr.InvalidRequest},
		{"negative first", 0, []batch{{-5, 0, accept}}, kerr.InvalidRequest},
		{"gap from MinInt64", 0, []batch{{math.MinInt64, 0, []int8{0}}}, kerr.InvalidRequest},
		{"overlapping", 0, []batch{{0, 2, accept}, {1, 3, accept}}, kerr.InvalidRequest},
		{"unsorted", 0, []batch{{3, 3, accept}, {2, 2, accept}}, kerr.InvalidRequest},
		{"partition 99", 99, []batch{{0, 0, accept}}, kerr.UnknownTopicOrPartition},
		{"partition -1", -1, []batch{{0, 0, accept}}, kerr.UnknownTopicOrPartition},
		{"beyond the end", 0, []batch{{1 << 40, 1 << 40, accept}}, kerr.InvalidRecordState},
		{"release 9", 0, []batch{{9, 9, release}}, nil},
	} {
		if got := kerr.ErrorForCode(ack(c.partition, c.batches...)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// None of the refused batches applied: every record but the released
	// 9 is still the member's, and it accepts them one by one.
	for off := range int64(total - 1) {
		if code := ack(0, batch{off, off, accept}); code != 0 {
			t.Errorf("accept of %d after the refused batches: %v", off, kerr.ErrorForCode(code))
		}
	}
}
