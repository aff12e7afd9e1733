package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
)

// TestTopicCompressionType: a topic whose compression.type names a codec
// stores every batch in that codec whatever the producer used; "producer"
// keeps the producer's. Consumers read the same records either way.
func TestTopicCompressionType(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	for _, c := range []struct {
		topicType string
		producer  kgo.CompressionCodec
		want      record.Codec
	}{
		{"producer", kgo.Lz4Compression(), record.CodecLZ4},
		{"zstd", kgo.Lz4Compression(), record.CodecZstd},
		{"gzip", kgo.NoCompression(), record.CodecGzip},
		{"snappy", kgo.ZstdCompression(), record.CodecSnappy},
		{"uncompressed", kgo.SnappyCompression(), record.CodecNone},
		{"lz4", kgo.Lz4Compression(), record.CodecLZ4},
	} {
		t.Run(c.topicType, func(t *testing.T) {
			topic := "compress-" + c.topicType
			cl := newClient(t, n, kgo.ProducerBatchCompression(c.producer), kgo.ProducerBatchMaxBytes(64<<10))
			ct := c.topicType
			createTopic(t, cl, topic, 1, map[string]*string{"compression.type": &ct})
			produced := produceN(t, cl, topic, 2000)
			checkRoundTrip(t, produced, consumeAll(t, n, topic, len(produced)))

			// The batches as stored, fetched raw.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := kmsg.NewPtrFetchRequest()
			req.Version = 11
			req.ReplicaID = -1
			req.MaxBytes = 64 << 20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 64 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			raw := resp.Topics[0].Partitions[0].RecordBatches
			batches, records := 0, 0
			if _, err := record.Batches(raw, func(b []byte, h record.Header) error {
				if _, err := record.Validate(b); err != nil {
					return err
				}
				if h.Codec() != c.want {
					t.Errorf("batch at %d in %v, want %v", h.BaseOffset, h.Codec(), c.want)
				}
				batches++
				records += int(h.NumRecords)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if batches == 0 || records != len(produced) {
				t.Fatalf("%d batches holding %d records, want %d records", batches, records, len(produced))
			}
		})
	}
}
