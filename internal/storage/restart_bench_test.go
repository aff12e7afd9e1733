package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// BenchmarkManagerRestart opens and closes (cleanly) a log dir of 2,000
// logs of one batch each, as a node's restart and clean shutdown do for
// each partition (scripts/scale.sh runs it at 100,000 partitions through
// a real node): manifest sets the logs up from the ManifestFile the clean
// shutdown wrote, files opens each from its files (the manifest removed
// before each open). It reports open-ms and close-ms per restart of the
// dir, and the process's CPU time per restart (cpu-ms/op).
//
//	go test -run '^$' -bench ManagerRestart -benchtime 5x ./internal/storage
func BenchmarkManagerRestart(b *testing.B) {
	b.Run("manifest", func(b *testing.B) { benchmarkManagerRestart(b, true) })
	b.Run("files", func(b *testing.B) { benchmarkManagerRestart(b, false) })
}

// BenchmarkManagerRestartMany is BenchmarkManagerRestart's manifest case
// at 20,000 logs (SAMSA_BENCH_LOGS sets another count): the clean
// shutdown (close-ms: close every log, checkpoints, the manifest and the
// marker) and the restart from the manifest (open-ms) at the scale where
// their per-log costs show.
//
//	go test -run '^$' -bench ManagerRestartMany -benchtime 3x -benchmem ./internal/storage
func BenchmarkManagerRestartMany(b *testing.B) {
	benchmarkManagerRestartLogs(b, true, benchLogs(b, 20_000))
}

// benchLogs is the count of logs in $SAMSA_BENCH_LOGS, or def.
func benchLogs(b *testing.B, def int) int {
	b.Helper()
	s := os.Getenv("SAMSA_BENCH_LOGS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("SAMSA_BENCH_LOGS: %v", err)
	}
	return n
}

func benchmarkManagerRestart(b *testing.B, manifest bool) {
	benchmarkManagerRestartLogs(b, manifest, 2000)
}

func benchmarkManagerRestartLogs(b *testing.B, manifest bool, logs int) {
	dir := b.TempDir()
	opts := ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "bench-restart"}
	m, err := OpenManager(opts)
	if err != nil {
		b.Fatal(err)
	}
	createLogs(b, m, logs)
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	var open, closing int64
	cpu0 := int64(testutil.ProcessCPU(b))
	for b.Loop() {
		if !manifest {
			if err := os.Remove(filepath.Join(dir, ManifestFile)); err != nil {
				b.Fatal(err)
			}
		}
		start := nanotime()
		m, err := OpenManager(opts)
		if err != nil {
			b.Fatal(err)
		}
		mid := nanotime()
		if len(m.Logs()) != logs {
			b.Fatalf("%d logs opened, want %d", len(m.Logs()), logs)
		}
		if want := map[bool]int64{true: int64(logs)}[manifest]; m.fromManifest != want {
			b.Fatalf("%d logs from the manifest, want %d", m.fromManifest, want)
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

// createLogs creates n logs in m (topics t0, t1, … of 100 partitions each)
// and appends one batch of one 100-byte record to each, timestamped now
// (older timestamps would roll every log by segment.ms).
func createLogs(b *testing.B, m *Manager, n int) {
	b.Helper()
	batch, err := record.Build(record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: make([]byte, 100)}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		l, err := m.Create(TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
}

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

// BenchmarkManifestCodec encodes and decodes the ManifestFile of 100,000
// logs of one segment and one idempotent producer each (scripts/scale.sh's
// node), what a clean shutdown writes and the next start reads besides
// the logs' own work.
//
//	go test -run '^$' -bench ManifestCodec ./internal/storage
func BenchmarkManifestCodec(b *testing.B) {
	logs := make([]logManifest, 100_000)
	for i := range logs {
		e := newProducerEntry(int64(i))
		e.addBatch(batchMeta{lastOffset: 0, timestamp: 1700000000000})
		logs[i] = logManifest{name: fmt.Sprintf("topic-%d-%d", i/100, i%100), logEndOffset: 1,
			epochs:    []EpochEntry{{0, 0}},
			segments:  []segmentManifest{{size: 80, maxTimestamp: 1700000000000, bytesSinceLastIndexEntry: 80, rollingBasedTimestamp: 1700000000000}},
			producers: producerManifest{mapEndOffset: 1, producers: []*producerEntry{e}}}
	}
	data := encodeManifest(manifestID{1}, logs)
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			encodeManifest(manifestID{1}, logs)
		}
		b.ReportMetric(float64(len(data)), "bytes")
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, _, _, err := decodeManifest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreate creates logs in one log dir, as a CreateTopics of many
// partitions has the replica manager's creators do, two a op: one with
// Create (no partition.metadata, the baseline) and one with CreateTopic,
// which writes partition.metadata with the log's other files. The two
// alternate, so that a busy machine slows both alike; it reports the
// time of each (no-id-us, topic-id-us a log) and their ratio.
//
//	go test -run '^$' -bench 'Create$' -benchtime 5000x ./internal/storage
func BenchmarkCreate(b *testing.B) {
	m, err := OpenManager(ManagerOptions{Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: "bench-create"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	id := [16]byte{1}
	var plain, withID time.Duration
	i := 0
	for b.Loop() {
		tp := TopicPartition{Topic: "t" + strconv.Itoa(i/1000), Partition: int32(i % 1000)}
		i++
		t0 := time.Now()
		if _, err := m.Create(tp, Config{}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		tp.Topic = "id-" + tp.Topic
		if _, err := m.CreateTopic(tp, id, Config{}); err != nil {
			b.Fatal(err)
		}
		plain += t1.Sub(t0)
		withID += time.Since(t1)
	}
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "no-id-us")
	b.ReportMetric(float64(withID.Microseconds())/float64(b.N), "topic-id-us")
	b.ReportMetric(float64(withID)/float64(plain), "ratio")
}
