package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
)

// ShareFetch: v1-2
//
// Version notes (v0 was Kafka 4.0's early access, removed in 4.1; not served):
//   - v1: MaxRecords, BatchSize (KIP-932 as released)
//   - v2: ShareAcquireMode (KIP-1206: batch_optimized, record_limit), IsRenewAck
//     (KIP-1222: acknowledgements only, Renew allowed)

// ShareFetch (KIP-932): opens, continues or closes the member's share
// session on this broker, applies the piggy-backed acknowledgements, then
// acquires records of the session's partitions this broker leads,
// waiting up to MaxWaitMillis for some.
func init() { register(kmsg.ShareFetch, 1, 2, handleShareFetch) }

// defaultShareMaxRecords is what a ShareFetch with MaxRecords 0 acquires
// (Kafka's share.max.fetch.records default, 500).
const defaultShareMaxRecords = 500

func handleShareFetch(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	groupID, member := deref(req.GroupID), deref(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(b.share.coord.Settings(groupID).LockDuration.Milliseconds())
	if resp.ErrorCode = b.shareRequestDenied(c, groupID, member); resp.ErrorCode != 0 {
		return resp, nil
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	im := b.image()
	parts := newShareResponse(resp)

	var adds, forgets []share.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			adds = append(adds, share.TopicPartition{TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forgets = append(forgets, share.TopicPartition{TopicID: t.TopicID, Partition: p})
		}
	}
	// Acknowledgements first, in every session state but a bad epoch.
	applyAcks := func() {
		for _, t := range req.Topics {
			topic := im.TopicByID(t.TopicID)
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) == 0 {
					continue
				}
				batches := make([]ackBatch, len(p.AcknowledgementBatches))
				for i, ab := range p.AcknowledgementBatches {
					batches[i] = ackBatch{ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes}
				}
				err := b.ackPartition(ctx, c, groupID, member, topic, p.Partition, batches, renew)
				rp := parts.get(t.TopicID, p.Partition)
				rp.AcknowledgeErrorCode = errCode(err)
			}
		}
	}
	tps, closed, err := b.share.coord.OpenSession(groupID, member, req.ShareSessionEpoch, adds, forgets, false)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	applyAcks()
	if req.ShareSessionEpoch == 0 && b.share.coord.BindSession(groupID, member, c) {
		// A client gone without closing its session (a crash, a lost
		// connection) releases its records now, not at lock expiry.
		c.OnClose(func(ctx context.Context) {
			if tps, ok := b.share.coord.CloseOwnedSession(groupID, member, c); ok {
				b.releaseShareSession(ctx, groupID, member, tps)
			}
		})
	}
	if closed {
		b.releaseShareSession(ctx, groupID, member, tps)
		return parts.done(), nil
	}
	if renew {
		return parts.done(), nil
	}

	type target struct {
		tp    share.TopicPartition
		topic *metadata.Topic
		rp    *replica.Partition
	}
	var targets []target
	for _, tp := range tps {
		t := im.TopicByID(tp.TopicID)
		switch {
		case t == nil:
			parts.get(tp.TopicID, tp.Partition).ErrorCode = kerr.UnknownTopicID.Code
			continue
		case !b.authorized(c, opRead, resTopic, t.Name):
			parts.get(tp.TopicID, tp.Partition).ErrorCode = kerr.TopicAuthorizationFailed.Code
			continue
		case int(tp.Partition) >= len(t.Partitions) || tp.Partition < 0:
			parts.get(tp.TopicID, tp.Partition).ErrorCode = kerr.UnknownTopicOrPartition.Code
			continue
		}
		rp := b.replicas.Get(t.Name, tp.Partition)
		if rp == nil || !rp.IsLeader() {
			parts.get(tp.TopicID, tp.Partition).ErrorCode = kerr.NotLeaderForPartition.Code
			continue
		}
		targets = append(targets, target{tp, t, rp})
		if req.ShareSessionEpoch == 0 {
			parts.get(tp.TopicID, tp.Partition) // a full response lists every partition
		}
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	strict := req.Version >= 2 && req.ShareAcquireMode == 1 // record_limit (KIP-1206)
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	start := int(req.ShareSessionEpoch) // rotates the first partition for fairness
	for {
		total := 0
		for i := range targets {
			tg := targets[(start+i)%len(targets)]
			if total >= maxRecords {
				break
			}
			got, recs, err := b.acquire(ctx, groupID, member, tg.topic, tg.tp.Partition, maxRecords-total, strict, maxBytes)
			if err != nil {
				parts.get(tg.tp.TopicID, tg.tp.Partition).ErrorCode = errCode(err)
				continue
			}
			if len(got) == 0 {
				continue
			}
			rp := parts.get(tg.tp.TopicID, tg.tp.Partition)
			rp.Records = recs
			for _, g := range got {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = g.First, g.Last, g.DeliveryCount
				rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
				total += int(g.Last - g.First + 1)
			}
		}
		left := time.Until(deadline)
		if total > 0 || left <= 0 || len(targets) == 0 || ctx.Err() != nil {
			break
		}
		var next time.Time
		rps := make([]*replica.Partition, len(targets))
		var sps []*share.Partition
		for i, tg := range targets {
			rps[i] = tg.rp
			if sp := b.share.coord.Partition(groupID, tg.topic.Name, tg.tp.Partition, false); sp != nil {
				sps = append(sps, sp)
				if e := sp.NextExpiry(); !e.IsZero() && (next.IsZero() || e.Before(next)) {
					next = e
				}
			}
		}
		b.waitShareFetch(ctx, rps, sps, next, left)
	}
	return parts.done(), nil
}

// shareResponse builds the topics of a ShareFetch response in request
// order, one entry per partition.
type shareResponse struct {
	resp  *kmsg.ShareFetchResponse
	order [][16]byte
	byID  map[[16]byte]map[int32]*kmsg.ShareFetchResponseTopicPartition
	parts map[[16]byte][]int32
}

func newShareResponse(resp *kmsg.ShareFetchResponse) *shareResponse {
	return &shareResponse{resp: resp, byID: map[[16]byte]map[int32]*kmsg.ShareFetchResponseTopicPartition{},
		parts: map[[16]byte][]int32{}}
}

func (s *shareResponse) get(id [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	m := s.byID[id]
	if m == nil {
		m = map[int32]*kmsg.ShareFetchResponseTopicPartition{}
		s.byID[id] = m
		s.order = append(s.order, id)
	}
	rp := m[p]
	if rp == nil {
		x := kmsg.NewShareFetchResponseTopicPartition()
		x.Partition = p
		x.CurrentLeader.LeaderID, x.CurrentLeader.LeaderEpoch = -1, -1
		rp = &x
		m[p] = rp
		s.parts[id] = append(s.parts[id], p)
	}
	return rp
}

func (s *shareResponse) done() *kmsg.ShareFetchResponse {
	for _, id := range s.order {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		for _, p := range s.parts[id] {
			t.Partitions = append(t.Partitions, *s.byID[id][p])
		}
		s.resp.Topics = append(s.resp.Topics, t)
	}
	return s.resp
}
