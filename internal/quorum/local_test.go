package quorum

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/storage"
)

// waitRec waits until cond holds on rc after one of its events.
func waitRec(t *testing.T, events chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-events:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func newRecorder() (*recorder, chan struct{}) {
	events := make(chan struct{}, 1)
	return &recorder{poke: func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}}, events
}

func TestLocalListeners(t *testing.T) {
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 4, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, err := OpenLocal(logs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var offs []int64
	for seq := int64(1); seq <= 3; seq++ {
		off, err := l.Append(ctx, []metadata.Record{seqRecord(seq), seqRecord(seq + 100)})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if l.Leader() != (Leadership{Epoch: 0, LeaderID: 4}) {
		t.Fatalf("leader %+v", l.Leader())
	}
	// From the middle of the first batch: that batch is not repeated.
	rc, events := newRecorder()
	unreg := l.Register(offs[0]+1, rc.listener())
	waitRec(t, events, "the replay", func() bool {
		c, ld := rc.state()
		return len(c) == 2 && ld.LeaderID == 4
	})
	off, err := l.Append(ctx, []metadata.Record{seqRecord(4)})
	if err != nil {
		t.Fatal(err)
	}
	waitRec(t, events, "the new batch", func() bool {
		c, _ := rc.state()
		return len(c) == 3 && c[2].offset == off && c[2].recs[0] == seqRecord(4)
	})
	unreg()
	var replayed int
	if err := l.Replay(func(int64, []metadata.Record) error { replayed++; return nil }); err != nil || replayed != 4 {
		t.Fatalf("replay: %d batches, %v", replayed, err)
	}
	if off, err := l.Append(ctx, nil); err != nil || off != l.log.LogEndOffset() {
		t.Fatalf("empty append: %d %v", off, err)
	}
}

// TestRaftSingleVoter: one voter elects itself at once and commits alone.
func TestRaftSingleVoter(t *testing.T) {
	l := openTestLog(t, t.TempDir(), 0)
	r, err := OpenRaft(RaftConfig{
		NodeID:    0,
		Voters:    []config.Voter{{ID: 0, Host: "127.0.0.1", Port: 1}},
		Log:       l,
		Transport: &memTransport{n: &memNet{rcv: map[int32]func(*raftpb.Message){}}, self: 0},
		Logger:    testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc, events := newRecorder()
	r.Register(0, rc.listener())
	waitRec(t, events, "leadership", func() bool { _, ld := rc.state(); return ld.LeaderID == 0 && ld.Epoch >= 1 })
	ctx := context.Background()
	off, err := r.Append(ctx, []metadata.Record{seqRecord(1)})
	if err != nil {
		t.Fatal(err)
	}
	if off != 1 { // offset 0 is the LEADER_CHANGE
		t.Fatalf("first append at %d", off)
	}
	waitRec(t, events, "the commit", func() bool { c, _ := rc.state(); return len(c) == 1 && c[0].offset == 1 })

	// A storage failure stops the voter instead of panicking.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Append(ctx, []metadata.Record{seqRecord(2)}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("append on a closed log: %v", err)
	}
	if _, err := r.Append(ctx, []metadata.Record{seqRecord(3)}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("append after the failure: %v", err)
	}
	waitRec(t, events, "leadership lost", func() bool { _, ld := rc.state(); return ld.LeaderID == -1 })
}
