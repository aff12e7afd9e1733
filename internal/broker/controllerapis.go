package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// BrokerRegistration: v0-3
//
// Version notes:
//   - v0: the lowest version served
//   - v1: IsMigratingZkBroker (request)
//   - v2: LogDirs (request; ignored: Samsa's metadata assigns no replica to a directory)
//   - v3: PreviousBrokerEpoch (request, KIP-966: a clean restart keeps the broker's leaderships)

// BrokerHeartbeat: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: no field change

// AlterPartition: v2
//
// Version notes:
//   - v2: the lowest version served

// AllocateProducerIDs: v0
//
// Version notes:
//   - v0: the lowest version served

// AssignReplicasToDirs: v0
//
// Version notes:
//   - v0: the lowest version served (KIP-858; only DirectoryId.LOST and its undoing change the image)

// The APIs brokers send to the active controller over the controller
// listener (KIP-631, KIP-497, KIP-730). A node whose controller is not the
// active one answers NOT_CONTROLLER.
func init() {
	registerController(kmsg.BrokerRegistration, 0, 3, handleBrokerRegistration)
	registerController(kmsg.BrokerHeartbeat, 0, 1, handleBrokerHeartbeat)
	registerController(kmsg.AlterPartition, 2, 2, handleAlterPartition)
	registerController(kmsg.AllocateProducerIDs, 0, 0, handleAllocateProducerIDs)
	registerController(kmsg.AssignReplicasToDirs, 0, 0, handleAssignReplicasToDirs)
}

func handleBrokerRegistration(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	if req.ClusterID != b.image().ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp, nil
	}
	eps := make([]metadata.Endpoint, 0, len(req.Listeners))
	for _, l := range req.Listeners {
		eps = append(eps, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	prev := int64(-1)
	if req.Version >= 3 {
		prev = req.PreviousBrokerEpoch
	}
	epoch, err := b.ctrl.RegisterBroker(ctx, req.BrokerID, req.IncarnationID, prev, eps, req.Rack)
	resp.ErrorCode = errCode(err)
	if err == nil {
		resp.BrokerEpoch = epoch
	}
	return resp, nil
}

func handleBrokerHeartbeat(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	fenced, shutdown, err := b.ctrl.Heartbeat(ctx, req.BrokerID, req.BrokerEpoch, req.WantShutdown, req.OfflineLogDirs)
	resp.ErrorCode = errCode(err)
	resp.IsFenced, resp.ShouldShutdown = fenced, shutdown
	resp.IsCaughtUp = err == nil
	return resp, nil
}

func handleAlterPartition(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if !b.ctrl.Active() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	// The whole request is one controller write.
	var items []controller.AlterPartitionItem
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			items = append(items, controller.AlterPartitionItem{TopicID: rt.TopicID, Partition: rp.Partition, LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, ISR: rp.NewISR})
		}
	}
	res, err := b.ctrl.AlterPartitions(ctx, req.BrokerID, items)
	if errors.Is(err, controller.ErrNotController) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	i := 0
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.TopidID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			perr := err
			if err == nil {
				perr = res[i].Err
			}
			sp.ErrorCode = errCode(perr)
			if perr == nil {
				sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = req.BrokerID, rp.LeaderEpoch, res[i].ISR, res[i].PartitionEpoch
			}
			st.Partitions = append(st.Partitions, sp)
			i++
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func handleAllocateProducerIDs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	first, n, err := b.ctrl.AllocateProducerIDs(ctx, req.BrokerID)
	resp.ErrorCode = errCode(err)
	if err == nil {
		resp.ProducerIDStart, resp.ProducerIDLen = first, int32(n)
	}
	return resp, nil
}

// handleAssignReplicasToDirs: a broker tells where its replicas live
// (KIP-858); the whole request is one controller write per chunk
// (controller.AssignReplicasToDirs).
func handleAssignReplicasToDirs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AssignReplicasToDirsRequest)
	errs, err := b.ctrl.AssignReplicasToDirs(ctx, req.BrokerID, req.BrokerEpoch, dirAssignments(req))
	return dirAssignmentsResponse(req, errs, err), nil
}

// dirAssignments flattens an AssignReplicasToDirs request into one item
// per partition, in request order.
func dirAssignments(req *kmsg.AssignReplicasToDirsRequest) []controller.DirAssignment {
	var items []controller.DirAssignment
	for _, d := range req.Directories {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				items = append(items, controller.DirAssignment{TopicID: t.TopicID, Partition: p.Partition, Dir: d.ID})
			}
		}
	}
	return items
}

// dirAssignmentsResponse answers req: err for the whole request, else
// errs[i] for the i-th partition of dirAssignments(req).
func dirAssignmentsResponse(req *kmsg.AssignReplicasToDirsRequest, errs []error, err error) *kmsg.AssignReplicasToDirsResponse {
	resp := req.ResponseKind().(*kmsg.AssignReplicasToDirsResponse)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp
	}
	i := 0
	for _, d := range req.Directories {
		rd := kmsg.NewAssignReplicasToDirsResponseDirectory()
		rd.ID = d.ID
		for _, t := range d.Topics {
			rt := kmsg.NewAssignReplicasToDirsResponseDirectoryTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewAssignReplicasToDirsResponseDirectoryTopicPartition()
				rp.Partition = p.Partition
				if i < len(errs) {
					rp.ErrorCode = errCode(errs[i])
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Directories = append(resp.Directories, rd)
	}
	return resp
}
