package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// AlterPartitionAssignments: v0
//
// Version notes:
//   - v0: the lowest version served

// ListPartitionReassignments: v0
//
// Version notes:
//   - v0: the lowest version served

// AlterPartitionReassignments v0 and ListPartitionReassignments v0
// (KIP-455), on the active controller (forwarded there by other brokers).
func init() {
	register(kmsg.AlterPartitionAssignments, 0, 0, handleAlterPartitionReassignments)
	register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments)
}

func handleAlterPartitionReassignments(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	var reqs []controller.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqs = append(reqs, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	errs, err := b.ctrl.AlterPartitionReassignments(ctx, reqs)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMessage(err)
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errCode(errs[i]), errMessage(errs[i])
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func handleListPartitionReassignments(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var parts []controller.PartitionRef
	if req.Topics != nil {
		parts = []controller.PartitionRef{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.PartitionRef{Topic: t.Topic, Partition: p})
			}
		}
	}
	byTopic := map[string]int{}
	for _, r := range b.ctrl.ListPartitionReassignments(parts) {
		i, ok := byTopic[r.Topic]
		if !ok {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[r.Topic] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = r.Partition, r.Replicas, r.AddingReplicas, r.RemovingReplicas
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}
