package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// manualOr is the session clients' partitioner: a produce whose context
// went through withPartition keeps its record's Partition, others get the
// default (sticky key) partitioner. One client serves both the produce
// form's "any partition" and its chosen partition, and replays.
type manualOr struct{ kgo.Partitioner }

type manualKey struct{}

// withPartition marks ctx's produces as naming their partition.
func withPartition(ctx context.Context) context.Context {
	return context.WithValue(ctx, manualKey{}, true)
}

func manual(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(manualKey{}) != nil
}

func (p manualOr) ForTopic(t string) kgo.TopicPartitioner {
	return manualTopic{p.Partitioner.ForTopic(t)}
}

type manualTopic struct{ kgo.TopicPartitioner }

func (p manualTopic) RequiresConsistency(r *kgo.Record) bool {
	return manual(r) || p.TopicPartitioner.RequiresConsistency(r)
}

func (p manualTopic) Partition(r *kgo.Record, n int) int {
	if manual(r) {
		return int(r.Partition)
	}
	return p.TopicPartitioner.Partition(r, n)
}

// OnNewBatch keeps the sticky partitioner's batch switching.
func (p manualTopic) OnNewBatch() {
	if nb, ok := p.TopicPartitioner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

// fetchMaxBytes bounds one Fetch response (fetch.max.bytes), and
// fetchPartitionMaxBytes each partition of it (max.partition.fetch.bytes);
// a larger first batch still comes whole (Fetch v3+, KIP-74).
const (
	fetchMaxBytes          = 8 << 20
	fetchPartitionMaxBytes = 1 << 20
)

// consume reads topic's partitions from their from offsets up to their
// until offsets (exclusive) with Fetch requests of the session's client to
// each partition's leader, calling fn for each record until fn returns
// false or ctx ends (then it returns nil: a search reports how far it
// got). It opens no client: a live tail polling every second costs a
// Fetch, not a SCRAM login.
func (c *Console) consume(ctx context.Context, s *session, topic string, from, until map[int32]int64, fn func(*kgo.Record) bool) error {
	next := map[int32]int64{}
	for p, o := range from {
		if o < until[p] {
			next[p] = o
		}
	}
	if len(next) == 0 {
		return nil
	}
	adm := kadm.NewClient(s.cl)
	var td kadm.TopicDetail
	stale := true
	for len(next) > 0 {
		if ctx.Err() != nil {
			return nil
		}
		if stale {
			tds, err := adm.ListTopics(ctx, topic)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			var ok bool
			if td, ok = tds[topic]; !ok {
				return fmt.Errorf("%w: no topic %q", errNotFound, topic)
			}
			if td.Err != nil {
				return td.Err
			}
			stale = false
		}
		byLeader := map[int32][]int32{}
		for p := range next {
			pd, ok := td.Partitions[p]
			if !ok {
				return fmt.Errorf("%w: no partition %d of topic %q", errNotFound, p, topic)
			}
			byLeader[pd.Leader] = append(byLeader[pd.Leader], p)
		}
		for leader, ps := range byLeader {
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, fetchMaxBytes
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, td.ID
			for _, p := range ps {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, next[p], fetchPartitionMaxBytes
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			kresp, err := s.cl.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				stale = true // the leader moved or is down: ask again
				continue
			}
			resp := kresp.(*kmsg.FetchResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return err
			}
			for _, t := range resp.Topics {
				for i := range t.Partitions {
					rp := &t.Partitions[i]
					p := rp.Partition
					at, ok := next[p]
					if !ok {
						continue
					}
					fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, Topic: topic, Partition: p}, rp, kgo.DefaultDecompressor(), nil)
					if fp.Err != nil {
						if errors.Is(fp.Err, kerr.NotLeaderForPartition) || errors.Is(fp.Err, kerr.FencedLeaderEpoch) ||
							errors.Is(fp.Err, kerr.UnknownLeaderEpoch) || errors.Is(fp.Err, kerr.LeaderNotAvailable) {
							stale = true
							continue
						}
						return fp.Err
					}
					for _, r := range fp.Records {
						if r.Offset >= until[p] {
							break
						}
						if !fn(r) {
							return nil
						}
						next[p] = r.Offset + 1
					}
					// Past compacted or aborted records and control
					// batches; done at until or the high watermark.
					if after > next[p] {
						next[p] = after
					}
					if next[p] >= until[p] || next[p] >= fp.HighWatermark {
						delete(next, p)
					}
				}
			}
		}
	}
	return nil
}
