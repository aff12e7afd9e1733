package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
	"github.com/samsahq/samsa/internal/testutil"
)

// topicRecords is a topic of n partitions as the controller creates it.
func topicRecords(name string, n int) []metadata.Record {
	id := topicID(name)
	recs := []metadata.Record{metadata.TopicRecord{Name: name, ID: id}}
	for p := range n {
		recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1})
	}
	return recs
}

func topicID(name string) (id metadata.UUID) {
	copy(id[:], name)
	return id
}

func sampleSnapshot(t testing.TB, id SnapshotID, topics int) ([]byte, []metadata.Record) {
	t.Helper()
	im := metadata.Empty("c")
	for i := range topics {
		im = im.Apply(im.Offset+1, topicRecords(fmt.Sprintf("t%d", i), 3))
	}
	recs := im.Records()
	b, err := encodeSnapshot(id, 1234, 5678, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b, recs
}

func TestSnapshotFileName(t *testing.T) {
	id := SnapshotID{EndOffset: 12345, Epoch: 7}
	if got, want := id.FileName(), "00000000000000012345-0000000007.checkpoint"; got != want {
		t.Fatalf("file name %s, want %s (Kafka's)", got, want)
	}
	if got, ok := parseSnapshotName(id.FileName()); !ok || got != id {
		t.Fatalf("parsed %v %v", got, ok)
	}
	for _, bad := range []string{"00000000000000012345-0000000007.checkpoint.part", "12345-7.checkpoint", "0000000000000001234x-0000000007.checkpoint", "quorum-state"} {
		if _, ok := parseSnapshotName(bad); ok {
			t.Errorf("%q parsed as a snapshot", bad)
		}
	}
}

// A snapshot decodes to its records; every truncation and every single
// bit flip of it is refused (ErrCorruptSnapshot), never decoded to other
// records.
func TestSnapshotDecodeRejectsDamage(t *testing.T) {
	id := SnapshotID{EndOffset: 100, Epoch: 3}
	b, recs := sampleSnapshot(t, id, 2)
	got, ts, err := decodeSnapshot(b, id.Epoch)
	if err != nil || ts != 1234 || !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %d records, timestamp %d, err %v; want %d records", len(got), ts, err, len(recs))
	}
	if _, _, err := decodeSnapshot(b, 4); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("other epoch: %v", err)
	}
	for n := range len(b) {
		if _, _, err := decodeSnapshot(b[:n], id.Epoch); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated to %d of %d bytes: %v", n, len(b), err)
		}
	}
	for i := range len(b) * 8 {
		c := slices.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		got, _, err := decodeSnapshot(c, id.Epoch)
		if err == nil && !reflect.DeepEqual(got, recs) {
			t.Fatalf("bit %d flipped: decoded other records", i)
		}
		// Flips in the base offset and epoch fields are not covered by
		// the CRC; they are still caught by the offset and epoch checks.
		if err == nil {
			t.Fatalf("bit %d flipped: accepted", i)
		}
	}
	if _, _, err := decodeSnapshot(append(slices.Clone(b), b...), id.Epoch); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("data after the footer: %v", err)
	}
}

// FuzzDecodeSnapshot: no panic on any file contents, and what decodes
// encodes back to a snapshot that decodes to the same records.
func FuzzDecodeSnapshot(f *testing.F) {
	b, _ := sampleSnapshot(f, SnapshotID{EndOffset: 10, Epoch: 2}, 2)
	f.Add(b, int32(2))
	empty, _ := encodeSnapshot(SnapshotID{EndOffset: 1}, 0, 0, nil)
	f.Add(empty, int32(0))
	f.Add(b[:len(b)/2], int32(2))
	f.Fuzz(func(t *testing.T, b []byte, epoch int32) {
		recs, ts, err := decodeSnapshot(b, epoch)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v not ErrCorruptSnapshot", err)
			}
			return
		}
		again, err := encodeSnapshot(SnapshotID{EndOffset: 1, Epoch: epoch}, ts, 0, recs)
		if err != nil {
			t.Fatal(err)
		}
		recs2, ts2, err := decodeSnapshot(again, epoch)
		if err != nil || ts2 != ts || !reflect.DeepEqual(recs, recs2) {
			t.Fatalf("re-encoded snapshot decodes differently: %v", err)
		}
	})
}

// crashAt is an errorfs injector that crashes the CrashFS under it at the
// n-th call.
type crashAt struct {
	mu    sync.Mutex
	n     int
	crash func()
}

func (c *crashAt) MaybeError(errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 {
		c.crash()
	}
	return nil
}

// A crash (power loss, keeping a random part of what was not fsynced) at
// any step of writing a snapshot leaves either the previous snapshots only
// or the new one whole, and the directory lists and loads without error.
func TestSnapshotWriteCrash(t *testing.T) {
	old := SnapshotID{EndOffset: 50, Epoch: 1}
	oldData, oldRecs := sampleSnapshot(t, old, 2)
	id := SnapshotID{EndOffset: 100, Epoch: 2}
	data, recs := sampleSnapshot(t, id, 30)
	for step := 1; ; step++ {
		dir := t.TempDir()
		if err := writeSnapshot(vfs.Default, dir, old, oldData); err != nil {
			t.Fatal(err)
		}
		cfs := errorfs.NewCrashFS(nil)
		inj := &crashAt{n: step}
		fsys := errorfs.Wrap(cfs, inj)
		inj.crash = func() { _ = cfs.Crash(errorfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(step), 1))}) }
		err := writeSnapshot(fsys, dir, id, data)
		if rerr := removePartFiles(vfs.Default, dir); rerr != nil { // the next start
			t.Fatal(rerr)
		}
		ids, lerr := listSnapshots(vfs.Default, dir)
		if lerr != nil {
			t.Fatal(lerr)
		}
		var loaded []SnapshotID
		for _, sid := range ids {
			got, _, rerr := readSnapshot(vfs.Default, dir, sid)
			switch {
			case rerr != nil:
				t.Fatalf("step %d: snapshot %s left corrupt: %v", step, sid.FileName(), rerr)
			case sid == old && !reflect.DeepEqual(got, oldRecs), sid == id && !reflect.DeepEqual(got, recs):
				t.Fatalf("step %d: snapshot %s has other records", step, sid.FileName())
			case sid != old && sid != id:
				t.Fatalf("step %d: unexpected snapshot %s", step, sid.FileName())
			}
			loaded = append(loaded, sid)
		}
		if err == nil && !slices.Contains(loaded, id) {
			t.Fatalf("step %d: the write succeeded and the snapshot is gone", step)
		}
		if !slices.Contains(loaded, old) {
			t.Fatalf("step %d: the previous snapshot is gone: %v", step, loaded)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if filepath.Ext(e.Name()) == ".part" {
				t.Fatalf("step %d: %s left after the start's cleanup", step, e.Name())
			}
		}
		if inj.n > 0 { // the write ended before the crash step: all steps covered
			if err != nil || !slices.Contains(loaded, id) {
				t.Fatalf("uncrashed write: %v, snapshots %v", err, loaded)
			}
			if step < 4 {
				t.Fatalf("only %d steps", step)
			}
			return
		}
	}
}

// follower keeps an image of a Log as the controller does: replayed at
// open, then applied from a listener, the replayed image and each
// committed one offered to the snapshot writer (as samsa.go offers the
// images of Controller.OnImage).
type follower struct {
	replays int           // calls of the Replay function
	events  chan struct{} // poked on each commit
	poke    func()        // also called on each commit, when set
	mu      sync.Mutex
	im      *metadata.Image
	unreg   func()
}

type snapshotLog interface {
	Log
	Snapshots
}

func follow(t *testing.T, l snapshotLog, cfg SnapshotConfig, poke func()) *follower {
	t.Helper()
	f := &follower{im: metadata.Empty("c"), events: make(chan struct{}, 1), poke: poke}
	next := int64(0)
	if err := l.Replay(func(off int64, recs []metadata.Record) error {
		f.replays++
		f.im = f.im.Apply(off, recs)
		next = off + int64(len(recs))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	offer := l.StartSnapshots(cfg)
	offer(f.im) // as the controller's OnImage hands over the replayed image
	f.unreg = l.Register(next, Listener{Commit: func(off int64, recs []metadata.Record) {
		f.mu.Lock()
		f.im = f.im.Apply(off, recs)
		im := f.im
		f.mu.Unlock()
		offer(im)
		select {
		case f.events <- struct{}{}:
		default:
		}
		if f.poke != nil {
			f.poke()
		}
	}})
	return f
}

func (f *follower) image() *metadata.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.im
}

// localNode is a Local log followed as the controller does.
type localNode struct {
	*follower
	logs *storage.Manager
	l    *Local
}

func openLocalNode(t *testing.T, dir string, cfg SnapshotConfig) *localNode {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{dir}, NodeID: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(logs)
	if err != nil {
		t.Fatal(err)
	}
	return &localNode{follower: follow(t, l, cfg, nil), logs: logs, l: l}
}

func (n *localNode) close() {
	n.unreg()
	n.l.Close()
	n.logs.Close()
}

// A single node writes snapshots every MaxRecordBytes of log, keeps the
// newest two, and at restart loads the newest and replays only the log
// after it; the image equals the full replay's. A corrupt newest snapshot
// falls back to the one before it, and with every snapshot corrupt the
// whole log is replayed: the same image each time. The .part file of a
// snapshot whose writing crashed is ignored and removed.
func TestLocalSnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	n := openLocalNode(t, dir, SnapshotConfig{MaxRecordBytes: 4 << 10, Logger: testLogger(t)})
	ctx := context.Background()
	for i := range 60 {
		if _, err := n.l.Append(ctx, topicRecords(fmt.Sprintf("topic-%d", i), 10)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			if _, err := n.l.Append(ctx, []metadata.Record{metadata.RemoveTopicRecord{ID: topicID(fmt.Sprintf("topic-%d", i-1))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := n.l.log.LogEndOffset()
	waitRec(t, n.events, "the last image", func() bool { return n.image().Offset == end-1 })
	want := n.image()
	n.close()
	mdir := filepath.Join(dir, MetadataTopic+"-0")
	ids, err := listSnapshots(vfs.Default, mdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("%d snapshots kept, want 2: %v", len(ids), ids)
	}

	fullReplays := 0
	check := func(what string, wantSnap SnapshotID) {
		t.Helper()
		n := openLocalNode(t, dir, SnapshotConfig{MaxRecordBytes: 1 << 30})
		defer n.close()
		if wantSnap.EndOffset == 0 {
			fullReplays = n.replays
		}
		got, ok := n.l.LatestSnapshot()
		if wantSnap.EndOffset == 0 && ok || wantSnap.EndOffset != 0 && got != wantSnap {
			t.Fatalf("%s: loaded snapshot %v (%v), want %v", what, got, ok, wantSnap)
		}
		if wantSnap.EndOffset != 0 && n.replays >= fullReplays {
			t.Fatalf("%s: %d batches replayed, the whole log has %d", what, n.replays, fullReplays)
		}
		if im := n.image(); im.Offset != want.Offset || !reflect.DeepEqual(im.Records(), want.Records()) {
			t.Fatalf("%s: image at offset %d with %d records, want offset %d, %d records", what, im.Offset, len(im.Records()), want.Offset, len(want.Records()))
		}
	}
	// The whole log first (snapshots moved away), to count its batches.
	tmp := t.TempDir()
	for _, id := range ids {
		if err := os.Rename(filepath.Join(mdir, id.FileName()), filepath.Join(tmp, id.FileName())); err != nil {
			t.Fatal(err)
		}
	}
	check("no snapshot", SnapshotID{})
	for _, id := range ids {
		if err := os.Rename(filepath.Join(tmp, id.FileName()), filepath.Join(mdir, id.FileName())); err != nil {
			t.Fatal(err)
		}
	}
	// A crash while writing a newer snapshot left its .part file: ignored
	// and removed at start.
	part := filepath.Join(mdir, SnapshotID{EndOffset: ids[0].EndOffset + 11}.FileName()+".part")
	partData, _ := sampleSnapshot(t, SnapshotID{EndOffset: ids[0].EndOffset + 11}, 3)
	if err := os.WriteFile(part, partData[:len(partData)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	check("newest snapshot", ids[0])
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left at start: %v", filepath.Base(part), err)
	}
	corrupt := func(id SnapshotID) {
		p := filepath.Join(mdir, id.FileName())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corrupt(ids[0])
	check("newest corrupt", ids[1])
	corrupt(ids[1])
	check("all corrupt", SnapshotID{})
}

// BenchmarkMetadataReplay measures what a node's start spends on the
// metadata log: replaying it into an image, as the controller does, with
// 20,000 partitions (200 topics of 100) created and then moved to a new
// leader 4 times each (100,000 partition records, one batch per 100).
// "full" replays the whole log; "snapshot" loads the snapshot written at
// its end. Compare the two in one run:
//
//	go test -run '^$' -bench BenchmarkMetadataReplay -benchtime 5x ./internal/quorum/
func BenchmarkMetadataReplay(b *testing.B) {
	dir := b.TempDir()
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{dir}, NodeID: 1})
	if err != nil {
		b.Fatal(err)
	}
	l, err := OpenLocal(logs)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const topics, partitions, moves = 200, 100, 4
	for i := range topics {
		if _, err := l.Append(ctx, topicRecords(fmt.Sprintf("topic-%d", i), partitions)); err != nil {
			b.Fatal(err)
		}
	}
	for m := range moves {
		for i := range topics {
			id := topicID(fmt.Sprintf("topic-%d", i))
			recs := make([]metadata.Record, partitions)
			for p := range recs {
				leader := int32(m%3 + 1)
				recs[p] = metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: leader, LeaderEpoch: int32(m + 2), PartitionEpoch: int32(m + 2)}
			}
			if _, err := l.Append(ctx, recs); err != nil {
				b.Fatal(err)
			}
		}
	}
	replay := func() *metadata.Image {
		im := metadata.Empty("c")
		if err := l.Replay(func(off int64, recs []metadata.Record) error {
			im = im.Apply(off, recs)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return im
	}
	full := replay()
	s := l.d.snap
	s.start(SnapshotConfig{MaxRecordBytes: 1 << 40})
	if err := s.write(full); err != nil {
		b.Fatal(err)
	}
	mdir := filepath.Join(dir, MetadataTopic+"-0")
	ids, err := listSnapshots(vfs.Default, mdir)
	if err != nil || len(ids) != 1 {
		b.Fatal(ids, err)
	}
	away := filepath.Join(b.TempDir(), ids[0].FileName())
	b.Logf("log %d bytes, %d offsets; snapshot %s", l.log.Size(), l.log.LogEndOffset(), ids[0].FileName())
	b.Run("full", func(b *testing.B) {
		if err := os.Rename(filepath.Join(mdir, ids[0].FileName()), away); err != nil {
			b.Fatal(err)
		}
		defer os.Rename(away, filepath.Join(mdir, ids[0].FileName()))
		for b.Loop() {
			if im := replay(); im.Offset != full.Offset {
				b.Fatal("offset", im.Offset)
			}
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			if im := replay(); im.Offset != full.Offset || im.Topic("topic-7").Partitions[99].Leader != full.Topic("topic-7").Partitions[99].Leader {
				b.Fatal("image", im.Offset)
			}
		}
	})
	l.Close()
	logs.Close()
}

// Three voters write snapshots as their logs grow. One is down meanwhile
// and comes back: it catches up from the leader's log (the log is not
// compacted, so raft never needs to send a snapshot) and writes its own.
// After a restart of all three, each loads its newest snapshot, replays
// only the log after it, and the three images are equal.
func TestRaftSnapshotsRestart(t *testing.T) {
	h := newHarness(t, 3, false)
	h.startAll()
	cfg := SnapshotConfig{MaxRecordBytes: 4 << 10, Logger: testLogger(t)}
	fs := map[int32]*follower{}
	for _, id := range h.ids {
		fs[id] = follow(t, h.nodes[id].r, cfg, h.poke)
	}
	ctx := context.Background()
	for i := range 20 {
		h.appendTopic(ctx, i)
	}
	h.stop(3)
	delete(fs, 3)
	for i := 20; i < 60; i++ {
		h.appendTopic(ctx, i)
	}
	h.start(3)
	fs[3] = follow(t, h.nodes[3].r, cfg, h.poke)
	lead := h.waitLeader(nil, 10*time.Second)
	h.waitFor("node 3 to catch up", 10*time.Second, func() bool {
		return fs[3].image().Offset == fs[lead].image().Offset && fs[lead].image().Topic("topic-59") != nil
	})
	want := fs[lead].image()
	snaps := map[int32]SnapshotID{}
	for _, id := range h.ids {
		h.waitFor(fmt.Sprintf("node %d's image", id), 10*time.Second, func() bool { return fs[id].image().Offset == want.Offset })
		h.stop(id)
		ids, err := listSnapshots(vfs.Default, filepath.Join(h.dir, fmt.Sprint("node", id), MetadataTopic+"-0"))
		if err != nil || len(ids) == 0 {
			t.Fatalf("node %d: snapshots %v, %v", id, ids, err)
		}
		snaps[id] = ids[0]
	}
	for _, id := range h.ids {
		n := h.start(id)
		f := follow(t, n.r, SnapshotConfig{MaxRecordBytes: 1 << 30}, h.poke)
		got, ok := n.r.LatestSnapshot()
		if !ok || got != snaps[id] {
			t.Fatalf("node %d loaded snapshot %v (%v), want its newest %v", id, got, ok, snaps[id])
		}
		if f.replays > 20 {
			t.Errorf("node %d replayed %d batches after its snapshot", id, f.replays)
		}
		if im := f.image(); im.Offset != want.Offset || !reflect.DeepEqual(im.Records(), want.Records()) {
			t.Fatalf("node %d: image at offset %d, want %d (or other records)", id, im.Offset, want.Offset)
		}
	}
}

// An observer (a broker-only node) writes snapshots of the image it
// follows and restarts from its newest one, then catches up with the
// leader from its log end.
func TestObserverSnapshotsRestart(t *testing.T) {
	h := newHarness(t, 3, false)
	h.startAll()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(cfg SnapshotConfig) (*Observer, *storage.Log, *follower) {
		t.Helper()
		l := h.openObserverLog(10)
		o, err := OpenObserver(ObserverConfig{NodeID: 10, Voters: h.voters, Log: l, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Fetcher: &memFetcher{h: h, self: 10}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		return o, l, follow(t, o, cfg, h.poke)
	}
	o, l, f := open(SnapshotConfig{MaxRecordBytes: 4 << 10, Logger: testLogger(t)})
	for i := range 30 {
		h.appendTopic(ctx, i)
	}
	h.waitFor("the observer's image", 10*time.Second, func() bool { return f.image().Topic("topic-29") != nil })
	want := f.image()
	f.unreg()
	o.Close()
	l.Close()
	ids, err := listSnapshots(vfs.Default, filepath.Join(h.dir, "observer10", MetadataTopic+"-0"))
	if err != nil || len(ids) == 0 {
		t.Fatalf("observer snapshots %v, %v", ids, err)
	}
	h.appendTopic(ctx, 30)
	o, l, f = open(SnapshotConfig{MaxRecordBytes: 1 << 30})
	defer func() { f.unreg(); o.Close(); l.Close() }()
	if got, ok := o.LatestSnapshot(); !ok || got != ids[0] {
		t.Fatalf("observer loaded %v (%v), want its newest %v", got, ok, ids[0])
	}
	h.waitFor("the observer to catch up", 10*time.Second, func() bool { return f.image().Topic("topic-30") != nil })
	im := f.image()
	if im.Topic("topic-29") == nil || len(im.Records()) != len(want.Records())+11 {
		t.Fatalf("image after restart: %d records, want %d + 11", len(im.Records()), len(want.Records()))
	}
}

// appendTopic appends topic-i, of 10 partitions, on the leader, retrying
// while leadership moves.
func (h *harness) appendTopic(ctx context.Context, i int) {
	h.t.Helper()
	for range 50 {
		lead := h.waitLeader(nil, 10*time.Second)
		_, err := h.raft(lead).Append(ctx, topicRecords(fmt.Sprintf("topic-%d", i), 10))
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrDropped) {
			h.t.Fatal(err)
		}
	}
	h.t.Fatal("no append succeeded")
}

// logImage is the image of l's data batches in [0, to), as a full
// replay builds it, and the epoch of the last batch read.
func logImage(t *testing.T, l *storage.Log, to int64) (*metadata.Image, int32) {
	t.Helper()
	im, epoch := metadata.Empty("c"), int32(-1)
	err := readBatches(l, 0, to, func(b []byte, h record.Header) error {
		epoch = h.PartitionLeaderEpoch
		if h.IsControl() {
			return nil
		}
		recs, err := decodeBatch(b)
		if err != nil {
			return err
		}
		im = im.Apply(h.BaseOffset, recs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return im, epoch
}

// A snapshot is only written of a committed image. A leader cut off from
// the others appends an entry it cannot commit; the image of its log
// with that entry is refused by the snapshot writer. Forced onto the disk
// anyway (as a bug would write it), that snapshot is skipped at the next
// start once the new leader's entries replaced the entry: it does not end
// at a batch of its epoch in the log. The node's image is the quorum's.
func TestSnapshotOnlyCommitted(t *testing.T) {
	h := newHarness(t, 3, false)
	h.startAll()
	ctx := context.Background()
	for i := range 3 {
		h.appendTopic(ctx, i)
	}
	old := h.waitLeader(nil, 10*time.Second)
	majority := others(h.ids, old)
	h.f.isolate(old, h.ids)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := h.raft(old).Append(actx, topicRecords("uncommitted", 10))
	cancel()
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on the cut-off leader: %v, want ErrNotLeader", err)
	}
	n := h.nodes[old]
	im, epoch := logImage(t, n.log, n.log.LogEndOffset())
	if im.Topic("uncommitted") == nil {
		t.Fatal("the cut-off leader's log lacks its uncommitted entry")
	}
	if err := n.r.d.snap.write(im); err == nil {
		t.Fatal("a snapshot of an image past the committed end was written")
	}
	mdir := filepath.Join(h.dir, fmt.Sprint("node", old), MetadataTopic+"-0")
	if ids, err := listSnapshots(vfs.Default, mdir); err != nil || len(ids) != 0 {
		t.Fatalf("snapshots %v, %v; want none", ids, err)
	}
	forged := SnapshotID{EndOffset: im.Offset + 1, Epoch: epoch}
	data, err := encodeSnapshot(forged, 0, 0, im.Records())
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSnapshot(vfs.Default, mdir, forged, data); err != nil {
		t.Fatal(err)
	}

	// The majority elects a leader and commits past the forged snapshot.
	lead := h.waitLeader(majority, 10*time.Second)
	for i := 3; i < 6; i++ {
		if _, err := h.raft(lead).Append(ctx, topicRecords(fmt.Sprintf("topic-%d", i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	h.f.heal()
	h.waitFor("the old leader to catch up", 10*time.Second, func() bool {
		return h.agreedLeader(nil) >= 0 && h.nodes[old].r.HighWatermark() >= h.nodes[lead].r.HighWatermark()
	})
	hw := h.sameLogs()
	if hw <= forged.EndOffset {
		t.Fatalf("high-watermark %d, want past the forged snapshot's end %d", hw, forged.EndOffset)
	}
	want, _ := logImage(t, h.nodes[lead].log, hw)
	h.stop(old)
	n = h.start(old)
	f := follow(t, n.r, SnapshotConfig{MaxRecordBytes: 1 << 30}, h.poke)
	defer f.unreg()
	if id, ok := n.r.LatestSnapshot(); ok {
		t.Fatalf("loaded snapshot %s of an uncommitted entry", id.FileName())
	}
	h.waitFor("the old leader's image", 10*time.Second, func() bool { return f.image().Offset >= want.Offset })
	if got := f.image(); got.Topic("uncommitted") != nil || !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("image after restart: %d records, want the quorum's %d", len(got.Records()), len(want.Records()))
	}
}

// A voter and an observer that join after the others wrote snapshots
// start from empty logs and catch up by fetching the whole log: the log
// is never compacted, so raft never needs to send a snapshot (MsgSnap)
// and an observer's fetch from offset 0 is always in range. Their images
// equal the leader's, and they write snapshots of their own.
func TestJoinAfterSnapshots(t *testing.T) {
	h := newHarness(t, 3, false)
	cfg := SnapshotConfig{MaxRecordBytes: 4 << 10, Logger: testLogger(t)}
	fs := map[int32]*follower{}
	for _, id := range h.ids[:2] { // a quorum of 3 without node 3
		h.start(id)
		fs[id] = follow(t, h.nodes[id].r, cfg, h.poke)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 30 {
		h.appendTopic(ctx, i)
	}
	dirs := map[int32]string{}
	for _, id := range h.ids {
		dirs[id] = filepath.Join(h.dir, fmt.Sprint("node", id), MetadataTopic+"-0")
	}
	dirs[11] = filepath.Join(h.dir, "observer11", MetadataTopic+"-0")
	snapshots := func(id int32) []string {
		names, _ := filepath.Glob(filepath.Join(dirs[id], "*"+SnapshotSuffix))
		return names
	}
	for _, id := range h.ids[:2] {
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d's snapshot", id), func() bool { return len(snapshots(id)) > 0 })
	}

	n3 := h.start(3)
	fs[3] = follow(t, n3.r, cfg, h.poke)
	ol := h.openObserverLog(11)
	o, err := OpenObserver(ObserverConfig{NodeID: 11, Voters: h.voters, Log: ol, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Fetcher: &memFetcher{h: h, self: 11}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { o.Close(); ol.Close() }()
	if err := o.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	fs[11] = follow(t, o, cfg, h.poke)
	defer fs[11].unreg()
	lead := h.waitLeader(nil, 10*time.Second)
	want := fs[lead].image()
	for id, sn := range map[int32]Snapshots{3: n3.r, 11: o} {
		if st := sn.SnapshotStats(); st.Loads != 0 {
			t.Fatalf("node %d loaded %d snapshots with an empty log", id, st.Loads)
		}
		h.waitFor(fmt.Sprintf("node %d to catch up", id), 10*time.Second, func() bool { return fs[id].image().Offset >= want.Offset })
		if im := fs[id].image(); !reflect.DeepEqual(im.Records(), want.Records()) {
			t.Fatalf("node %d: image of %d records, want the leader's %d", id, len(im.Records()), len(want.Records()))
		}
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d's own snapshot", id), func() bool { return len(snapshots(id)) > 0 })
	}
}

// onRename runs fn before the first rename (a snapshot writer's .part
// written and fsynced, not yet renamed).
type onRename struct {
	once sync.Once
	fn   func()
}

func (o *onRename) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpRename {
		o.once.Do(o.fn)
	}
	return nil
}

// TestSnapshotPartFiles: listing snapshots (Replay does, while the
// snapshotter may be writing one) leaves a writer's .checkpoint.part in
// place, so the write completes; the .part files a crash left are removed
// when the log's snapshotter is made, at start.
func TestSnapshotPartFiles(t *testing.T) {
	dir := t.TempDir()
	id := SnapshotID{EndOffset: 100, Epoch: 2}
	data, _ := sampleSnapshot(t, id, 3)
	var listed []SnapshotID
	hook := &onRename{fn: func() {
		var err error
		if listed, err = listSnapshots(vfs.Default, dir); err != nil {
			t.Error(err)
		}
	}}
	if err := writeSnapshot(errorfs.Wrap(vfs.Default, hook), dir, id, data); err != nil {
		t.Fatalf("a snapshot listed while written: %v", err)
	}
	if len(listed) != 0 {
		t.Fatalf("listed %v while the snapshot was a .part", listed)
	}
	if ids, err := listSnapshots(vfs.Default, dir); err != nil || !slices.Equal(ids, []SnapshotID{id}) {
		t.Fatalf("snapshots %v, %v; want %v", ids, err, id)
	}

	mdir := filepath.Join(t.TempDir(), MetadataTopic+"-0")
	l, err := storage.Open(storage.OpenOptions{Dir: mdir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	left := filepath.Join(mdir, "00000000000000000050-0000000001"+partSuffix)
	if err := os.WriteFile(left, []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	newSnapshotter(l, func() int64 { return 0 }, testLogger(t))
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crash's %s left at start: %v", filepath.Base(left), err)
	}
}
