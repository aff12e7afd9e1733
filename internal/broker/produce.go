package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// Produce v3-v11 (record batch v2 only). Each partition is validated and
// appended on its own: a bad batch fails its partition with CORRUPT_MESSAGE,
// MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE while the others succeed.
// acks=0 sends no response; on one node acks=1 and acks=-1 are answered
// once the append is done (the ISR is this broker alone).
func init() { register(kmsg.Produce, 3, 11, handleProduce) }

func handleProduce(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	now := time.Now().UnixMilli()
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			p := b.replicas.Get(rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case len(rp.Records) == 0:
				sp.ErrorCode = kerr.CorruptMessage.Code
			default:
				res, err := p.Append(rp.Records, req.Acks, now)
				if err != nil {
					sp.ErrorCode = errCode(err)
					if sp.ErrorCode == kerr.UnknownServerError.Code {
						b.logger.Error("append failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
						// A failed disk write is not the client's fault but
						// must not read as success; Kafka answers
						// KAFKA_STORAGE_ERROR, which clients retry.
						sp.ErrorCode = kerr.KafkaStorageError.Code
					}
					msg := err.Error()
					sp.ErrorMessage = &msg
					break
				}
				sp.BaseOffset = res.BaseOffset
				if p.Config().LogAppendTime {
					sp.LogAppendTime = now
				}
				sp.LogStartOffset = p.LogStartOffset()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}
