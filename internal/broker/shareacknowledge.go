package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ShareAcknowledge: v1-2
//
// Version notes (v0 was Kafka 4.0's early access, removed in 4.1; not served):
//   - v1: KIP-932 as released
//   - v2: IsRenewAck and the Renew type (KIP-1222)

// ShareAcknowledge (KIP-932): acknowledgements outside a fetch, in the
// member's share session (epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 closes
// the session after the acknowledgements, releasing the rest).
func init() { register(kmsg.ShareAcknowledge, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	groupID, member := deref(req.GroupID), deref(req.MemberID)
	if resp.ErrorCode = b.shareRequestDenied(c, groupID, member); resp.ErrorCode != 0 {
		return resp, nil
	}
	renew := req.Version >= 2 && req.IsRenewAck
	tps, closed, err := b.share.coord.OpenSession(groupID, member, req.ShareSessionEpoch, nil, nil, true)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	im := b.image()
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		topic := im.TopicByID(t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			batches := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, ab := range p.AcknowledgementBatches {
				batches[i] = ackBatch{ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes}
			}
			err := b.ackPartition(ctx, c, groupID, member, topic, p.Partition, batches, renew)
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if closed {
		b.releaseShareSession(ctx, groupID, member, tps)
	}
	return resp, nil
}
