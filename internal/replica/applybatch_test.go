package replica

import (
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// newBenchManager is a Manager of broker 1 hosting the n partitions of
// moves, followers of broker 2, closed at the end of b.
func newBenchManager(b *testing.B, n int) *Manager {
	b.Helper()
	m := newTestManager(b)
	m.ApplyBatch(moves(n, 2, 0))
	waitCreated(b, m)
	return m
}

// BenchmarkApplyLeaderMoves moves the leadership of 2,000 partitions to
// this broker and back, one Apply each or in one ApplyBatch, while two
// goroutines look partitions up as fetch handlers do.
func BenchmarkApplyLeaderMoves(b *testing.B) {
	const n = 2000
	for _, mode := range []string{"apply", "batch"} {
		b.Run(mode, func(b *testing.B) {
			m := newBenchManager(b, n)
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

// BenchmarkApplyLeaderMovesHosted moves the leadership of 2,000 of the
// 10,000 partitions a broker hosts to it and back in one ApplyBatch (a
// chunk of a controlled shutdown on a surviving broker), alone ("idle")
// or while two goroutines serve fetches of every partition in turn
// (lookup and a read at the log end) and the high-watermark
// checkpointer writes its file ("fetching"). cpu-ms/op is the process's
// CPU time (user and system) per ApplyBatch.
func BenchmarkApplyLeaderMovesHosted(b *testing.B) {
	const hosted, n = 10000, 2000
	m := newBenchManager(b, hosted)
	epoch := int32(0)
	for _, mode := range []string{"idle", "fetching"} {
		b.Run(mode, func(b *testing.B) {
			var stop atomic.Bool
			var wg sync.WaitGroup
			if mode == "fetching" {
				for range 2 {
					wg.Go(func() {
						for i := 0; !stop.Load(); i++ {
							if p := m.Get("b", int32(i%hosted)); p != nil {
								_, _ = p.Read(p.LogEndOffset(), 1<<20, true, true)
							}
						}
					})
				}
				wg.Go(func() {
					for !stop.Load() {
						m.hwMoved.Store(true)
						if err := m.Checkpoint(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				epoch++
				m.ApplyBatch(moves(n, int32(1+i%2), epoch))
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
			stop.Store(true)
			wg.Wait()
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// An apply gives a hosted partition, and its log, the config it carries
// when it differs from the partition's, and leaves them as they are when
// it is the same (a leadership move).
func TestApplyConfigChange(t *testing.T) {
	m := newTestManager(t)
	tp := TopicPartition{Topic: "c", Partition: 0}
	st := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	for i, segBytes := range []int64{1 << 20, 2 << 20, 2 << 20, 1 << 20} {
		cfg := LogConfig{SegmentBytes: segBytes, Storage: storage.Config{SegmentBytes: segBytes}}
		st.LeaderEpoch++
		p, err := m.Apply(tp, [16]byte{}, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config().SegmentBytes; got != segBytes {
			t.Fatalf("apply %d: partition segment.bytes %d, want %d", i, got, segBytes)
		}
		if got := p.Log().Config().SegmentBytes; got != segBytes {
			t.Fatalf("apply %d: log segment.bytes %d, want %d", i, got, segBytes)
		}
	}
}
