package storage

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// debianBatches reads the data set into snappy batches of up to 200
// records keyed by package, as a producer would send them.
func debianBatches(b *testing.B) (batches [][]byte, raw int64) {
	b.Helper()
	var recs []record.Record
	flush := func() {
		batch, err := record.Build(record.Spec{Codec: record.CodecSnappy, BaseTimestamp: testEpoch.UnixMilli(),
			ProducerID: 1, ProducerEpoch: 0, BaseSequence: int32(len(batches) * 200)}, recs)
		if err != nil {
			b.Fatal(err)
		}
		batches = append(batches, batch)
		recs = recs[:0]
	}
	for _, l := range testutil.DebianLines(b, 0) {
		raw += int64(len(l.Line))
		recs = append(recs, record.Record{OffsetDelta: int32(len(recs)), Key: []byte(l.Package), Value: l.Line})
		if len(recs) == 200 {
			flush()
		}
	}
	if len(recs) > 0 {
		flush()
	}
	return batches, raw
}

// BenchmarkCleanDebian cleans the Debian data set (66,541 records, 2,863
// superseded) written in 1 MiB segments: MB/s is of segment bytes read.
//
//	go test -run '^$' -bench CleanDebian -benchtime 5x ./internal/storage
func BenchmarkCleanDebian(b *testing.B) {
	batches, raw := debianBatches(b)
	clock := &fakeClock{t: testEpoch}
	var res CleanResult
	for b.Loop() {
		b.StopTimer()
		l := compactedLog(b, b.TempDir(), clock, 1<<20)
		for _, batch := range batches {
			if _, err := l.Append(slices.Clone(batch), 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.roll(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var err error
		if res, err = l.Clean(context.Background(), CleanOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
	b.SetBytes(res.BytesRead)
	b.ReportMetric(float64(raw)/1e6, "MB_json")
	b.ReportMetric(float64(res.RecordsKept), "records_kept")
	b.ReportMetric(float64(res.BytesWritten)/float64(res.BytesRead), "written/read")
	b.ReportMetric(float64(raw)/1e6/(float64(b.Elapsed())/float64(time.Second)/float64(b.N)), "MB_json/s")
}
