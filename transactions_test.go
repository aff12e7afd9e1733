package samsa_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
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

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// Exactly-once tests (KIP-98): transactions with franz-go, librdkafka
// (kcat, Python confluent-kafka) and raw requests, against real nodes.

// debianLines returns the first n lines of the Debian data set (all of
// them when n <= 0).
func debianLines(t *testing.T, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for _, l := range testutil.DebianLines(t, n) {
		out = append(out, l.Line)
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
	out, stderr, err := stdoutOnly(exec.CommandContext(ctx, python3, "-c", script, addr, topic))
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python transactional producer: %v\n%s\nstderr:\n%s", err, out, stderr)
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
	out, stderr, err := stdoutOnly(exec.CommandContext(ctx, python3, "-c", script, addr, topic, level))
	if err != nil {
		t.Fatalf("python consumer %s: %v\n%s\nstderr:\n%s", level, err, out, stderr)
	}
	return strings.Fields(string(out)), true
}

// TestTxnFencing: a second producer with the same transactional id fences
// the first: the first's open transaction is aborted, its later produce
// and commit fail, and only the second's records are committed.
func TestTxnFencing(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(nil))
	admin := newClient(t, n)
	createTopic(t, admin, "fenced", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := newClient(t, n, kgo.TransactionalID("shared"), kgo.DefaultProduceTopic("fenced"))
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := newClient(t, n, kgo.TransactionalID("shared"), kgo.DefaultProduceTopic("fenced"))
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, kgo.StringRecord("second-1")).FirstErr(); err != nil {
		t.Fatalf("second producer: %v", err)
	}
	zerr := first.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	cerr := first.EndTransaction(ctx, kgo.TryCommit)
	if zerr == nil && cerr == nil {
		t.Fatal("the fenced producer produced and committed")
	}
	fenced := func(err error) bool {
		return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping)
	}
	if !fenced(zerr) && !fenced(cerr) {
		t.Fatalf("fenced producer: produce %v, commit %v; want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", zerr, cerr)
	}
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	got := readTopic(t, n.Addr(), "fenced", kgo.ReadCommitted(), 1, 30*time.Second)
	if len(got) != 1 || string(got[0].Value) != "second-1" {
		var vs []string
		for _, r := range got {
			vs = append(vs, string(r.Value))
		}
		t.Fatalf("read_committed after fencing: %q", vs)
	}
	t.Logf("fenced producer: produce %v; commit %v", zerr, cerr)
}

// dropProxy is a TCP proxy between clients and one broker that drops the
// responses to chosen Produce requests and cuts the connection instead,
// as a lost acknowledgement: the broker wrote the records, the producer
// does not know and retries.
type dropProxy struct {
	ln net.Listener
	// drop says, for the n-th Produce response (1-based), whether to
	// drop it.
	drop func(n int) bool

	mu       sync.Mutex // guards the fields below
	target   string     // the broker's address
	produces int
	dropped  int
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startDropProxy(t *testing.T, drop func(n int) bool) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, drop: drop}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var mu sync.Mutex
		keys := map[int32]int16{} // correlation id -> API key
		p.wg.Add(2)
		go func() { // client -> broker
			defer p.wg.Done()
			defer s.Close()
			for {
				frame, err := readFrame(c)
				if err != nil {
					return
				}
				if len(frame) >= 12 {
					mu.Lock()
					keys[int32(be32(frame[8:]))] = int16(uint16(frame[4])<<8 | uint16(frame[5]))
					mu.Unlock()
				}
				if _, err := s.Write(frame); err != nil {
					return
				}
			}
		}()
		go func() { // broker -> client
			defer p.wg.Done()
			defer c.Close()
			for {
				frame, err := readFrame(s)
				if err != nil {
					return
				}
				if len(frame) >= 8 {
					mu.Lock()
					key, ok := keys[int32(be32(frame[4:]))]
					mu.Unlock()
					if ok && key == int16(kmsg.Produce) {
						p.mu.Lock()
						p.produces++
						drop := p.drop(p.produces)
						if drop {
							p.dropped++
						}
						p.mu.Unlock()
						if drop {
							s.Close()
							return
						}
					}
				}
				if _, err := c.Write(frame); err != nil {
					return
				}
			}
		}()
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// readFrame reads one size-prefixed Kafka frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := be32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// freePort returns a loopback port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestIdempotentLostAcks: an idempotent producer whose acknowledgements
// are lost (a proxy drops Produce responses and cuts the connection)
// retries its batches, and the broker writes none of them twice.
func TestIdempotentLostAcks(t *testing.T) {
	proxy := startDropProxy(t, func(n int) bool { return n == 3 || n == 11 || n == 12 })
	n := startNode(t, t.TempDir(), map[string]string{
		"advertised.listeners": "PLAINTEXT://" + proxy.addr(),
	})
	proxy.mu.Lock()
	proxy.target = n.Addr()
	proxy.mu.Unlock()
	admin := newClient(t, n)
	createTopic(t, admin, "acks", 2, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxy.addr()), kgo.DefaultProduceTopic("acks"),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const total = 2000
	var wg sync.WaitGroup
	var failed sync.Map
	for i := range total {
		wg.Add(1)
		v := strconv.Itoa(i)
		cl.Produce(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Store(v, err)
			}
		})
		if i%100 == 99 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	failed.Range(func(k, v any) bool { t.Fatalf("record %s: %v", k, v); return false })
	proxy.mu.Lock()
	dropped, produces := proxy.dropped, proxy.produces
	proxy.mu.Unlock()
	if dropped != 3 {
		t.Fatalf("the proxy dropped %d of %d Produce responses, want 3", dropped, produces)
	}
	got := readTopic(t, n.Addr(), "acks", kgo.ReadUncommitted(), total, 30*time.Second)
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for i := range total {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Fatalf("record %d written %d times", i, c)
		}
	}
	if len(got) != total {
		t.Fatalf("%d records, want %d", len(got), total)
	}
	t.Logf("%d records through %d Produce requests, %d responses dropped: no duplicate", total, produces, dropped)
}

// describeTxn returns the state of a transactional id (DescribeTransactions
// through kadm).
func describeTxn(t *testing.T, cl *kgo.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := kadm.NewClient(cl).DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return ds[id]
}

// waitTxnEnded waits until id's transaction is CompleteCommit or
// CompleteAbort and the last stable offset of topic's partition 0 reached
// its high-watermark: the transaction does not hang.
func waitTxnEnded(t *testing.T, cl *kgo.Client, id, topic string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		d := describeTxn(t, cl, id)
		if d.Err == nil && (d.State == "CompleteCommit" || d.State == "CompleteAbort") {
			if hw, lso := listLatest(t, cl, topic, 0, 0), listLatest(t, cl, topic, 0, 1); hw == lso {
				return d.State
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s still %q (err %v) after %v", id, d.State, d.Err, within)
		}
		<-tick.C
	}
}

// restartNode closes n and starts a node on the same directory and ports.
func restartNode(t *testing.T, n *samsa.Node, dir string, props map[string]string) *samsa.Node {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return startNode(t, dir, props)
}

// TestTxnBrokerRestart restarts the broker in the middle of transactions:
// one whose producer goes on and ends it after the restart (it commits or
// aborts, and consumers see all its records or none), one whose producer
// is gone (the coordinator aborts it after its timeout). Neither hangs.
func TestTxnBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	props := txnProps(map[string]string{
		"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", freePort(t), freePort(t)),
	})
	n := startNode(t, dir, props)
	admin := newClient(t, n)
	createTopic(t, admin, "restart-a", 1, nil)
	createTopic(t, admin, "restart-b", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := newClient(t, n, kgo.TransactionalID("restart-a"), kgo.DefaultProduceTopic("restart-a"),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(time.Minute))
	b := newClient(t, n, kgo.TransactionalID("restart-b"), kgo.DefaultProduceTopic("restart-b"), kgo.TransactionTimeout(3*time.Second))
	for _, cl := range []*kgo.Client{a, b} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	b.Close() // producer b is gone with its transaction open

	n = restartNode(t, n, dir, props)
	admin = newClient(t, n)
	err := a.EndTransaction(ctx, kgo.TryCommit)
	if err != nil {
		t.Logf("commit after the restart failed (%v): aborting", err)
		if aerr := a.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			t.Logf("abort: %v", aerr)
		}
	}
	stateA := waitTxnEnded(t, admin, "restart-a", "restart-a", 30*time.Second)
	wantA := 0
	if stateA == "CompleteCommit" {
		wantA = 50
	}
	if err == nil && stateA != "CompleteCommit" {
		t.Fatalf("commit acknowledged but the transaction is %s", stateA)
	}
	if got := readTopic(t, n.Addr(), "restart-a", kgo.ReadCommitted(), wantA, 20*time.Second); len(got) != wantA {
		t.Fatalf("restart-a: %d committed records, want %d (%s)", len(got), wantA, stateA)
	}
	if stateB := waitTxnEnded(t, admin, "restart-b", "restart-b", 30*time.Second); stateB != "CompleteAbort" {
		t.Fatalf("abandoned transaction ended %s", stateB)
	}
	if got := readTopic(t, n.Addr(), "restart-b", kgo.ReadCommitted(), 0, 5*time.Second); len(got) != 0 {
		t.Fatalf("abandoned transaction: %d records visible to read_committed", len(got))
	}
	t.Logf("transaction ended after the restart: %s; abandoned one: CompleteAbort", stateA)
}

// TestTxnBrokerKilled kills the broker process with SIGKILL in the middle
// of a transaction (no clean shutdown: the producer state is recovered
// from the log) and restarts it; a new instance of the producer then
// fences the old one, whose transaction is aborted, and commits its own.
func TestTxnBrokerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the samsa binary")
	}
	dir := t.TempDir()
	args := []string{"server", "--override", "log.dirs=" + dir,
		"--override", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", freePort(t), freePort(t)),
		"--override", "http.listener="}
	for k, v := range txnProps(nil) {
		args = append(args, "--override", k+"="+v)
	}
	srv := proctest.StartArgs(t, dir, args...)
	admin, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "killed"); err != nil {
		t.Fatal(err)
	}
	old, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.TransactionalID("killed"), kgo.DefaultProduceTopic("killed"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := old.ProduceSync(ctx, kgo.StringRecord("old-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv = proctest.StartArgs(t, dir, args...)

	fresh, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.TransactionalID("killed"), kgo.DefaultProduceTopic("killed"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := fresh.ProduceSync(ctx, kgo.StringRecord("new-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("new producer: %v", err)
		}
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("new producer commit: %v", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the old producer committed after being fenced")
	}
	if state := waitTxnEnded(t, admin, "killed", "killed", 30*time.Second); state != "CompleteCommit" {
		t.Fatalf("state %s", state)
	}
	got := readTopic(t, srv.Addr, "killed", kgo.ReadCommitted(), 10, 20*time.Second)
	for _, r := range got {
		if !strings.HasPrefix(string(r.Value), "new-") {
			t.Fatalf("record %q of the fenced transaction is visible", r.Value)
		}
	}
	if len(got) != 10 {
		t.Fatalf("%d committed records, want 10", len(got))
	}
	if raw := readTopic(t, srv.Addr, "killed", kgo.ReadUncommitted(), 110, 20*time.Second); len(raw) != 110 {
		t.Fatalf("read_uncommitted: %d records, want 110", len(raw))
	}
}

// rawProduce sends one batch of producer pid/epoch from sequence seq to
// topic/partition with Produce v9 (transactional when txnID is not empty)
// and returns the partition's error code and base offset.
func rawProduce(t *testing.T, cl *kgo.Client, txnID, topic string, partition int32, pid int64, epoch int16, seq int32, value string) (int16, int64) {
	t.Helper()
	batch, err := record.Build(record.Spec{Transactional: txnID != "", ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	p := produceBatch(t, cl, topic, partition, 9, txnID, batch)
	if p.ErrorCode == kerr.UnknownServerError.Code {
		t.Fatalf("produce answered UNKNOWN_SERVER_ERROR: %v", p.ErrorMessage)
	}
	return p.ErrorCode, p.BaseOffset
}

func wantErr(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestTxnServerChecks follows the broker's defences with raw requests:
// idempotent duplicates, gaps and stale epochs; and KIP-890 part 1: a
// transactional produce to a partition not added to the open transaction
// is rejected, and so are a late produce after the transaction ended and
// the requests of a fenced epoch.
//
// It runs transaction version 1 (EndTxn v4 at most): TestTxnV2LostEndTxn
// covers version 2.
func TestTxnServerChecks(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(nil))
	cl := newClient(t, n, kgo.MaxVersions(txnV1Versions()))
	createTopic(t, cl, "checks", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Idempotence.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	ipr, err := ip.RequestWith(ctx, cl)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, ipr)
	}
	pid, epoch := ipr.ProducerID, ipr.ProducerEpoch
	code, first := rawProduce(t, cl, "", "checks", 0, pid, epoch, 0, "a")
	wantErr(t, "first batch", code, nil)
	code, off := rawProduce(t, cl, "", "checks", 0, pid, epoch, 0, "a")
	wantErr(t, "retried batch", code, nil)
	if off != first {
		t.Fatalf("retry answered offset %d, want %d", off, first)
	}
	code, _ = rawProduce(t, cl, "", "checks", 0, pid, epoch, 5, "gap")
	wantErr(t, "sequence gap", code, kerr.OutOfOrderSequenceNumber)
	code, _ = rawProduce(t, cl, "", "checks", 0, pid, epoch+1, 0, "bump")
	wantErr(t, "epoch bump from 0", code, nil)
	code, _ = rawProduce(t, cl, "", "checks", 0, pid, epoch, 1, "stale")
	wantErr(t, "stale epoch", code, kerr.InvalidProducerEpoch)

	// Transactions.
	const id = "raw-txn"
	txnID := id
	init := func() (int64, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 60000
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode == kerr.ConcurrentTransactions.Code || resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
				continue
			}
			wantErr(t, "InitProducerId", resp.ErrorCode, nil)
			return resp.ProducerID, resp.ProducerEpoch
		}
	}
	addPartitions := func(pid int64, epoch int16, partition int32) int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "checks", []int32{partition}
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	endTxn := func(pid int64, epoch int16, commit bool) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	tpid, tepoch := init()
	code, _ = rawProduce(t, cl, id, "checks", 0, tpid, tepoch, 0, "unadded")
	wantErr(t, "transactional produce to a partition not added", code, kerr.InvalidTxnState)
	wantErr(t, "AddPartitionsToTxn", addPartitions(tpid, tepoch, 0), nil)
	code, _ = rawProduce(t, cl, id, "checks", 0, tpid, tepoch, 0, "added")
	wantErr(t, "produce after AddPartitionsToTxn", code, nil)
	code, _ = rawProduce(t, cl, id, "checks", 1, tpid, tepoch, 1, "other partition")
	wantErr(t, "produce to another partition not added", code, kerr.InvalidTxnState)
	wantErr(t, "commit", endTxn(tpid, tepoch, true), nil)
	// EndTxn answers once the commit is prepared, before the markers are
	// written. Until the COMMIT marker is in partition 0, the producer's
	// transaction is open there and a batch of it needs no verification:
	// it is accepted into the transaction being committed, as Kafka does
	// (UnifiedLog.maybeStartTransactionVerification skips an ongoing
	// transaction; KIP-890 part 2's per-transaction epoch bump closes
	// that window). Between the marker and CompleteCommit, verification
	// answers CONCURRENT_TRANSACTIONS (the retriable NOT_ENOUGH_REPLICAS).
	// Only once the transaction completed is a batch refused.
	if state := waitTxnEnded(t, cl, id, "checks", 30*time.Second); state != "CompleteCommit" {
		t.Fatalf("transaction ended %s, want CompleteCommit", state)
	}
	code, _ = rawProduce(t, cl, id, "checks", 0, tpid, tepoch, 1, "late")
	wantErr(t, "produce after the transaction ended", code, kerr.InvalidTxnState)

	// A new instance fences the old epoch.
	wantErr(t, "AddPartitionsToTxn", addPartitions(tpid, tepoch, 0), nil)
	code, openAt := rawProduce(t, cl, id, "checks", 0, tpid, tepoch, 1, "open")
	wantErr(t, "produce", code, nil)
	// ListOffsets latest: read_committed gets the LSO, the open
	// transaction's first offset; read_uncommitted the high-watermark.
	if lso, hw := listLatest(t, cl, "checks", 0, 1), listLatest(t, cl, "checks", 0, 0); lso != openAt || hw != openAt+1 {
		t.Fatalf("with a transaction open at %d: LSO %d, high-watermark %d", openAt, lso, hw)
	}
	npid, nepoch := init()
	if npid != tpid || nepoch <= tepoch+1 {
		t.Fatalf("new instance: producer %d epoch %d (old %d/%d)", npid, nepoch, tpid, tepoch)
	}
	wantErr(t, "late EndTxn of the fenced producer", endTxn(tpid, tepoch, true), kerr.ProducerFenced)
	wantErr(t, "AddPartitionsToTxn of the fenced producer", addPartitions(tpid, tepoch, 1), kerr.ProducerFenced)
	code, _ = rawProduce(t, cl, id, "checks", 0, tpid, tepoch, 2, "zombie")
	if code != kerr.InvalidProducerEpoch.Code && code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce of the fenced producer: %v", kerr.ErrorForCode(code))
	}
	got := readTopic(t, n.Addr(), "checks", kgo.ReadCommitted(), 3, 10*time.Second)
	var vs []string
	for _, r := range got {
		vs = append(vs, string(r.Value))
	}
	if strings.Join(vs, ",") != "a,bump,added" {
		t.Fatalf("read_committed: %q", vs)
	}
}

// TestTxnCluster runs transactions on a three-node cluster, where markers
// go to partition leaders on other brokers (WriteTxnMarkers) and
// transactional produce is verified with a coordinator elsewhere
// (AddPartitionsToTxn v4); then the coordinator's node stops in the middle
// of a transaction, which the coordinator elected next ends.
func TestTxnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes")
	}
	c := startCluster(t, 3, txnProps(map[string]string{"default.replication.factor": "3", "min.insync.replicas": "2"}))
	seeds := c.Addrs()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 6, 3, nil, "ct"); err != nil {
		t.Fatal(err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("cluster-tx"), kgo.DefaultProduceTopic("ct"),
		kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	committed := map[string]bool{}
	txn := func(i int, commit bool) error {
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		for j := range 30 {
			v := fmt.Sprintf("%d-%d", i, j)
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				return err
			}
			if commit {
				committed[v] = true
			}
		}
		return nil
	}
	for i, commit := range []bool{true, false, true, false, true} {
		if err := txn(i, commit); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
	}
	// Stop the coordinator in the middle of a transaction.
	coord := describeTxn(t, admin, "cluster-tx").Coordinator
	if err := txn(5, true); err != nil {
		t.Fatal(err)
	}
	if err := c.StopNode(coord); err != nil {
		t.Fatal(err)
	}
	endErr := p.EndTransaction(ctx, kgo.TryCommit)
	if endErr != nil {
		for j := range 30 {
			delete(committed, fmt.Sprintf("5-%d", j))
		}
		t.Logf("commit with the coordinator stopped: %v", endErr)
	}
	if err := c.StartNode(ctx, coord); err != nil {
		t.Fatal(err)
	}
	got := readTopic(t, seeds[0], "ct", kgo.ReadCommitted(), len(committed), 30*time.Second)
	seen := map[string]bool{}
	for _, r := range got {
		v := string(r.Value)
		if seen[v] || !committed[v] {
			t.Fatalf("read_committed: %q unexpected or twice", v)
		}
		seen[v] = true
	}
	if len(seen) != len(committed) {
		t.Fatalf("read_committed: %d records, want %d", len(seen), len(committed))
	}
	t.Logf("cluster: %d committed records read back; commit after stopping coordinator %d: %v", len(committed), coord, endErr)
}
