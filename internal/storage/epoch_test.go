package storage

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

func epochBatch(t *testing.T, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLeaderEpochHistory(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 0 writes 0-9, epoch 2 writes 10-14, epoch 5 writes 15-19.
	for _, step := range []struct {
		epoch int32
		n     int
	}{{0, 5}, {0, 5}, {2, 5}, {5, 5}} {
		if _, err := l.Append(epochBatch(t, step.n), step.epoch); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{0, 0, 10}, {1, 0, 10}, {2, 2, 15}, {4, 2, 15}, {5, 5, 20}, {9, 5, 20}, {-1, -1, -1},
	} {
		e, end := l.EndOffsetForEpoch(tc.req)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tc.req, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
	// Truncating to where epoch 5 began drops it.
	if err := l.Truncate(15); err != nil {
		t.Fatal(err)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 2 {
		t.Fatalf("latest epoch after truncate: %d %v", e, ok)
	}
	l.Close()
	data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "0\n2\n0 0\n2 10\n" {
		t.Fatalf("checkpoint %q", data)
	}
	// A missing checkpoint is rebuilt from the batches on open.
	os.Remove(filepath.Join(dir, LeaderEpochCheckpointFile))
	l, err = Open(OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.EpochHistory(); len(got) != 2 || got[1] != (EpochEntry{2, 10}) {
		t.Fatalf("rebuilt history %v", got)
	}
}

func FuzzEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n2 10\n"))
	f.Add([]byte("0\n1\n5 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeEpochCheckpoint(data)
		if err != nil {
			return
		}
		again, err := decodeEpochCheckpoint(encodeEpochCheckpoint(entries))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("round trip: %v %v", entries, err)
		}
	})
}

// TestAssignEpoch: a new leader's epoch starts at the log end (Kafka's
// Partition.makeLeader) in memory; WriteEpochs writes it to the
// leader-epoch-checkpoint, after which the first append of that epoch
// writes no file; an append before WriteEpochs writes the file itself,
// before its batches. A newer epoch assigned at the same offset replaces
// one nothing was written in, as Kafka's LeaderEpochFileCache.assign
// does, and a restart forgets an epoch nothing was written in.
func TestAssignEpoch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LeaderEpochCheckpointFile)
	l, err := Open(OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	checkFile := func(want string) os.FileInfo {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil || string(data) != want {
			t.Fatalf("checkpoint %q, %v; want %q", data, err, want)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	if !l.AssignEpoch(2) || l.AssignEpoch(2) || l.AssignEpoch(1) {
		t.Fatal("AssignEpoch: want true for 2, then false for 2 again and for 1")
	}
	if got := l.EpochHistory(); !slices.Equal(got, []EpochEntry{{2, 0}}) {
		t.Fatalf("history %v, want [{2 0}]", got)
	}
	if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 0 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 2, 0", e, end)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("AssignEpoch wrote the checkpoint (%v): that is WriteEpochs' work", err)
	}
	if err := l.WriteEpochs(); err != nil {
		t.Fatal(err)
	}
	written := checkFile("0\n1\n2 0\n")
	if _, err := l.Append(epochBatch(t, 3), 2); err != nil {
		t.Fatal(err)
	}
	if fi := checkFile("0\n1\n2 0\n"); !os.SameFile(fi, written) {
		t.Fatal("the first append of an epoch already written replaced the checkpoint")
	}
	if err := l.WriteEpochs(); err != nil {
		t.Fatal(err)
	}
	if fi := checkFile("0\n1\n2 0\n"); !os.SameFile(fi, written) {
		t.Fatal("WriteEpochs with nothing new replaced the checkpoint")
	}
	// Led at 4, then at 5 before anything was written: 5 replaces 4.
	l.AssignEpoch(4)
	l.AssignEpoch(5)
	if got := l.EpochHistory(); !slices.Equal(got, []EpochEntry{{2, 0}, {5, 3}}) {
		t.Fatalf("history %v, want [{2 0} {5 3}]", got)
	}
	if e, end := l.EndOffsetForEpoch(4); e != 2 || end != 3 {
		t.Fatalf("EndOffsetForEpoch(4) = %d, %d; want 2, 3", e, end)
	}
	// No WriteEpochs: the append writes the checkpoint first.
	if _, err := l.Append(epochBatch(t, 3), 5); err != nil {
		t.Fatal(err)
	}
	checkFile("0\n2\n2 0\n5 3\n")
	l.AssignEpoch(7)
	if err := l.WriteEpochs(); err != nil {
		t.Fatal(err)
	}
	checkFile("0\n3\n2 0\n5 3\n7 6\n")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.EpochHistory(); !slices.Equal(got, []EpochEntry{{2, 0}, {5, 3}}) {
		t.Fatalf("history after a restart %v, want [{2 0} {5 3}]", got)
	}
	if !l.AssignEpoch(7) {
		t.Fatal("AssignEpoch(7) after the restart: want true")
	}
}

// TestAssignEpochCrash: a crash of the machine at any filesystem call of
// a leader's life (epochs assigned at the log end, their checkpoint
// written by WriteEpochs or by the first append, appends, flushes),
// keeping a random part of what was not synced, leaves a log whose epoch
// history, once opened, is the one its surviving batches show: no batch
// of an epoch the history lacks or places later, so that truncation and
// OffsetForLeaderEpoch answer from what the log holds.
func TestAssignEpochCrash(t *testing.T) {
	script := func(l *Log) error {
		steps := []func() error{
			func() error { _, err := l.Append(epochBatch(t, 3), 0); return err },
			l.Flush,
			func() error { l.AssignEpoch(2); return l.WriteEpochs() },
			func() error { _, err := l.Append(epochBatch(t, 2), 2); return err },
			func() error { _, err := l.Append(epochBatch(t, 2), 2); return err },
			func() error { l.AssignEpoch(4); l.AssignEpoch(5); return nil },
			func() error { _, err := l.Append(epochBatch(t, 2), 5); return err }, // writes the checkpoint itself
			l.Flush,
			func() error { l.AssignEpoch(7); return l.WriteEpochs() },
			func() error { _, err := l.Append(epochBatch(t, 1), 7); return err },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	}
	for k := 1; ; k++ {
		dir := t.TempDir()
		crash := errorfs.NewCrashFS(nil)
		var calls atomic.Int64
		crashed := false
		hook := errorfs.Func(func(op errorfs.Op) error {
			if op.Kind&errorfs.OpMutate == 0 || !strings.HasPrefix(op.Path, dir) {
				return nil
			}
			if calls.Add(1) == int64(k) {
				crashed = true
				crash.Crash(errorfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(k), 1))})
				return errorfs.ErrCrashed
			}
			return nil
		})
		l, err := Open(OpenOptions{Dir: dir, FS: errorfs.Wrap(crash, hook)})
		if err == nil {
			err = script(l)
		}
		if !crashed {
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
			if k < 10 {
				t.Fatalf("the script made only %d filesystem calls", k-1)
			}
			return
		}
		l2, err := Open(OpenOptions{Dir: dir})
		if err != nil {
			t.Fatalf("crash at call %d: open: %v", k, err)
		}
		var want []EpochEntry
		for _, s := range l2.segments() {
			if _, err := scanSegment(vfs.Default, s.path(logSuffix), func(b SegmentBatch) error {
				if e := b.Header.PartitionLeaderEpoch; b.Err == nil && (len(want) == 0 || e > want[len(want)-1].Epoch) {
					want = append(want, EpochEntry{e, b.Header.BaseOffset})
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if got := l2.EpochHistory(); !slices.Equal(got, want) {
			t.Errorf("crash at call %d: history %v, the batches show %v (log end %d)", k, got, want, l2.LogEndOffset())
		}
		l2.Close()
	}
}

// TestTruncateAtLogEndDropsAssignedEpoch: a truncation at or past the log
// end removes no record but drops the epochs starting at the log end, in
// memory and in the leader-epoch-checkpoint (an epoch assigned as a leader
// with nothing written in it, which the leader being followed never had),
// as Kafka's UnifiedLog.truncateTo does; earlier epochs stay.
func TestTruncateAtLogEndDropsAssignedEpoch(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(epochBatch(t, 3), 1); err != nil {
		t.Fatal(err)
	}
	l.AssignEpoch(4)
	if err := l.WriteEpochs(); err != nil {
		t.Fatal(err)
	}
	for _, to := range []int64{3, 10} {
		if err := l.Truncate(to); err != nil {
			t.Fatal(err)
		}
		if got := l.EpochHistory(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
			t.Fatalf("history after Truncate(%d) %v, want [{1 0}]", to, got)
		}
		if l.LogEndOffset() != 3 {
			t.Fatalf("log end %d after Truncate(%d), want 3", l.LogEndOffset(), to)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil || string(data) != "0\n1\n1 0\n" {
		t.Fatalf("checkpoint %q, %v; want %q", data, err, "0\n1\n1 0\n")
	}
}
