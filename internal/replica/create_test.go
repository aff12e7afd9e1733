package replica

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// waitCreated waits until the creators made every pending log.
func waitCreated(tb testing.TB, m *Manager) {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); m.Pending() > 0; {
		if time.Now().After(deadline) {
			tb.Fatalf("%d partitions still pending after a minute", m.Pending())
		}
		time.Sleep(time.Millisecond) // polling Pending: the creators signal no one
	}
}

// gateFS holds the creation of the log directories of topic "slow"
// until release, and fails those of topic "bad".
type gateFS struct {
	vfs.FS
	entered chan string   // the partition directory whose creation began
	gate    chan struct{} // closed by release
	once    sync.Once
}

func (g *gateFS) MkdirAll(path string, perm fs.FileMode) error {
	switch base := filepath.Base(path); {
	case strings.HasPrefix(base, "slow-"):
		g.entered <- base
		<-g.gate
	case strings.HasPrefix(base, "bad-"):
		return &fs.PathError{Op: "mkdir", Path: path, Err: errors.New("injected")}
	}
	return g.FS.MkdirAll(path, perm)
}

func (g *gateFS) release() { g.once.Do(func() { close(g.gate) }) }

// newGatedManager is a Manager with workers creators over a gateFS.
func newGatedManager(t *testing.T, workers int) (*Manager, *storage.Manager, *gateFS) {
	t.Helper()
	g := &gateFS{FS: vfs.Default, entered: make(chan string, 16), gate: make(chan struct{})}
	m, logs := newFSManager(t, t.TempDir(), g, workers)
	t.Cleanup(g.release) // before the Manager's Close (cleanups run last first)
	return m, logs, g
}

func item(topic string, p, leader, epoch int32, id byte) ApplyItem {
	return ApplyItem{TopicPartition: TopicPartition{Topic: topic, Partition: p}, TopicID: [16]byte{id},
		State: State{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}
}

// ApplyBatch returns while a new partition's log is being created (the
// metadata listener, and with it the next commits and a new controller's
// activation, waited for every creation of a commit before), and the
// partition is hosted at the latest state given meanwhile once its log
// exists, while the partitions already hosted change at once.
func TestApplyBatchDoesNotWaitForCreation(t *testing.T) {
	m, _, g := newGatedManager(t, 2)
	m.ApplyBatch([]ApplyItem{item("b", 0, 1, 1, 1)})
	waitCreated(t, m)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.ApplyBatch([]ApplyItem{item("slow", 0, 1, 1, 2), item("b", 0, 2, 2, 1)})
	}()
	<-g.entered
	select {
	case <-done:
	case <-time.After(time.Minute):
		g.release()
		<-done
		t.Fatal("ApplyBatch waited for the creation of a log")
	}
	if p := m.Get("slow", 0); p != nil || m.Pending() != 1 || m.Offline("slow", 0) != nil {
		t.Fatalf("while its log is created: partition %v, pending %d, offline %v; want none, 1, nil", p, m.Pending(), m.Offline("slow", 0))
	}
	if p := m.Get("b", 0); p == nil || p.IsLeader() || p.Leader() != 2 || p.LeaderEpoch() != 2 {
		t.Fatalf("hosted partition not moved meanwhile: %+v", p)
	}
	// A leader epoch change while the log is being made.
	m.ApplyBatch([]ApplyItem{item("slow", 0, 2, 3, 2)})
	g.release()
	waitCreated(t, m)
	p := m.Get("slow", 0)
	if p == nil || p.IsLeader() || p.Leader() != 2 || p.LeaderEpoch() != 3 || p.TopicID != [16]byte{2} {
		t.Fatalf("created partition %+v, want follower of 2 at epoch 3", p)
	}
}

// A partition removed while its log is being created, or before its turn,
// ends without a log; one removed and assigned again (a topic deleted and
// created again under its name) is hosted with the new topic id.
func TestApplyBatchRemoveWhilePending(t *testing.T) {
	m, logs, g := newGatedManager(t, 1)
	m.ApplyBatch([]ApplyItem{item("slow", 0, 1, 1, 1), item("slow", 1, 1, 1, 1), item("slow", 2, 1, 1, 1), item("slow", 3, 1, 1, 1)})
	if got := <-g.entered; got != "slow-0" {
		t.Fatalf("first creation %s, want slow-0", got)
	}
	// slow-0 is being created, the others wait for the one creator.
	for _, p := range []int32{0, 1, 2, 3} {
		if err := m.Remove(TopicPartition{"slow", p}); err != nil {
			t.Fatal(err)
		}
	}
	m.ApplyBatch([]ApplyItem{item("slow", 2, 2, 2, 9), item("slow", 3, 1, 2, 9)})
	if err := m.Remove(TopicPartition{"slow", 3}); err != nil {
		t.Fatal(err)
	}
	m.ApplyBatch([]ApplyItem{item("slow", 3, 1, 3, 10)})
	g.release()
	waitCreated(t, m)
	for _, c := range []struct {
		p      int32
		hosted bool
		id     byte
		epoch  int32
	}{{0, false, 0, 0}, {1, false, 0, 0}, {2, true, 9, 2}, {3, true, 10, 3}} {
		p := m.Get("slow", c.p)
		l := logs.Get(storage.TopicPartition{Topic: "slow", Partition: c.p})
		if (p != nil) != c.hosted || (l != nil) != c.hosted {
			t.Fatalf("slow-%d: partition %v log %v, want hosted %v", c.p, p, l, c.hosted)
		}
		if c.hosted && (p.TopicID != [16]byte{c.id} || p.LeaderEpoch() != c.epoch) {
			t.Fatalf("slow-%d: topic id %x epoch %d, want %x %d", c.p, p.TopicID, p.LeaderEpoch(), c.id, c.epoch)
		}
	}
}

// A log that cannot be created leaves its partition offline
// (KAFKA_STORAGE_ERROR), as when it was created in ApplyBatch.
func TestApplyBatchCreateFails(t *testing.T) {
	m, _, _ := newGatedManager(t, 2)
	if errs := m.ApplyBatch([]ApplyItem{item("bad", 0, 1, 1, 1), item("ok", 0, 1, 1, 1)}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	waitCreated(t, m)
	if m.Offline("bad", 0) == nil || m.Get("bad", 0) != nil {
		t.Fatalf("bad-0: offline %v, partition %v; want offline", m.Offline("bad", 0), m.Get("bad", 0))
	}
	if p := m.Get("ok", 0); p == nil || !p.IsLeader() {
		t.Fatalf("ok-0 %+v, want led", p)
	}
	// Items said Now are created in the call and report the error.
	if errs := m.ApplyBatch([]ApplyItem{{TopicPartition: TopicPartition{"bad", 1}, Now: true}}); errs[0] == nil {
		t.Fatal("bad-1 created in the call: no error")
	}
}

// Close waits for a creation under way, does not host its partition,
// and abandons the partitions still queued.
func TestCloseWithPendingCreations(t *testing.T) {
	m, logs, g := newGatedManager(t, 1)
	m.ApplyBatch([]ApplyItem{item("slow", 0, 1, 1, 1), item("slow", 1, 1, 1, 1)})
	<-g.entered
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	<-m.ctx.Done() // Close began
	g.release()
	<-closed
	if m.Get("slow", 0) != nil || m.Get("slow", 1) != nil {
		t.Fatal("partitions hosted after Close")
	}
	if logs.Get(storage.TopicPartition{Topic: "slow", Partition: 1}) != nil {
		t.Fatal("slow-1 created after Close")
	}
}

// AwaitPending makes the logs no creator has taken on the caller's
// goroutine and waits for those being made, until its deadline: the one
// creator here is held on slow-0.
func TestAwaitPending(t *testing.T) {
	m, _, g := newGatedManager(t, 1)
	m.ApplyBatch([]ApplyItem{item("slow", 0, 1, 1, 1), item("slow", 1, 1, 1, 1), item("ok", 0, 1, 1, 2)})
	if got := <-g.entered; got != "slow-0" {
		t.Fatalf("first creation %s, want slow-0", got)
	}
	ctx := context.Background()
	slow0, slow1, ok0 := TopicPartition{"slow", 0}, TopicPartition{"slow", 1}, TopicPartition{"ok", 0}
	// A deadline past: nothing made, nothing waited for.
	if n := m.AwaitPending(ctx, []TopicPartition{slow1, ok0}, time.Now().Add(-time.Second)); n != 0 || m.Get("ok", 0) != nil {
		t.Fatalf("past deadline: %d pending seen, ok-0 %v; want 0, not hosted", n, m.Get("ok", 0))
	}
	// ok-0 is queued behind the held creator: the caller makes it.
	if n := m.AwaitPending(ctx, []TopicPartition{ok0}, time.Now().Add(time.Minute)); n != 1 {
		t.Fatalf("ok-0: %d pending seen, want 1", n)
	}
	if p := m.Get("ok", 0); p == nil || !p.IsLeader() || p.TopicID != [16]byte{2} {
		t.Fatalf("ok-0 after AwaitPending: %+v, want led", p)
	}
	// slow-1 is made by the caller, slow-0 waited for.
	done := make(chan int, 1)
	go func() { done <- m.AwaitPending(ctx, []TopicPartition{slow0, slow1}, time.Now().Add(time.Minute)) }()
	if got := <-g.entered; got != "slow-1" {
		t.Fatalf("the caller made %s, want slow-1", got)
	}
	g.release()
	if n := <-done; n != 2 {
		t.Fatalf("%d pending seen, want 2", n)
	}
	for _, tp := range []TopicPartition{slow0, slow1} {
		if p := m.Get(tp.Topic, tp.Partition); p == nil || !p.IsLeader() {
			t.Fatalf("%v after AwaitPending: %+v, want led", tp, p)
		}
	}
	if m.Pending() != 0 {
		t.Fatalf("%d still pending", m.Pending())
	}
}
