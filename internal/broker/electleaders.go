package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// ElectLeaders: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ElectionType (request), ErrorCode (response)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)

// ElectLeaders v0-v2 (KIP-183, KIP-460): preferred or unclean leader
// elections, on the active controller (forwarded there by other brokers).
// Topics nil means every partition.
func init() { register(kmsg.ElectLeaders, 0, 2, handleElectLeaders) }

func handleElectLeaders(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var parts []controller.PartitionRef
	if req.Topics != nil {
		parts = []controller.PartitionRef{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.PartitionRef{Topic: t.Topic, Partition: p})
			}
		}
	}
	res, err := b.ctrl.ElectLeaders(ctx, req.ElectionType, parts)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	byTopic := map[string]int{}
	for ref, perr := range res {
		i, ok := byTopic[ref.Topic]
		if !ok {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = ref.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[ref.Topic] = i
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = ref.Partition
		rp.ErrorCode, rp.ErrorMessage = errCode(perr), errMessage(perr)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}
