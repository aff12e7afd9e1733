package replica

import (
	"fmt"
	"sync"
	"testing"

	"github.com/samsahq/samsa/internal/storage"
)

// flushEvery is a topic with flush.messages=1.
var flushEvery = LogConfig{Storage: storage.Config{FlushIntervalMessages: 1}}

// TestAppendWaitsForFlush: with flush.messages=1, concurrent producers'
// appends return only once an fsync covers them, and the high-watermark
// never passes the recovery point.
func TestAppendWaitsForFlush(t *testing.T) {
	m := newTestManager(t)
	p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, flushEvery)
	if err != nil {
		t.Fatal(err)
	}
	const producers, each = 16, 10
	b := batch(t, 0, 0, 2)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				res, err := checkAppend(t, p, append([]byte(nil), b...), nil)
				if err != nil {
					errs <- err
					return
				}
				hw := p.HighWatermark()
				rp := p.Log().RecoveryPoint()
				if rp <= res.LastOffset || hw > rp {
					errs <- fmt.Errorf("append of [%d, %d] returned with recovery point %d, high-watermark %d", res.BaseOffset, res.LastOffset, rp, hw)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if hw, leo := p.HighWatermark(), p.Log().LogEndOffset(); hw != leo || leo != producers*each*2 {
		t.Fatalf("high-watermark %d, log end %d, want %d", hw, leo, producers*each*2)
	}
}

// TestLeaderFlushesUnflushedTail: a partition that becomes leader with
// flush.messages set flushes the records its log holds above the recovery
// point (a crash's tail), or the high-watermark would wait for the next
// produce to reach them.
func TestLeaderFlushesUnflushedTail(t *testing.T) {
	m := newTestManager(t)
	log, err := m.logs.Create(storage.TopicPartition{Topic: testTP.Topic, Partition: testTP.Partition}, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := log.Append(batch(t, 0, 0, 2), 0); err != nil {
			t.Fatal(err)
		}
	}
	if log.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d before any flush", log.RecoveryPoint())
	}
	p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, flushEvery)
	if err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 6 || log.RecoveryPoint() != 6 {
		t.Fatalf("high-watermark %d, recovery point %d, want 6 and 6", p.HighWatermark(), log.RecoveryPoint())
	}
}
