package storage

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

var idleLogs = flag.Int("idle-logs", 10000, "logs of the periodic-task benchmarks (BenchmarkIdlePass)")

// BenchmarkIdlePass is one pass of each periodic walk over -idle-logs
// idle logs of one batch each, none due, the way it was (walk: every log
// looked at) and as the periodic task runs it now (schedule: only the logs
// due or changed), in the same run:
//
//	go test -run '^$' -bench IdlePass -idle-logs 100000 ./internal/storage
//
// roll: the roll check, every second; checkpoint: the recovery-point,
// log-start-offset and cleaner-offset checkpoints, every
// log.flush.offset.checkpoint.interval.ms.
func BenchmarkIdlePass(b *testing.B) {
	m, err := OpenManager(ManagerOptions{Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: "bench-idle",
		CheckpointInterval: 24 * time.Hour, RetentionCheckInterval: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	batch, err := record.Build(record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: make([]byte, 100)}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range *idleLogs {
		l, err := m.Create(TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	// The periodic task's first pass over the new logs, then idle ones.
	m.rollPass(time.Now())
	if err := m.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, pass func()) {
		cpu0 := int64(testutil.ProcessCPU(b))
		for b.Loop() {
			pass()
		}
		b.ReportMetric(float64(int64(testutil.ProcessCPU(b))-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
	}
	b.Run(fmt.Sprintf("roll/walk/logs=%d", *idleLogs), func(b *testing.B) {
		run(b, func() {
			if err := m.MaybeRoll(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run(fmt.Sprintf("roll/schedule/logs=%d", *idleLogs), func(b *testing.B) {
		run(b, func() { m.rollPass(time.Now()) })
	})
	b.Run(fmt.Sprintf("checkpoint/walk/logs=%d", *idleLogs), func(b *testing.B) {
		run(b, func() {
			m.ckptMoved.Store(true) // as every interval wrote them before
			if err := m.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run(fmt.Sprintf("checkpoint/schedule/logs=%d", *idleLogs), func(b *testing.B) {
		run(b, func() {
			if err := m.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, l := range m.Logs() {
		if n := len(l.Segments()); n != 1 {
			b.Fatalf("%d segments, want 1: a log rolled", n)
		}
	}
}
