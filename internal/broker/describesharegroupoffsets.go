package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeShareGroupOffsets: v0-1
//
// Version notes:
//   - v0: the share-partition start offsets (KIP-932)
//   - v1: Lag (response partition, KIP-1226)

// DescribeShareGroupOffsets (KIP-932): each share-partition's start offset
// from its durable state (-1: never initialized) and its lag (records
// below the high-watermark not yet acknowledged or archived; the
// high-watermark from the partition's leader, ListOffsets latest when
// another broker leads it; -1 when the leader cannot be reached). Topics
// null means the partitions the group initialized (assigned to its
// members, or given start offsets), as Kafka. DESCRIBE on the group, else
// GROUP_AUTHORIZATION_FAILED; DESCRIBE on each topic, else
// TOPIC_AUTHORIZATION_FAILED for its partitions; NOT_COORDINATOR on a
// broker that is not the group's coordinator.
func init() { register(kmsg.DescribeShareGroupOffsets, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	im := b.image()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !b.authorized(c, opDescribe, resGroup, g.GroupID) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if err := b.shareCoordinatorError(g.GroupID); err != nil {
			rg.ErrorCode = err.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		topics := g.Topics
		if topics == nil {
			// As Kafka: the partitions the group initialized (its
			// ShareGroupStatePartitionMetadata), members or not.
			for _, it := range b.share.coord.InitializedTopics(g.GroupID) {
				if t := im.Topic(it.Name); t != nil && t.ID == it.ID {
					rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
					rt.Topic = it.Name
					for _, p := range it.Partitions {
						if int(p) < len(t.Partitions) {
							rt.Partitions = append(rt.Partitions, p)
						}
					}
					topics = append(topics, rt)
				}
			}
		}
		for _, rt := range topics {
			ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			ot.Topic = rt.Topic
			t := im.Topic(rt.Topic)
			if t != nil {
				ot.TopicID = t.ID
			}
			for _, p := range rt.Partitions {
				op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				op.Partition, op.StartOffset, op.LeaderEpoch = p, -1, -1
				switch {
				case !b.authorized(c, opDescribe, resTopic, rt.Topic):
					op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case t == nil || p < 0 || int(p) >= len(t.Partitions):
					op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					st, err := b.readShareState(rctx, share.StateKey{Group: g.GroupID, TopicID: t.ID, Partition: p}, -1)
					cancel()
					if err != nil {
						op.ErrorCode = errCode(err)
						break
					}
					if st == nil {
						break
					}
					op.StartOffset, op.LeaderEpoch = st.StartOffset, st.LeaderEpoch
					if hwm, ok := b.highWatermark(ctx, t.Name, p, t.Partitions[p].Leader); ok {
						lag := hwm - st.StartOffset
						for _, sb := range st.Batches {
							if sb.State == share.Acknowledged || sb.State == share.Archived {
								lag -= sb.Last - sb.First + 1
							}
						}
						op.Lag = max(lag, 0)
					}
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			rg.Topics = append(rg.Topics, ot)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// highWatermark is partition p of topic's high-watermark: this broker's
// replica when it leads the partition, else ListOffsets (latest,
// read_uncommitted) sent to leader over the inter-broker connection, within
// 5 s. ok is false when neither answers.
func (b *Broker) highWatermark(ctx context.Context, topic string, p, leader int32) (hwm int64, ok bool) {
	if rp := b.replicas.Get(topic, p); rp != nil && rp.IsLeader() {
		return rp.HighWatermark(), true
	}
	if leader < 0 || leader == b.node.NodeID {
		return 0, false
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4 // v0 answers in OldStyleOffsets
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := b.requestBroker(rctx, leader, req)
	if err != nil {
		return 0, false
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return 0, false
	}
	return resp.Topics[0].Partitions[0].Offset, true
}
