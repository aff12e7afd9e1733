package samsa_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// killDuringDelete makes a node in dir with topic t of 4 partitions
// holding 100 records, deletes t and kills the node once the deletion is
// committed to its metadata log but before its broker deleted any of
// t's logs; with recreate, a topic t of 4 partitions is created again
// and committed before the kill too. What the node wrote stays on disk
// (a killed process's writes are in the page cache), nothing after the
// kill does.
func killDuringDelete(ctx context.Context, t *testing.T, dir string, recreate bool) {
	t.Helper()
	// gate holds the deletion's first file call on the topic's logs;
	// kill then fails every later change to the disk.
	gate := errorfs.NewGate(filepath.Join(dir, "t-"))
	kill := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpMutate}}
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir, FS: errorfs.Wrap(vfs.Default, gate, kill)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close() // fails: nothing reaches the disk after the kill
	cl := newClient(t, n)
	createTopic(t, cl, "t", 4, nil)
	produceN(t, cl, "t", 100)
	adm := kadm.NewClient(cl)

	gate.Shut()
	dresp, err := adm.DeleteTopics(ctx, "t")
	if err != nil || dresp.Error() != nil {
		t.Fatalf("delete topic t: %v %v", err, dresp.Error())
	}
	select {
	case <-gate.Held(): // the broker's apply of the deletion is under way
	case <-ctx.Done():
		t.Fatal("the deletion's apply never touched the topic's logs")
	}
	if recreate {
		// The creation commits, but is answered only after the
		// deletion's apply (held) and its own: not before the kill.
		committed := samsa.MetadataCommitted(n)
		cctx, cancel := context.WithCancel(ctx)
		created := make(chan struct{})
		go func() {
			defer close(created)
			adm.CreateTopic(cctx, 4, 1, nil, "t") // cut short by the kill
		}()
		defer func() { cancel(); <-created }()
		waitFor(t, time.Minute, "the creation committed", func() bool { return samsa.MetadataCommitted(n) > committed })
	}
	kill.Set(true)
	gate.Release()
	cl.Close()
	for p := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "t-"+strconv.Itoa(p))); err != nil {
			t.Fatalf("the kill did not leave the deleted topic's log t-%d: %v", p, err)
		}
	}
}

// restartAfterKill is killDuringDelete in a new dir, then a restart of
// the node there, returned once it serves clients.
func restartAfterKill(ctx context.Context, t *testing.T, recreate bool) (string, *samsa.Node) {
	t.Helper()
	dir := t.TempDir()
	killDuringDelete(ctx, t, dir, recreate)
	n := startConfig(t, samsa.Config{Dir: dir})
	select {
	case <-n.Serving():
	case <-ctx.Done():
		t.Fatal("the restarted node never served")
	}
	return dir, n
}

// checkOwnRecords produces 10 records to the topic t of n and checks
// that t holds those and no other.
func checkOwnRecords(ctx context.Context, t *testing.T, n *samsa.Node) {
	t.Helper()
	cl := newClient(t, n)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "t", Value: []byte("new-" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(len(recs)) {
		t.Errorf("the new topic t holds %d records, produced %d (the deleted one had 100)", total, len(recs))
	}
	for _, r := range consumeAll(t, n, "t", len(recs)) {
		if !strings.HasPrefix(string(r.Value), "new-") {
			t.Fatalf("the new topic t serves a deleted topic's record at %d/%d: %.20q", r.Partition, r.Offset, r.Value)
		}
	}
}

// TestStrayLogsAfterKill: a node killed after a DeleteTopics was
// committed to its metadata log but before its broker deleted the
// topic's logs restarts with an image that already lacks the topic, so no
// image change ever names those logs again. The restarted broker deletes
// them once caught up (Kafka's stray replicas), with their checkpoint
// entries, and a topic created again under the same name serves only its
// own records. Before, the logs stayed on disk, loaded, and the new
// topic's partitions were hosted on them: a client read the deleted
// topic's records under the new topic.
func TestStrayLogsAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, n := restartAfterKill(ctx, t, false)
	for p := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "t-"+strconv.Itoa(p))); !os.IsNotExist(err) {
			t.Errorf("log t-%d of the deleted topic is still there after the restart (%v)", p, err)
		}
	}
	for _, name := range []string{storage.RecoveryPointCheckpointFile, storage.LogStartOffsetCheckpointFile} {
		ck, err := storage.ReadOffsetCheckpoint(vfs.Default, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for tp := range ck {
			if tp.Topic == "t" {
				t.Errorf("%s still names the deleted %s", name, tp)
			}
		}
	}
	createTopic(t, newClient(t, n), "t", 4, nil)
	checkOwnRecords(ctx, t, n)
}

// TestStrayLogsRecreatedAfterKill: as TestStrayLogsAfterKill, but the
// topic was created again under the same name before the kill: the
// restarted node's image assigns it t, of a new topic id, and its log
// dir holds the deleted t's logs. It hosts the new t on new, empty logs
// whose partition.metadata names the new id, never on the deleted
// topic's records (Kafka tells them apart by the topic id of
// partition.metadata).
func TestStrayLogsRecreatedAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, n := restartAfterKill(ctx, t, true)
	tp := samsa.MetadataImage(n).Topic("t")
	if tp == nil {
		t.Fatal("the restarted node's image lacks the topic t created again")
	}
	waitHosted(t, newClient(t, n), "t", 4)
	want := storage.EncodePartitionMetadata(tp.ID)
	for p := range 4 {
		got, err := os.ReadFile(filepath.Join(dir, "t-"+strconv.Itoa(p), storage.PartitionMetadataFile))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("t-%d: partition.metadata %q (%v), want %q", p, got, err, want)
		}
	}
	checkOwnRecords(ctx, t, n)
}

// TestRestartTopicIDsFromManifest: the stray-log check of a start asks
// each loaded log its topic id. After a clean shutdown the logs know it
// from the log manifest, and a restart to serving reads no
// partition.metadata (before, one read a log: 100,000 at 100,000
// partitions, about a second while the other metadata listeners waited);
// after an unclean shutdown each log still reads its file.
func TestRestartTopicIDsFromManifest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var reads atomic.Int64
	fsys := errorfs.Wrap(vfs.Default, errorfs.Func(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpOpen && filepath.Base(op.Path) == storage.PartitionMetadataFile {
			reads.Add(1)
		}
		return nil
	}))
	start := func() *samsa.Node {
		t.Helper()
		n, err := samsa.Start(ctx, samsa.Config{Dir: dir, FS: fsys})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-n.Serving():
		case <-ctx.Done():
			t.Fatal("the node never served")
		}
		return n
	}
	n := start()
	cl := newClient(t, n)
	createTopic(t, cl, "t", 8, nil)
	produceN(t, cl, "t", 50)
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	reads.Store(0)
	n = start()
	if got := reads.Load(); got != 0 {
		t.Errorf("a clean restart read partition.metadata %d times, want 0", got)
	}
	waitHosted(t, newClient(t, n), "t", 8)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	reads.Store(0)
	n = start()
	defer n.Close()
	if got := reads.Load(); got != 8 {
		t.Errorf("an unclean restart read partition.metadata %d times, want 8 (one a log)", got)
	}
	waitHosted(t, newClient(t, n), "t", 8)
}
