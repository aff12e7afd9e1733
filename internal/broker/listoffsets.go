package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
)

// ListOffsets timestamps with special meanings.
const (
	listLatest       = -1 // the high-watermark (read_uncommitted) or LSO
	listEarliest     = -2 // the log start offset
	listMaxTimestamp = -3 // the record with the largest timestamp (KIP-734)
)

// ListOffsets replica ids (ListOffsetsRequest.CONSUMER_REPLICA_ID and
// DEBUGGING_REPLICA_ID).
const (
	replicaConsumer = -1 // a consumer: leader only, up to what it may read
	replicaDebug    = -2 // a debugging tool: any replica, up to its log end
)

// ListOffsets: v1-8
//
// Version notes:
//   - v1: the lowest version served: one timestamp per partition, no
//     max_num_offsets
//   - v2: IsolationLevel (request), ThrottleMillis (response)
//   - v3: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v4: CurrentLeaderEpoch (request TopicPartition), LeaderEpoch (response
//     TopicPartition)
//   - v5: OFFSET_NOT_AVAILABLE may be returned (KIP-207)
//   - v6: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v7: timestamp -3 (MAX_TIMESTAMP) finds the record with the largest
//     timestamp (KIP-734)
//   - v8: timestamp -4 (EARLIEST_LOCAL_TIMESTAMP, KIP-405)

// ListOffsets v1-v8: earliest, latest, max timestamp and by timestamp. A
// partition listed twice gets INVALID_REQUEST in each entry, as Kafka's
// ReplicaManager.fetchOffset answers ListOffsetsRequest.duplicatePartitions.
// As Kafka's Partition.fetchOffsetForTimestamp: only the leader answers
// (NOT_LEADER_OR_FOLLOWER elsewhere) unless replica_id is -2 (debug); a
// consumer (replica_id -1) reads up to the high-watermark or last stable
// offset, and while a new leader's high-watermark is below the offset where
// its epoch began it gets OFFSET_NOT_AVAILABLE for the latest offset and for
// a timestamp found at or past what it may read (KIP-207), since the
// previous leader may have served a higher high-watermark; other replica
// ids read up to the log end offset. Before v5 OFFSET_NOT_AVAILABLE is
// LEADER_NOT_AVAILABLE, as Kafka answers.
//
// A partition given to this broker whose log is still being made (a topic
// just created) is waited for, up to listOffsetsPendingWait, as Produce and
// Fetch wait for it (Broker.awaitPending): Kafka makes the log while it
// applies the metadata that names it the leader, so its clients are never
// told NOT_LEADER_OR_FOLLOWER by the leader their metadata names, on which
// they back off and look the metadata up again.
func init() { register(kmsg.ListOffsets, 1, 8, handleListOffsets) }

// listOffsetsPendingWait bounds how long a ListOffsets waits for the logs
// being made of the partitions it names (ListOffsets has no timeout
// field before v10, KIP-1075): long enough for the creation of a new
// topic's logs, which the request helps with (100,000 logs took 26 s on a
// quiet machine, 1,000 a few seconds at load 18), and well below the clients' own request timeouts (franz-go's 10 s
// RequestTimeoutOverhead, the Java client's request.timeout.ms 30 s).
// Past it a partition still pending is answered NOT_LEADER_OR_FOLLOWER,
// as before.
const listOffsetsPendingWait = 5 * time.Second

func handleListOffsets(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	b.awaitPending(ctx, time.Now().Add(listOffsetsPendingWait), func(add func(string, int32)) {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				add(rt.Topic, rp.Partition)
			}
		}
	})
	dup := duplicatePartitions(req)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp = -1
			sp.Offset = -1
			sp.LeaderEpoch = -1
			if dup[topicPartition{rt.Topic, rp.Partition}] {
				sp.ErrorCode = kerr.InvalidRequest.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p := b.replicas.Get(rt.Topic, rp.Partition)
			if p == nil {
				sp.ErrorCode = b.absentCode(rt.Topic, rp.Partition)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if err := p.CheckEpoch(rp.CurrentLeaderEpoch); err != nil {
				sp.ErrorCode = errCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if req.ReplicaID != replicaDebug && !p.IsLeader() {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			consumer := req.ReplicaID == replicaConsumer
			lagging := consumer && p.HighWatermarkLagging()
			notAvailable := kerr.OffsetNotAvailable.Code
			if req.Version < 5 {
				notAvailable = kerr.LeaderNotAvailable.Code // as Kafka before v5
			}
			end := p.LogEndOffset()
			if consumer {
				end = visibleEnd(p, req.IsolationLevel)
			}
			sp.LeaderEpoch = p.LeaderEpoch()
			switch rp.Timestamp {
			case listLatest:
				if lagging {
					sp.ErrorCode = notAvailable
					break
				}
				sp.Offset = end
			case listEarliest:
				sp.Offset = p.LogStartOffset()
			case listMaxTimestamp:
				ts, off, ok := p.Log().MaxTimestamp()
				switch {
				case ok && off < end:
					sp.Timestamp, sp.Offset = ts, off
				case lagging:
					sp.ErrorCode = notAvailable
				}
			default:
				if rp.Timestamp < 0 {
					sp.ErrorCode = kerr.UnsupportedVersion.Code
					break
				}
				off, ts, ok, err := p.Log().OffsetForTimestamp(rp.Timestamp)
				switch {
				case err != nil:
					sp.ErrorCode = errCode(err)
				case ok && off < end:
					if ls := p.LogStartOffset(); off < ls {
						off = ls
					}
					sp.Offset, sp.Timestamp = off, ts
				case lagging:
					sp.ErrorCode = notAvailable
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// visibleEnd is the offset a consumer at the isolation level reads up to:
// the last stable offset for read_committed (1), else the high-watermark.
func visibleEnd(p *replica.Partition, isolation int8) int64 {
	if isolation == 1 {
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// duplicatePartitions returns the partitions req lists more than once; nil
// when none is (a request of one partition costs no map).
func duplicatePartitions(req *kmsg.ListOffsetsRequest) map[topicPartition]bool {
	if len(req.Topics) == 1 && len(req.Topics[0].Partitions) < 2 {
		return nil
	}
	var tps []topicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, topicPartition{t.Topic, p.Partition})
		}
	}
	return duplicates(tps)
}
