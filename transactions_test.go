package samsa_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once tests (KIP-98): transactions with franz-go, librdkafka
// (kcat, Python confluent-kafka) and raw requests, against real nodes.

// txnDebianPath is the Debian package index (see ../shared/data/README.md),
// relative to the package directory, the project root.
const txnDebianPath = "../shared/data/debian-packages.jsonl.gz"

// debianLines returns the first n lines of the Debian data set (all of
// them when n <= 0).
func debianLines(t *testing.T, n int) [][]byte {
	t.Helper()
	f, err := os.Open(txnDebianPath)
	if err != nil {
		t.Skipf("Debian data set not available: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out [][]byte
	for sc.Scan() && (n <= 0 || len(out) < n) {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// txnProps are node properties for transaction tests: no initial rebalance
// delay, and timed-out transactions aborted within a second.
func txnProps(extra map[string]string) map[string]string {
	p := map[string]string{
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
		"offsets.topic.num.partitions":                                "4",
		"transaction.state.log.num.partitions":                        "4",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// readTopic consumes topic from the start at the isolation level until it
// holds at least want records and nothing more arrives for a grace period
// (extras, such as duplicates, would arrive then), or until the deadline.
func readTopic(t *testing.T, addr, topic string, level kgo.IsolationLevel, want int, deadline time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var got []*kgo.Record
	var reached time.Time
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("fetch %s/%d: %v", tp, p, err)
			}
		})
		got = append(got, fs.Records()...)
		if len(got) >= want {
			if reached.IsZero() {
				reached = time.Now()
			} else if time.Since(reached) > 2*time.Second {
				break
			}
		}
	}
	return got
}

// TestExactlyOnceCopyDebian copies the Debian data set from one topic to
// another with franz-go's GroupTransactSession (consume, produce and
// commit the consumed offsets in one transaction) while the copier process
// is killed with SIGKILL at random points and restarted: the output, read
// with read_committed, holds each input record exactly once.
func TestExactlyOnceCopyDebian(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts copier processes")
	}
	lines := debianLines(t, txnCopyRecords())
	n := startNode(t, t.TempDir(), txnProps(nil))
	admin := newClient(t, n)
	createTopic(t, admin, "debian-in", 4, nil)
	createTopic(t, admin, "debian-out", 4, nil)
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: "debian-in", Key: []byte(strconv.Itoa(i)), Value: l}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce input: %v", err)
	}

	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 42))
	kills := 0
	const maxKills = 6
	for round := 0; ; round++ {
		cmd, copying := startCopier(t, n.Addr(), round, 1+rng.IntN(12))
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var kill <-chan time.Time
		if kills < maxKills {
			// Kill at a random point once it copies: in its first
			// transactions or later, while it produces, commits offsets,
			// ends a transaction or waits for the next.
			select {
			case <-copying:
				kill = time.After(time.Duration(rng.IntN(40)) * time.Millisecond)
			case err := <-exited:
				if err != nil {
					t.Fatalf("copier %d failed: %v", round, err)
				}
				exited <- nil // nothing was left to copy
			case <-time.After(time.Minute):
				t.Fatalf("copier %d did not start copying", round)
			}
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("copier %d failed: %v", round, err)
			}
		case <-kill:
			cmd.Process.Kill()
			<-exited
			kills++
			continue
		case <-time.After(3 * time.Minute):
			cmd.Process.Kill()
			<-exited
			t.Fatal("copier did not finish")
		}
		break
	}
	copyTime := time.Since(start)

	got := readTopic(t, n.Addr(), "debian-out", kgo.ReadCommitted(), len(lines), time.Minute)
	seen := make([]int, len(lines))
	for _, r := range got {
		i, err := strconv.Atoi(string(r.Key))
		if err != nil || i < 0 || i >= len(lines) || string(r.Value) != string(lines[i]) {
			t.Fatalf("unexpected output record %q", r.Key)
		}
		seen[i]++
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("input record %d is in the output %d times (read_committed, %d records read)", i, c, len(got))
		}
	}
	raw := readTopic(t, n.Addr(), "debian-out", kgo.ReadUncommitted(), len(lines), time.Minute)
	t.Logf("copied %d records exactly once in %v with %d copier kills; read_uncommitted sees %d records (%d from aborted transactions)",
		len(lines), copyTime.Round(time.Millisecond), kills, len(raw), len(raw)-len(got))
}

// txnCopyRecords is how many Debian records the copy test uses: a slice of
// 20,000 by default, all with SAMSA_TXN_FULL=1.
func txnCopyRecords() int {
	if os.Getenv("SAMSA_TXN_FULL") != "" {
		return 0
	}
	return 20000
}

// startCopier runs this test binary as a copier process
// (TestTxnCopierProcess); copying is closed once it began its txns-th
// transaction with records.
func startCopier(t *testing.T, addr string, round, txns int) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnCopierProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SAMSA_TXN_COPIER="+addr)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var mu sync.Mutex
	out := &strings.Builder{}
	copying := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		seen := 0
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "copier: producing") {
				if seen++; seen == txns {
					close(copying)
				}
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		pw.Close()
		if t.Failed() {
			mu.Lock()
			t.Logf("copier %d output:\n%s", round, tail(out.String(), 3000))
			mu.Unlock()
		}
	})
	return cmd, copying
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestTxnCopierProcess is the copier of TestExactlyOnceCopyDebian, run as
// a child process: it copies debian-in to debian-out in transactions with
// a GroupTransactSession and exits once the group's committed offsets
// reach the end of the input.
func TestTxnCopierProcess(t *testing.T) {
	addr := os.Getenv("SAMSA_TXN_COPIER")
	if addr == "" {
		t.Skip("the copier process of TestExactlyOnceCopyDebian")
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID("debian-copier"),
		kgo.TransactionTimeout(20*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup("debian-copier"),
		kgo.ConsumeTopics("debian-in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.DefaultProduceTopic("debian-out"),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := context.Background()
	adm := kadm.NewClient(sess.Client())
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, 200) // many small transactions
		cancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s/%d: %v", tp, p, err)
			}
		})
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		if fs.NumRecords() > 0 {
			fmt.Printf("copier: producing %d records\n", fs.NumRecords())
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Logf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Logf("end (committed %v): %v", committed, err)
			continue
		}
		if fs.NumRecords() > 0 {
			continue
		}
		// Idle: done once the group's offsets reach the input's end.
		lag, err := adm.Lag(ctx, "debian-copier")
		if err != nil {
			continue
		}
		if gl, ok := lag["debian-copier"]; ok && gl.Error() == nil && gl.Lag.Total() == 0 && len(gl.Lag) > 0 {
			t.Logf("copy complete")
			return
		}
	}
}

// TestAbortedInvisible writes committed and aborted transactions with
// franz-go's producer and with librdkafka's (Python confluent-kafka), and
// reads them back with franz-go, kcat (-X isolation.level=...) and Python:
// read_committed sees the committed records only, read_uncommitted all of
// them.
func TestAbortedInvisible(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(nil))
	admin := newClient(t, n)
	createTopic(t, admin, "tx", 3, nil)
	p := newClient(t, n, kgo.TransactionalID("franz"), kgo.DefaultProduceTopic("tx"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	committed, aborted := 0, 0
	for i, commit := range []bool{true, false, true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			v := fmt.Sprintf("franz-%d-%d-%v", i, j, commit)
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
		if commit {
			committed += 20
		} else {
			aborted += 20
		}
	}
	// librdkafka's transactional producer, when Python has confluent-kafka.
	if c, a, ok := pythonTransactions(t, n.Addr(), "tx"); ok {
		committed += c
		aborted += a
	}
	check := func(what string, got []string, want int, wantAborted bool) {
		t.Helper()
		seen := map[string]bool{}
		abortedSeen := 0
		for _, v := range got {
			if seen[v] {
				t.Fatalf("%s: %q twice", what, v)
			}
			seen[v] = true
			if strings.HasSuffix(v, "-false") {
				abortedSeen++
			}
		}
		if len(got) != want || (abortedSeen > 0) != wantAborted {
			t.Fatalf("%s: %d records (%d aborted), want %d", what, len(got), abortedSeen, want)
		}
	}
	values := func(rs []*kgo.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, string(r.Value))
		}
		return out
	}
	check("franz-go read_committed", values(readTopic(t, n.Addr(), "tx", kgo.ReadCommitted(), committed, 30*time.Second)), committed, false)
	check("franz-go read_uncommitted", values(readTopic(t, n.Addr(), "tx", kgo.ReadUncommitted(), committed+aborted, 30*time.Second)), committed+aborted, true)
	if kcat, err := exec.LookPath("kcat"); err != nil {
		t.Logf("kcat not installed: skipping its reads")
	} else {
		for _, level := range []string{"read_committed", "read_uncommitted"} {
			out, err := exec.CommandContext(ctx, kcat, "-C", "-b", n.Addr(), "-t", "tx", "-o", "beginning", "-e", "-q",
				"-X", "isolation.level="+level, "-f", "%s\n").Output()
			if err != nil {
				t.Fatalf("kcat %s: %v", level, err)
			}
			got := strings.Fields(string(out))
			if level == "read_committed" {
				check("kcat "+level, got, committed, false)
			} else {
				check("kcat "+level, got, committed+aborted, true)
			}
		}
	}
	if out, ok := pythonConsume(t, n.Addr(), "tx", "read_committed"); ok {
		check("python read_committed", out, committed, false)
		out, _ = pythonConsume(t, n.Addr(), "tx", "read_uncommitted")
		check("python read_uncommitted", out, committed+aborted, true)
	}
	// ListOffsets latest with read_committed gives the LSO: all ended, so
	// it equals the high-watermark.
	for part := int32(0); part < 3; part++ {
		hw, lso := listLatest(t, admin, "tx", part, 0), listLatest(t, admin, "tx", part, 1)
		if hw != lso || hw == 0 {
			t.Fatalf("partition %d: high-watermark %d, last stable offset %d", part, hw, lso)
		}
	}
	t.Logf("%d committed and %d aborted records, read back with franz-go, kcat and Python", committed, aborted)
}

// listLatest is ListOffsets latest (-1) at isolation level (0
// read_uncommitted: the high-watermark; 1 read_committed: the LSO).
func listLatest(t *testing.T, cl *kgo.Client, topic string, partition int32, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	return p.Offset
}

// python3 is Debian's interpreter, which python3-confluent-kafka installs
// into.
const python3 = "/usr/bin/python3"

// havePythonKafka reports whether python3 imports confluent_kafka; the
// tests that need it skip their part otherwise (CI installs it).
func havePythonKafka(t *testing.T) bool {
	t.Helper()
	if err := exec.Command(python3, "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-confluent-kafka is required in CI: %v", err)
		}
		t.Logf("python3-confluent-kafka not installed (apt-get install python3-confluent-kafka): skipping its part")
		return false
	}
	return true
}

// pythonTransactions runs librdkafka's transactional producer: three
// transactions of 15 records to topic, the second aborted. Values end in
// -true or -false (committed or not).
func pythonTransactions(t *testing.T, addr, topic string) (committed, aborted int, ok bool) {
	t.Helper()
	if !havePythonKafka(t) {
		return 0, 0, false
	}
	script := `
import sys
from confluent_kafka import Producer
p = Producer({'bootstrap.servers': sys.argv[1], 'transactional.id': 'python-tx', 'enable.idempotence': True})
p.init_transactions(30)
for i, commit in enumerate([True, False, True]):
    p.begin_transaction()
    for j in range(15):
        v = 'python-%d-%d-%s' % (i, j, 'true' if commit else 'false')
        p.produce(sys.argv[2], key=v, value=v)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
print('ok')
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python3, "-c", script, addr, topic).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("python transactional producer: %v\n%s", err, out)
	}
	return 30, 15, true
}

// pythonConsume reads topic from the start to its end with confluent-kafka
// at the isolation level and returns the values.
func pythonConsume(t *testing.T, addr, topic, level string) ([]string, bool) {
	t.Helper()
	if !havePythonKafka(t) {
		return nil, false
	}
	script := `
import sys
from confluent_kafka import Consumer, KafkaError, TopicPartition
c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 'py-' + sys.argv[3], 'isolation.level': sys.argv[3],
              'auto.offset.reset': 'earliest', 'enable.auto.commit': False, 'enable.partition.eof': True})
md = c.list_topics(sys.argv[2], timeout=30)
parts = [TopicPartition(sys.argv[2], p, 0) for p in md.topics[sys.argv[2]].partitions]
c.assign(parts)
eof = set()
while len(eof) < len(parts):
    m = c.poll(30)
    if m is None:
        sys.exit('timed out')
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            eof.add(m.partition())
            continue
        sys.exit(str(m.error()))
    print(m.value().decode())
c.close()
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python3, "-c", script, addr, topic, level).Output()
	if err != nil {
		t.Fatalf("python consumer %s: %v\n%s", level, err, out)
	}
	return strings.Fields(string(out)), true
}
