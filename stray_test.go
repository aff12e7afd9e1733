package samsa_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// TestStrayLogsAfterKill: a node killed after a DeleteTopics was
// committed to its metadata log but before its broker deleted the
// topic's logs restarts with an image that already lacks the topic, so no
// image change ever names those logs again. The restarted broker deletes
// them once caught up (Kafka's stray replicas, found by topic id), and a
// topic created again under the same name serves only its own records.
// Before, the logs stayed on disk, loaded, and the new topic's partitions
// were hosted on them: a client read the deleted topic's records under
// the new topic.
func TestStrayLogsAfterKill(t *testing.T) {
	dir := t.TempDir()
	// gate holds the deletion's first file call on the topic's logs;
	// kill then fails every later change to the disk, as a process
	// killed there makes none (what it wrote stays, in the page cache).
	gate := errorfs.NewGate(filepath.Join(dir, "t-"))
	kill := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpMutate}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir, FS: errorfs.Wrap(vfs.Default, gate, kill)})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, n)
	createTopic(t, cl, "t", 4, nil)
	old := produceN(t, cl, "t", 100)
	cl.Close()

	gate.Shut()
	dresp, err := kadm.NewClient(newClient(t, n)).DeleteTopics(ctx, "t")
	if err != nil || dresp.Error() != nil {
		t.Fatalf("delete topic t: %v %v", err, dresp.Error())
	}
	select {
	case <-gate.Held(): // the broker's apply of the deletion is under way
	case <-ctx.Done():
		t.Fatal("the deletion's apply never touched the topic's logs")
	}
	kill.Set(true)
	gate.Release()
	n.Close() // fails: nothing reaches the disk any more
	for p := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "t-"+strconv.Itoa(p))); err != nil {
			t.Fatalf("the kill did not leave the deleted topic's log t-%d: %v", p, err)
		}
	}

	n = startConfig(t, samsa.Config{Dir: dir})
	select {
	case <-n.Serving():
	case <-ctx.Done():
		t.Fatal("the restarted node never served")
	}
	for p := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "t-"+strconv.Itoa(p))); !os.IsNotExist(err) {
			t.Errorf("log t-%d of the deleted topic is still there after the restart (%v)", p, err)
		}
	}
	ck, err := storage.ReadOffsetCheckpoint(vfs.Default, filepath.Join(dir, storage.RecoveryPointCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	for tp := range ck {
		if tp.Topic == "t" {
			t.Errorf("the recovery-point checkpoint still names the deleted %s", tp)
		}
	}

	cl = newClient(t, n)
	createTopic(t, cl, "t", 4, nil)
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
		t.Errorf("the new topic t holds %d records, produced %d (the deleted one had %d)", total, len(recs), len(old))
	}
	for _, r := range consumeAll(t, n, "t", len(recs)) {
		if !strings.HasPrefix(string(r.Value), "new-") {
			t.Fatalf("the new topic t serves a deleted topic's record at %d/%d: %.20q", r.Partition, r.Offset, r.Value)
		}
	}
}
