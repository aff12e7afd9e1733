// Command bench measures Samsa against franz-go's kfake (the Kafka-protocol
// baseline, and with BlackholeProduce the ceiling of the client itself),
// NATS JetStream with file storage, and the machine's loopback TCP, in one
// run on loopback, and writes docs/BENCHMARKS.md with a table and PNG
// charts.
//
// It lives in its own module so that kfake, nats-server and gonum/plot stay
// out of Samsa's go.mod. Run it from the repository root:
//
//	cd bench && go run . [-quick]
//
// Every broker runs as its own child process, started fresh for each
// workload, so that its CPU time and peak resident memory (VmHWM) are its
// own. Throughput workloads run -reps times (2) with the targets
// interleaved, and each target's best run is reported, so that other work
// on a shared machine weighs on every target alike. The Kafka workloads use one client for every broker: `samsa perf`
// from the binary built from this checkout (franz-go). NATS uses its own Go
// client (async publish, an ordered pull consumer). -quick runs every
// workload with 50,000 records and a 3-second e2e, to check the script.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	sub := map[string]func([]string) error{
		"serve-kfake": serveKfake,
		"serve-nats":  serveNATS,
		"nats-client": natsClient,
	}
	var err error
	if len(os.Args) > 1 && sub[os.Args[1]] != nil {
		err = sub[os.Args[1]](os.Args[2:])
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// settings of one run of the benchmark.
type settings struct {
	quick      bool
	records    int
	recordSize int
	partitions int
	e2eRate    float64
	e2eFor     time.Duration
	e2eWarmup  time.Duration
	// manyPartitions and manyRate: the many-partitions e2e workload
	// (issue 13), records spread round-robin.
	manyPartitions int
	manyRate       float64
	reps           int
	only           string
	repo           string
	out            string
	samsa          string // built binary
	self           string // this program, for its server subcommands
	tmp            string
}

func run() error {
	var s settings
	flag.BoolVar(&s.quick, "quick", false, "50,000 records and a 3 s e2e: a smoke test of the script")
	flag.StringVar(&s.repo, "repo", "..", "the repository root (where cmd/samsa is)")
	flag.StringVar(&s.out, "out", "", "markdown report to write, its charts and results.json beside it in bench/ (default REPO/docs/BENCHMARKS.md; with -quick TMPDIR/samsa-bench-quick/BENCHMARKS.md)")
	flag.StringVar(&s.only, "only", "", "run only this target: samsa, kfake, blackhole, nats or tcp; or replication: Samsa's single node acks=1 and the three-node cluster acks=all; or many: the many-partitions workload on Samsa and kfake")
	flag.IntVar(&s.reps, "reps", 2, "runs of each throughput workload (the best is reported)")
	records := flag.Int("records", 0, "records per throughput workload (default 1,000,000; 50,000 with -quick)")
	flag.Parse()
	s.records, s.recordSize, s.partitions = 1_000_000, 1024, 8
	s.e2eRate, s.e2eFor, s.e2eWarmup = 20000, 30*time.Second, 5*time.Second
	s.manyPartitions, s.manyRate = 10_000, 20000
	if s.quick {
		s.records, s.e2eFor, s.e2eWarmup, s.reps = 50_000, 3*time.Second, time.Second, 1
		s.manyPartitions = 1000
	}
	if *records > 0 {
		s.records = *records
	}
	if s.out == "" {
		s.out = filepath.Join(s.repo, "docs", "BENCHMARKS.md")
		if s.quick {
			// A smoke test must not replace the report and charts of
			// a full run in the checkout.
			s.out = filepath.Join(os.TempDir(), "samsa-bench-quick", "BENCHMARKS.md")
		}
	}
	started := time.Now()
	loadBefore := loadAverage()
	var err error
	if s.tmp, err = os.MkdirTemp("", "samsa-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(s.tmp)
	if s.self, err = os.Executable(); err != nil {
		return err
	}
	s.samsa = filepath.Join(s.tmp, "samsa")
	logf("building samsa")
	build := exec.Command("go", "build", "-o", s.samsa, "./cmd/samsa")
	build.Dir = s.repo
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building samsa: %w", err)
	}

	var rows []row
	add := func(r ...row) {
		for _, x := range r {
			logf("%-16s %-28s %s", x.Target, x.Workload, x.brief())
		}
		rows = append(rows, r...)
	}
	want := func(t string) bool { return s.only == "" || s.only == t }
	if want("tcp") {
		add(loopbackTCP(s))
	}
	// Throughput runs are repeated with the targets interleaved, so that
	// other work on the machine falls on all of them alike; the report
	// keeps each one's best run.
	kafka := []string{"samsa", "kfake", "blackhole"}
	for rep := 0; rep < s.reps; rep++ {
		for i, w := range produceWorkloads {
			for j := range kafka {
				t := kafka[(i+j+rep)%len(kafka)]
				if want(t) {
					add(kafkaProduce(s, t, w.acks, w.compression, i == 0 && t != "blackhole")...)
				}
			}
		}
		if want("nats") {
			add(natsPublish(s)...)
		}
		if want("samsa") {
			// The cost of compression.type: the broker recompresses
			// what the producer sent uncompressed.
			add(kafkaProduce(s, "samsa", "1", "none", false, "--topic-config", "compression.type=lz4")...)
		}
		if s.only == "replication" {
			// The baseline of the cluster's ratio alone.
			add(kafkaProduce(s, "samsa", "1", "none", false)...)
		}
		if want("samsa") || s.only == "replication" {
			// Replication: three nodes, acks=all, beside the single
			// node's acks=1 above. -quick runs only the layout that
			// also measures the followers' CPU.
			add(clusterProduce(s, true))
			if !s.quick {
				add(clusterProduce(s, false))
			}
		}
	}
	for _, t := range kafka[:2] {
		if want(t) {
			add(kafkaE2E(s, t))
		}
	}
	if want("nats") {
		add(natsE2E(s))
	}
	for _, t := range kafka[:2] {
		if want(t) || s.only == "many" {
			add(kafkaManyPartitions(s, t))
		}
	}
	rows = best(rows)
	rep := report{Settings: s, Rows: rows, Started: started, Took: time.Since(started), Load: [2]string{loadBefore, loadAverage()}}
	if err := rep.write(); err != nil {
		return err
	}
	logf("wrote %s in %s", s.out, time.Since(started).Round(time.Second))
	for _, r := range rows {
		if r.Target == "Samsa" && r.Err != "" {
			return fmt.Errorf("samsa %s failed: %s", r.Workload, r.Err)
		}
	}
	return nil
}

// loadAverage is the first three fields of /proc/loadavg: other work on
// the machine shows in the figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// row is one measured workload on one target.
type row struct {
	Target   string  `json:"target"`
	Workload string  `json:"workload"`
	Records  float64 `json:"records"`
	RecPerS  float64 `json:"records_per_sec"`
	MBPerS   float64 `json:"mb_per_sec"`
	P50      float64 `json:"p50_ms,omitempty"`
	P99      float64 `json:"p99_ms,omitempty"`
	P999     float64 `json:"p99_9_ms,omitempty"`
	Max      float64 `json:"max_ms,omitempty"`
	// SendDelay (e2e) is how late the generator sent its latest record.
	SendDelay float64 `json:"max_send_delay_ms,omitempty"`
	// FollowerCPUPerGB (the cluster workload with one leader) is the
	// follower processes' CPU seconds per GB (10^9 bytes) their logs grew
	// by; ReplicatedMB is those bytes.
	FollowerCPUPerGB float64 `json:"follower_cpu_s_per_gb,omitempty"`
	ReplicatedMB     float64 `json:"replicated_mb,omitempty"`
	// PubP50 and PubP99 (e2e) are the publish latency: from when a
	// record was due to its acknowledgement.
	PubP50 float64 `json:"publish_p50_ms,omitempty"`
	PubP99 float64 `json:"publish_p99_ms,omitempty"`
	Server usage   `json:"server"`
	Client usage   `json:"client"`
	Err    string  `json:"error,omitempty"`
}

func (r row) brief() string {
	if r.Err != "" {
		return "FAILED: " + r.Err
	}
	s := fmt.Sprintf("%10.0f rec/s %8.1f MB/s", r.RecPerS, r.MBPerS)
	if r.P99 > 0 {
		s += fmt.Sprintf("  p50 %.2f p99 %.2f p99.9 %.2f ms", r.P50, r.P99, r.P999)
	}
	s += fmt.Sprintf("  server cpu %.1fs rss %.0f MB", r.Server.CPUSeconds, r.Server.PeakRSSMB)
	if r.FollowerCPUPerGB > 0 {
		s += fmt.Sprintf("  followers %.2f cpu s/GB of %.0f MB", r.FollowerCPUPerGB, r.ReplicatedMB)
	}
	return s
}

// fromResult fills a row from a client's final JSON line.
func fromResult(target, workload string, c *clientRun) row {
	r := row{Target: target, Workload: workload, Client: c.Usage}
	r.Records = num(c.Result, "records")
	r.RecPerS = num(c.Result, "records_per_sec")
	r.MBPerS = num(c.Result, "mb_per_sec")
	r.P50 = num(c.Result, "latency_ms.p50")
	r.P99 = num(c.Result, "latency_ms.p99")
	r.P999 = num(c.Result, "latency_ms.p99_9")
	r.Max = num(c.Result, "latency_ms.max")
	r.SendDelay = num(c.Result, "max_send_delay_ms")
	r.PubP50 = num(c.Result, "publish_latency_ms.p50")
	r.PubP99 = num(c.Result, "publish_latency_ms.p99")
	return r
}

// loopbackTCP measures one TCP stream over 127.0.0.1 with 1 MiB writes
// for 3 seconds (1 in quick mode): the most any broker could move through
// one connection here.
func loopbackTCP(s settings) row {
	r := row{Target: "loopback TCP", Workload: "1 stream, 1 MiB writes"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		r.Err = err.Error()
		return r
	}
	buf := make([]byte, 1<<20)
	d := 3 * time.Second
	if s.quick {
		d = time.Second
	}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			r.Err = err.Error()
			break
		}
	}
	c.Close()
	n := <-got
	secs := time.Since(start).Seconds()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	r.MBPerS = float64(n) / 1e6 / secs
	r.RecPerS = r.MBPerS * 1e6 / float64(s.recordSize)
	r.Records = float64(n) / float64(s.recordSize)
	r.Client.CPUSeconds = tvSeconds(after.Utime) + tvSeconds(after.Stime) - tvSeconds(before.Utime) - tvSeconds(before.Stime)
	return r
}

var produceWorkloads = []struct{ acks, compression string }{
	{"1", "none"}, {"all", "none"}, {"1", "lz4"}, {"all", "lz4"},
}

// kafkaServer starts a fresh Samsa or kfake.
func kafkaServer(s settings, target string) (*server, error) {
	port := freePort()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	switch target {
	case "samsa":
		dir, err := os.MkdirTemp(s.tmp, "data-")
		if err != nil {
			return nil, err
		}
		return startServer(target, addr, dir, s.samsa, "server", "--log-level", "warn",
			"--override", "log.dirs="+dir,
			"--override", fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", addr, freePort()),
			"--override", "http.listener=")
	case "kfake":
		return startServer(target, addr, "", s.self, "serve-kfake", "-port", strconv.Itoa(port))
	default:
		return startServer(target, addr, "", s.self, "serve-kfake", "-port", strconv.Itoa(port), "-blackhole")
	}
}

var targetNames = map[string]string{"samsa": "Samsa", "kfake": "kfake", "blackhole": "kfake blackhole", "nats": "NATS JetStream"}

// kafkaArgs are the client settings every Kafka workload shares.
func kafkaArgs(s settings) []string {
	return []string{"--partitions", strconv.Itoa(s.partitions), "--record-size", strconv.Itoa(s.recordSize),
		"--linger", "5ms", "--batch-max-bytes", strconv.Itoa(1 << 20), "-q"}
}

const clientLimit = 5 * time.Minute

// kafkaProduce runs one produce workload against a fresh server and, when
// consume is set, reads the records back from the same server.
func kafkaProduce(s settings, target, acks, compression string, consume bool, extra ...string) []row {
	name := targetNames[target]
	workload := fmt.Sprintf("produce acks=%s %s", acks, compression)
	if len(extra) > 0 {
		workload += ", topic " + strings.Join(extra[1:], " ")
	}
	srv, err := kafkaServer(s, target)
	if err != nil {
		return []row{{Target: name, Workload: workload, Err: err.Error()}}
	}
	defer srv.stop()
	before := srv.sample()
	c, err := runClient(clientLimit, append([]string{s.samsa, "perf", "produce", "bench", "-b", srv.addr,
		"--records", strconv.Itoa(s.records), "--acks", acks, "--compression", compression}, append(kafkaArgs(s), extra...)...)...)
	if err != nil {
		return []row{{Target: name, Workload: workload, Err: err.Error()}}
	}
	r := fromResult(name, workload, c)
	r.Server = delta(before, srv.sample())
	rows := []row{r}
	if consume {
		before := srv.sample()
		c, err := runClient(clientLimit, s.samsa, "perf", "consume", "bench", "-b", srv.addr, "-q",
			"--fetch-max-bytes", strconv.Itoa(1<<20), "--partition-max-bytes", strconv.Itoa(1<<20))
		if err != nil {
			return append(rows, row{Target: name, Workload: "consume", Err: err.Error()})
		}
		r := fromResult(name, "consume", c)
		r.Server = delta(before, srv.sample())
		rows = append(rows, r)
	}
	return rows
}

// kafkaE2E runs the fixed-rate end-to-end workload against a fresh server.
func kafkaE2E(s settings, target string) row {
	name := targetNames[target]
	workload := fmt.Sprintf("e2e %.0f/s acks=all", s.e2eRate)
	srv, err := kafkaServer(s, target)
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	defer srv.stop()
	before := srv.sample()
	c, err := runClient(clientLimit, append([]string{s.samsa, "perf", "e2e", "e2e", "-b", srv.addr,
		"--rate", fmt.Sprint(s.e2eRate), "--duration", s.e2eFor.String(), "--warmup", s.e2eWarmup.String(), "--acks", "all"}, kafkaArgs(s)...)...)
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	r := fromResult(name, workload, c)
	r.Server = delta(before, srv.sample())
	return r
}

// kafkaManyPartitions runs the many-partitions workload against a fresh
// server: the e2e workload over s.manyPartitions partitions at s.manyRate
// records/s in all, one record to each partition in turn (round-robin),
// so that each partition gets a low rate and each produce request names
// many partitions. The row has both the end-to-end and the publish
// (due to acknowledgement) latency.
func kafkaManyPartitions(s settings, target string) row {
	name := targetNames[target]
	workload := fmt.Sprintf("many partitions: %d, %.0f/s in all, acks=all", s.manyPartitions, s.manyRate)
	srv, err := kafkaServer(s, target)
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	defer srv.stop()
	before := srv.sample()
	c, err := runClient(clientLimit, s.samsa, "perf", "e2e", "many", "-b", srv.addr,
		"--partitions", strconv.Itoa(s.manyPartitions), "--partitioner", "round-robin",
		"--rate", fmt.Sprint(s.manyRate), "--duration", s.e2eFor.String(), "--warmup", s.e2eWarmup.String(), "--acks", "all",
		"--record-size", strconv.Itoa(s.recordSize), "--linger", "5ms", "--batch-max-bytes", strconv.Itoa(1<<20), "-q")
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	r := fromResult(name, workload, c)
	r.Server = delta(before, srv.sample())
	return r
}

// delta is the CPU spent between two samples and the peak memory of the
// later one (the process's peak since it started).
func delta(before, after usage) usage {
	return usage{CPUSeconds: after.CPUSeconds - before.CPUSeconds, PeakRSSMB: after.PeakRSSMB}
}

// natsServer starts a fresh nats-server with JetStream on file storage.
func natsServer(s settings) (*server, error) {
	port := freePort()
	dir, err := os.MkdirTemp(s.tmp, "nats-")
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return startServer("nats", addr, dir, s.self, "serve-nats", "-port", strconv.Itoa(port), "-dir", dir)
}

// natsPublish publishes the records to a fresh server, then reads them
// back.
func natsPublish(s settings) []row {
	name := targetNames["nats"]
	workload := "publish (async, stream ack)"
	srv, err := natsServer(s)
	if err != nil {
		return []row{{Target: name, Workload: workload, Err: err.Error()}}
	}
	defer srv.stop()
	url := "nats://" + srv.addr
	size := strconv.Itoa(s.recordSize)
	before := srv.sample()
	c, err := runClient(clientLimit, s.self, "nats-client", "produce", "-url", url, "-records", strconv.Itoa(s.records), "-record-size", size)
	if err != nil {
		return []row{{Target: name, Workload: workload, Err: err.Error()}}
	}
	r := fromResult(name, workload, c)
	r.Server = delta(before, srv.sample())
	rows := []row{r}
	before = srv.sample()
	c, err = runClient(clientLimit, s.self, "nats-client", "consume", "-url", url, "-records", strconv.Itoa(s.records), "-record-size", size)
	if err != nil {
		return append(rows, row{Target: name, Workload: "consume", Err: err.Error()})
	}
	r = fromResult(name, "consume", c)
	r.Server = delta(before, srv.sample())
	return append(rows, r)
}

// natsE2E runs the fixed-rate end-to-end workload against a fresh server.
func natsE2E(s settings) row {
	name := targetNames["nats"]
	workload := fmt.Sprintf("e2e %.0f/s", s.e2eRate)
	srv, err := natsServer(s)
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	defer srv.stop()
	before := srv.sample()
	c, err := runClient(clientLimit, s.self, "nats-client", "e2e", "-url", "nats://"+srv.addr, "-record-size", strconv.Itoa(s.recordSize),
		"-rate", fmt.Sprint(s.e2eRate), "-duration", s.e2eFor.String(), "-warmup", s.e2eWarmup.String())
	if err != nil {
		return row{Target: name, Workload: workload, Err: err.Error()}
	}
	r := fromResult(name, workload, c)
	r.Server = delta(before, srv.sample())
	return r
}

// best keeps, for each target and workload, the run with the most
// records/s (a failed run only when every run failed), in first-seen
// order.
func best(rows []row) []row {
	type key struct{ t, w string }
	at := map[key]int{}
	var out []row
	for _, r := range rows {
		k := key{r.Target, r.Workload}
		i, ok := at[k]
		switch {
		case !ok:
			at[k] = len(out)
			out = append(out, r)
		case out[i].Err != "" || (r.Err == "" && r.RecPerS > out[i].RecPerS):
			out[i] = r
		}
	}
	return out
}

// writeJSON writes v indented to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
