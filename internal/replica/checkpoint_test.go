package replica

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/samsahq/samsa/internal/storage"
)

// TestHWCheckpointOnlyWhenMoved: the replication-offset-checkpoint is
// written within replica.high.watermark.checkpoint.interval.ms of a
// high-watermark moving or a partition going, and not at all while
// nothing changes (it was rewritten with every hosted partition every
// interval: 42-46 ms of encoding every 5 s at 100,000 partitions); what
// it holds is what a restart after a crash starts from.
func TestHWCheckpointOnlyWhenMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 5 * time.Second
		dir := t.TempDir()
		logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "replica-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		m := NewManager(logs, Options{NodeID: 1, Controller: noController{}, LeaderAddr: func(int32) (string, bool) { return "", false },
			HighWatermarkCheckpointInterval: interval})
		defer m.Close()
		var parts []*Partition
		for i := range 20 {
			p, err := m.Apply(TopicPartition{Topic: "t", Partition: int32(i)}, [16]byte{1}, State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, LogConfig{})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
		}
		ckpt := filepath.Join(dir, storage.ReplicationOffsetCheckpointFile)
		read := func() map[storage.TopicPartition]int64 {
			t.Helper()
			hws, err := storage.ReadOffsetCheckpoint(nil, ckpt)
			if err != nil {
				t.Fatal(err)
			}
			return hws
		}
		produce := func(p *Partition) {
			t.Helper()
			if _, err := p.AppendInternal(batch(t, 0, 1, 2)); err != nil {
				t.Fatal(err)
			}
			if p.HighWatermark() != p.log.LogEndOffset() {
				t.Fatalf("high-watermark %d, log end %d: a single-replica ISR's HW is its log end", p.HighWatermark(), p.log.LogEndOffset())
			}
		}

		produce(parts[0])
		time.Sleep(interval + time.Second)
		synctest.Wait()
		if hws := read(); hws[storage.TopicPartition{Topic: "t", Partition: 0}] != 2 {
			t.Fatalf("checkpoint after an interval: %v, want t-0 at 2", hws)
		}

		// Idle: nothing is written.
		if err := os.Remove(ckpt); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * interval)
		synctest.Wait()
		if _, err := os.Stat(ckpt); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("checkpoint written while no high-watermark moved: %v", err)
		}

		// A moved HW is written within the interval, with every other.
		produce(parts[3])
		time.Sleep(interval)
		synctest.Wait()
		hws := read()
		if hws[storage.TopicPartition{Topic: "t", Partition: 3}] != 2 || hws[storage.TopicPartition{Topic: "t", Partition: 0}] != 2 {
			t.Fatalf("checkpoint after t-3 moved: %v, want t-0 and t-3 at 2", hws)
		}

		// A partition that goes leaves it.
		if err := m.Remove(TopicPartition{Topic: "t", Partition: 0}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
		synctest.Wait()
		if _, ok := read()[storage.TopicPartition{Topic: "t", Partition: 0}]; ok {
			t.Fatal("a removed partition is still in the checkpoint an interval later")
		}
	})
}
