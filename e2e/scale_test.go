package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
)

// The scale run's size: TestScale's defaults are the CI-sized run (100
// topics of 100 partitions, 10,000 partitions; with the race detector on
// this shared 2-core machine 5,000 took 13 s and 20,000 55 s, a third of
// it removing the log dir); scripts/scale.sh runs 1,000 x 100.
var (
	scaleTopics     = flag.Int("scale.topics", 100, "TestScale: topics to create")
	scalePartitions = flag.Int("scale.partitions", 100, "TestScale: partitions per topic")
	scaleBatch      = flag.Int("scale.batch", 20, "TestScale: topics per CreateTopics request")
	scaleReport     = flag.String("scale.report", "", "TestScale: file to append the figures to")
	scaleLogs       = flag.String("scale.logs", "", "TestScale: directory to write the server's logs to")
	scaleDir        = flag.String("scale.dir", "", "TestScale: the node's data directory, kept after the run (default: a temporary one); when it holds a kept run, only its restarts are measured")
	scaleProfile    = flag.String("scale.profile", "", "TestScale: give each server process --profile-phases DIR/<first|restart-N>")
	scaleRestarts   = flag.Int("scale.restarts", 1, "TestScale: clean stops and restarts to measure")
)

// saveLogs writes srv's logs to <scale.logs>/<name>.log when asked.
func saveLogs(t *testing.T, srv *proctest.Server, name string) {
	if *scaleLogs == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*scaleLogs, name+".log"), []byte(srv.Logs()), 0o644); err != nil {
		t.Error(err)
	}
}

// TestScale creates topics x partitions on one node through the Admin API
// in requests of scale.batch topics, produces one record to each
// partition and reads every one back, then stops the node cleanly and
// restarts it, and checks that every partition serves again with its
// record. It fails on any error (a fenced broker session shows as
// INVALID_REPLICATION_FACTOR from CreateTopics), a lost record, or 10,000
// or more open descriptors; it reports (without asserting them) the
// times, the server's CPU time and the load average of each phase, the
// open descriptors and the RSS at rest.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale run")
	}
	topics, parts, batch := *scaleTopics, int32(*scalePartitions), *scaleBatch
	total := topics * int(parts)
	dir, reuse := *scaleDir, false
	if dir == "" {
		dir = t.TempDir()
	} else if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		// A directory a run kept: measure its restarts only.
		reuse = true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startScale(t, dir, "first", 10*time.Minute, snapshotOverrides()...)
	first := srv
	t.Cleanup(func() { saveLogs(t, first, "first") })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	report := map[string]string{"partitions": strconv.Itoa(total)}
	var order []string
	put := func(k, v string) {
		report[k] = v
		order = append(order, k)
		t.Logf("%s: %s", k, v)
	}
	// phase reports a phase's wall time since start, the server's CPU time
	// (user+system) since cpu0, and the load average now: on a shared
	// machine the wall time alone says little.
	phase := func(name string, start time.Time, srv *proctest.Server, cpu0 time.Duration) {
		wall := time.Since(start)
		put(name, wall.Round(time.Millisecond).String())
		if cpu, err := srv.CPUTime(); err == nil {
			put(name+"_cpu", (cpu - cpu0).Round(10*time.Millisecond).String())
		}
		put(name+"_load", loadAverage(t))
	}

	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%04d", i)
	}
	adm, admCl := newAdmin(t, srv.Addr)
	if !reuse {
		fill(t, ctx, srv, adm, names, parts, batch, phase, put)
	} else {
		checkServing(t, ctx, adm, names, total)
	}
	fds, rss := procStats(t, srv.Pid())
	put("open_fds", strconv.Itoa(fds))
	put("rss_mib", strconv.Itoa(rss>>20))
	if fds >= 10000 {
		t.Errorf("%d open descriptors, want under 10,000", fds)
	}
	admCl.Close()

	var took time.Duration // the last restart's, to serving
	for n := 1; n <= *scaleRestarts; n++ {
		suffix := ""
		if n > 1 {
			suffix = "_" + strconv.Itoa(n)
		}
		start, cpu0 := time.Now(), cpuTime(t, srv)
		if err := srv.Stop(2 * time.Minute); err != nil {
			t.Fatalf("clean shutdown: %v", err)
		}
		phase("shutdown"+suffix, start, srv, cpu0)

		start = time.Now()
		srv, took = restartServing(t, ctx, dir, "restart-"+strconv.Itoa(n), names, snapshotOverrides()...)
		phase("restart_to_serving"+suffix, start, srv, 0)
		fds, rss = procStats(t, srv.Pid())
		put("open_fds_after_restart"+suffix, strconv.Itoa(fds))
		put("rss_mib_after_restart"+suffix, strconv.Itoa(rss>>20))
	}
	if *scaleCompareSnapshots {
		// Stops srv, restarts without and with snapshots, stops cleanly.
		compareSnapshotRestarts(t, ctx, srv, dir, names, took, put)
	} else if err := srv.Stop(2 * time.Minute); err != nil {
		// A clean stop: a kept directory restarts cleanly.
		t.Errorf("clean shutdown: %v", err)
	}
	if *scaleReport != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "partitions=%d", total)
		for _, k := range order {
			fmt.Fprintf(&b, " %s=%s", k, report[k])
		}
		b.WriteString("\n")
		f, err := os.OpenFile(*scaleReport, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.WriteString(b.String())
	}
}

// fill creates names (parts partitions each) in CreateTopics requests of
// batch topics, produces one record to each partition and reads every one
// back, reporting each phase.
func fill(t *testing.T, ctx context.Context, srv *proctest.Server, adm *kadm.Client, names []string, parts int32, batch int,
	phase func(string, time.Time, *proctest.Server, time.Duration), put func(k, v string)) {
	t.Helper()
	topics, total := len(names), len(names)*int(parts)
	start, cpu0 := time.Now(), cpuTime(t, srv)
	var slowest time.Duration
	for i := 0; i < topics; i += batch {
		reqStart := time.Now()
		rs, err := adm.CreateTopics(ctx, parts, 1, nil, names[i:min(i+batch, topics)]...)
		if err != nil {
			t.Fatalf("CreateTopics of topics %d-%d after %v (load average %s): %v",
				i, min(i+batch, topics)-1, time.Since(reqStart).Round(time.Millisecond), loadAverage(t), err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("create %s: %v %s", r.Topic, r.Err, r.ErrMessage)
			}
		}
		slowest = max(slowest, time.Since(reqStart))
	}
	phase("create", start, srv, cpu0)
	put("create_slowest_request", slowest.Round(time.Millisecond).String())
	// The answer comes before the node has made every log (they are made
	// in the background; a partition answers NOT_LEADER_OR_FOLLOWER, a
	// retriable error, until then): wait until each answers ListOffsets,
	// so that the produce below measures producing, and report the time
	// from the first request until then.
	for {
		ends, err := adm.ListEndOffsets(ctx, names...)
		waiting := total
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					waiting--
				}
			})
		}
		if err == nil && waiting == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions not hosted (%d waiting, %v) when the test's time ran out", waiting, err)
		}
		time.Sleep(200 * time.Millisecond) // poll: the node makes the logs in the background
	}
	phase("create_hosted", start, srv, cpu0)

	start, cpu0 = time.Now(), cpuTime(t, srv)
	prod, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(total+1), kgo.ProducerLinger(10*time.Millisecond), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, name := range names {
		for p := range parts {
			prod.Produce(ctx, &kgo.Record{Topic: name, Partition: p, Value: []byte(fmt.Sprintf("%s/%d", name, p))}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			})
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d records not acknowledged; first error: %v", n, total, firstErr.Load())
	}
	phase("produce", start, srv, cpu0)
	prod.Close()

	start, cpu0 = time.Now(), cpuTime(t, srv)
	consumeEach(t, ctx, srv.Addr, names, parts)
	phase("consume", start, srv, cpu0)

}

// checkServing checks that every partition of names (total in all) serves
// its one record: its end offset is 1.
func checkServing(t *testing.T, ctx context.Context, adm *kadm.Client, names []string, total int) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	serving := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset == 1 {
			serving++
		}
	})
	if serving != total {
		t.Fatalf("%d of %d partitions serve their record", serving, total)
	}
}

// startScale starts the node on dir with overrides (name=value),
// waiting up to timeout for it to serve; with -scale.profile it profiles
// the process's start and stop into <scale.profile>/<name>.
func startScale(t *testing.T, dir, name string, timeout time.Duration, overrides ...string) *proctest.Server {
	t.Helper()
	if *scaleProfile == "" {
		return proctest.StartWithin(t, dir, timeout, overrides...)
	}
	args := []string{"server", "--profile-phases", filepath.Join(*scaleProfile, name),
		"--override", "log.dirs=" + dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "http.listener=",
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	srv, err := proctest.StartProcess(proctest.Binary(t), dir, timeout, args...)
	if srv != nil {
		t.Cleanup(srv.Kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// cpuTime returns the CPU time (user+system) srv's process used so far.
func cpuTime(t *testing.T, srv *proctest.Server) time.Duration {
	t.Helper()
	cpu, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// loadAverage returns the machine's one-minute load average
// (/proc/loadavg), "?" when it cannot be read.
func loadAverage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// restartServing starts the node of dir (a server named name for
// saveLogs and -scale.profile, with overrides) and waits until every
// partition of topics serves its one record; it returns the server and
// the time from the start to then.
func restartServing(t *testing.T, ctx context.Context, dir, name string, topics []string, overrides ...string) (*proctest.Server, time.Duration) {
	t.Helper()
	start := time.Now()
	srv := startScale(t, dir, name, 10*time.Minute, overrides...)
	t.Cleanup(func() { saveLogs(t, srv, name) })
	adm, cl := newAdmin(t, srv.Addr)
	defer cl.Close()
	checkServing(t, ctx, adm, topics, len(topics)*int(*scalePartitions))
	return srv, time.Since(start)
}

func newAdmin(t *testing.T, addr string) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(120000)
	return adm, cl
}

// consumeEach reads every partition of topics from the start until each
// gave its one record, "<topic>/<partition>".
func consumeEach(t *testing.T, ctx context.Context, addr string, topics []string, parts int32) {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := len(topics) * int(parts)
	seen := make(map[string]bool, want)
	for len(seen) < want {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(seen), want, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if v, k := string(r.Value), fmt.Sprintf("%s/%d", r.Topic, r.Partition); v != k {
				t.Fatalf("partition %s holds %q", k, v)
			}
			seen[string(r.Value)] = true
		})
	}
}

// procStats returns the open descriptors and the resident set size in
// bytes of process pid.
func procStats(t *testing.T, pid int) (fds int, rss int) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if kb, err := strconv.Atoi(f[0]); err == nil {
				rss = kb << 10
			}
		}
	}
	return len(ents), rss
}
