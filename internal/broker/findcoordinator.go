package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/coordinator/txn"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// FindCoordinator: v0-4
//
// Version notes:
//   - v0: the lowest version served
//   - v1: CoordinatorType (request), ThrottleMillis (response), ErrorMessage
//     (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v4: drops CoordinatorKey (request), CoordinatorKeys (request), drops
//     ErrorCode (response), drops ErrorMessage (response), drops NodeID
//     (response), drops Host (response), drops Port (response), Coordinators
//     (response); several coordinator keys in one request (KIP-699)

// FindCoordinator v0-v4 (several keys from v4, KIP-699). The coordinator of
// group G is the leader of partition group.PartitionFor(G,
// offsets.topic.num.partitions) of __consumer_offsets; that of
// transactional id T (key type 1) the leader of partition
// txn.PartitionFor(T, transaction.state.log.num.partitions) of
// __transaction_state. Each topic is created on the first request.
func init() { register(kmsg.FindCoordinator, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		co := b.findCoordinator(ctx, c, req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, b.findCoordinator(ctx, c, req.CoordinatorType, key))
	}
	return resp, nil
}

func (b *Broker) findCoordinator(ctx context.Context, c *server.Conn, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key = key
	co.NodeID, co.Port = -1, -1
	fail := func(code int16, msg string) kmsg.FindCoordinatorResponseCoordinator {
		co.ErrorCode = code
		if msg != "" {
			co.ErrorMessage = &msg
		}
		return co
	}
	var t *metadata.Topic
	var err error
	var p int32
	switch keyType {
	case coordinatorGroup:
		t, err = b.ensureOffsetsTopic(ctx)
		p = group.PartitionFor(key, b.groups.coord.NumPartitions())
	case coordinatorTransaction:
		if key == "" {
			return fail(kerr.InvalidRequest.Code, "empty transactional id")
		}
		t, err = b.ensureTxnTopic(ctx)
		p = txn.PartitionFor(key, b.txns.coord.NumPartitions())
	default:
		return fail(kerr.InvalidRequest.Code, "unknown coordinator type")
	}
	if err != nil {
		b.logger.Warn("find coordinator", "key", key, "err", err)
		if errors.Is(err, context.Canceled) {
			return fail(kerr.CoordinatorNotAvailable.Code, "")
		}
		return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
	}
	if int(p) >= len(t.Partitions) {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	leader := t.Partitions[p].Leader
	br := b.image().Broker(leader)
	if leader < 0 || br == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	ep, ok := clientEndpoint(br, c.Listener)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	co.NodeID, co.Host, co.Port = leader, ep.Host, ep.Port
	return co
}
