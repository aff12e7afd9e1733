package replica

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// epochFile reads the leader-epoch-checkpoint of p's log; fi is nil when
// there is none.
func epochFile(t *testing.T, p *Partition) (string, os.FileInfo) {
	t.Helper()
	path := filepath.Join(p.Log().Dir(), storage.LeaderEpochCheckpointFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), fi
}

// TestLeaderWritesEpochCheckpoint: a partition led by this broker has
// its leader epoch in its leader-epoch-checkpoint once its log is made,
// before any produce, and again after a leadership change, as Kafka's
// Partition.makeLeader assigns the epoch at the log end; the first append
// of the epoch then writes no file. The first append to each new log
// wrote it, in the Produce handler: 1,000 openat, write, rename and close
// in the first requests to a new topic of 1,000 partitions. A followed
// partition assigns nothing (its epochs come with the leader's batches).
func TestLeaderWritesEpochCheckpoint(t *testing.T) {
	m, _ := newFSManager(t, t.TempDir(), vfs.Default, 2)
	// A wake-up that never blocks a writer: the waiter reads the file
	// again after each, so one pending is enough.
	wrote := make(chan struct{}, 1)
	m.epochsWritten = func(*Partition) {
		select {
		case wrote <- struct{}{}:
		default:
		}
	}
	m.ApplyBatch([]ApplyItem{item("e", 0, 1, 3, 1), item("e", 1, 2, 3, 1)})
	tps := []TopicPartition{{"e", 0}, {"e", 1}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m.AwaitPending(ctx, tps, time.Now().Add(time.Minute))
	led, followed := m.Get("e", 0), m.Get("e", 1)
	if led == nil || followed == nil {
		t.Fatal("partitions not hosted after AwaitPending")
	}
	if got, fi := epochFile(t, followed); fi != nil {
		t.Errorf("followed partition's checkpoint %q, want none", got)
	}
	got, written := epochFile(t, led)
	if got != "0\n1\n3 0\n" {
		t.Fatalf("checkpoint once the log is led %q, want epoch 3 from offset 0", got)
	}
	appendOne := func() {
		t.Helper()
		if _, err := led.AppendInternal(batch(t, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	if got, fi := epochFile(t, led); got != "0\n1\n3 0\n" || !os.SameFile(fi, written) {
		t.Fatalf("the first append replaced the checkpoint (now %q)", got)
	}

	// Led again at epoch 5: the creators write the checkpoint.
	m.ApplyBatch([]ApplyItem{item("e", 0, 1, 5, 1)})
	want := "0\n2\n3 0\n5 1\n"
	for got, written = epochFile(t, led); got != want; got, written = epochFile(t, led) {
		select {
		case <-wrote: // a creator wrote a checkpoint (or failed to): look again
		case <-ctx.Done():
			t.Fatalf("checkpoint after the leadership change %q, want %q (no creator wrote it)", got, want)
		}
	}
	if e, end := led.Log().EndOffsetForEpoch(3); e != 3 || end != 1 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d; want 3, 1", e, end)
	}
	appendOne()
	if got, fi := epochFile(t, led); got != want || !os.SameFile(fi, written) {
		t.Fatalf("the first append at epoch 5 replaced the checkpoint (now %q)", got)
	}
}
