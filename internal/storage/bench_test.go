package storage

import (
	"testing"

	"github.com/samsahq/samsa/internal/record"
)

// benchBatch is one uncompressed batch of one 1 KB record.
func benchBatch(b *testing.B) []byte {
	b.Helper()
	batch, err := record.Build(record.Spec{BaseTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: make([]byte, 1024)}})
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// BenchmarkAppend appends batches of one 1 KB record (page cache, no
// fsync), rolling 64 MiB segments.
func BenchmarkAppend(b *testing.B) {
	l := openTest(b, b.TempDir(), Config{SegmentBytes: 64 << 20}, 0)
	defer l.Close()
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads one 1 KB-record batch at a time at offsets spread over
// a 64 MiB log (a consumer far behind: index lookup, scan, pread).
func BenchmarkRead(b *testing.B) {
	l := openTest(b, b.TempDir(), Config{SegmentBytes: 16 << 20}, 0)
	defer l.Close()
	batch := benchBatch(b)
	const n = 64 << 10
	for range n {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		res, err := l.Read(off, int32(len(batch)), 1<<62, true)
		if err != nil || len(res.Records) != len(batch) {
			b.Fatalf("read at %d: %d bytes, %v", off, len(res.Records), err)
		}
		off = (off + 7919) % n
	}
}

// BenchmarkReadSequential reads 1 MiB at a time from the start of the log
// to its end, as a catching-up consumer with fetch.max.bytes = 1 MiB does.
func BenchmarkReadSequential(b *testing.B) {
	l := openTest(b, b.TempDir(), Config{SegmentBytes: 16 << 20}, 0)
	defer l.Close()
	batch := benchBatch(b)
	const n = 64 << 10
	for range n {
		l.Append(batch, 0)
	}
	b.SetBytes(1 << 20)
	off := int64(0)
	for b.Loop() {
		res, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			b.Fatal(err)
		}
		off += int64(len(res.Records) / len(batch))
		if off >= n {
			off = 0
		}
	}
}
