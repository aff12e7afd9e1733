package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DescribeProducers: v0
//
// Version notes:
//   - v0: the lowest version served

// DescribeProducers v0 (KIP-664): the producers a partition leader keeps
// state for: producer id, epoch, last sequence and timestamp, coordinator
// epoch of its last marker, and the first offset of its open transaction
// (-1 none), for finding hanging transactions. Followers answer
// NOT_LEADER_OR_FOLLOWER.
func init() { register(kmsg.DescribeProducers, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, pn := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = pn
			p := b.replicas.Get(rt.Topic, pn)
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !p.IsLeader():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				for _, pi := range p.Log().Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
