package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetForLeaderEpoch: v0-4
//
// Version notes:
//   - v0: the lowest version served
//   - v1: LeaderEpoch (response TopicPartition)
//   - v2: CurrentLeaderEpoch (request TopicPartition), ThrottleMillis
//     (response)
//   - v3: ReplicaID (request)
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)

// OffsetForLeaderEpoch v0-v4 (KIP-101, KIP-279, KIP-320): for each
// partition, the largest epoch at or below the requested one in the
// leader's history and the offset where the next epoch starts. Only the
// leader answers; consumers use it to detect truncation.
func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := b.replicas.Get(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = b.absentCode(rt.Topic, rp.Partition)
			case !p.IsLeader():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if err := p.CheckEpoch(rp.CurrentLeaderEpoch); err != nil {
					sp.ErrorCode = errCode(err)
					break
				}
				// The log's answer, for consumers too (Kafka's
				// Partition.lastOffsetForLeaderEpoch): a new leader's
				// high-watermark may lag the records the previous one
				// served, and an end offset cut to it would make a
				// consumer see truncation and read them again.
				sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
