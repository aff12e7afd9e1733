package replica

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/samsahq/samsa/internal/storage"
)

// moves is n partitions of topic "b" led by leader at epoch, replicas
// 1 and 2.
func moves(n int, leader, epoch int32) []ApplyItem {
	items := make([]ApplyItem, n)
	for i := range items {
		items[i] = ApplyItem{TopicPartition: TopicPartition{Topic: "b", Partition: int32(i)},
			State: State{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}
	}
	return items
}

// ApplyBatch hosts every partition as Apply would, across chunks: leader
// where the state names this broker, follower of the leader elsewhere,
// and moves leadership both ways.
func TestApplyBatch(t *testing.T) {
	m := newTestManager(t)
	n := 2*applyChunk + 3
	for _, step := range []struct{ leader, epoch int32 }{{1, 1}, {2, 2}, {1, 3}} {
		for i, err := range m.ApplyBatch(moves(n, step.leader, step.epoch)) {
			if err != nil {
				t.Fatalf("partition %d: %v", i, err)
			}
		}
		waitCreated(t, m)
		for i := range n {
			p := m.Get("b", int32(i))
			if p == nil || p.IsLeader() != (step.leader == 1) || p.Leader() != step.leader || p.LeaderEpoch() != step.epoch {
				t.Fatalf("leader %d epoch %d: partition %d is %+v", step.leader, step.epoch, i, p)
			}
		}
	}
}

// BenchmarkApplyLeaderMoves moves the leadership of 2,000 partitions to
// this broker and back, one Apply each or in one ApplyBatch, while two
// goroutines look partitions up as fetch handlers do.
func BenchmarkApplyLeaderMoves(b *testing.B) {
	const n = 2000
	for _, mode := range []string{"apply", "batch"} {
		b.Run(mode, func(b *testing.B) {
			logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: "replica-bench"})
			if err != nil {
				b.Fatal(err)
			}
			m := NewManager(logs, Options{NodeID: 1, Controller: noController{}, LeaderAddr: func(int32) (string, bool) { return "", false }})
			defer logs.Close()
			defer m.Close()
			m.ApplyBatch(moves(n, 2, 0))
			waitCreated(b, m)
			var stop atomic.Bool
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						m.Get("b", int32(i%n))
					}
				})
			}
			b.ResetTimer()
			for i := range b.N {
				items := moves(n, int32(1+i%2), int32(i+1))
				if mode == "batch" {
					m.ApplyBatch(items)
					continue
				}
				for _, it := range items {
					m.Apply(it.TopicPartition, it.TopicID, it.State, it.Config)
				}
			}
			b.StopTimer()
			stop.Store(true)
			wg.Wait()
		})
	}
}
