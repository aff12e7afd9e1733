package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/wire"
)

// TestSessionFetchWakesOnUnwatched: a consumer's incremental fetch that
// waits (min_bytes 1, a long max_wait_ms) is woken by an append to a
// partition its session did not watch when the fetch began: one the
// fetch adds to the session, or any after the session went dormant
// (fetchSessions.expire dropped its watches). Before, the session
// registered those watches only when the fetch answered, so the append
// waited for max_wait_ms (kgo's 5 s) to be seen, where a fetch without
// sessions or before them answered at once.
func TestSessionFetchWakesOnUnwatched(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs between the session's settling fetch and the
		// waiting one; add is the partition the waiting fetch adds to
		// the session (-1: none); target is where the record goes.
		before      func(br *Broker)
		add, target int32
	}{
		{name: "dormant", before: func(br *Broker) { br.sessions.expire(time.Now().Add(sessionEvictionAge)) }, add: -1, target: 0},
		{name: "added partition", before: func(*Broker) {}, add: 1, target: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newReplicas(t)
			parts := make([]*replica.Partition, 2)
			for i := range int32(2) {
				p, err := m.Apply(replica.TopicPartition{Topic: "t", Partition: i}, [16]byte{1},
					replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, replica.LogConfig{})
				if err != nil {
					t.Fatal(err)
				}
				parts[i] = p
			}
			br := &Broker{node: &config.Node{FetchMaxBytes: 1 << 20}, replicas: m, sessions: newFetchSessions(10)}
			request := func(id, epoch int32, maxWait time.Duration, named ...int32) *kmsg.FetchRequest {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = 12, -1, 1<<20, id, epoch
				req.MaxWaitMillis, req.MinBytes = int32(maxWait/time.Millisecond), 1
				if len(named) > 0 {
					rt := kmsg.NewFetchRequestTopic()
					rt.Topic = "t"
					for _, p := range named {
						rp := kmsg.NewFetchRequestTopicPartition()
						rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
				}
				return req
			}
			fetch := func(ctx context.Context, req *kmsg.FetchRequest) *wire.FetchResponse {
				t.Helper()
				kresp, err := handleFetch(ctx, br, nil, req)
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return nil
				}
				return kresp.(*wire.FetchResponse)
			}
			id := fetch(context.Background(), request(0, 0, 0, 0)).SessionID
			if id == 0 {
				t.Fatal("no session")
			}
			fetch(context.Background(), request(id, 1, 0)) // settles partition 0
			tc.before(br)

			var named []int32
			if tc.add >= 0 {
				named = append(named, tc.add)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			read := br.ConsumerPartitionsRead()
			done := make(chan *wire.FetchResponse, 1)
			go func() { done <- fetch(ctx, request(id, 2, 10*time.Minute, named...)) }()
			// The fetch read its partitions (and found nothing) before the
			// append; it waits for up to ten minutes.
			for deadline := time.Now().Add(30 * time.Second); br.ConsumerPartitionsRead() == read; {
				if time.Now().After(deadline) {
					t.Fatal("the waiting fetch read no partition")
				}
				time.Sleep(time.Millisecond) // polling a counter the fetch raises; nothing to wait on
			}
			batch, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence},
				[]record.Record{{Value: []byte("v")}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parts[tc.target].AppendInternal(batch); err != nil {
				t.Fatal(err)
			}
			var resp *wire.FetchResponse
			select {
			case resp = <-done:
			case <-time.After(30 * time.Second):
				cancel()
				<-done
				t.Fatalf("a fetch waiting in its session was not woken by an append to partition %d (of its ten minutes max_wait_ms, 30 s passed)", tc.target)
			}
			if resp == nil {
				t.FailNow()
			}
			got := false
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.Partition == tc.target && len(rp.RecordBatches) > 0 {
						got = true
					}
				}
			}
			if !got {
				t.Fatalf("the woken fetch returned no records from partition %d: %+v", tc.target, resp.Topics)
			}
		})
	}
}
