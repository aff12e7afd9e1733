package samsa_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// uncleanDir makes a node in dir with topic t of partitions partitions
// holding acknowledged records, and leaves it as a crash would: no
// clean-shutdown marker (the manifest beside it is then never read).
func uncleanDir(t *testing.T, dir string, fsys vfs.FS, partitions int32) []*kgo.Record {
	t.Helper()
	n, err := samsa.Start(context.Background(), samsa.Config{Dir: dir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, n)
	createTopic(t, cl, "t", partitions, nil)
	recs := produceN(t, cl, "t", 200)
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	return recs
}

// startHeld shuts gate (holding the data logs of topic t) and starts a node of cfg, which must return while
// a data log's open is held by the gate (its controller does not wait for
// the data logs). The node is closed at the end of the test.
func startHeld(t *testing.T, gate *errorfs.Gate, cfg samsa.Config) *samsa.Node {
	t.Helper()
	gate.Shut()
	type started struct {
		n   *samsa.Node
		err error
	}
	done := make(chan started, 1)
	go func() {
		n, err := samsa.Start(context.Background(), cfg)
		done <- started{n, err}
	}()
	<-gate.Held() // a data log is being opened, and stays so
	select {
	case s := <-done:
		if s.err != nil {
			gate.Release()
			t.Fatal(s.err)
		}
		t.Cleanup(func() { s.n.Close() })
		return s.n
	case <-time.After(30 * time.Second): // a deadline, not a measure: Start waits for nothing the gate holds
		gate.Release()
		if s := <-done; s.err == nil {
			s.n.Close()
		}
		t.Fatal("Start did not return while a data log's open was held: the controller waits for every log to be recovered")
		return nil
	}
}

// TestUncleanRestartControllerFirst: after an unclean shutdown a node
// opens its metadata log and runs its controller before its data logs are
// recovered (Kafka's order: the raft manager and controller start, then
// the broker's LogManager loads the logs while the broker is in RECOVERY).
// Meanwhile the readiness probe says the logs are loading and a client's
// produce waits, to succeed once they are; no acknowledged record is lost.
// Before, Start recovered every log before the quorum and controller ran.
func TestUncleanRestartControllerFirst(t *testing.T) {
	dir := t.TempDir()
	gate := errorfs.NewGate(filepath.Join(dir, "t-"))
	fsys := errorfs.Wrap(vfs.Default, gate)
	recs := uncleanDir(t, dir, fsys, 8)

	n := startHeld(t, gate, samsa.Config{Dir: dir, FS: fsys, HTTPListener: "127.0.0.1:0"})
	// The controller learns its leadership from the quorum's listener,
	// delivered on the quorum's goroutine after Start returned: wait for
	// it while the gate still holds a data log.
	waitFor(t, 30*time.Second, "the controller active while the data logs load", func() bool { return samsa.ControllerActive(n) })
	if samsa.MetadataImage(n).Topic("t") == nil {
		t.Error("the metadata image lacks topic t: the metadata log was not replayed first")
	}
	select {
	case <-n.Serving():
		t.Error("the node serves clients before its data logs are loaded")
	default:
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "loading") {
		t.Errorf("/readyz while loading: %d %q, want not ready, loading", resp.StatusCode, body)
	}

	// A produce sent now waits (or retries) until the logs are loaded.
	cl := newClient(t, n)
	late := &kgo.Record{Topic: "t", Partition: 0, Value: []byte("late")}
	produced := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { produced <- cl.ProduceSync(ctx, late).FirstErr() }()
	gate.Release()
	if err := <-produced; err != nil {
		t.Fatalf("produce while the logs loaded: %v", err)
	}
	<-n.Serving()
	waitHosted(t, cl, "t", 8)
	got := consumeAll(t, n, "t", len(recs)+1)
	want := map[string]bool{"late": true}
	for _, r := range recs {
		want[string(r.Value)] = true
	}
	for _, r := range got {
		delete(want, string(r.Value))
	}
	if len(want) > 0 {
		t.Errorf("%d acknowledged records missing after the unclean restart", len(want))
	}
}

// TestCloseDuringLogRecovery: a node closed while its data logs load in
// the background stops without waiting for the logs not yet begun, and
// writes no clean-shutdown marker (it would vouch for logs never
// recovered): the next start recovers them and finds every record.
func TestCloseDuringLogRecovery(t *testing.T) {
	dir := t.TempDir()
	gate := errorfs.NewGate(filepath.Join(dir, "t-"))
	fsys := errorfs.Wrap(vfs.Default, gate)
	recs := uncleanDir(t, dir, fsys, 8)

	n := startHeld(t, gate, samsa.Config{Dir: dir, FS: fsys, Properties: map[string]string{"num.recovery.threads.per.data.dir": "1"}})
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	gate.Release() // the one log being opened finishes; the others are never begun
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean-shutdown marker after a close during log recovery: %v", err)
	}
	n = startConfig(t, samsa.Config{Dir: dir})
	<-n.Serving()
	waitHosted(t, newClient(t, n), "t", 8)
	if got := consumeAll(t, n, "t", len(recs)); len(got) != len(recs) {
		t.Errorf("%d records after the restart, want %d", len(got), len(recs))
	}
}

// TestDeleteWhileLoading: topics deleted (and one created again under the
// same name) while a node loads its data logs after an unclean shutdown
// leave no log behind once it hosts: the deleted topic's logs are removed,
// and the new topic starts empty instead of serving the deleted one's
// records. Kafka's broker, in RECOVERY, removes the logs its first
// metadata image no longer assigns it (stray replicas). Before, the broker
// applied only the image it found once the logs were loaded, never saw the
// deletions, and hosted the new topic on the old logs.
func TestDeleteWhileLoading(t *testing.T) { deleteWhileLoading(t, false) }

// TestDeleteWhileLoadingNoPartitionMetadata is TestDeleteWhileLoading
// with logs that have no partition.metadata: a data dir of an older
// Samsa, or files lost to the power loss that made the start unclean
// (they are written without an fsync). The start's stray-log check,
// which goes by that file, would give such a log the new topic's id and
// serve the deleted topic's records; the broker knows from the image it
// replayed at start that the log was of the deleted topic id, and
// deletes it before it hosts anything (Broker.removeStray).
func TestDeleteWhileLoadingNoPartitionMetadata(t *testing.T) { deleteWhileLoading(t, true) }

// deleteWhileLoading is TestDeleteWhileLoading, with noMetadata the
// partition.metadata files removed before the unclean restart.
func deleteWhileLoading(t *testing.T, noMetadata bool) {
	t.Helper()
	dir := t.TempDir()
	gate := errorfs.NewGate(filepath.Join(dir, "t-"))
	fsys := errorfs.Wrap(vfs.Default, gate)
	uncleanDir(t, dir, fsys, 8)
	if noMetadata {
		for p := range 8 {
			if err := os.Remove(filepath.Join(dir, "t-"+strconv.Itoa(p), storage.PartitionMetadataFile)); err != nil {
				t.Fatal(err)
			}
		}
	}

	n := startHeld(t, gate, samsa.Config{Dir: dir, FS: fsys})
	ctl, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("CONTROLLER")))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 30000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("t")
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{"t"}
	dresp, err := del.RequestWith(ctx, ctl.SeedBrokers()[0])
	if err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics while loading: %v %+v", err, dresp)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 4, 1
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, ctl.SeedBrokers()[0])
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics while loading: %v %+v", err, cresp)
	}
	gate.Release()
	<-n.Serving()
	cl := newClient(t, n)
	waitHosted(t, cl, "t", 4)
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("new topic t partition %d ends at %d: it serves the deleted topic's records", o.Partition, o.Offset)
		}
	})
	for p := 4; p < 8; p++ {
		name := filepath.Join(dir, "t-"+strconv.Itoa(p))
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Errorf("log %s of the deleted topic is still there (%v)", name, err)
		}
	}
}
