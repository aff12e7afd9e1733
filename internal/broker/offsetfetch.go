package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// OffsetFetch: v0-10
//
// Version notes:
//   - v0: the lowest version served
//   - v1: offsets come from __consumer_offsets, not ZooKeeper
//   - v2: ErrorCode (response)
//   - v3: ThrottleMillis (response)
//   - v4: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v5: LeaderEpoch (response TopicPartition)
//   - v6: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v7: RequireStable (request)
//   - v8: Topic (request GroupTopic), drops Group (request), drops Topics
//     (request), Groups (request), Topic (response GroupTopic), drops Topics
//     (response), drops ErrorCode (response), Groups (response)
//   - v9: MemberID (request Group), MemberEpoch (request Group)
//   - v10: topics by id (TopicID), UNKNOWN_TOPIC_ID for an id not served

// OffsetFetch, of several groups from v8: committed offsets, -1 where none.
// From v10 topics are named by id: the coordinator keeps offsets by name,
// so ids are resolved here; an id not served gets UNKNOWN_TOPIC_ID on each
// of its partitions, and a fetch of all offsets leaves out topics that no
// longer exist, as Kafka's KafkaApis.
func init() { registerGroupAPI(kmsg.OffsetFetch, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if req.Version < 10 {
		return b.groups.coord.OffsetFetch(ctx, req), nil
	}
	im := b.image()
	named := *req
	named.Groups = slices.Clone(req.Groups)
	for i := range named.Groups {
		g := &named.Groups[i]
		if g.Topics == nil {
			continue // all of the group's offsets
		}
		topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(g.Topics))
		for _, t := range g.Topics {
			if tm := im.TopicByID(t.TopicID); tm != nil {
				t.Topic = tm.Name
				topics = append(topics, t)
			}
		}
		g.Topics = topics
	}
	resp := b.groups.coord.OffsetFetch(ctx, &named)
	for i := range resp.Groups {
		rg := &resp.Groups[i]
		topics := rg.Topics[:0]
		for _, t := range rg.Topics {
			if tm := im.Topic(t.Topic); tm != nil {
				t.TopicID = tm.ID
				topics = append(topics, t)
			}
		}
		rg.Topics = topics
		if i >= len(req.Groups) || req.Groups[i].Topics == nil || rg.ErrorCode != 0 {
			continue
		}
		for _, t := range req.Groups[i].Topics {
			if im.TopicByID(t.TopicID) != nil {
				continue
			}
			ut := kmsg.NewOffsetFetchResponseGroupTopic()
			ut.TopicID = t.TopicID
			for _, p := range t.Partitions {
				up := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				up.Partition = p
				up.Offset = -1
				up.LeaderEpoch = -1
				up.ErrorCode = kerr.UnknownTopicID.Code
				ut.Partitions = append(ut.Partitions, up)
			}
			rg.Topics = append(rg.Topics, ut)
		}
	}
	return resp, nil
}
