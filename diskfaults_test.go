package samsa_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

// Disk faults injected where they happen (issue 18): a node runs on a
// filesystem of internal/storage/vfs/errorfs under a produce workload.

// startFSNode starts a single node on dir with its log dir on fsys.
func startFSNode(t *testing.T, dir string, fsys vfs.FS) *samsa.Node {
	t.Helper()
	return startConfig(t, samsa.Config{Dir: dir, FS: fsys})
}

// acked is what a workload's producers had acknowledged: the value at
// each partition and offset.
type acked struct {
	mu   sync.Mutex
	recs map[int32]map[int64]string
	errs map[string]int // the producers' errors by text
	n    atomic.Int64
	// fatal counts errors that are neither retriable nor a timeout
	// (whose outcome is unknown).
	fatal atomic.Int64
}

// failed records a producer's error. kgo.ErrRecordRetries is not fatal:
// kgo gives it when a batch used up its retries (kgo.RecordRetries) on
// retriable errors, dead connections among them; a non-retriable error
// code fails the batch at once with that code.
func (a *acked) failed(err error) {
	if !kerr.IsRetriable(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrRecordTimeout) && !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, kgo.ErrRecordRetries) {
		a.fatal.Add(1)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.errs == nil {
		a.errs = map[string]int{}
	}
	a.errs[err.Error()]++
}

func (a *acked) add(r *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs == nil {
		a.recs = map[int32]map[int64]string{}
	}
	if a.recs[r.Partition] == nil {
		a.recs[r.Partition] = map[int64]string{}
	}
	a.recs[r.Partition][r.Offset] = string(r.Value)
	a.n.Add(1)
}

// produceUntil runs producers, each sending one record at a time with
// acks=all, until stop is closed; it records what was acknowledged and
// returns once they all stopped.
func produceUntil(t *testing.T, addr, topic string, producers int, stop <-chan struct{}, a *acked) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for p := range producers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
			kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			// Close fails the records in flight to a node that is gone.
			defer wg.Done()
			<-stop
			cl.Close()
		}()
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "p%d-%d", p, i)}
				err := cl.ProduceSync(ctx, r).FirstErr()
				cancel()
				if err == nil {
					a.add(r)
				} else {
					a.failed(err)
				}
			}
		}()
	}
	return wg.Wait
}

// produceInBackground runs 4 producers as produceUntil until the returned
// stop is called (which waits for them), or the test ends.
func produceInBackground(t *testing.T, addr, topic string, a *acked) (stop func()) {
	t.Helper()
	stopc := make(chan struct{})
	wait := produceUntil(t, addr, topic, 4, stopc, a)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(stopc)
			wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// readAll reads topic from the start to its end offsets: the values by
// partition and offset.
func readAll(t *testing.T, addr, topic string) map[int32]map[int64]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	got := map[int32]map[int64]string{}
	next := map[int32]int64{}
	done := func() bool {
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of %v: %v", next, ends, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64]string{}
			}
			if prev, ok := got[r.Partition][r.Offset]; ok {
				t.Fatalf("partition %d offset %d read twice (%q, %q)", r.Partition, r.Offset, prev, r.Value)
			}
			got[r.Partition][r.Offset] = string(r.Value)
			next[r.Partition] = r.Offset + 1
		})
	}
	return got
}

// checkNoLoss fails unless every acknowledged record is in got at its
// offset, and no value is at two offsets.
func checkNoLoss(t *testing.T, a *acked, got map[int32]map[int64]string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	lost := 0
	for p, recs := range a.recs {
		for o, v := range recs {
			if got[p][o] != v {
				if lost < 5 {
					t.Errorf("acknowledged %q at %d/%d, read %q", v, p, o, got[p][o])
				}
				lost++
			}
		}
	}
	seen := map[string]string{}
	for p, recs := range got {
		for o, v := range recs {
			at := fmt.Sprintf("%d/%d", p, o)
			if prev, ok := seen[v]; ok {
				t.Errorf("value %q at %s and %s", v, prev, at)
			}
			seen[v] = at
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost", lost, a.n.Load())
	}
}

// TestPowerLossFlushMessages: with flush.messages=1 every acknowledged
// record was fsynced before its acknowledgement, so a power loss at any
// instant (the crash drops everything not fsynced, or keeps a random part
// of it, torn and reordered by page) loses none of them, and the restarted
// node reads back a log without holes or duplicates.
func TestPowerLossFlushMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed uint64
		torn bool
	}{{"drop-unsynced", 1, false}, {"torn-1", 2, true}, {"torn-2", 3, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			crash := errorfs.NewCrashFS(nil)
			n := startFSNode(t, dir, crash)
			cl := newClient(t, n)
			createTopic(t, cl, "fsynced", 2, map[string]*string{
				"flush.messages": kmsg.StringPtr("1"),
				"segment.bytes":  kmsg.StringPtr("16384"), // rolls during the run
			})
			rng := rand.New(rand.NewPCG(tc.seed, 0))
			var a acked
			stop := make(chan struct{})
			wait := produceUntil(t, n.Addr(), "fsynced", 4, stop, &a)
			at := 200 + rng.Int64N(300)
			waitFor(t, 60*time.Second, "acknowledged records", func() bool { return a.n.Load() >= at })
			opts := errorfs.CrashOptions{}
			if tc.torn {
				opts.Rand = rng
			}
			if err := crash.Crash(opts); err != nil {
				t.Fatalf("crash: %v", err)
			}
			n.Close() // fails: the disk is gone
			close(stop)
			wait()
			t.Logf("%d records acknowledged before the crash", a.n.Load())

			n = startFSNode(t, dir, nil)
			checkNoLoss(t, &a, readAll(t, n.Addr(), "fsynced"))
			// The restarted node takes writes.
			produceN(t, newClient(t, n), "fsynced", 10)
		})
	}
}

// TestPowerLossDefaultFlush: with Kafka's defaults (no flush.messages,
// no flush.ms) a single replica acknowledges records the page cache holds;
// a power loss loses those not yet written back. What the restarted node
// reads is a prefix of each partition's acknowledged records: no holes,
// no foreign bytes, and it takes writes again. (Replication, not fsync,
// is what keeps such records: TestPowerLossReplicated.)
func TestPowerLossDefaultFlush(t *testing.T) {
	dir := t.TempDir()
	crash := errorfs.NewCrashFS(nil)
	n := startFSNode(t, dir, crash)
	cl := newClient(t, n)
	createTopic(t, cl, "unsynced", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("16384")})
	var a acked
	stop := make(chan struct{})
	wait := produceUntil(t, n.Addr(), "unsynced", 2, stop, &a)
	waitFor(t, 60*time.Second, "acknowledged records", func() bool { return a.n.Load() >= 400 })
	if err := crash.Crash(errorfs.CrashOptions{Rand: rand.New(rand.NewPCG(7, 0))}); err != nil {
		t.Fatalf("crash: %v", err)
	}
	n.Close()
	close(stop)
	wait()

	n = startFSNode(t, dir, nil)
	got := readAll(t, n.Addr(), "unsynced")
	a.mu.Lock()
	recs := a.recs[0]
	a.mu.Unlock()
	for o, v := range got[0] {
		if w, ok := recs[o]; ok && w != v {
			t.Fatalf("offset %d: read %q, acknowledged %q", o, v, w)
		}
	}
	for o := range int64(len(got[0])) {
		if _, ok := got[0][o]; !ok {
			t.Fatalf("hole at offset %d of %d read", o, len(got[0]))
		}
	}
	t.Logf("%d acknowledged, %d survived the power loss", len(recs), len(got[0]))
	produceN(t, newClient(t, n), "unsynced", 10)
}

// produceOneCode sends one record to topic/partition with acks=all and
// returns the partition's error code.
func produceOneCode(t *testing.T, cl *kgo.Client, topic string, partition int32, value string) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, validBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// produceOK sends n records prefix-0 ... prefix-(n-1) to topic, one a
// request, each of which must succeed, and returns their values.
func produceOK(t *testing.T, cl *kgo.Client, topic, prefix string, n int) []string {
	t.Helper()
	var vs []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		if c := produceOneCode(t, cl, topic, 0, v); c != 0 {
			t.Fatalf("produce %s: %v", v, kerr.ErrorForCode(c))
		}
		vs = append(vs, v)
	}
	return vs
}

// TestDiskFull: a full disk refuses appends with KAFKA_STORAGE_ERROR (a
// write that ran out of space is cut back, never half in the log); once
// space returns the same log takes writes again, and every acknowledged
// record is read back once, in order. (Kafka marks the whole log dir
// offline on the IOException instead: docs/reliability.md.)
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	disk := errorfs.NewDiskFull(1 << 40)
	// The disk of the topic's partition: the metadata log keeps its
	// space, so that the node itself stays up.
	onTopic := errorfs.Func(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, "full-0") {
			return nil
		}
		return disk.MaybeError(op)
	})
	n := startFSNode(t, dir, errorfs.Wrap(vfs.Default, onTopic))
	cl := newClient(t, n)
	createTopic(t, cl, "full", 1, nil)
	want := produceOK(t, cl, "full", "before", 20)
	segment := filepath.Join(dir, "full-0", "00000000000000000000.log")
	size := func() int64 {
		fi, err := os.Stat(segment)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	disk.SetFree(30) // less than a batch: the next write is cut short
	for i := range 3 {
		if c := produceOneCode(t, cl, "full", 0, fmt.Sprintf("refused-%d", i)); c != kerr.KafkaStorageError.Code {
			t.Fatalf("produce to a full disk: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(c))
		}
	}
	if disk.Refused() == 0 {
		t.Fatal("no write refused")
	}
	if after := size(); after != before {
		t.Fatalf("segment is %d bytes after the refused writes, %d before: a short write was left in it", after, before)
	}
	disk.SetFree(1 << 40)
	want = append(want, produceOK(t, cl, "full", "after", 20)...)
	checkReadBack(t, n, "full", want)
}

// checkReadBack reads partition 0 of topic from its start and fails
// unless it holds exactly want, value by offset.
func checkReadBack(t *testing.T, n *samsa.Node, topic string, want []string) {
	t.Helper()
	got := readAll(t, n.Addr(), topic)[0]
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d: %v", len(got), len(want), got)
	}
	for o, v := range want {
		if got[int64(o)] != v {
			t.Fatalf("offset %d: %q, want %q", o, got[int64(o)], v)
		}
	}
}

// TestOutOfDescriptors: a node whose process is out of descriptors
// (EMFILE opening the partition's files: a segment roll, its producer
// snapshot, an index) answers KAFKA_STORAGE_ERROR, keeps its log dir
// online and does not halt (Kafka takes the dir offline and halts);
// once descriptors are back it takes the same records, and a consumer
// reads exactly the acknowledged ones.
func TestOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpOpen, PathContains: "nofd-0"}, Err: syscall.EMFILE}
	n := startConfig(t, samsa.Config{Dir: dir, FS: errorfs.Wrap(vfs.Default, fail), HTTPListener: "127.0.0.1:0"})
	cl := newClient(t, n)
	// Small segments: every produce below rolls.
	createTopic(t, cl, "nofd", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("100")})
	want := produceOK(t, cl, "nofd", "before", 5)
	fail.Set(true)
	for i := range 3 {
		if c := produceOneCode(t, cl, "nofd", 0, fmt.Sprintf("refused-%d", i)); c != kerr.KafkaStorageError.Code {
			t.Fatalf("produce out of descriptors: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(c))
		}
	}
	if fail.Count() == 0 {
		t.Fatal("no open refused")
	}
	fail.Set(false)
	if v := scrapeGauge(t, n.HTTPAddr(), "kafka_log_logmanager_offlinelogdirectorycount"); v != "0" {
		t.Fatalf("offline log dirs: %q, want 0", v)
	}
	select {
	case <-n.Halted():
		t.Fatalf("the node halted: %v", n.HaltError())
	default:
	}
	want = append(want, produceOK(t, cl, "nofd", "after", 5)...)
	checkReadBack(t, n, "nofd", want)
}

// TestFsyncFailure: an fsync that fails (flush.messages=1, so appends wait
// for it) is answered KAFKA_STORAGE_ERROR and the record is not
// acknowledged; the log dir, the node's only one, goes offline and the
// node halts as Kafka's broker does (Halted, then closed), even though
// fsync works again (the page cache's state is unknown). Restarted, it
// recovers the log from its last good flush: every acknowledged record
// survives and it takes writes.
func TestFsyncFailure(t *testing.T) {
	dir := t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync, PathContains: "sync-0"}}
	n := startFSNode(t, dir, errorfs.Wrap(vfs.Default, fail))
	cl := newClient(t, n)
	createTopic(t, cl, "sync", 1, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
	want := produceOK(t, cl, "sync", "ok", 10)
	fail.Set(true)
	if c := produceOneCode(t, cl, "sync", 0, "unsynced"); c != kerr.KafkaStorageError.Code {
		t.Fatalf("produce with fsync failing: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(c))
	}
	if fail.Count() == 0 {
		t.Fatal("no fsync failed")
	}
	fail.Set(false)
	select {
	case <-n.Halted():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not halt with its only log dir offline")
	}
	n.Close()
	n = startFSNode(t, dir, nil)
	got := readAll(t, n.Addr(), "sync")[0]
	for o, v := range want {
		if got[int64(o)] != v {
			t.Fatalf("offset %d: %q, want acknowledged %q", o, got[int64(o)], v)
		}
	}
	if c := produceOneCode(t, newClient(t, n), "sync", 0, "restarted"); c != 0 {
		t.Fatalf("produce after restart: %v", kerr.ErrorForCode(c))
	}
}

// TestLogDirOffline: a node of two log dirs (log.dirs) whose fsyncs fail
// in one takes that dir offline and keeps running: its
// kafka_log_logmanager_offlinelogdirectorycount is 1, the partition in
// that dir answers KAFKA_STORAGE_ERROR, as does the dir in
// DescribeLogDirs, and the node does not halt (a dir
// is left). Kafka's broker reports the dir to the controller the same way.
func TestLogDirOffline(t *testing.T) {
	bad, good := t.TempDir(), t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync, PathContains: filepath.Join(bad, "twodirs-")}}
	n := startConfig(t, samsa.Config{FS: errorfs.Wrap(vfs.Default, fail), HTTPListener: "127.0.0.1:0",
		Properties: map[string]string{"log.dirs": bad + "," + good}})
	if v := scrapeGauge(t, n.HTTPAddr(), "kafka_log_logmanager_offlinelogdirectorycount"); v != "0" {
		t.Fatalf("offline log dirs at start: %q, want 0", v)
	}
	cl := newClient(t, n)
	// Two partitions: the log dir holding fewer logs takes each, so
	// one is in each dir.
	createTopic(t, cl, "twodirs", 2, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// CreateTopics returns once the controller committed the topic; the
	// broker hosts its partitions when it applies that record, a moment
	// later (a fast run saw no partition dir yet, or was answered
	// NOT_LEADER_OR_FOLLOWER): wait until one is in each dir and the one
	// in the failing dir takes a record.
	inBad := int32(-1)
	waitFor(t, 10*time.Second, "a partition of twodirs in each log dir", func() bool {
		inBad = -1
		hosted := 0
		for p := range int32(2) {
			for _, d := range []string{bad, good} {
				if _, err := os.Stat(filepath.Join(d, fmt.Sprintf("twodirs-%d", p))); err == nil {
					hosted++
					if d == bad {
						inBad = p
					}
				}
			}
		}
		return hosted == 2 && inBad >= 0
	})
	produce := func(value string) int16 { return produceOneCode(t, cl, "twodirs", inBad, value) }
	waitFor(t, 10*time.Second, "the partition in the failing dir takes writes", func() bool { return produce("ready") == 0 })
	fail.Set(true)
	if c := produce("lost"); c != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the failing dir: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(c))
	}
	if v := scrapeGauge(t, n.HTTPAddr(), "kafka_log_logmanager_offlinelogdirectorycount"); v != "1" {
		t.Fatalf("offline log dirs: %q, want 1", v)
	}
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("describe log dirs: %v", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if want := map[string]error{bad: kerr.KafkaStorageError, good: nil}[d.Dir]; !errors.Is(d.Err, want) && d.Err != want {
			t.Errorf("DescribeLogDirs %s: %v, want %v", d.Dir, d.Err, want)
		}
	})
	select {
	case <-n.Halted():
		t.Fatal("the node halted with a log dir left")
	default:
	}
}

// TestPowerLossReplicated: with Kafka's default flush settings (no
// fsync before acknowledging) and replication factor 3,
// min.insync.replicas=2, acks=all, a power loss of one node at a time,
// twice (the partition's leader each time; the second crash keeps a torn
// and reordered part of the unsynced writes), loses no acknowledged record:
// the node restarts with what its disk kept, truncates to its leader's log
// and catches up, and the other replicas had each acknowledged record.
func TestPowerLossReplicated(t *testing.T) {
	var mu sync.Mutex
	crashes := map[int32]*errorfs.CrashFS{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, adm := startReplicatedTopic(t, ctx, "replicated", 1, nil, samsa.ClusterConfig{
		Properties: map[string]string{"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "3000"},
		FS: func(id int32) vfs.FS {
			mu.Lock()
			defer mu.Unlock()
			crashes[id] = errorfs.NewCrashFS(nil)
			return crashes[id]
		},
	})
	fullISR := func() bool { return fullISR(t, adm, "replicated", 1) }
	waitFor(t, 30*time.Second, "full ISR", fullISR)

	var a acked
	stopProducers := produceInBackground(t, strings.Join(c.Addrs(), ","), "replicated", &a)
	for round := range 2 {
		at := a.n.Load() + 150
		waitFor(t, 60*time.Second, "acknowledged records", func() bool { return a.n.Load() >= at })
		leader := describe(t, adm, "replicated").Partitions[0].Leader
		mu.Lock()
		crash := crashes[leader]
		mu.Unlock()
		opts := errorfs.CrashOptions{}
		if round == 1 {
			opts.Rand = rand.New(rand.NewPCG(11, 0)) // torn and reordered
		}
		if err := crash.Crash(opts); err != nil {
			t.Fatalf("crash node %d: %v", leader, err)
		}
		samsa.StopWithoutControlledShutdown(c, leader)
		at = a.n.Load() + 100
		waitFor(t, 60*time.Second, "acknowledged records with a node down", func() bool { return a.n.Load() >= at })
		if err := c.StartNode(ctx, leader); err != nil {
			t.Fatalf("restart node %d: %v", leader, err)
		}
		waitFor(t, 60*time.Second, "full ISR after restart", fullISR)
		t.Logf("round %d: node %d crashed and back, %d acknowledged", round, leader, a.n.Load())
	}
	stopProducers()
	checkNoLoss(t, &a, readAll(t, strings.Join(c.Addrs(), ","), "replicated"))
}

// TestLogDirFailure: fsync fails on the log dir of one node of three (the
// leader of partition 0, under flush.messages=1, acks=all,
// min.insync.replicas=2 producers). As Kafka, the node takes the dir
// offline, reports it in its next heartbeat, and the controller moves it
// out of every ISR and its leaderships to other in-sync replicas: the
// producers go on after retriable errors only, and the node halts
// (closes: its only dir is offline). Restarted on a healthy disk it
// catches up and rejoins every ISR, and no acknowledged record is lost.
func TestLogDirFailure(t *testing.T) {
	var mu sync.Mutex
	faults := map[int32]*errorfs.Toggle{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "dirfail"
	c, admCl, adm := startReplicatedTopic(t, ctx, topic, 3, map[string]*string{"flush.messages": kmsg.StringPtr("1")}, samsa.ClusterConfig{
		HTTPListeners: true,
		// A session far longer than the test waits: the failed node's
		// leaderships must move because it reported its dir, not
		// because it went silent.
		Properties: map[string]string{"replica.lag.time.max.ms": "30000", "broker.session.timeout.ms": "30000"},
		FS: func(id int32) vfs.FS {
			// A new toggle, off, at each start: a restart is on a
			// healthy disk.
			mu.Lock()
			defer mu.Unlock()
			faults[id] = &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync, PathContains: "dirfail-"}}
			return errorfs.Wrap(vfs.Default, faults[id])
		},
	})
	fullISR := func() bool { return fullISR(t, adm, topic, 3) }
	waitFor(t, 30*time.Second, "full ISR", fullISR)

	var a acked
	stopProducers := produceInBackground(t, strings.Join(c.Addrs(), ","), topic, &a)
	waitFor(t, 30*time.Second, "acknowledged records", func() bool { return a.n.Load() >= 200 })

	victim := describe(t, adm, topic).Partitions[0].Leader
	mu.Lock()
	fault := faults[victim]
	mu.Unlock()
	failedAt := time.Now()
	fault.Set(true)
	// Out of every ISR and leadership: the controller does it on the
	// heartbeat that reports the dir.
	// Asked of a node that stays: the failed one halts, and a client
	// that asks it meets a closed connection.
	survivor := victim%3 + 1
	out := func() bool {
		ps, err := partitionMetadata(ctx, admCl, survivor, topic)
		if err != nil || len(ps) != 3 {
			return false
		}
		for _, p := range ps {
			if p.ErrorCode != 0 || p.Leader < 0 || p.Leader == victim || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	}
	waitFor(t, 5*time.Second, "the failed node out of every ISR and leadership", out)
	t.Logf("node %d failed; out of the ISRs after %v, %d fsyncs refused", victim, time.Since(failedAt).Round(time.Millisecond), fault.Count())
	if fault.Count() == 0 {
		t.Fatal("no fsync failed")
	}
	select {
	case <-c.Node(victim).Halted():
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d did not halt with its only log dir offline", victim)
	}
	waitFor(t, 10*time.Second, "the failed node closed", func() bool {
		_, err := net.DialTimeout("tcp", c.HTTPAddr(victim), time.Second)
		return err != nil
	})
	// The other nodes' dirs stay online.
	for _, id := range c.Brokers() {
		if id != victim {
			if v := scrapeGauge(t, c.HTTPAddr(id), "kafka_log_logmanager_offlinelogdirectorycount"); v != "0" {
				t.Fatalf("offline log dirs of node %d: %q, want 0", id, v)
			}
		}
	}
	at := a.n.Load() + 200
	waitFor(t, 30*time.Second, "acknowledged records after the failure", func() bool { return a.n.Load() >= at })

	samsa.StopWithoutControlledShutdown(c, victim)
	if err := c.StartNode(ctx, victim); err != nil {
		t.Fatalf("restart node %d: %v", victim, err)
	}
	waitFor(t, 30*time.Second, "full ISR after restart", fullISR)
	at = a.n.Load() + 100
	waitFor(t, 30*time.Second, "acknowledged records after the restart", func() bool { return a.n.Load() >= at })
	stopProducers()
	a.mu.Lock()
	t.Logf("%d acknowledged; producer errors: %v", a.n.Load(), a.errs)
	a.mu.Unlock()
	if n := a.fatal.Load(); n > 0 {
		t.Fatalf("%d producer errors were not retriable", n)
	}
	checkNoLoss(t, &a, readAll(t, strings.Join(c.Addrs(), ","), topic))
}

// scrapeGauge returns the value of the unlabelled series name in the
// /metrics of the node at httpAddr, or "" when it has none.
func scrapeGauge(t *testing.T, httpAddr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", httpAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return ""
}

// startReplicatedTopic starts a 3-node cluster with cfg (Nodes, Dir when
// empty, and the replication properties filled in: RF 3, min.insync.replicas=2,
// heartbeats every 500 ms, cfg.Properties on top) and creates topic with
// partitions partitions and configs. It returns the cluster and an admin
// client of it (and its kgo client), which close at the end of the test.
func startReplicatedTopic(t *testing.T, ctx context.Context, topic string, partitions int32, configs map[string]*string, cfg samsa.ClusterConfig) (*samsa.Cluster, *kgo.Client, *kadm.Client) {
	t.Helper()
	props := map[string]string{"broker.heartbeat.interval.ms": "500", "min.insync.replicas": "2", "default.replication.factor": "3"}
	maps.Copy(props, cfg.Properties)
	cfg.Nodes, cfg.Properties = 3, props
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, cl := startClusterClient(t, ctx, cfg)
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, partitions, 3, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	return c, cl, adm
}

// startClusterClient starts a cluster of cfg and a client of its brokers,
// both closed at the end of t.
func startClusterClient(t *testing.T, ctx context.Context, cfg samsa.ClusterConfig) (*samsa.Cluster, *kgo.Client) {
	t.Helper()
	c, err := samsa.StartCluster(ctx, cfg)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// fullISR reports whether each of the partitions of topic has a leader
// and all 3 replicas in its ISR.
func fullISR(t *testing.T, adm *kadm.Client, topic string, partitions int) bool {
	t.Helper()
	td := describe(t, adm, topic)
	for _, p := range td.Partitions {
		if len(p.ISR) != 3 || p.Leader < 0 {
			return false
		}
	}
	return len(td.Partitions) == partitions
}

// TestCheckpointFailureOffline: an fsync that fails on the
// replication-offset-checkpoint (the high-watermark checkpoint, every
// replica.high.watermark.checkpoint.interval.ms) takes the log dir
// offline, as Kafka's checkpointHighWatermarks reports the IOException to
// LogDirFailureChannel; with its only dir offline the node halts. Before,
// the failure was logged at every interval and the node went on (found by
// the chaos harness's fsync nemesis).
func TestCheckpointFailureOffline(t *testing.T) {
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync, PathContains: "replication-offset-checkpoint"}}
	n := startConfig(t, samsa.Config{Dir: t.TempDir(), FS: errorfs.Wrap(vfs.Default, fail),
		Properties: map[string]string{"replica.high.watermark.checkpoint.interval.ms": "100"}})
	cl := newClient(t, n)
	createTopic(t, cl, "hwck", 1, nil)
	produceOK(t, cl, "hwck", "v", 3)
	fail.Set(true)
	select {
	case <-n.Halted():
	case <-time.After(10 * time.Second):
		t.Fatalf("the node did not halt: %d checkpoint fsyncs failed", fail.Count())
	}
	if fail.Count() == 0 {
		t.Fatal("no checkpoint fsync failed")
	}
}

// TestReadErrorOffline: a read of a segment that fails with EIO (a fetch
// of records already on disk) answers KAFKA_STORAGE_ERROR and takes the
// log dir offline, as Kafka's UnifiedLog.read reports the IOException to
// LogDirFailureChannel; with its only dir offline the node halts. Before,
// the fetch failed and the dir stayed online.
func TestReadErrorOffline(t *testing.T) {
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpRead, PathContains: "readfail-0" + string(filepath.Separator)}}
	n := startFSNode(t, t.TempDir(), errorfs.Wrap(vfs.Default, fail))
	cl := newClient(t, n)
	createTopic(t, cl, "readfail", 1, nil)
	produceOK(t, cl, "readfail", "v", 5)
	fail.Set(true)
	// The node may halt before it answers: then the connection closes.
	if p, err := fetchAtErr(cl, "readfail", 0, 0); err == nil && p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch with reads failing: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(p.ErrorCode))
	}
	if fail.Count() == 0 {
		t.Fatal("no read failed: the fetch did not read the segment")
	}
	select {
	case <-n.Halted():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not halt with its only log dir offline")
	}
}

// TestMetadataLogFullHalts: a voter whose metadata log (__cluster_metadata)
// meets a full disk halts, as Kafka's fatal fault handler ends the
// process when the raft log cannot be written. Before, the raft voter
// stopped and the node stayed up with no metadata quorum and its
// partitions' leaderships ("no active controller known" for minutes; the
// chaos harness's disk-full nemesis, seed 7000), since ENOSPC does not
// take the log dir offline.
func TestMetadataLogFullHalts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpWrite, PathContains: "__cluster_metadata-0"}, Err: errorfs.ENOSPC}
	const victim = 2
	c, _, adm := startReplicatedTopic(t, ctx, "mdfull", 1, nil, samsa.ClusterConfig{FS: func(id int32) vfs.FS {
		if id != victim {
			return nil
		}
		return errorfs.Wrap(vfs.Default, full)
	}})
	full.Set(true)
	// Every topic created appends metadata records on every voter. The
	// create may fail: the victim may be the active controller.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "mdfull-2"); err != nil {
		t.Logf("create: %v", err)
	}
	select {
	case <-c.Node(victim).Halted():
	case <-time.After(20 * time.Second):
		t.Fatalf("the voter did not halt: %d metadata log writes failed", full.Count())
	}
	if err := c.Node(victim).HaltError(); err == nil || !strings.Contains(err.Error(), "metadata quorum voter stopped") {
		t.Fatalf("HaltError %v, want the voter's", err)
	}
}

// TestQuorumStateWriteHalts: the raft quorum-state file goes through the
// node's vfs.FS (it was written with package os, out of the faults'
// reach): a voter whose quorum-state cannot be written (EIO) halts, as
// one whose metadata log cannot be (TestMetadataLogFullHalts), since
// raft must not send a vote or entries it did not persist. The active
// controller is stopped, so that the election's new term makes the
// victim, another voter, write it.
func TestQuorumStateWriteHalts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	fails := map[int32]*errorfs.Toggle{}
	c, _, _ := startReplicatedTopic(t, ctx, "qsfail", 1, nil, samsa.ClusterConfig{FS: func(id int32) vfs.FS {
		mu.Lock()
		defer mu.Unlock()
		fails[id] = &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpWrite | errorfs.OpSync, PathContains: quorum.StateFile}}
		return errorfs.Wrap(vfs.Default, fails[id])
	}})
	active := c.ActiveController()
	if active < 0 {
		t.Fatal("no active controller")
	}
	victim := active%3 + 1
	mu.Lock()
	fail := fails[victim]
	mu.Unlock()
	fail.Set(true)
	if err := c.StopNode(active); err != nil {
		t.Logf("stop %d: %v", active, err)
	}
	select {
	case <-c.Node(victim).Halted():
	case <-time.After(30 * time.Second):
		t.Fatalf("voter %d did not halt: %d quorum-state writes failed", victim, fail.Count())
	}
	if err := c.Node(victim).HaltError(); err == nil || !strings.Contains(err.Error(), "metadata quorum voter stopped") || !strings.Contains(err.Error(), quorum.StateFile) {
		t.Fatalf("HaltError %v, want the voter's, naming %s", err, quorum.StateFile)
	}
}
