package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetCommit: v0-10
//
// Version notes:
//   - v0: the lowest version served
//   - v1: Timestamp (request TopicPartition), Generation (request), MemberID
//     (request)
//   - v2: drops Timestamp (request TopicPartition), RetentionTimeMillis
//     (request)
//   - v3: ThrottleMillis (response)
//   - v4: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v5: drops RetentionTimeMillis (request)
//   - v6: LeaderEpoch (request TopicPartition)
//   - v7: InstanceID (request)
//   - v8: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v9: the member epoch of a KIP-848 consumer group may stand in for the
//     generation
//   - v10: topics by id (TopicID), UNKNOWN_TOPIC_ID for an id no topic has

// OffsetCommit: answered once the offsets are written to
// __consumer_offsets. Partitions of topics that do not exist get
// UNKNOWN_TOPIC_OR_PARTITION here (v10, topics by id: UNKNOWN_TOPIC_ID for
// an id not served), as Kafka's KafkaApis does, and are not passed to the
// coordinator, which keeps offsets by topic name.
func init() { registerGroupAPI(kmsg.OffsetCommit, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	im := b.image()
	unknownCode := kerr.UnknownTopicOrPartition.Code
	if req.Version >= 10 {
		// Name the topics for the coordinator; ids not served stay
		// nameless and are unknown.
		unknownCode = kerr.UnknownTopicID.Code
		named := *req
		named.Topics = slices.Clone(req.Topics)
		for i := range named.Topics {
			named.Topics[i].Topic = ""
			if t := im.TopicByID(named.Topics[i].TopicID); t != nil {
				named.Topics[i].Topic = t.Name
			}
		}
		req = &named
	}
	known := func(topic string, partition int32) bool {
		t := im.Topic(topic)
		return topic != "" && t != nil && partition >= 0 && int(partition) < len(t.Partitions)
	}
	resp, err := commitKnown(ctx, b, req, known, unknownCode)
	if err == nil && req.Version >= 10 {
		for i := range resp.Topics {
			resp.Topics[i].TopicID = req.Topics[i].TopicID
		}
	}
	return resp, err
}

// commitKnown commits the partitions of req that known reports, and
// answers the others with unknownCode, in the request's order.
func commitKnown(ctx context.Context, b *Broker, req *kmsg.OffsetCommitRequest, known func(string, int32) bool, unknownCode int16) (*kmsg.OffsetCommitResponse, error) {
	all := true
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			all = all && known(t.Topic, p.Partition)
		}
	}
	if all {
		return b.groups.coord.OffsetCommit(ctx, req), nil
	}
	// Commit the known partitions, then answer in the request's order.
	sub := *req
	sub.Topics = nil
	for _, t := range req.Topics {
		st := t
		st.Partitions = nil
		for _, p := range t.Partitions {
			if known(t.Topic, p.Partition) {
				st.Partitions = append(st.Partitions, p)
			}
		}
		if len(st.Partitions) > 0 {
			sub.Topics = append(sub.Topics, st)
		}
	}
	codes := map[string]map[int32]int16{}
	if len(sub.Topics) > 0 {
		for _, t := range b.groups.coord.OffsetCommit(ctx, &sub).Topics {
			m := codes[t.Topic]
			if m == nil {
				m = map[int32]int16{}
				codes[t.Topic] = m
			}
			for _, p := range t.Partitions {
				m[p.Partition] = p.ErrorCode
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if known(t.Topic, p.Partition) {
				rp.ErrorCode = codes[t.Topic][p.Partition]
			} else {
				rp.ErrorCode = unknownCode
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
