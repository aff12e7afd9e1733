package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
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

// BenchmarkAppendFlushEveryMessage appends batches of one 1 KB record with
// flush.messages=1 (every append waits for an fsync covering it) from 1, 8
// and 64 goroutines, to one log and spread over 8 logs. It reports
// appends/s, flushes/op (flushes per append: 1 without grouping, below 1
// when concurrent appends share them; a flush fsyncs the segment's .log,
// .index and .timeindex) and x-vs-1, appends/s against the one-appender,
// one-log case of the same run (the sub-benchmarks run in order).
//
//	go test -run '^$' -bench AppendFlushEveryMessage -benchtime 2s ./internal/storage
func BenchmarkAppendFlushEveryMessage(b *testing.B) {
	var base float64 // appends/s of partitions=1/appenders=1
	for _, c := range []struct{ partitions, appenders int }{{1, 1}, {1, 8}, {1, 64}, {8, 8}, {8, 64}} {
		b.Run(fmt.Sprintf("partitions=%d/appenders=%d", c.partitions, c.appenders), func(b *testing.B) {
			logs := make([]*Log, c.partitions)
			for i := range logs {
				logs[i] = openTest(b, b.TempDir(), Config{SegmentBytes: 64 << 20, FlushIntervalMessages: 1}, 0)
			}
			batch := benchBatch(b)
			b.SetBytes(int64(len(batch)))
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for g := range c.appenders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := logs[g%len(logs)]
					buf := append([]byte(nil), batch...)
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(buf, 0); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			var flushes int64
			for _, l := range logs {
				flushes += l.flushes.Load()
			}
			rate := float64(b.N) / b.Elapsed().Seconds()
			if c.partitions == 1 && c.appenders == 1 {
				base = rate
			}
			b.ReportMetric(rate, "appends/s")
			b.ReportMetric(float64(flushes)/float64(b.N), "flushes/op")
			if base > 0 {
				b.ReportMetric(rate/base, "x-vs-1")
			}
		})
	}
}
