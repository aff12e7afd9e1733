package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/server"
)

// MetadataQuorum is this node's voter of the metadata quorum, as the
// controller listener serves it: quorum.Raft and quorum.Local implement
// it.
type MetadataQuorum interface {
	// HandleFetch answers an observer's Fetch of __cluster_metadata-0
	// (see quorum.Raft.HandleFetch).
	HandleFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	// Describe is the quorum's state for DescribeQuorum.
	Describe(ctx context.Context) (quorum.QuorumInfo, error)
}

// DescribeQuorum: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: LastFetchTimestamp (response TopicPartitionReplicaState),
//     LastCaughtUpTimestamp (response TopicPartitionReplicaState)
//   - v2: ReplicaDirectoryID (response TopicPartitionReplicaState),
//     ErrorMessage (response TopicPartition), ErrorMessage (response), Nodes
//     (response)

// DescribeQuorum v0-v2 (KIP-595, KIP-836, KIP-853 without directory ids).
// The leader of the metadata quorum answers it. A voter that does not lead
// answers NOT_LEADER_OR_FOLLOWER on its controller listener; on a broker
// listener the request is forwarded to the active controller, as Kafka's
// brokers do, so clients can ask any broker.
func init() { register(kmsg.DescribeQuorum, 0, 2, handleDescribeQuorum) }

func handleDescribeQuorum(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeQuorumRequest)
	onController := c != nil && b.node.IsControllerListener(c.Listener)
	if !isMetadataPartitionOnly(req) {
		return describeQuorumError(req, kerr.UnknownTopicOrPartition, "DescribeQuorum asks for __cluster_metadata partition 0 only"), nil
	}
	if b.quorum != nil {
		qi, err := b.quorum.Describe(ctx)
		switch {
		case err != nil:
			if onController {
				return describeQuorumError(req, kerr.NotLeaderForPartition, err.Error()), nil
			}
		case qi.LeaderID == b.node.NodeID:
			return b.describeQuorumResponse(req, qi), nil
		case onController:
			resp := describeQuorumError(req, kerr.NotLeaderForPartition, "not the leader of the metadata quorum")
			p := &resp.Topics[0].Partitions[0]
			p.LeaderID, p.LeaderEpoch = qi.LeaderID, int32(qi.Epoch)
			return resp, nil
		}
	}
	if onController {
		return describeQuorumError(req, kerr.NotLeaderForPartition, "not a voter of the metadata quorum"), nil
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return b.ctrlChan.send(fctx, req, describeQuorumNotLeader)
}

// describeQuorumNotLeader reports whether a DescribeQuorum answer came
// from a node that does not lead the metadata quorum (ask the next).
func describeQuorumNotLeader(r kmsg.Response) bool {
	dr := r.(*kmsg.DescribeQuorumResponse)
	return dr.ErrorCode == kerr.NotController.Code || dr.ErrorCode == kerr.NotLeaderForPartition.Code ||
		len(dr.Topics) == 1 && len(dr.Topics[0].Partitions) == 1 && dr.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code
}

// isMetadataPartitionOnly reports whether req asks for __cluster_metadata
// partition 0 and nothing else.
func isMetadataPartitionOnly(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == quorum.MetadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
}

// describeQuorumError answers every requested partition (or
// __cluster_metadata-0 when none) with code.
func describeQuorumError(req *kmsg.DescribeQuorumRequest, code *kerr.Error, msg string) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	topics := req.Topics
	if len(topics) == 0 {
		topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorum.MetadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	}
	for _, rt := range topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.LeaderID, sp.LeaderEpoch = rp.Partition, code.Code, -1, -1
			if req.Version >= 2 {
				sp.ErrorMessage = kmsg.StringPtr(msg)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// describeQuorumResponse is the leader's answer: the voters with their
// log end offsets, the observers (brokers fetching the log) and, from v2,
// the voters' controller endpoints from controller.quorum.voters.
func (b *Broker) describeQuorumResponse(req *kmsg.DescribeQuorumRequest, qi quorum.QuorumInfo) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	st := kmsg.NewDescribeQuorumResponseTopic()
	st.Topic = quorum.MetadataTopic
	sp := kmsg.NewDescribeQuorumResponseTopicPartition()
	sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = qi.LeaderID, int32(qi.Epoch), qi.HighWatermark
	replica := func(v quorum.VoterState) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID, r.LogEndOffset = v.ID, v.LogEndOffset
		r.LastFetchTimestamp, r.LastCaughtUpTimestamp = v.LastFetchTimestamp, v.LastCaughtUpTimestamp
		return r
	}
	for _, v := range qi.Voters {
		sp.CurrentVoters = append(sp.CurrentVoters, replica(v))
	}
	for _, o := range qi.Observers {
		sp.Observers = append(sp.Observers, replica(o))
	}
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	if req.Version >= 2 {
		name := "CONTROLLER"
		if l, ok := b.node.ControllerListener(); ok {
			name = l.Name
		}
		for _, v := range b.node.QuorumVoters {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = name, v.Host, uint16(v.Port)
			n.Listeners = append(n.Listeners, l)
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return resp
}

// isMetadataFetch reports whether req fetches __cluster_metadata (an
// observer following the metadata quorum).
func isMetadataFetch(req *kmsg.FetchRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == quorum.MetadataTopic
}

// controllerID is the controller id Metadata and DescribeCluster give
// clients, which send admin requests there: the active controller when it
// is a live broker, else this broker, which forwards them (KIP-590; KRaft
// gives clients a live broker since they cannot reach controller-only
// nodes). -1 when no controller is known on a node without the broker role.
func (b *Broker) controllerID() int32 {
	id := b.ctrl.Leader()
	if id >= 0 {
		if br := b.image().Broker(id); br != nil && !br.Fenced {
			return id
		}
	}
	if b.node.HasRole("broker") {
		return b.node.NodeID
	}
	return id
}
