package broker

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// WriteTxnMarkers: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: flexible versions: compact encodings and tagged fields (KIP-482)

// WriteTxnMarkers v0-v1, broker to broker: a transaction coordinator on
// another broker asks this one, the leader of the partitions, to write
// COMMIT or ABORT markers. Each partition is answered once its marker is
// committed (at most one marker per partition and transaction: a retry
// finds the transaction ended and writes nothing); on __consumer_offsets
// the group coordinator then applies or drops the transaction's offsets.
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
// INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, REQUEST_TIMED_OUT,
// KAFKA_STORAGE_ERROR.
func init() { register(kmsg.WriteTxnMarkers, 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	var wg sync.WaitGroup
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	// Partitions are written concurrently: each waits for its own
	// replication.
	for i, m := range req.Markers {
		for j, t := range m.Topics {
			for k, p := range t.Partitions {
				rp := &resp.Markers[i].Topics[j].Partitions[k]
				wg.Add(1)
				go func() {
					defer wg.Done()
					rp.ErrorCode = b.writeMarker(ctx, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, t.Topic, p)
				}()
			}
		}
	}
	wg.Wait()
	return resp, nil
}
