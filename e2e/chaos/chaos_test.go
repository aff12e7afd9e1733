package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa/internal/chaos/check"
	"github.com/samsahq/samsa/internal/proctest"
)

var (
	schedules = flag.Int("chaos.schedules", 1, "schedules to run")
	seed      = flag.Uint64("chaos.seed", 1, "seed of the first schedule (schedule i uses seed+i)")
	duration  = flag.Duration("chaos.duration", 15*time.Second, "workload time of each schedule, under faults")
	results   = flag.String("chaos.results", "", "directory for each schedule's history and analysis (default a temporary one)")
)

// TestMain fails the package if a run leaves goroutines behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(proctest.Main(m)) }

const (
	topic      = "chaos"
	partitions = 3
)

// TestChaos runs -chaos.schedules schedules and fails on any anomaly. Its
// last log line is "N schedules, M anomalies".
func TestChaos(t *testing.T) {
	dir := *results
	if dir == "" {
		dir = t.TempDir()
	}
	total := 0
	var table strings.Builder
	table.WriteString("| seed | kill -9 | kill -9 controller | SIGSTOP | isolate | bridge | minority with leader / controller | slow node / cluster | flaky | transfer | reassign | disk full | fsync fails (halted) | power loss | EndTxn lost / delayed (of v5 / v4) | ops | ok | sends fail / unknown | txns fail / unknown | anomalies | kinds |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range *schedules {
		s := *seed + uint64(i)
		out := filepath.Join(dir, fmt.Sprintf("schedule-%03d-seed-%d", i, s))
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		var (
			r      *check.Result
			faults map[string]int
		)
		t.Run(fmt.Sprintf("seed-%d", s), func(t *testing.T) { r, faults = runSchedule(t, s, out) })
		if r == nil {
			t.Fatalf("schedule seed %d did not finish", s)
		}
		n := r.Count()
		total += n
		fmt.Fprintf(&table, "| %d | %d | %d | %d | %d | %d | %d / %d | %d / %d | %d | %d | %d | %d | %d (%d) | %d | %d / %d (%d / %d) | %d | %d | %d / %d | %d / %d | %d | %s |\n", s, faults["kill"], faults["kill-controller"], faults["stop"], faults["isolate"],
			faults["bridge"], faults["minority-leader"], faults["minority-controller"], faults["slow-node"], faults["slow-cluster"], faults["flaky"], faults["transfer"], faults["reassign"],
			faults["disk-full"], faults["fsync-fail"], faults["halted"], faults["power-loss"], faults["endtxn-lost"], faults["endtxn-delayed"], faults["endtxn-v5"], faults["endtxn-v4"], r.Ops, r.OK,
			r.Failed[check.FSend], r.Unknown[check.FSend], r.Failed[check.FTxn], r.Unknown[check.FTxn], n, summary(r))
		t.Logf("schedule seed %d: %d ops (%d ok), %d anomalies %s", s, r.Ops, r.OK, n, summary(r))
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(table.String()), 0o644); err != nil {
		t.Error(err)
	}
	msg := fmt.Sprintf("%d schedules, %d anomalies", *schedules, total)
	fmt.Println(msg)
	if total > 0 {
		t.Errorf("%s (results in %s)", msg, dir)
	}
}

func summary(r *check.Result) string {
	var parts []string
	for _, k := range check.Kinds {
		if f := r.Anomalies[k]; f != nil {
			parts = append(parts, fmt.Sprintf("%s=%d", k, f.Count))
		}
	}
	return strings.Join(parts, " ")
}

// runSchedule starts a cluster, runs the workload under the nemesis of
// seed for -chaos.duration, heals, reads everything and analyzes.
// It returns the analysis and the faults injected by kind.
func runSchedule(t *testing.T, seed uint64, out string) (*check.Result, map[string]int) {
	// Every node runs the faultfs build of the command, so that the
	// nemesis can fill its disk, fail its fsyncs or cut its power.
	faultfs := proctest.BinaryOf(t, faultfsPkg)
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3, Proxied: true, Command: func(n *proctest.Node) []string {
		return []string{faultfs, "-control", controlSocket(n)}
	}, Overrides: []string{
		"replica.lag.time.max.ms=2000",
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=300",
		"default.replication.factor=3",
		"min.insync.replicas=2",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"offsets.topic.replication.factor=3",
	}})
	hf, err := os.Create(filepath.Join(out, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	nf, err := os.Create(filepath.Join(out, "nemesis.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	rec := check.NewRecorder(hf)
	// The servers' logs, also when the schedule fails half-way.
	defer func() {
		for _, n := range c.Nodes {
			os.WriteFile(filepath.Join(out, fmt.Sprintf("node-%d.log", n.ID)), []byte(n.Logs()), 0o644)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), *duration+3*time.Minute)
	defer cancel()
	cf, err := os.Create(filepath.Join(out, "clients.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	clientLog = kgo.BasicLogger(&syncWriter{w: cf}, kgo.LogLevelInfo, nil)
	admCl := newClient(t, c)
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}

	var values atomic.Int64
	wctx, stop := context.WithTimeout(ctx, *duration)
	defer stop()
	var wg sync.WaitGroup
	proc := 0
	for range 2 {
		proc++
		p := proc
		cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProduceRequestTimeout(5*time.Second), kgo.RecordDeliveryTimeout(10*time.Second))
		wg.Go(func() { sender(wctx, rec, p, cl, &values, seed+uint64(p)) })
	}
	if haveRdkafka() {
		proc++
		p := proc
		wg.Go(func() { rdkafkaSend(wctx, t, rec, p, c, &values, seed+uint64(p), out) })
	} else {
		t.Log("no confluent_kafka for /usr/bin/python3: no librdkafka producer")
	}
	// The transactional producers reach the brokers through proxies of
	// their own that lose or delay EndTxn responses (endTxnFaults); one
	// runs transactions v2 (EndTxn v5, KIP-890 part 2, the cluster's
	// default transaction.version 2), one v1 (EndTxn capped at v4).
	txnFaults := newEndTxnFaults(seed)
	txnDial := txnFaults.dialer(t, c)
	for _, v2 := range []bool{true, false} {
		proc++
		tp := proc
		opts := []kgo.Opt{kgo.TransactionalID(fmt.Sprintf("chaos-%d-%d", seed, tp)), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10 * time.Second), kgo.RecordDeliveryTimeout(10 * time.Second), kgo.Dialer(txnDial)}
		if !v2 {
			opts = append(opts, kgo.MaxVersions(transactionsV1()))
		}
		tcl := func() *kgo.Client { return newClient(t, c, opts...) }
		trd := newClient(t, c, kgo.ConsumePartitions(allPartitions(kgo.NewOffset().AtStart())), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		wg.Go(func() { transactor(wctx, rec, tp, tcl, trd, &values, seed+uint64(tp)) })
	}
	for _, rc := range []bool{true, false} {
		proc++
		p := proc
		opts := []kgo.Opt{kgo.ConsumePartitions(allPartitions(kgo.NewOffset().AtStart()))}
		if rc {
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		cl := newClient(t, c, opts...)
		wg.Go(func() { consumer(wctx, rec, p, rc, cl, c) })
	}
	faults := map[string]int{}
	nadm := kadm.NewClient(newClient(t, c))
	wg.Go(func() { nemesis(wctx, t, c, nadm, nf, seed, faults) })
	wg.Wait()
	txnFaults.stop()
	txnFaults.count(faults)

	// Heal: every node running and resumed, then a fresh consumer reads
	// every partition to its high-watermark.
	c.HealAll()
	for _, n := range c.Nodes {
		n.Resume()
		if !n.Running() {
			n.Restart()
		}
	}
	proc++
	final(ctx, t, rec, proc, c)
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	hf.Seek(0, 0)
	ops, err := check.Read(hf)
	if err != nil {
		t.Fatal(err)
	}
	r := check.Analyze(ops)
	a, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "analysis.json"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	return r, faults
}

func allPartitions(o kgo.Offset) map[string]map[int32]kgo.Offset {
	m := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		m[p] = o
	}
	return map[string]map[int32]kgo.Offset{topic: m}
}

// clientLog receives the clients' logs of the running schedule (leader
// changes, truncation detected, retries).
var clientLog kgo.Logger

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  *os.File
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func newClient(t *testing.T, c *proctest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(100 * time.Millisecond), kgo.Dialer(c.Dial)}
	if clientLog != nil {
		base = append(base, kgo.WithLogger(clientLog))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// value is the number a record carries; -1 for one the workload did not
// write.
func value(r *kgo.Record) int64 {
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// outcome classifies a failed produce: certainly not written (a
// non-retriable error the broker answered) or unknown.
func outcome(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) && !ke.Retriable {
		return check.Fail
	}
	return check.Info
}

// sender produces one unique value at a time with an idempotent acks=all
// client.
func sender(ctx context.Context, rec *check.Recorder, proc int, cl *kgo.Client, values *atomic.Int64, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	for ctx.Err() == nil {
		p := rnd.Int32N(partitions)
		v := values.Add(1)
		rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FSend, Mops: []check.Mop{{F: check.FSend, Partition: p, Value: v, Offset: -1}}})
		r, err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: fmt.Append(nil, v)}).First()
		done := check.Op{Type: check.OK, Process: proc, F: check.FSend, Mops: []check.Mop{{F: check.FSend, Partition: p, Value: v, Offset: -1}}}
		if err != nil {
			done.Type, done.Error = outcome(err), err.Error()
		} else {
			done.Mops[0].Offset = r.Offset
		}
		rec.Record(done)
	}
}

// transactor polls what its read_committed consumer rd has (up to
// 100 ms), then sends two values to random partitions in a transaction
// and commits it (or aborts one in five); the polls are the
// transaction's reads, for the G1c analysis.
//
// A client whose producer id failed for good is closed and replaced by a
// new one (newClient), which fences the old producer epoch.
func transactor(ctx context.Context, rec *check.Recorder, proc int, newClient func() *kgo.Client, rd *kgo.Client, values *atomic.Int64, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 2))
	cl := newClient()
	defer func() { cl.Close() }()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := rd.PollFetches(pctx)
		cancel()
		var mops []check.Mop
		fs.EachRecord(func(r *kgo.Record) {
			mops = append(mops, check.Mop{F: check.FPoll, Partition: r.Partition, Value: value(r), Offset: r.Offset})
		})
		for range 2 {
			mops = append(mops, check.Mop{F: check.FSend, Partition: rnd.Int32N(partitions), Value: values.Add(1), Offset: -1})
		}
		abort := rnd.IntN(5) == 0
		rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FTxn, ReadCommitted: true, Mops: slices.Clone(mops)})
		done := check.Op{Type: check.OK, Process: proc, F: check.FTxn, ReadCommitted: true, Mops: mops}
		err := cl.BeginTransaction()
		for i := range mops {
			if err != nil {
				break
			}
			if mops[i].F != check.FSend {
				continue
			}
			var r *kgo.Record
			r, err = cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: mops[i].Partition, Value: fmt.Append(nil, mops[i].Value)}).First()
			if err == nil {
				mops[i].Offset = r.Offset
			}
		}
		ectx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		switch {
		case err == nil && !abort:
			done.CommitTime = rec.Since()
			if err = cl.EndTransaction(ectx, kgo.TryCommit); err != nil {
				done.Type, done.Error = check.Info, err.Error()
			}
		default:
			if err == nil {
				err = errors.New("aborted by the workload")
			}
			done.Type, done.Error = check.Fail, err.Error()
			if aerr := cl.AbortBufferedRecords(ectx); aerr != nil {
				done.Type = check.Info
			} else if aerr := cl.EndTransaction(ectx, kgo.TryAbort); aerr != nil {
				done.Type, done.Error = check.Info, err.Error()+"; abort: "+aerr.Error()
			}
		}
		cancel()
		rec.Record(done)
		if strings.Contains(done.Error, "fatal") || strings.Contains(done.Error, "while already in a transaction") {
			cl.Close()
			cl = newClient()
		}
		if done.Type == check.Info {
			// The producer may be fenced or in an unknown state: its next
			// BeginTransaction fails until it recovers; back off.
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// consumer polls every partition and, every 500 ms, records the
// high-watermarks ListOffsets serves it.
func consumer(ctx context.Context, rec *check.Recorder, proc int, rc bool, cl *kgo.Client, c *proctest.Cluster) {
	adm := kadm.NewClient(cl)
	next := time.Now()
	for ctx.Err() == nil {
		rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FPoll, ReadCommitted: rc})
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		done := check.Op{Type: check.OK, Process: proc, F: check.FPoll, ReadCommitted: rc}
		fs.EachRecord(func(r *kgo.Record) {
			done.Mops = append(done.Mops, check.Mop{F: check.FPoll, Partition: r.Partition, Value: value(r), Offset: r.Offset})
		})
		rec.Record(done)
		if !rc && time.Now().After(next) {
			next = time.Now().Add(500 * time.Millisecond)
			rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FHW})
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ends, err := adm.ListEndOffsets(lctx, topic)
			cancel()
			hw := check.Op{Type: check.OK, Process: proc, F: check.FHW}
			if err != nil {
				hw.Type, hw.Error = check.Info, err.Error()
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					hw.Mops = append(hw.Mops, check.Mop{F: check.FHW, Partition: o.Partition, Value: -1, Offset: o.Offset})
				}
			})
			rec.Record(hw)
		}
	}
}

// final reads every partition from the start up to the high-watermark
// after the cluster healed.
func final(ctx context.Context, t *testing.T, rec *check.Recorder, proc int, c *proctest.Cluster) {
	cl := newClient(t, c, kgo.ConsumePartitions(allPartitions(kgo.NewOffset().AtStart())))
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	deadline := time.Now().Add(60 * time.Second)
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		ends, err = adm.ListEndOffsets(lctx, topic)
		cancel()
		if err == nil && ends.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("final ListEndOffsets: %v %v", err, ends.Error())
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	need := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { need[o.Partition] = o.Offset })
	pos := map[int32]int64{}
	// Done when every partition reached its end, or came within one
	// offset of it (a transaction marker can be the last) and three polls
	// since found nothing.
	for empty := 0; time.Now().Before(deadline); {
		caught, near := true, true
		for p, end := range need {
			caught = caught && pos[p] >= end
			near = near && pos[p] >= end-1
		}
		if caught || near && empty >= 3 {
			return
		}
		rec.Record(check.Op{Type: check.Invoke, Process: proc, F: check.FPoll})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		done := check.Op{Type: check.OK, Process: proc, F: check.FPoll}
		fs.EachRecord(func(r *kgo.Record) {
			done.Mops = append(done.Mops, check.Mop{F: check.FPoll, Partition: r.Partition, Value: value(r), Offset: r.Offset})
			pos[r.Partition] = r.Offset + 1
		})
		if len(done.Mops) == 0 {
			empty++
		} else {
			empty = 0
		}
		rec.Record(done)
	}
	t.Logf("final read stopped at %v of %v", pos, need)
}

// nemesis injects one fault every 2-5 s until ctx ends: SIGKILL of a
// random node or of the active controller with a restart 1-4 s later,
// SIGSTOP of a random node for 1-5 s (past replica.lag.time.max.ms and
// broker.session.timeout.ms when long), a cut of every link between a
// random node and the others for 1-6 s (the proxies), a bridge (two nodes
// cut from each other, the third talking to both) or a minority of the
// leader of a partition or of the active controller for 1-6 s, slow links
// (50-500 ms each way, jitter, a byte rate cap) of one node or of every
// node for 2-6 s, flaky links of one node closing connections at random
// for 2-5 s, a leadership transfer of a random partition (its replicas
// reordered, then a preferred leader election), a reassignment that
// removes one of its replicas and adds it back (the replica copies the
// log again), or a disk fault (full, fsync failing, power loss) of a
// random node. Faults do not overlap.
//
// faults counts the faults by kind (kill, kill-controller, stop, isolate,
// bridge, minority-leader, minority-controller, slow-node, slow-cluster,
// flaky, transfer, reassign, disk-full, fsync-fail, halted, power-loss);
// it is the caller's once ctx ended and nemesis returned.
func nemesis(ctx context.Context, t *testing.T, c *proctest.Cluster, adm *kadm.Client, log *os.File, seed uint64, faults map[string]int) {
	rnd := rand.New(rand.NewPCG(seed, 3))
	start := time.Now()
	note := func(format string, args ...any) {
		fmt.Fprintf(log, "%8.3fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rnd.IntN(hi-lo)) * time.Millisecond }
	// restart starts node n again if its process ended (it halted, or a
	// fault ended it); it reports false when that failed.
	restart := func(n *proctest.Node) bool {
		if n.Running() {
			return true
		}
		code, _ := n.Wait(0)
		note("node %d exited with status %d: restart", n.ID, code)
		if err := n.TryRestart(); err != nil {
			note("restart of node %d failed: %v", n.ID, err)
			t.Errorf("nemesis: restarting node %d: %v", n.ID, err)
			return false
		}
		note("restarted node %d", n.ID)
		return true
	}
	for wait(ms(2000, 5000)) {
		for _, n := range c.Nodes {
			// Only the faults below end a process, and each restarts
			// it: a node that exited on its own is worth a look.
			if !n.Running() {
				faults["exited"]++
				note("node %d is not running (see its log)", n.ID)
				if !restart(n) {
					return
				}
			}
		}
		n := c.Nodes[rnd.IntN(len(c.Nodes))]
		switch k := rnd.IntN(13); k {
		case 0, 1:
			what, kind := "node", "kill"
			if k == 1 {
				if id, err := activeController(c); err == nil {
					n, what, kind = c.Node(id), "active controller", "kill-controller"
				}
			}
			faults[kind]++
			d := ms(1000, 4000)
			note("kill -9 %s %d, restart after %v", what, n.ID, d)
			n.Kill()
			wait(d)
			if err := n.TryRestart(); err != nil {
				note("restart of node %d failed: %v", n.ID, err)
				t.Errorf("nemesis: restarting node %d: %v", n.ID, err)
				return
			}
			note("restarted node %d", n.ID)
		case 2:
			d := ms(1000, 5000)
			faults["stop"]++
			note("SIGSTOP node %d for %v", n.ID, d)
			n.Pause()
			wait(d)
			n.Resume()
			note("SIGCONT node %d", n.ID)
		case 3:
			// The proxies cut the node from the other nodes (raft,
			// heartbeats, replication to and from it) but not from the
			// clients, which dial around them: a leader that lost the
			// quorum goes on answering clients.
			d := ms(1000, 6000)
			faults["isolate"]++
			note("isolate node %d from the other nodes for %v", n.ID, d)
			c.Isolate(n.ID)
			wait(d)
			c.Heal(n.ID)
			note("heal node %d", n.ID)
		case 4:
			// Leadership transfer: the partition's replicas reordered so
			// that another node is preferred, then a preferred leader
			// election (kafka-reassign-partitions then
			// kafka-leader-election --election-type PREFERRED).
			p := int32(rnd.IntN(partitions))
			faults["transfer"]++
			replicas, err := assignment(ctx, adm, p)
			if err != nil {
				note("transfer of partition %d: describe: %v", p, err)
				continue
			}
			i := 1 + rnd.IntN(len(replicas)-1)
			replicas[0], replicas[i] = replicas[i], replicas[0]
			note("transfer partition %d to node %d: reassign to %v, elect preferred", p, replicas[0], replicas)
			note("  %s", reassign(ctx, adm, p, replicas, 10*time.Second))
			res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {p: {}}})
			if err == nil {
				for _, rs := range res {
					for _, r := range rs {
						err = r.Err
					}
				}
			}
			note("  elect preferred leader of partition %d: %v", p, err)
		case 5:
			// Reassignment moving data: a replica removed, then added
			// back (it copies the log from its start again) at a random
			// place in the list.
			p := int32(rnd.IntN(partitions))
			faults["reassign"]++
			replicas, err := assignment(ctx, adm, p)
			if err != nil || len(replicas) < 3 {
				note("reassign partition %d: replicas %v: %v", p, replicas, err)
				continue
			}
			i := rnd.IntN(len(replicas))
			gone := replicas[i]
			fewer := append(append([]int32(nil), replicas[:i]...), replicas[i+1:]...)
			note("reassign partition %d from %v to %v", p, replicas, fewer)
			note("  %s", reassign(ctx, adm, p, fewer, 10*time.Second))
			wait(ms(500, 3000))
			j := rnd.IntN(len(fewer) + 1)
			back := append(append(append([]int32(nil), fewer[:j]...), gone), fewer[j:]...)
			note("reassign partition %d back to %v", p, back)
			note("  %s", reassign(ctx, adm, p, back, 20*time.Second))
		case 6:
			// A full disk: every write of the node fails with ENOSPC
			// (the last one short) until space returns. Samsa refuses
			// the writes and goes on (docs/reliability.md); a node that
			// halts anyway is restarted once space is back.
			d := ms(1000, 5000)
			faults["disk-full"]++
			note("disk of node %d full for %v", n.ID, d)
			if _, err := faultCommand(controlSocket(n), "full"); err != nil {
				note("  %v", err)
				continue
			}
			wait(d)
			answer, err := faultCommand(controlSocket(n), "free")
			note("disk of node %d has space again: %s %v", n.ID, answer, err)
			if !restart(n) {
				return
			}
		case 7:
			// fsync fails from now on: the first fsync that fails takes
			// the node's only log dir offline, and the node halts
			// (KIP-858, Kafka's LogDirFailureChannel). It must not
			// acknowledge what it could not make durable.
			faults["fsync-fail"]++
			note("fsync fails on node %d", n.ID)
			if _, err := faultCommand(controlSocket(n), "fsync-fail"); err != nil {
				note("  %v", err)
				continue
			}
			start := time.Now()
			if code, err := n.Wait(10 * time.Second); err == nil {
				faults["halted"]++
				note("node %d halted after %v with status %d", n.ID, time.Since(start).Round(time.Millisecond), code)
				if code != 1 {
					t.Errorf("nemesis: node %d exited with status %d after an fsync failure, want 1", n.ID, code)
				}
			} else {
				answer, err := faultCommand(controlSocket(n), "fsync-ok")
				note("node %d still running after 10 s: fsync works again: %s %v", n.ID, answer, err)
				if answer != "ok failed=0" {
					t.Errorf("nemesis: node %d met a failed fsync (%s) and did not halt", n.ID, answer)
				}
			}
			wait(ms(1000, 4000))
			if !restart(n) {
				return
			}
		case 8:
			// Power loss: the node's files are left as of their last
			// fsync (half of the time with a torn writeback of the
			// rest), the process dies, and it restarts 1-4 s later.
			// With the default flush it loses its recent records; the
			// other replicas hold every acknowledged one.
			torn := uint64(0)
			if rnd.IntN(2) == 0 {
				torn = rnd.Uint64() | 1
			}
			faults["power-loss"]++
			note("power loss of node %d (torn writeback seed %d; 0: every unsynced write lost)", n.ID, torn)
			if _, err := faultCommand(controlSocket(n), fmt.Sprintf("crash %d", torn)); err != nil {
				note("  %v", err)
			}
			if _, err := n.Wait(10 * time.Second); err != nil {
				note("  %v: kill -9", err)
				n.Kill()
			}
			wait(ms(1000, 4000))
			if !restart(n) {
				return
			}
		case 9:
			// Bridge (Jepsen): the two other nodes cannot talk to each
			// other, n talks to both.
			var a, b int32
			for _, o := range c.Nodes {
				if o != n {
					if a == 0 {
						a = o.ID
					} else {
						b = o.ID
					}
				}
			}
			d := ms(1000, 6000)
			faults["bridge"]++
			note("bridge through node %d: nodes %d and %d cut from each other for %v", n.ID, a, b, d)
			c.CutLink(a, b, true)
			wait(d)
			c.CutLink(a, b, false)
			note("heal the link of nodes %d and %d", a, b)
		case 10:
			// Majority and minority, the minority holding the leader of
			// a partition or the active controller: every link between
			// it and the others cut (as a follower too), clients still
			// reach it.
			kind, what := "minority-leader", ""
			if rnd.IntN(2) == 0 {
				p := int32(rnd.IntN(partitions))
				if id, err := leader(ctx, adm, p); err == nil && id > 0 {
					n, what = c.Node(id), fmt.Sprintf("leader of partition %d", p)
				}
			} else if id, err := activeController(c); err == nil {
				n, kind, what = c.Node(id), "minority-controller", "active controller"
			}
			if what == "" {
				what = "node (no leader known)"
			}
			d := ms(1000, 6000)
			faults[kind]++
			note("minority of node %d (%s) for %v", n.ID, what, d)
			c.Partition(n.ID)
			wait(d)
			for _, o := range c.Nodes {
				if o != n {
					c.CutLink(n.ID, o.ID, false)
				}
			}
			note("heal the minority of node %d", n.ID)
		case 11:
			// Slow links: 50-500 ms each way with up to as much jitter,
			// half of the time capped at 256 KiB/s-2 MiB/s, on the links
			// of one node or of the whole cluster.
			s := proctest.Slowness{Latency: ms(50, 500)}
			s.Jitter = time.Duration(rnd.Int64N(int64(s.Latency)))
			if rnd.IntN(2) == 0 {
				s.BytesPerSecond = (256 + rnd.IntN(1792)) << 10
			}
			ids, kind, what := []int32{n.ID}, "slow-node", fmt.Sprintf("node %d", n.ID)
			if rnd.IntN(3) == 0 {
				ids, kind, what = c.Brokers(), "slow-cluster", "every node"
			}
			d := ms(2000, 6000)
			faults[kind]++
			note("slow links of %s for %v: %v latency, %v jitter, %d B/s (0: no cap)", what, d, s.Latency, s.Jitter, s.BytesPerSecond)
			c.Slow(s, ids...)
			wait(d)
			c.Slow(proctest.Slowness{}, ids...)
			note("links of %s fast again", what)
		case 12:
			// A flaky link: the node's links close connections at random
			// (each frame or chunk with probability 2-20%).
			prob := float64(2+rnd.IntN(19)) / 100
			d := ms(2000, 5000)
			faults["flaky"]++
			note("flaky links of node %d for %v: %.0f%% of frames close their connection", n.ID, d, prob*100)
			c.Flaky(prob, n.ID)
			wait(d)
			c.Flaky(0, n.ID)
			note("links of node %d steady again", n.ID)
		}
	}
}

// leader is the leader of partition p of the topic.
func leader(ctx context.Context, adm *kadm.Client, p int32) (int32, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(rctx, topic)
	if err != nil {
		return -1, err
	}
	pd, ok := tds[topic].Partitions[p]
	if !ok || pd.Err != nil {
		return -1, fmt.Errorf("partition %d not described: %v", p, pd.Err)
	}
	return pd.Leader, nil
}

// controlSocket is where node n's faultfs process takes fault commands.
func controlSocket(n *proctest.Node) string { return n.Dir + ".sock" }

// assignment is the replica list of partition p of the topic.
func assignment(ctx context.Context, adm *kadm.Client, p int32) ([]int32, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(rctx, topic)
	if err != nil {
		return nil, err
	}
	pd, ok := tds[topic].Partitions[p]
	if !ok || pd.Err != nil {
		return nil, fmt.Errorf("partition %d not described: %v", p, pd.Err)
	}
	return append([]int32(nil), pd.Replicas...), nil
}

// reassign asks for partition p on replicas and waits up to d for the
// reassignment to complete; it says how that went.
func reassign(ctx context.Context, adm *kadm.Client, p int32, replicas []int32, d time.Duration) string {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, replicas)
	resp, err := adm.AlterPartitionAssignments(rctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Sprintf("reassignment refused: %v", err)
	}
	start := time.Now()
	for {
		ls, err := adm.ListPartitionReassignments(rctx, kadm.TopicsSet{topic: {p: {}}})
		if err == nil && len(ls[topic]) == 0 {
			return fmt.Sprintf("reassignment complete after %v", time.Since(start).Round(time.Millisecond))
		}
		select {
		case <-rctx.Done():
			return fmt.Sprintf("reassignment still in progress after %v (%v)", d, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// activeController asks the running nodes for the metadata quorum's
// leader (proctest.QuorumLeader).
func activeController(c *proctest.Cluster) (int32, error) {
	last := errors.New("no node running")
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		id, err := proctest.QuorumLeader(n.Addr())
		if err == nil && id > 0 {
			return id, nil
		}
		last = err
	}
	return -1, fmt.Errorf("no quorum leader known: %v", last)
}
