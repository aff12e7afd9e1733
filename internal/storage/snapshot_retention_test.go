package storage

import (
	"slices"
	"testing"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// TestSnapshotsOfDeletedSegments checks that the producer snapshots below
// the log start offset go with the segments retention or DeleteRecords
// deletes (Kafka's deleteProducerSnapshots), all but the newest at or below
// the log start, and that the producer state still loads from what is left.
func TestSnapshotsOfDeletedSegments(t *testing.T) {
	for _, tc := range []struct {
		name     string
		logStart int64
		want     []int64 // snapshots left
	}{
		// At a segment's base: its own snapshot stays, those below go.
		{"segment base", 4, []int64{4, 5}},
		// Inside the last segment, at 5: its snapshot is the newest
		// at or below.
		{"inside a segment", 6, []int64{5}},
		{"below the first snapshot", 0, []int64{1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 1 << 20, IndexIntervalBytes: 100, Cleanup: DefaultCleanup()}
			cfg.Cleanup.FileDeleteDelay = 0
			l := openTest(t, dir, cfg, -1)
			p := producer{id: 7, epoch: 0}
			for i := range 6 {
				p.seq = int32(i)
				if _, err := l.Append(kvBatch(t, record.CodecNone, testEpoch.UnixMilli(), p, put("k", "v")), 0); err != nil {
					t.Fatal(err)
				}
				if i < 5 {
					if err := l.roll(); err != nil { // snapshot at i+1
						t.Fatal(err)
					}
				}
			}
			if got, _ := listSnapshots(vfs.Default, dir); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("snapshots %v before deleting, want [1 2 3 4 5]", got)
			}
			if tc.logStart == 6 {
				// DeleteRecords inside segment 5: a batch at 6 there.
				p.seq = 6
				if _, err := l.Append(kvBatch(t, record.CodecNone, testEpoch.UnixMilli(), p, put("k", "v")), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.SetLogStartOffset(tc.logStart); err != nil {
				t.Fatal(err)
			}
			if _, err := l.DeleteOldSegments(); err != nil {
				t.Fatal(err)
			}
			if got, _ := listSnapshots(vfs.Default, dir); !slices.Equal(got, tc.want) {
				t.Fatalf("snapshots %v with log start %d, want %v", got, l.LogStartOffset(), tc.want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, dir, cfg, -1)
			if info, ok := l.Producer(7); !ok || info.LastSequence != p.seq {
				t.Fatalf("producer 7 after reopening: %+v %v, want last sequence %d", info, ok, p.seq)
			}
		})
	}
}
