package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// CreatePartitions: v0-3
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v3: THROTTLING_QUOTA_EXCEEDED may be returned (KIP-599)

// CreatePartitions v0-v3. A topic named twice is not changed and gets one
// result, INVALID_REQUEST "Duplicate topic name.", as in Kafka.
func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	dup := duplicates(names)
	answered := map[string]bool{}
	for _, t := range req.Topics {
		if dup[t.Topic] {
			if !answered[t.Topic] {
				answered[t.Topic] = true
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic = t.Topic
				rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msgDuplicateTopic)
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		var assignments [][]int32
		for _, a := range t.Assignment {
			assignments = append(assignments, a.Replicas)
		}
		err := b.ctrl.CreatePartitions(ctx, t.Topic, t.Count, assignments, req.ValidateOnly)
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode = errCode(err)
		rt.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
