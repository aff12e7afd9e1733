package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// BenchmarkManagerRestart opens and closes (cleanly) a log dir of 2,000
// logs of one batch each, as a node's restart and clean shutdown do for
// each partition (scripts/scale.sh runs it at 100,000 partitions through
// a real node). It reports open-ms and close-ms per restart of the dir,
// and the process's CPU time per restart (cpu-ms/op).
//
//	go test -run '^$' -bench ManagerRestart -benchtime 5x ./internal/storage
func BenchmarkManagerRestart(b *testing.B) {
	const logs = 2000
	dir := b.TempDir()
	opts := ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "bench-restart"}
	m, err := OpenManager(opts)
	if err != nil {
		b.Fatal(err)
	}
	// Timestamps of now: older ones would roll every log by segment.ms.
	batch, err := record.Build(record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: make([]byte, 100)}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range logs {
		l, err := m.Create(TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	var open, closing int64
	cpu0 := int64(testutil.ProcessCPU(b))
	for b.Loop() {
		start := nanotime()
		m, err := OpenManager(opts)
		if err != nil {
			b.Fatal(err)
		}
		mid := nanotime()
		if len(m.Logs()) != logs {
			b.Fatalf("%d logs opened, want %d", len(m.Logs()), logs)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		open += mid - start
		closing += nanotime() - mid
	}
	b.ReportMetric(float64(open)/float64(b.N)/1e6, "open-ms")
	b.ReportMetric(float64(closing)/float64(b.N)/1e6, "close-ms")
	b.ReportMetric(float64(int64(testutil.ProcessCPU(b))-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

func nanotime() int64 { return time.Now().UnixNano() }

// BenchmarkEncodeOffsetCheckpoint encodes a checkpoint of 100,000
// partitions (1,000 topics of 100), as a clean shutdown of such a node
// does four times (recovery points, log start offsets, cleaner offsets,
// high-watermarks), and the periodic checkpoints every minute.
//
//	go test -run '^$' -bench EncodeOffsetCheckpoint -benchmem ./internal/storage
func BenchmarkEncodeOffsetCheckpoint(b *testing.B) {
	offsets := make(map[TopicPartition]int64, 100000)
	for i := range 100000 {
		offsets[TopicPartition{Topic: fmt.Sprintf("scale-%04d", i/100), Partition: int32(i % 100)}] = int64(i)
	}
	cpu0 := testutil.ProcessCPU(b)
	for b.Loop() {
		if len(EncodeOffsetCheckpoint(offsets)) == 0 {
			b.Fatal("empty checkpoint")
		}
	}
	b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}
