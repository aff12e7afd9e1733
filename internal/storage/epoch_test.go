package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/samsahq/samsa/internal/record"
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
