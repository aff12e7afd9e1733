package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DeleteRecords: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)

// DeleteRecords v0-v2 (KIP-107): raise partitions' log start offsets, the
// "low watermark" below which records are no longer readable. Offset -1
// means the high-watermark. The segments wholly below the new log start go
// with the next retention pass, which the storage Manager runs at once.
//
// Samsa answers as soon as the leader's log start moved. Kafka waits
// (DelayedDeleteRecords, up to timeout_ms) until every follower's log start
// offset reached it too; followers learn it from the log start offset of
// the leader's Fetch responses.
func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark, sp.ErrorCode = b.deleteRecords(rt.Topic, rp.Partition, rp.Offset)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// deleteRecords moves one partition's log start offset to offset and
// returns the new low watermark (-1 on error) and the error code:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, POLICY_VIOLATION when
// cleanup.policy lacks delete (as Kafka), OFFSET_OUT_OF_RANGE for an offset
// below zero (other than -1) or above the high-watermark.
func (b *Broker) deleteRecords(topic string, partition int32, offset int64) (int64, int16) {
	p := b.replicas.Get(topic, partition)
	switch {
	case p == nil:
		return -1, b.absentCode(topic, partition)
	case !p.IsLeader():
		return -1, kerr.NotLeaderForPartition.Code
	case !p.Config().Storage.Cleanup.Delete:
		return -1, kerr.PolicyViolation.Code
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange.Code
	}
	if err := p.SetLogStartOffset(offset); err != nil {
		return -1, errCode(err)
	}
	return p.LogStartOffset(), 0
}
