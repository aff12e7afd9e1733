package share

import (
	"testing"
	"time"
)

// BenchmarkAckWrite: the share-partition leader's and the share
// coordinator's work for one acknowledgement and its write, with 2,000
// records in flight, every other one released (1,000 state batches) and
// the start offset held by a record another member keeps: "delta" writes
// the records changed (this code), "snapshot" every in-flight record, as
// every acknowledgement did before (its write was the whole state, merged
// into the coordinator's). Per op: Acknowledge, the write's batches,
// Store.Prepare and Apply.
func BenchmarkAckWrite(b *testing.B) {
	const inflight = 2000
	k := StateKey{Group: "g", Partition: 0}
	now := time.Now()
	setup := func() (*Partition, *Store) {
		p := NewPartition(PartitionConfig{MaxLocks: inflight + 1, LockDuration: time.Hour})
		p.Init(0)
		p.Acquire("x", 1, true, []Span{{First: 0, Last: 0}}, now)
		p.Acquire("a", inflight, false, []Span{{First: 1, Last: inflight}}, now)
		for off := int64(2); off <= inflight; off += 2 {
			if _, err := p.Ack("a", off, off, []AckType{AckRelease}, now); err != nil {
				b.Fatal(err)
			}
		}
		s := NewStore()
		s.Load(0, NewShard())
		r, _ := s.Prepare(0, k, Write{Initialize: true, StartOffset: 0}, DefaultUpdatesPerSnapshot, now)
		s.Apply(0, r)
		start, batches, _ := p.Snapshot()
		r, err := s.Prepare(0, k, Write{LeaderEpoch: 1, StartOffset: start, Batches: batches}, DefaultUpdatesPerSnapshot, now)
		if err != nil {
			b.Fatal(err)
		}
		s.Apply(0, r)
		p.Finish(nil, p.Delta(nil), true)
		return p, s
	}
	for _, mode := range []string{"delta", "snapshot"} {
		b.Run(mode, func(b *testing.B) {
			p, s := setup()
			off := int64(1)
			for b.Loop() {
				if off > inflight {
					b.StopTimer()
					p, s = setup()
					off = 1
					b.StartTimer()
				}
				c, err := p.Acknowledge("a", []AckBatch{{First: off, Last: off, Types: []AckType{AckAccept}}}, now)
				if err != nil {
					b.Fatal(err)
				}
				d := p.Delta(c)
				w := Write{LeaderEpoch: 1, StartOffset: d.Start, Batches: d.Batches}
				if mode == "snapshot" {
					p.Finish(c, d, true)
					w.StartOffset, w.Batches, _ = p.Snapshot()
				}
				r, err := s.Prepare(0, k, w, DefaultUpdatesPerSnapshot, now)
				if err != nil {
					b.Fatal(err)
				}
				s.Apply(0, r)
				if mode == "delta" {
					p.Finish(c, d, true)
				}
				off += 2
			}
		})
	}
}
