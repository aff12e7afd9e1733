package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record/recordtest"
)

// The malformed-burst scenario (issue 12): a raw client sends a burst of
// record batches whose CRC is right but whose records are not (the cases
// a broker that checked only the CRC used to store: bad lengths and
// varints, counts, offset deltas, garbage compressed data, an undefined
// codec, a transactional batch without a producer id), between two runs
// of well-formed records. The broker must refuse every one and store
// nothing of them, so that every real client then reads the partition
// from its start to its end. The runner is compacted-read's (read
// partition 0 to the log end offset minus one, report the key→value map
// on a DATA line): each well-formed record has a key of its own.

// malformedGood is how many well-formed records Setup writes, half before
// the burst and half after.
const malformedGood = 20

func malformedKey(i int) string   { return fmt.Sprintf("m%02d", i) }
func malformedValue(i int) string { return fmt.Sprintf("value-%02d", i) }

func malformedScenario() Scenario {
	return Scenario{
		ID: "malformed-burst",
		Title: fmt.Sprintf("after a burst of %d malformed batches with valid CRCs from a raw client (each refused, none stored), "+
			"read the partition's %d well-formed records from its start to its end", len(malformedBatches()), malformedGood),
		Runner: "compacted-read", Needs: produceNeeds, Partitions: 1,
		Setup: setupMalformed, Verify: verifyMalformed,
	}
}

// malformedBatches are the burst: name → batch.
func malformedBatches() map[string][]byte {
	v := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	rec := func(fields ...[]byte) []byte {
		body := bytes.Join(fields, nil)
		return append(v(int64(len(body))), body...)
	}
	good := func(delta int64) []byte {
		return rec([]byte{0}, v(0), v(delta), v(1), []byte("k"), v(1), []byte("v"), v(0))
	}
	// batch frames records as a v2 batch of count records with the last
	// offset delta and attributes given, CRC computed.
	batch := func(attrs int16, lastDelta, count int32, producerID int64, records []byte) []byte {
		b := make([]byte, 61, 61+len(records))
		b = append(b, records...)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		b[16] = 2
		binary.BigEndian.PutUint16(b[21:], uint16(attrs))
		binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
		now := time.Now().UnixMilli()
		binary.BigEndian.PutUint64(b[27:], uint64(now))
		binary.BigEndian.PutUint64(b[35:], uint64(now))
		binary.BigEndian.PutUint64(b[43:], uint64(producerID))
		binary.BigEndian.PutUint16(b[51:], 0xffff)
		binary.BigEndian.PutUint32(b[53:], 0xffffffff)
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	garbage := bytes.Repeat([]byte{0x5a, 0xa5, 0x13, 0x37, 0xff, 0x00, 0x80}, 30)
	k := []byte("k")
	out := map[string][]byte{
		"record length -5":                 batch(0, 0, 1, -1, append(v(-5), good(0)...)),
		"record length past the batch":     batch(0, 0, 1, -1, append(v(1000), good(0)[1:]...)),
		"key length 2^40":                  batch(0, 0, 1, -1, rec([]byte{0}, v(0), v(0), v(1<<40), k, v(1), k, v(0))),
		"value length -7":                  batch(0, 0, 1, -1, rec([]byte{0}, v(0), v(0), v(1), k, v(-7), v(0))),
		"header count 2^31":                batch(0, 0, 1, -1, rec([]byte{0}, v(0), v(0), v(1), k, v(1), k, v(1<<31))),
		"garbage after the last record":    batch(0, 0, 1, -1, append(good(0), 1, 2, 3)),
		"count 3, two records":             batch(0, 2, 3, -1, append(good(0), good(1)...)),
		"duplicate offset deltas":          batch(0, 1, 2, -1, append(good(0), good(0)...)),
		"last offset delta 7, two records": batch(0, 7, 2, -1, append(good(0), good(1)...)),
		"gzip garbage":                     batch(1, 1, 2, -1, garbage),
		"snappy garbage":                   batch(2, 1, 2, -1, garbage),
		"lz4 garbage":                      batch(3, 1, 2, -1, garbage),
		"zstd garbage":                     batch(4, 1, 2, -1, garbage),
		"undefined codec 5":                batch(5, 0, 1, -1, good(0)),
		"transactional, producer id -1":    batch(0x10, 0, 1, -1, good(0)),
	}
	// Compressed forms Samsa's decoders read and librdkafka or the Java
	// client do not (S2 labelled snappy, LZ4 legacy and concatenated
	// frames, gzip members after the first).
	for _, f := range recordtest.OtherCodecForms(append(recordtest.Good(0), recordtest.Good(1)...)) {
		out[f.Name] = batch(int16(f.Codec), 1, 2, -1, f.Payload)
	}
	return out
}

// setupMalformed writes the first half of the well-formed records, the
// burst (each must be refused), then the second half.
func setupMalformed(ctx context.Context, e *Env) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(e.Topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	produce := func(from, to int) error {
		for i := from; i < to; i++ {
			r := &kgo.Record{Partition: 0, Key: []byte(malformedKey(i)), Value: []byte(malformedValue(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("setup: produce %s: %w", r.Key, err)
			}
		}
		return nil
	}
	if err := produce(0, malformedGood/2); err != nil {
		return err
	}
	for name, b := range malformedBatches() {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = e.Topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("setup: produce %q: %w", name, err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code == 0 {
			return fmt.Errorf("setup: the broker acknowledged the malformed batch %q", name)
		}
	}
	if end, err := endOffset(ctx, e); err != nil || end != malformedGood/2 {
		return fmt.Errorf("setup: log end offset %d after the burst, want %d: a malformed batch was stored (%v)", end, malformedGood/2, err)
	}
	return produce(malformedGood/2, malformedGood)
}

func verifyMalformed(ctx context.Context, e *Env) error {
	want := map[string]string{}
	for i := range malformedGood {
		want[malformedKey(i)] = malformedValue(i)
	}
	if err := compareReported(e.Reported, want); err != nil {
		return err
	}
	if end, err := endOffset(ctx, e); err != nil || end != malformedGood {
		return fmt.Errorf("broker side: log end offset %d, want %d (%v)", end, malformedGood, err)
	}
	return nil
}
