package quorum

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// Log is the metadata log as the controller sees it.
type Log interface {
	// Append makes recs durable and committed, returning the offset of the
	// first one.
	Append(ctx context.Context, recs []metadata.Record) (int64, error)
	// Replay calls fn for every committed batch of records in order.
	Replay(fn func(offset int64, recs []metadata.Record) error) error
}

// MetadataTopic is the metadata log's partition directory name stem.
const MetadataTopic = "__cluster_metadata"

// Local is a single-voter metadata log.
type Local struct {
	mu  sync.Mutex // serializes appends
	log *storage.Log
}

// OpenLocal opens (creating when missing) __cluster_metadata-0 in logs.
func OpenLocal(logs *storage.Manager) (*Local, error) {
	tp := storage.TopicPartition{Topic: MetadataTopic, Partition: 0}
	l := logs.Get(tp)
	if l == nil {
		var err error
		if l, err = logs.Create(tp, storage.Config{}); err != nil {
			return nil, err
		}
	}
	return &Local{log: l}, nil
}

// Append implements Log.
func (l *Local) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	if len(recs) == 0 {
		return l.log.LogEndOffset(), nil
	}
	batch, err := encodeBatch(recs, time.Now().UnixMilli())
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res, err := l.log.Append(batch, 0)
	if err != nil {
		return 0, err
	}
	if err := l.log.Flush(); err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// Replay implements Log.
func (l *Local) Replay(fn func(offset int64, recs []metadata.Record) error) error {
	off := l.log.LogStartOffset()
	for {
		res, err := l.log.Read(off, 1<<20, l.log.LogEndOffset(), true)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			return nil
		}
		_, err = record.Batches(res.Records, func(b []byte, h record.Header) error {
			recs, err := decodeBatch(b)
			if err != nil {
				return fmt.Errorf("metadata log at offset %d: %w", h.BaseOffset, err)
			}
			if err := fn(h.BaseOffset, recs); err != nil {
				return err
			}
			off = h.NextOffset()
			return nil
		})
		if err != nil {
			return err
		}
	}
}

// encodeBatch builds an uncompressed v2 batch of recs.
func encodeBatch(recs []metadata.Record, now int64) ([]byte, error) {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		k, v, err := metadata.Encode(r)
		if err != nil {
			return nil, err
		}
		rs[i] = record.Record{OffsetDelta: int32(i), Key: k, Value: v}
	}
	return record.Build(record.Spec{
		PartitionLeaderEpoch: -1,
		BaseTimestamp:        now,
		ProducerID:           record.NoProducerID,
		ProducerEpoch:        record.NoProducerEpoch,
		BaseSequence:         record.NoSequence,
	}, rs)
}

func decodeBatch(b []byte) ([]metadata.Record, error) {
	var out []metadata.Record
	err := record.Records(b, func(r record.Record) error {
		m, err := metadata.Decode(r.Key, r.Value)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}
