package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
)

// refuseISR is a controller that never changes an ISR.
type refuseISR struct{}

func (refuseISR) AlterPartition(context.Context, [16]byte, int32, int32, int32, []int32) ([]int32, int32, error) {
	return nil, 0, errors.New("refused")
}

// newReplicas is a replica manager of node 1 on a storage manager in a
// temporary dir, whose controller refuses every ISR change and which knows
// no leader's address; both are closed at the end of the test.
func newReplicas(t testing.TB) *replica.Manager {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "broker-test"})
	if err != nil {
		t.Fatal(err)
	}
	m := replica.NewManager(logs, replica.Options{NodeID: 1, Controller: refuseISR{}, LeaderAddr: func(int32) (string, bool) { return "", false }})
	t.Cleanup(func() {
		m.Close()
		logs.Close()
	})
	return m
}

// TestLoadToLogEnd: a coordinator partition whose leader's high-watermark
// lags its log (a new leader before its followers fetched; here a follower
// in the ISR that never fetches) is loaded to the log end, as Kafka's
// coordinators load it: a load to the high-watermark forgot state the
// previous coordinator had committed.
func TestLoadToLogEnd(t *testing.T) {
	m := newReplicas(t)
	rp, err := m.Apply(replica.TopicPartition{Topic: txnTopic, Partition: 0}, [16]byte{1},
		replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, replica.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence},
			[]record.Record{{Key: []byte{byte(i)}, Value: []byte("state")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rp.AppendInternal(b); err != nil {
			t.Fatal(err)
		}
	}
	if hw, leo := rp.HighWatermark(), rp.LogEndOffset(); hw != 0 || leo != 3 {
		t.Fatalf("high-watermark %d, log end %d: want 0 and 3", hw, leo)
	}
	var keys []byte
	err = readPartition(context.Background(), rp, func(batch []byte, h record.Header) error {
		return record.Records(batch, func(r record.Record) error { keys = append(keys, r.Key...); return nil })
	})
	if err != nil || string(keys) != "\x00\x01\x02" {
		t.Fatalf("loaded keys %q (%v), want every record to the log end", keys, err)
	}
}
