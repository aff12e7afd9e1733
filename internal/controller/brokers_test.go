package controller

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/testutil"
)

// newLocalController is the active controller of node 1 over a local
// (single-voter) metadata log in a temporary directory.
func newLocalController(t *testing.T) *Controller {
	t.Helper()
	return newLocalControllerWith(t, nil)
}

// newLocalControllerWith is newLocalController over wrap(the local log)
// when wrap is not nil.
func newLocalControllerWith(t *testing.T, wrap func(quorum.Log) quorum.Log) *Controller {
	t.Helper()
	c := openLocalController(t, wrap)
	// Active, and its bootstrap records written: a test counting or
	// failing appends must not meet them (seen at load 50).
	waitController(t, c, func() bool { return c.Active() && c.Image().Bootstrapped })
	return c
}

// waitController waits up to 10 s for ready, failing t after.
func waitController(t *testing.T, c *Controller, ready func() bool) {
	t.Helper()
	// The local log announces its leadership from its dispatcher.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !ready() {
		select {
		case <-deadline.C:
			t.Fatal("the controller of a local log is not active, or without its bootstrap records")
		case <-tick.C:
		}
	}
}

// openLocalController is the controller of node 1 over wrap(a local
// metadata log) (the log itself when wrap is nil), closed at the end of
// t; it may not be active yet.
func openLocalController(t *testing.T, wrap func(quorum.Log) quorum.Log) *Controller {
	t.Helper()
	dir := t.TempDir()
	node, err := config.Parse(map[string]string{"node.id": "1", "log.dirs": dir})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "controller-test"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := quorum.OpenLocal(logs)
	if err != nil {
		t.Fatal(err)
	}
	var ql quorum.Log = q
	if wrap != nil {
		ql = wrap(q)
	}
	c, err := New(node, ql, "controller-test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		q.Close()
		logs.Close()
	})
	return c
}

func incarnation(b byte) metadata.UUID { return metadata.UUID{b} }

// sharedAndAlone registers brokers 1 to 3 on a new controller and creates
// "shared" (replicas 1, 2, 3) and "alone" (replica 1), each of one
// partition led by broker 1. It returns the controller, the broker epochs
// and a function giving a topic's partition in the current image.
func sharedAndAlone(t *testing.T, ctx context.Context) (*Controller, map[int32]int64, func(topic string) metadata.Partition) {
	t.Helper()
	c := newLocalController(t)
	epochs := registerBrokers(t, ctx, c, 3)
	errs, err := c.CreateTopics(ctx, []CreateTopic{
		{Name: "shared", Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1, 2, 3}}},
		{Name: "alone", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{1}}},
	}, false)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	return c, epochs, func(topic string) metadata.Partition {
		return c.Image().Topic(topic).Partitions[0]
	}
}

// A broker that registers with a new incarnation while its previous
// process's session is still open (a restart quicker than
// broker.session.timeout.ms) may have lost an unflushed log tail: it
// leaves every ISR and its leaderships move to other in-sync replicas
// with a new leader epoch, as when its session expires (KIP-903's
// premise). A broker that was the only in-sync replica leads again, at a
// new epoch. The same process registering again changes nothing.
func TestRegisterNewIncarnationLeavesISRs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, epochs, part := sharedAndAlone(t, ctx)
	before, beforeAlone := part("shared"), part("alone")
	if before.Leader != 1 || beforeAlone.Leader != 1 {
		t.Fatalf("leaders %d, %d; want 1", before.Leader, beforeAlone.Leader)
	}

	// The same process again: nothing changes.
	e, err := c.RegisterBroker(ctx, 1, incarnation(1), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil || e != epochs[1] {
		t.Fatalf("same incarnation: epoch %d (%v), want %d", e, err, epochs[1])
	}
	if got := part("shared"); got.Leader != 1 || got.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("same incarnation moved leadership: %+v", got)
	}

	// A new process of broker 1, before its session expired.
	e, err = c.RegisterBroker(ctx, 1, incarnation(9), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e <= epochs[1] {
		t.Fatalf("new incarnation: broker epoch %d, not above %d", e, epochs[1])
	}
	if b := c.Image().Broker(1); b == nil || b.Fenced || b.Epoch != e {
		t.Fatalf("broker 1 after registering again: %+v", b)
	}
	after := part("shared")
	if after.Leader == 1 || after.Leader < 0 || slices.Contains(after.ISR, 1) || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("shared after broker 1 restarted: leader %d epoch %d ISR %v (before: epoch %d)", after.Leader, after.LeaderEpoch, after.ISR, before.LeaderEpoch)
	}
	alone := part("alone")
	if alone.Leader != 1 || alone.LeaderEpoch <= beforeAlone.LeaderEpoch || !slices.Equal(alone.ISR, []int32{1}) {
		t.Fatalf("alone after broker 1 restarted: leader %d epoch %d ISR %v", alone.Leader, alone.LeaderEpoch, alone.ISR)
	}
}

// A new process of a broker that shows the registered broker epoch as its
// PreviousBrokerEpoch (KIP-966: its logs were closed cleanly after that
// registration) keeps its ISRs and leaderships at their epochs: the
// registration is one record, not one per partition. A stale previous
// epoch (an older process's, or one from before a re-registration) proves
// nothing and the broker leaves its ISRs as after an unclean shutdown.
func TestRegisterAfterCleanShutdownKeepsLeadership(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, epochs, part := sharedAndAlone(t, ctx)
	shared, alone := part("shared"), part("alone")
	offset := c.Image().Offset

	e, err := c.RegisterBroker(ctx, 1, incarnation(11), epochs[1], []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e <= epochs[1] {
		t.Fatalf("clean restart: broker epoch %d, not above %d", e, epochs[1])
	}
	if got := c.Image().Offset - offset; got != 1 {
		t.Errorf("clean restart wrote %d records, want 1 (the registration)", got)
	}
	if got := part("shared"); !reflect.DeepEqual(got, shared) {
		t.Errorf("shared after a clean restart: %+v, want unchanged %+v", got, shared)
	}
	if got := part("alone"); !reflect.DeepEqual(got, alone) {
		t.Errorf("alone after a clean restart: %+v, want unchanged %+v", got, alone)
	}

	// Another process showing the epoch before the last registration.
	if _, err := c.RegisterBroker(ctx, 1, incarnation(12), epochs[1], []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := part("shared"); got.Leader == 1 || slices.Contains(got.ISR, 1) || got.LeaderEpoch <= shared.LeaderEpoch {
		t.Errorf("shared after a restart with a stale previous epoch: leader %d epoch %d ISR %v", got.Leader, got.LeaderEpoch, got.ISR)
	}
	if got := part("alone"); got.Leader != 1 || got.LeaderEpoch <= alone.LeaderEpoch {
		t.Errorf("alone after a restart with a stale previous epoch: leader %d epoch %d, want 1 at a new epoch", got.Leader, got.LeaderEpoch)
	}
}

// A heartbeat that changes nothing is answered while another write waits
// for its commit to be applied (here a CreateTopics whose image a slow
// listener, as the broker creating thousands of logs, holds up): it does
// not wait behind it, which expired the session of the very broker
// applying the image.
func TestHeartbeatDoesNotWaitForCommits(t *testing.T) {
	c := newLocalController(t)
	ctx := context.Background()
	epoch, err := c.RegisterBroker(ctx, 1, incarnation(1), -1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.OnImage(func(_, next *metadata.Image) {
		if next.Topic("slow") != nil {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	})
	created := make(chan error, 1)
	go func() {
		errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "slow", Partitions: 1, ReplicationFactor: 1}}, false)
		created <- errors.Join(append(errs, err)...)
	}()
	<-entered
	beat := make(chan error, 1)
	go func() {
		fenced, _, err := c.Heartbeat(ctx, 1, epoch, false, nil)
		if err == nil && fenced {
			err = errors.New("fenced")
		}
		beat <- err
	}()
	select {
	case err := <-beat:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("heartbeat waits for another write's commit")
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}

// A restarted broker's fencing and re-election of the same partition in
// one commit keep only the last record of each partition, in place, and
// every other record.
func TestLastPerPartition(t *testing.T) {
	a, b := metadata.UUID{1}, metadata.UUID{2}
	recs := []metadata.Record{
		metadata.RegisterBrokerRecord{BrokerID: 1, Fenced: true},
		metadata.PartitionRecord{TopicID: a, Partition: 0, Leader: -1},
		metadata.PartitionRecord{TopicID: b, Partition: 0, Leader: 2},
		metadata.RegisterBrokerRecord{BrokerID: 1},
		metadata.PartitionRecord{TopicID: a, Partition: 0, Leader: 1},
		metadata.PartitionRecord{TopicID: a, Partition: 1, Leader: 1},
	}
	got := lastPerPartition(recs)
	want := []metadata.Record{recs[0], recs[2], recs[3], recs[4], recs[5]}
	if !slices.EqualFunc(got, want, func(x, y metadata.Record) bool { return reflect.DeepEqual(x, y) }) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// A broker whose heartbeat reports offline log dirs (KIP-858's
// OfflineLogDirs) is fenced at once: it leaves the ISR and its leadership
// moves to another in-sync replica with a new leader epoch. It stays
// fenced while it reports them, and a heartbeat without them unfences it.
func TestHeartbeatOfflineDirsFences(t *testing.T) {
	c := newLocalController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epochs := registerBrokers(t, ctx, c, 3)
	errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1, 2, 3}}}}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	before := c.Image().Topic("t").Partitions[0]
	if before.Leader != 1 {
		t.Fatalf("leader %d, want 1", before.Leader)
	}
	offline := []metadata.UUID{{7}}
	for range 2 {
		fenced, _, err := c.Heartbeat(ctx, 1, epochs[1], false, offline)
		if err != nil || !fenced {
			t.Fatalf("heartbeat with an offline dir: fenced %v, %v", fenced, err)
		}
		p := c.Image().Topic("t").Partitions[0]
		if p.Leader != 2 || p.LeaderEpoch != before.LeaderEpoch+1 || slices.Contains(p.ISR, 1) {
			t.Fatalf("after the offline dir: leader %d epoch %d ISR %v", p.Leader, p.LeaderEpoch, p.ISR)
		}
		if !c.Image().Broker(1).Fenced {
			t.Fatal("broker 1 not fenced")
		}
	}
	if fenced, _, err := c.Heartbeat(ctx, 1, epochs[1], false, nil); err != nil || fenced {
		t.Fatalf("heartbeat without offline dirs: fenced %v, %v", fenced, err)
	}
}

// registerBrokers registers brokers 1 to n (incarnation id, one PLAINTEXT
// endpoint each) and returns their broker epochs.
func registerBrokers(t *testing.T, ctx context.Context, c *Controller, n int32) map[int32]int64 {
	t.Helper()
	epochs := map[int32]int64{}
	for id := int32(1); id <= n; id++ {
		e, err := c.RegisterBroker(ctx, id, incarnation(byte(id)), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + id}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	return epochs
}

// A broker in controlled shutdown stays fenced and out of its
// leaderships when a heartbeat without WantShutdown follows (its periodic
// heartbeats while it stops), as Kafka's CONTROLLED_SHUTDOWN state lasts
// until the broker registers again; such a heartbeat unfenced it and gave
// it its leaderships back before. A new process registering ends it.
func TestControlledShutdownStaysFenced(t *testing.T) {
	c := newLocalController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epochs := registerBrokers(t, ctx, c, 2)
	errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Partitions: 1, ReplicationFactor: 2, Assignments: [][]int32{{1, 2}}}}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	if _, should, err := c.Heartbeat(ctx, 1, epochs[1], true, nil); err != nil || !should {
		t.Fatalf("controlled shutdown: should shut down %v, %v", should, err)
	}
	for range 2 {
		fenced, _, err := c.Heartbeat(ctx, 1, epochs[1], false, nil)
		if err != nil || !fenced {
			t.Fatalf("heartbeat during the shutdown: fenced %v, %v", fenced, err)
		}
		if p := c.Image().Topic("t").Partitions[0]; p.Leader != 2 || !c.Image().Broker(1).Fenced {
			t.Fatalf("during the shutdown: leader %d, broker 1 fenced %v", p.Leader, c.Image().Broker(1).Fenced)
		}
	}
	epoch, err := c.RegisterBroker(ctx, 1, incarnation(11), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fenced, _, err := c.Heartbeat(ctx, 1, epoch, false, nil); err != nil || fenced {
		t.Fatalf("heartbeat of the new process: fenced %v, %v", fenced, err)
	}
}

// TestStopFencing: a broker whose session expires is fenced, but not once
// StopFencing was called (a single node closing: its broker's heartbeats
// stop before its controller closes).
func TestStopFencing(t *testing.T) {
	ctx := context.Background()
	c := newLocalController(t)
	c.brokers.stop()
	c.brokers.timeout = 200 * time.Millisecond // the tracker looks every 50 ms
	c.brokers.start(-1)
	ep := []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}
	fenced := func() bool { b := c.Image().Broker(1); return b != nil && b.Fenced }
	if _, err := c.RegisterBroker(ctx, 1, incarnation(1), -1, ep, nil); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "broker 1 fenced once its session expired", fenced)
	if _, err := c.RegisterBroker(ctx, 1, incarnation(2), -1, ep, nil); err != nil {
		t.Fatal(err)
	}
	if fenced() {
		t.Fatal("broker 1 fenced after registering again")
	}
	c.StopFencing()
	wait := time.NewTimer(5 * c.brokers.timeout) // 20 looks of a running tracker
	<-wait.C
	if fenced() {
		t.Fatal("broker 1 fenced after StopFencing")
	}
}

// A broker's clean re-registration is one record even when the session
// check runs while it is being committed and finds the session the
// previous process left expired (a single node whose controller became
// active more than broker.session.timeout.ms before the broker could
// register: replaying a large metadata log, at load). The check's fence
// ran over the image holding the registration in flight and fenced the
// new process: 100,000 partition records at 100,000 partitions, a
// hundred here.
func TestCleanRestartSessionCheckWritesNothing(t *testing.T) {
	const partitions = 100
	h := &gatedLog{entered: make(chan struct{}), release: make(chan struct{})}
	c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log { h.Log = l; return h })
	c.StopFencing() // the test runs the session check itself
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	epochs := registerBrokers(t, ctx, c, 1)
	if errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Partitions: partitions, ReplicationFactor: 1}}, false); err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	offset := c.Image().Offset

	// The session as a new active controller starts it, longer ago than
	// the session timeout.
	c.brokers.mu.Lock()
	c.brokers.lastSeen[1] = time.Now().Add(-2 * c.brokers.timeout)
	c.brokers.mu.Unlock()
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	registered := make(chan error, 1)
	go func() {
		_, err := c.RegisterBroker(ctx, 1, incarnation(2), epochs[1], []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
		registered <- err
	}()
	<-h.entered // the registration is in flight
	// The session check (fenceExpired), computed over the image with the
	// registration in flight before the registration's append returns.
	fenced, ran := make(chan error, 1), make(chan struct{})
	var once sync.Once
	go func() {
		now := time.Now()
		fenced <- c.fenceWhile(ctx, 1, func(im *metadata.Image, _ *metadata.Broker) bool {
			defer once.Do(func() { close(ran) })
			return c.sessionExpired(im, 1, now)
		})
	}()
	<-ran
	close(h.release)
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	if err := c.writeBarrier(ctx, func(*metadata.Image) ([]metadata.Record, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if got := c.Image().Offset - offset; got != 1 {
		t.Errorf("clean restart with its session check wrote %d records, want 1 (the registration)", got)
	}
	if b := c.Image().Broker(1); b == nil || b.Fenced {
		t.Fatalf("broker 1 after a clean restart: %+v", b)
	}
	for i, p := range c.Image().Topic("t").Partitions {
		if p.Leader != 1 {
			t.Fatalf("partition %d led by %d after a clean restart", i, p.Leader)
		}
	}
}
