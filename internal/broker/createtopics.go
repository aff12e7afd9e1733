package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// CreateTopics: v2-7
//
// Version notes:
//   - v2: the lowest version served
//   - v3: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v4: num_partitions and replication_factor -1 take the broker defaults
//     (KIP-464)
//   - v5: flexible versions: compact encodings and tagged fields (KIP-482),
//     NumPartitions (response Topic), ReplicationFactor (response Topic),
//     Configs (response Topic)
//   - v6: THROTTLING_QUOTA_EXCEEDED may be returned (KIP-599)
//   - v7: TopicID (response Topic)

// CreateTopics v2-v7, with validate_only. v5+ responses carry the created
// topic's partitions, replication factor and configs (KIP-525). A name
// listed twice creates neither entry and gets one result, INVALID_REQUEST
// "Duplicate topic name.", as Kafka's ControllerApis; the other topics
// are created.
func init() { register(kmsg.CreateTopics, 2, 7, handleCreateTopics) }

func handleCreateTopics(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	dup := duplicates(names)
	topics := make([]controller.CreateTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		if dup[t.Topic] {
			continue
		}
		ct := controller.CreateTopic{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor, Configs: map[string]string{}}
		for _, a := range t.ReplicaAssignment {
			for int(a.Partition) >= len(ct.Assignments) {
				ct.Assignments = append(ct.Assignments, nil)
			}
			ct.Assignments[a.Partition] = a.Replicas
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		topics = append(topics, ct)
	}
	errs, err := b.ctrl.CreateTopics(ctx, topics, req.ValidateOnly)
	if err != nil {
		return nil, err
	}
	im := b.image()
	i := 0
	answered := map[string]bool{}
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		if dup[t.Topic] {
			if !answered[t.Topic] {
				answered[t.Topic] = true
				rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msgDuplicateTopic)
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		err := errs[i]
		i++
		if err != nil {
			rt.ErrorCode = errCode(err)
			rt.ErrorMessage = errMessage(err)
			if rt.ErrorCode == kerr.TopicAlreadyExists.Code {
				rt.ErrorMessage = kmsg.StringPtr("Topic '" + t.Topic + "' already exists.")
			}
		} else if mt := im.Topic(t.Topic); mt != nil {
			rt.TopicID = mt.ID
			rt.NumPartitions = int32(len(mt.Partitions))
			rt.ReplicationFactor = int16(len(mt.Partitions[0].Replicas))
			for _, name := range config.TopicConfigNames() {
				v, src := b.topicConfig(mt, name)
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.Source = name, kmsg.StringPtr(v), int8(src)
				rt.Configs = append(rt.Configs, c)
			}
		} else if req.ValidateOnly {
			rt.NumPartitions, rt.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
			if rt.NumPartitions == -1 {
				rt.NumPartitions = b.node.NumPartitions
			}
			if rt.ReplicationFactor == -1 {
				rt.ReplicationFactor = b.node.DefaultReplicationFactor
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
