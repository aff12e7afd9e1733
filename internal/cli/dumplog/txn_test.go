package dumplog

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsahq/samsa/internal/storage"
)

func TestDumpSnapshotAndTxnIndex(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "00000000000000000042.snapshot")
	os.WriteFile(snap, storage.EncodeProducerSnapshot([]storage.ProducerSnapshotEntry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: 9, LastOffset: 40, OffsetDelta: 4, Timestamp: 123, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 36},
	}), 0o644)
	idx := filepath.Join(dir, "00000000000000000000.txnindex")
	os.WriteFile(idx, storage.EncodeTxnIndex([]storage.AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 9, LastStableOffset: 10}}), 0o644)
	for _, c := range []struct{ file, want string }{
		{snap, "producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: 36 lastTimestamp: 123 firstSequence: 5 lastSequence: 9 lastOffset: 40 offsetDelta: 4 timestamp: 123\n"},
		{idx, "version: 0 producerId: 7 firstOffset: 3 lastOffset: 9 lastStableOffset: 10\n"},
	} {
		var sb strings.Builder
		w := bufio.NewWriter(&sb)
		if err := File(w, c.file, Options{}); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		if !strings.HasSuffix(sb.String(), c.want) {
			t.Errorf("%s:\n%s\nwant it to end with\n%s", c.file, sb.String(), c.want)
		}
	}
	os.WriteFile(idx, []byte{0, 0, 1}, 0o644)
	w := bufio.NewWriter(&strings.Builder{})
	if err := File(w, idx, Options{}); !errors.Is(err, ErrProblems) {
		t.Fatalf("corrupt .txnindex: %v", err)
	}
}
