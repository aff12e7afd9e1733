package broker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// isrRecorder is a controller that records the ISRs asked for, by
// partition, and refuses them (the partition's ISR stays as the test set
// it; the leader asks again after a backoff).
type isrRecorder struct {
	mu    sync.Mutex
	asked map[int32][]int32 // the last ISR asked for each partition
}

func (r *isrRecorder) AlterPartition(_ context.Context, _ [16]byte, partition, _, _ int32, isr []int32) ([]int32, int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asked == nil {
		r.asked = map[int32][]int32{}
	}
	r.asked[partition] = slices.Clone(isr)
	return nil, 0, context.Canceled
}

func (r *isrRecorder) get() map[int32][]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.asked)
}

// TestFollowerSessionISR: a follower whose incremental fetches (KIP-227)
// name nothing, because nothing changed, reads none of its idle
// partitions (fetchsession.go) yet stays in their ISR for three times
// replica.lag.time.max.ms; an acks=all wait on one of them completes
// once the follower fetches past it; and when the follower stops
// fetching, the leader asks to remove it after replica.lag.time.max.ms,
// as Kafka's ISR checks do. Time is synctest's.
func TestFollowerSessionISR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 10 * time.Second
		const parts = 20
		logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "broker-test"})
		if err != nil {
			t.Fatal(err)
		}
		ctl := &isrRecorder{}
		m := replica.NewManager(logs, replica.Options{NodeID: 1, Controller: ctl, ReplicaLagTime: lag,
			LeaderAddr: func(int32) (string, bool) { return "", false }})
		defer func() {
			m.Close()
			logs.Close()
		}()
		var ps []*replica.Partition
		for i := range int32(parts) {
			p, err := m.Apply(replica.TopicPartition{Topic: "t", Partition: i}, [16]byte{1},
				replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, replica.LogConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		b := &Broker{node: &config.Node{FetchMaxBytes: 1 << 20}, replicas: m, sessions: newFetchSessions(10)}
		ctx := context.Background()
		offsets := make([]int64, parts)
		var id, epoch int32
		// fetch sends the follower's next fetch: a full one opening the
		// session, then incremental ones naming the partitions whose
		// offset moved; it returns the partitions answered with records
		// and moves their offsets past them.
		fetch := func(moved ...int32) (withRecords []int32) {
			t.Helper()
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 12, 2, 1<<20, 1, 500
			req.SessionID, req.SessionEpoch = id, epoch
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			for i := range int32(parts) {
				if id != 0 && !slices.Contains(moved, i) {
					continue
				}
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = i, offsets[i], 1<<20, 1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			if len(rt.Partitions) > 0 {
				req.Topics = append(req.Topics, rt)
			}
			kresp, err := handleFetch(ctx, b, nil, req)
			if err != nil {
				t.Fatal(err)
			}
			resp := kresp.(*wire.FetchResponse)
			defer resp.Release()
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				t.Fatalf("fetch: error %d, session %d", resp.ErrorCode, resp.SessionID)
			}
			id, epoch = resp.SessionID, replica.NextSessionEpoch(epoch)
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					if sp.ErrorCode != 0 {
						t.Fatalf("partition %d: error %d", sp.Partition, sp.ErrorCode)
					}
					if n := len(sp.RecordBatches); n > 0 {
						withRecords = append(withRecords, sp.Partition)
						offsets[sp.Partition] = ps[sp.Partition].LogEndOffset()
					}
				}
			}
			return withRecords
		}
		produce := func(p *replica.Partition) int64 {
			t.Helper()
			batch, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence},
				[]record.Record{{Value: []byte("v")}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.AppendInternal(batch)
			if err != nil {
				t.Fatal(err)
			}
			return res.LastOffset
		}
		produce(ps[3])
		if got := fetch(); !slices.Equal(got, []int32{3}) {
			t.Fatalf("full fetch: records from %v, want [3]", got)
		}
		if got := fetch(3); len(got) != 0 || ps[3].HighWatermark() != 1 {
			t.Fatalf("fetch past the record: records from %v, high-watermark %d; want none, 1", got, ps[3].HighWatermark())
		}
		start := time.Now()
		for time.Since(start) < 3*lag {
			if got := fetch(); len(got) != 0 {
				t.Fatalf("idle fetch: records from %v", got)
			}
		}
		if asked := ctl.get(); len(asked) != 0 {
			t.Fatalf("a follower fetching an idle session: ISR changes asked %v, want none", asked)
		}

		// acks=all: the high-watermark passes a new record once the
		// follower fetched past it.
		last := produce(ps[7])
		w := replica.NewWaiter()
		defer w.Close()
		ps[7].WatchHighWatermark(w, last)
		if got := fetch(); !slices.Equal(got, []int32{7}) {
			t.Fatalf("fetch after a produce: records from %v, want [7]", got)
		}
		fetch(7)
		select {
		case <-w.C():
		default:
			t.Fatalf("acks=all wait not done: high-watermark %d, record at %d", ps[7].HighWatermark(), last)
		}

		// The follower stops fetching: out of every ISR after the lag.
		time.Sleep(2 * lag) // synctest's clock: the ISR checker runs every lag/2
		synctest.Wait()
		asked := ctl.get()
		if len(asked) != parts {
			t.Fatalf("a follower that stopped fetching: %d ISR changes asked (%v), want %d", len(asked), asked, parts)
		}
		for p, isr := range asked {
			if !slices.Equal(isr, []int32{1}) {
				t.Fatalf("partition %d: ISR asked %v, want [1]", p, isr)
			}
		}
	})
}
