package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// lastJSON decodes the last line of out as a perfResult.
func lastJSON(t *testing.T, out string) perfResult {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r perfResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("final line %q: %v", lines[len(lines)-1], err)
	}
	return r
}

// TestPerfProduceConsume: perf produce sends the records asked for, with a
// latency for each acknowledgement; perf consume then reads them all back.
func TestPerfProduceConsume(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		for _, c := range []struct {
			acks, compression, payload string
			size                       int
		}{
			{"1", "none", "text", 100},
			{"all", "lz4", "random", 100},
			{"1", "none", "text", 0}, // empty values, as kafka-producer-perf-test --record-size 0
		} {
			topic := fmt.Sprintf("perf-%s-%s-%d", c.acks, c.compression, c.size)
			r := mustRun(t, nil, "perf", "produce", topic, "-b", addr, "--partitions", "3", "--records", "3000",
				"--record-size", strconv.Itoa(c.size), "--acks", c.acks, "--compression", c.compression, "--payload", c.payload,
				"--batch-max-bytes", "16384")
			res := lastJSON(t, r.stdout)
			if res.Tool != "produce" || res.Records != 3000 || res.Bytes != 3000*int64(c.size) || res.Errors != 0 {
				t.Fatalf("produce %+v: want 3000 records of %d bytes", res, c.size)
			}
			if l := res.Latency; l == nil || l.Count != 3000 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.P50 <= 0 {
				t.Fatalf("produce latency %+v: want 3000 ordered samples", res.Latency)
			}
			if !strings.Contains(r.stderr, "samsa perf produce: done: 3000 records") {
				t.Errorf("stderr %q: no summary", r.stderr)
			}
			r = mustRun(t, nil, "perf", "consume", topic, "-b", addr, "-q")
			res = lastJSON(t, r.stdout)
			if res.Tool != "consume" || res.Records != 3000 || res.Bytes != 3000*int64(c.size) || res.FirstRecordMs == nil {
				t.Fatalf("consume %+v: want the 3000 records back", res)
			}
			if r.stderr != "" {
				t.Errorf("consume -q wrote %q to stderr", r.stderr)
			}
		}
	})
}

// TestPerfRoundRobin: --partitioner round-robin gives every partition its
// share of the records (the many-partitions benchmark: each of 10,000
// partitions at a low rate); the sticky default fills one partition's
// batch at a time.
func TestPerfRoundRobin(t *testing.T) {
	addr := startSamsa(t, "")
	mustRun(t, nil, "perf", "produce", "rr", "-b", addr, "--partitions", "8", "--records", "80", "--partitioner", "round-robin", "-q")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "rr")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		n++
		if o.Err != nil || o.Offset != 10 {
			t.Errorf("partition %d: end offset %d (%v), want 10", o.Partition, o.Offset, o.Err)
		}
	})
	if n != 8 {
		t.Fatalf("%d partitions listed, want 8", n)
	}
}

// TestPerfConsumeCount: --records beyond what the topic holds fails after
// --idle with what was read.
func TestPerfConsumeCount(t *testing.T) {
	addr := startSamsa(t, "")
	mustRun(t, nil, "perf", "produce", "few", "-b", addr, "--partitions", "1", "--records", "10", "-q")
	r := run(t, nil, "perf", "consume", "few", "-b", addr, "--records", "20", "--idle", "500ms", "-q")
	if r.err == nil || !strings.Contains(r.err.Error(), "read 10 of 20 records") {
		t.Fatalf("err %v: want read 10 of 20 records", r.err)
	}
	if res := lastJSON(t, r.stdout); res.Records != 10 {
		t.Fatalf("consume %+v: want 10 records", res)
	}
}

// TestPerfE2E: every record produced on the schedule arrives at the
// consumer and gets an end-to-end latency no smaller than its publish
// latency's minimum.
func TestPerfE2E(t *testing.T) {
	addr := startSamsa(t, "")
	r := mustRun(t, nil, "perf", "e2e", "lat", "-b", addr, "--partitions", "2", "--rate", "1000",
		"--duration", "1s", "--record-size", "64", "--acks", "1", "--report-interval", "200ms")
	res := lastJSON(t, r.stdout)
	if res.Tool != "e2e" || res.Records != 1000 || res.Errors != 0 || res.TargetRate != 1000 {
		t.Fatalf("e2e %+v: want 1000 records at 1000/s", res)
	}
	if res.Latency == nil || res.Latency.Count != 1000 || res.PublishLatency == nil || res.PublishLatency.Count != 1000 {
		t.Fatalf("e2e latencies %+v %+v: want 1000 samples each", res.Latency, res.PublishLatency)
	}
	if res.MaxSendDelayMs == nil {
		t.Fatalf("e2e %+v: no max_send_delay_ms", res)
	}
	if !strings.Contains(r.stderr, "samsa perf e2e: ") {
		t.Errorf("stderr %q: no progress line", r.stderr)
	}
}

// TestPerfFlags: bad settings fail before anything is sent, naming the
// flag.
func TestPerfFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--acks", "2"}, "--acks"},
		{[]string{"produce", "--record-size", "-1"}, "--record-size"},
		{[]string{"e2e", "--record-size", "4"}, "--record-size"},
		{[]string{"produce", "--payload", "zeros"}, "--payload"},
		{[]string{"e2e", "--partitioner", "hash"}, "--partitioner"},
		{[]string{"produce", "--records", "0"}, "--records"},
		{[]string{"e2e", "--rate", "0"}, "--rate"},
		{[]string{"e2e", "--rate", "-3"}, "--rate"},
		{[]string{"e2e", "--rate", "20000000"}, "--rate"},
		{[]string{"e2e", "--warmup", "-1s"}, "--warmup"},
		{[]string{"e2e", "--duration", "0s"}, "--duration"},
		{[]string{"produce", "--acks", "1", "--max-in-flight", "0"}, "--max-in-flight"},
		{[]string{"produce", "--batch-max-bytes", "-1"}, "--batch-max-bytes"},
		{[]string{"e2e", "--batch-max-bytes", "100"}, "--batch-max-bytes"},
		{[]string{"produce", "--partitions", "1", "--topic-config", "foo"}, "--topic-config"},
		{[]string{"produce", "--topic-config", "flush.messages=1"}, "--topic-config needs --partitions"},
		{[]string{"produce", "--partitions", "-1"}, "--partitions"},
		{[]string{"produce", "--throughput", "0"}, "--throughput"},
		{[]string{"produce", "--throughput", "-5"}, "--throughput"},
		{[]string{"produce", "--delivery-timeout", "10ms"}, "--delivery-timeout"},
		{[]string{"consume", "--fetch-max-bytes", "0"}, "--fetch-max-bytes"},
		{[]string{"consume", "--partition-max-bytes", "-1"}, "--partition-max-bytes"},
		{[]string{"consume", "--idle", "0s"}, "--idle"},
		{[]string{"consume", "--idle", "-1s"}, "--idle"},
		{[]string{"consume", "--records", "-1"}, "--records"},
	} {
		args := append([]string{"perf", c.args[0], "t", "-b", "127.0.0.1:1"}, c.args[1:]...)
		if r := run(t, nil, args...); r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %s", args, r.err, c.want)
		}
	}
}

// TestPerfTopicErrors: perf consume refuses an empty topic; a topic config
// the broker refuses shows the broker's message; --topic-config on a topic
// that exists warns that it is ignored.
func TestPerfTopicErrors(t *testing.T) {
	addr := startSamsa(t, "")
	mustRun(t, nil, "topic", "create", "empty", "-b", addr, "-p", "2")
	r := run(t, nil, "perf", "consume", "empty", "-b", addr, "-q")
	if r.err == nil || !strings.Contains(r.err.Error(), "holds no records") {
		t.Errorf("consume of an empty topic: %v, want holds no records", r.err)
	}
	r = run(t, nil, "perf", "produce", "badcfg", "-b", addr, "--partitions", "1", "--records", "1", "-q",
		"--topic-config", "no.such.config=1")
	if r.err == nil || !strings.Contains(r.err.Error(), "INVALID_CONFIG") || !strings.Contains(r.err.Error(), "no.such.config") {
		t.Errorf("unknown topic config: %v, want INVALID_CONFIG naming it", r.err)
	}
	r = mustRun(t, nil, "perf", "produce", "empty", "-b", addr, "--partitions", "1", "--records", "1", "-q",
		"--topic-config", "flush.messages=1")
	if !strings.Contains(r.stderr, "warning: topic empty exists: --topic-config ignored") {
		t.Errorf("stderr %q: want a warning that --topic-config was ignored", r.stderr)
	}
}

// TestPerfConsumeTransactional: perf consume reads a topic holding
// transaction markers to its end offsets and counts records, not offsets.
func TestPerfConsumeTransactional(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		mustRun(t, nil, "topic", "create", "txn", "-b", addr, "-p", "2")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("perf-test"), kgo.DefaultProduceTopic("txn"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for p := range int32(2) {
				for range 50 {
					r := kgo.SliceRecord(make([]byte, 10))
					r.Partition = p
					cl.Produce(ctx, r, nil)
				}
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, commit); err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
		}
		r := mustRun(t, nil, "perf", "consume", "txn", "-b", addr, "-q", "--idle", "5s")
		if res := lastJSON(t, r.stdout); res.Records != 300 || res.Bytes != 3000 {
			// Seen once at load 25 (250 records) and not again in 80
			// runs: say what the partitions hold now.
			ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "txn")
			t.Fatalf("consume %+v: want the 300 records (aborted ones included) without the markers; end offsets now %v (%v)", res, ends.Offsets(), err)
		}
	})
}

// TestPerfTopicConfig: --topic-config sets configs of the topic that
// --partitions creates.
func TestPerfTopicConfig(t *testing.T) {
	addr := startSamsa(t, "")
	out := mustRun(t, nil, "perf", "produce", "zt", "-b", addr, "--partitions", "1", "--records", "10", "-q",
		"--topic-config", "compression.type=zstd", "--throughput", "1000")
	settings, _ := lastJSON(t, out.stdout).Settings.(map[string]any)
	if settings["partitions"] != 1.0 || settings["throughput"] != 1000.0 || settings["max_in_flight"] != 5.0 ||
		fmt.Sprint(settings["topic_configs"]) != "[compression.type=zstd]" {
		t.Errorf("settings %v: want partitions, throughput, max_in_flight and topic_configs", settings)
	}
	r := mustRun(t, nil, "topic", "describe", "zt", "-b", addr)
	if !strings.Contains(r.stdout, "compression.type") || !strings.Contains(r.stdout, "zstd") {
		t.Fatalf("topic describe:\n%s\nwant compression.type zstd", r.stdout)
	}
}

// TestPerfMaxInFlight: without idempotence the perf producer keeps up to
// --max-in-flight produce requests in flight (5 by default, as the Java
// producer), where kgo's own default is 1; acks=all leaves kgo's
// idempotent producer as it is.
func TestPerfMaxInFlight(t *testing.T) {
	for _, c := range []struct {
		acks     string
		inFlight int
		want     int
	}{{"1", 5, 5}, {"0", 3, 3}, {"all", 5, 1}} {
		f := perfProducerFlags{recordSize: 1024, acks: c.acks, compression: "none", batchMaxBytes: 1 << 20,
			bufferedBytes: 64 << 20, maxInFlight: c.inFlight, payload: "text"}
		opts, err := f.options()
		if err != nil {
			t.Fatalf("acks=%s: %v", c.acks, err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
		if err != nil {
			t.Fatalf("acks=%s: %v", c.acks, err)
		}
		got := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker)
		cl.Close()
		if got != c.want {
			t.Errorf("acks=%s --max-in-flight %d: kgo keeps %v in flight, want %d", c.acks, c.inFlight, got, c.want)
		}
	}
}

// TestWaitForLeaders: the wait ends once a created topic has its leaders,
// and gives up without an error at its limit for a topic that has none.
func TestWaitForLeaders(t *testing.T) {
	addr := startSamsa(t, "")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := ensureTopic(ctx, cl, io.Discard, "ready", 4, -1, nil); err != nil {
		t.Fatal(err)
	}
	if err := waitForLeaders(ctx, cl, "ready", time.Minute); err != nil {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "ready")
	if err != nil || !topicReady(md.Topics["ready"]) || len(md.Topics["ready"].Partitions) != 4 {
		t.Fatalf("after the wait: %+v, %v", md.Topics["ready"], err)
	}
	start := time.Now()
	if err := waitForLeaders(ctx, cl, "missing", 100*time.Millisecond); err != nil {
		t.Fatalf("missing topic: %v, want nil at the limit", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up on a missing topic after %v, before the limit", d)
	}
}

// startSamsaAt starts a Samsa node listening on a fixed free port, so that
// a test can stop it under a running client; the node is closed by the
// caller (and by the test's end at the latest).
func startSamsaAt(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(),
		Properties: map[string]string{"listeners": "PLAINTEXT://" + addr + ",CONTROLLER://127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := n.Close(); err != nil {
				t.Errorf("closing the samsa node: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return addr, stop
}

// waitAppended waits until topic holds at least n records.
func waitAppended(ctx context.Context, t *testing.T, addr, topic string, n int64) {
	t.Helper()
	pollAdmin(ctx, t, addr, fmt.Sprintf("topic %s holding %d records", topic, n), func(adm *kadm.Client) bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return err == nil && sum >= n
	})
}

// TestPerfBrokerDies: with the idempotent producer (--acks all), which kgo
// never times out by itself, perf produce and perf e2e fail once records
// are outstanding and none was acknowledged for --delivery-timeout, and
// still print what was done.
func TestPerfBrokerDies(t *testing.T) {
	for _, args := range [][]string{
		{"perf", "produce", "dies", "--records", "10000000", "--throughput", "2000"},
		{"perf", "e2e", "dies", "--rate", "2000", "--duration", "10m"},
	} {
		t.Run(args[1], func(t *testing.T) {
			addr, stop := startSamsaAt(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan result, 1)
			go func() {
				done <- runCtx(ctx, nil, append(args, "-b", addr, "--partitions", "2", "--acks", "all",
					"--record-size", "100", "--delivery-timeout", "2s", "-q")...)
			}()
			waitAppended(ctx, t, addr, "dies", 200)
			stop()
			r := <-done
			if r.err == nil || !errors.Is(r.err, errNoProgress) || !strings.Contains(r.err.Error(), "--delivery-timeout") {
				t.Fatalf("err %v: want no acknowledgement for --delivery-timeout", r.err)
			}
			if ctx.Err() != nil {
				t.Fatalf("stopped by the test's limit, not the watchdog: %v", r.err)
			}
			if res := lastJSON(t, r.stdout); res.Records == 0 {
				t.Errorf("final line %+v: want the records acknowledged before the broker died", res)
			}
		})
	}
}

// TestPerfInterrupt: perf produce and perf e2e (behind its schedule at a
// rate it cannot keep) stop promptly when interrupted, fail, and print
// what was done.
func TestPerfInterrupt(t *testing.T) {
	addr := startSamsa(t, "")
	for _, args := range [][]string{
		{"perf", "produce", "intr-produce", "--records", "100000000", "--throughput", "2000"},
		{"perf", "e2e", "intr-e2e", "--rate", "10000000", "--duration", "10m"},
	} {
		t.Run(args[1], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan result, 1)
			go func() {
				done <- runCtx(ctx, nil, append(args, "-b", addr, "--partitions", "1", "--record-size", "100", "-q")...)
			}()
			limit, stopLimit := context.WithTimeout(context.Background(), time.Minute)
			defer stopLimit()
			waitAppended(limit, t, addr, args[2], 100)
			cancel()
			select {
			case r := <-done:
				if r.err == nil || !strings.Contains(r.err.Error(), "interrupted") {
					t.Fatalf("err %v: want interrupted", r.err)
				}
				if res := lastJSON(t, r.stdout); res.Tool != args[1] {
					t.Errorf("final line %+v", res)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("still running 20s after the interrupt")
			}
		})
	}
}

// TestPerfQueue: perf queue consumes a topic with N consumers of a share
// group, acknowledging in batches and one by one, and of a consumer group
// (the baseline): each run counts every record once.
func TestPerfQueue(t *testing.T) {
	addr := startSamsa(t, "")
	mustRun(t, nil, "perf", "produce", "jobs", "-b", addr, "--partitions", "2", "--records", "2000", "--record-size", "10", "-q")
	for _, c := range []struct {
		groupType, ack, consumers string
		records                   int64 // 0: the whole topic
	}{
		{"share", "batch", "1", 0},
		{"share", "batch", "3", 0},
		{"share", "one", "2", 100}, // a round trip per record
		{"consumer", "batch", "2", 0},
	} {
		group := "queue-" + c.groupType + "-" + c.ack + "-" + c.consumers
		r := mustRun(t, nil, "perf", "queue", "jobs", "-b", addr, "--group-type", c.groupType, "--ack", c.ack, "--group", group,
			"--consumers", c.consumers, "--records", strconv.FormatInt(c.records, 10), "--report-interval", "100ms")
		res := lastJSON(t, r.stdout)
		want := cmp.Or(c.records, 2000)
		s, _ := res.Settings.(map[string]any)
		// Consumers acknowledging when the target is reached may count
		// a few more (one each, or a poll's in batches).
		if res.Tool != "queue" || res.Records < want || c.records == 0 && res.Records != want || res.Bytes != res.Records*10 ||
			res.RecordsPerSec <= 0 || s["group_type"] != c.groupType {
			t.Fatalf("queue %+v: %+v, want %d records of 10 bytes", c, res, want)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("samsa perf queue: done: %d records", res.Records)) {
			t.Errorf("stderr %q: no summary", r.stderr)
		}
		if c.groupType == "consumer" {
			// Every partition's offsets committed to its end (the
			// last poll of each consumer was left uncommitted).
			checkCommittedToEnd(t, addr, group, "jobs")
		}
	}
	// --idle counts from the start, so it covers joining the share group
	// and the first fetch: 1 s ran out before the first acknowledgement
	// at load 25 on 2 cores ("acknowledged 0 of 3000").
	r := run(t, nil, "perf", "queue", "jobs", "-b", addr, "--records", "3000", "--idle", "5s", "-q")
	if r.err == nil || !strings.Contains(r.err.Error(), "acknowledged 2000 of 3000 records") {
		t.Fatalf("err %v: want acknowledged 2000 of 3000 records", r.err)
	}
	if r := run(t, nil, "perf", "queue", "jobs", "-b", addr, "--ack", "some"); r.err == nil || !strings.Contains(r.err.Error(), "--ack") {
		t.Fatalf("--ack some: %v", r.err)
	}
}

// checkCommittedToEnd fails t unless group committed every partition of
// topic that holds records at its end offset.
func checkCommittedToEnd(t *testing.T, addr, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := committed.Lookup(topic, e.Partition); (ok || e.Offset > 0) && o.At != e.Offset {
			t.Errorf("group %s: partition %d committed at %d (found: %v), want its end offset %d", group, e.Partition, o.At, ok, e.Offset)
		}
	})
}
