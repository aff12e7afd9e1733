package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// BenchmarkDirCheckpoints writes the three checkpoints of one log dir of
// 30,000 logs (SAMSA_BENCH_LOGS: another count), as each clean shutdown
// and each periodic checkpoint that found an offset moved do, two ways
// in turn on each iteration, so that both see the same load: before, as
// main wrote them until this benchmark (three maps, then each file
// encoded, written, fsynced, renamed and its dir fsynced, one after the
// other: WriteOffsetCheckpoint), and after (writeDirCheckpoints: one
// sort for the three, the three fsynced at once, one fsync of the dir).
// It reports the median of each (before-ms, after-ms), the median of the
// ratio after/before of each iteration's pair, and the same for the
// writes alone of the three files already encoded (io-before-ms,
// io-after-ms, io-after/before: WriteFileAtomic three times against
// writeFilesAtomic).
//
//	go test -run '^$' -bench DirCheckpoints -benchtime 50x ./internal/storage
func BenchmarkDirCheckpoints(b *testing.B) {
	logs := benchLogs(b, 30_000)
	entries := make([]dirCheckpointEntry, logs)
	for i := range entries {
		entries[i] = dirCheckpointEntry{tp: TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)},
			recoveryPoint: int64(1000 + i), logStartOffset: int64(i), cleanerOffset: -1}
	}
	dir := b.TempDir()
	fsys := vfs.Default
	names := []string{RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile, CleanerOffsetCheckpointFile}
	before := func() error {
		// main's Manager.checkpoint: maps filled from the logs, then
		// the three files one after the other.
		rps, lsos, cleaned := map[TopicPartition]int64{}, map[TopicPartition]int64{}, map[TopicPartition]int64{}
		for _, e := range entries {
			rps[e.tp], lsos[e.tp] = e.recoveryPoint, e.logStartOffset
			if e.cleanerOffset >= 0 {
				cleaned[e.tp] = e.cleanerOffset
			}
		}
		for i, offs := range []map[TopicPartition]int64{rps, lsos, cleaned} {
			if err := WriteOffsetCheckpoint(fsys, filepath.Join(dir, names[i]), offs); err != nil {
				return err
			}
		}
		return nil
	}
	after := func() error {
		// The entries as Manager.checkpoint collects them, in map order.
		return writeDirCheckpoints(fsys, dir, slices.Clone(entries))
	}
	tps, rps, lsos := make([]TopicPartition, logs), make([]int64, logs), make([]int64, logs)
	for i, e := range entries {
		tps[i], rps[i], lsos[i] = e.tp, e.recoveryPoint, e.logStartOffset
	}
	files := []fileData{{names[0], encodeOffsets(tps, rps)}, {names[1], encodeOffsets(tps, lsos)}, {names[2], encodeOffsets(nil, nil)}}
	ioBefore := func() error {
		for _, f := range files {
			if err := WriteFileAtomic(fsys, filepath.Join(dir, f.name), f.data); err != nil {
				return err
			}
		}
		return nil
	}
	ioAfter := func() error { return writeFilesAtomic(fsys, dir, files) }

	runs := []struct {
		name string
		fn   func() error
		d    []time.Duration
	}{{"before", before, nil}, {"after", after, nil}, {"io-before", ioBefore, nil}, {"io-after", ioAfter, nil}}
	for b.Loop() {
		for i := range runs {
			start := time.Now()
			if err := runs[i].fn(); err != nil {
				b.Fatal(err)
			}
			runs[i].d = append(runs[i].d, time.Since(start))
		}
	}
	ratio := func(num, den []time.Duration) float64 {
		r := make([]float64, len(num))
		for i := range num {
			r[i] = float64(num[i]) / float64(den[i])
		}
		slices.Sort(r)
		return r[len(r)/2]
	}
	b.ReportMetric(ratio(runs[1].d, runs[0].d), "after/before")
	b.ReportMetric(ratio(runs[3].d, runs[2].d), "io-after/before")
	for _, r := range runs {
		slices.Sort(r.d)
		b.ReportMetric(float64(r.d[len(r.d)/2])/1e6, r.name+"-ms")
	}
}
