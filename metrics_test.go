package samsa_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestMetricsPrometheus starts a real Prometheus (Debian's prometheus
// package) that scrapes a 3-node cluster every second and evaluates
// deploy/prometheus/alerts.yaml (with its for: durations cut to one
// second), and checks through Prometheus's HTTP API what an operator
// would see: no under-replicated partitions while all nodes run, the lag
// of a consumer group equal to the lag kadm computes, under-replicated
// partitions and the UnderReplicatedPartitions alert firing once a node
// stops, and both clearing when it is back. It also checks that every
// series of internal/metrics/testdata/strimzi-series.txt marked served is
// in the nodes' /metrics.
func TestMetricsPrometheus(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		testutil.Missing(t, "prometheus not installed (apt-get install prometheus; .ci/run installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{
		Dir:           t.TempDir(),
		HTTPListeners: true,
		Properties: map[string]string{
			"default.replication.factor":   "3",
			"min.insync.replicas":          "2",
			"offsets.topic.num.partitions": "3",
			"broker.session.timeout.ms":    "2000",
			"broker.heartbeat.interval.ms": "200",
			"replica.lag.time.max.ms":      "2000",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cl, adm := clusterClients(t, c)
	const topic = "metrics"
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("value")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A topic of one replica per partition: the group's coordinator
	// hosts at most one of its partitions and asks the other leaders for
	// their high-watermarks.
	const single = "single"
	one := "1"
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"min.insync.replicas": &one}, single); err != nil {
		t.Fatal(err)
	}
	manual, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	recs = recs[:0]
	for i := range 90 {
		recs = append(recs, &kgo.Record{Topic: single, Partition: int32(i % 3), Value: []byte("v")})
	}
	if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A group that consumed part of the topics: commit offsets below the
	// end of each partition.
	ends, err := adm.ListEndOffsets(ctx, topic, single)
	if err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		commit.AddOffset(o.Topic, o.Partition, o.Offset/3, -1)
	})
	if err := adm.CommitAllOffsets(ctx, "behind", commit); err != nil {
		t.Fatal(err)
	}
	lags, err := adm.Lag(ctx, "behind")
	if err != nil {
		t.Fatal(err)
	}
	wantLag := lags["behind"].Lag.TotalByTopic()[topic].Lag
	wantSingle := lags["behind"].Lag.TotalByTopic()[single].Lag
	if wantLag <= 0 || wantSingle <= 0 {
		t.Fatalf("kadm lag %d and %d, want > 0", wantLag, wantSingle)
	}

	t.Run("StrimziSeries", func(t *testing.T) {
		served := map[string]bool{}
		for _, id := range c.Brokers() {
			for name := range scrapeNames(t, c.HTTPAddr(id)) {
				served[name] = true
			}
		}
		for _, s := range strimziSeries(t) {
			if s.served && !served[s.name] {
				t.Errorf("%s (queried by Strimzi's %s) is not in /metrics", s.name, s.source)
			}
		}
	})

	prom := startPrometheus(t, promBin, c)

	prom.waitValue(t, `sum(kafka_controller_kafkacontroller_activecontrollercount)`, func(v float64) bool { return v == 1 })
	prom.waitValue(t, `count(kafka_server_replicamanager_underreplicatedpartitions)`, func(v float64) bool { return v == 3 })
	prom.waitValue(t, `sum(kafka_server_replicamanager_underreplicatedpartitions)`, func(v float64) bool { return v == 0 })
	prom.waitValue(t, `sum(kafka_consumergroup_lag{consumergroup="behind",topic="metrics"})`, func(v float64) bool { return v == float64(wantLag) })
	prom.waitValue(t, `count(kafka_consumergroup_lag{consumergroup="behind",topic="metrics"})`, func(v float64) bool { return v == 3 })
	prom.waitValue(t, `sum(kafka_consumergroup_lag{consumergroup="behind",topic="single"})`, func(v float64) bool { return v == float64(wantSingle) })
	prom.waitValue(t, `count(kafka_consumergroup_lag{consumergroup="behind",topic="single"})`, func(v float64) bool { return v == 3 })
	prom.waitValue(t, `sum(kafka_topic_partition_current_offset{topic="metrics"})`, func(v float64) bool { return v == 300 })
	prom.waitValue(t, `sum(kafka_server_brokertopicmetrics_messagesin_total{topic="metrics"})`, func(v float64) bool { return v == 300 })
	// Each record was replicated to two followers.
	prom.waitValue(t, `sum(kafka_server_brokertopicmetrics_replicationbytesin_total{topic="metrics"}) / sum(kafka_server_brokertopicmetrics_bytesin_total{topic="metrics"})`, func(v float64) bool { return v == 2 })

	// Every query of our dashboard returns data from this cluster.
	dash, err := os.ReadFile("deploy/grafana/samsa.json")
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &board); err != nil {
		t.Fatal(err)
	}
	for _, panel := range board.Panels {
		for _, tg := range panel.Targets {
			expr := strings.NewReplacer("$job", "samsa", "$__rate_interval", "1m").Replace(tg.Expr)
			prom.waitSeries(t, panel.Title, expr)
		}
	}

	stopped := c.Brokers()[2]
	if err := c.StopNode(stopped); err != nil {
		t.Fatal(err)
	}
	prom.waitValue(t, `sum(kafka_server_replicamanager_underreplicatedpartitions)`, func(v float64) bool { return v > 0 })
	prom.waitAlert(t, "UnderReplicatedPartitions", true)

	if err := c.StartNode(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	prom.waitValue(t, `sum(kafka_server_replicamanager_underreplicatedpartitions)`, func(v float64) bool { return v == 0 })
	prom.waitAlert(t, "UnderReplicatedPartitions", false)
	// The restarted follower rejoined the ISRs through its leaders'
	// AlterPartition.
	prom.waitValue(t, `sum(kafka_server_replicamanager_isrexpands_total)`, func(v float64) bool { return v > 0 })
}

type strimziEntry struct {
	name, source string
	served       bool
}

// strimziSeries reads internal/metrics/testdata/strimzi-series.txt.
func strimziSeries(t *testing.T) []strimziEntry {
	t.Helper()
	f, err := os.Open("internal/metrics/testdata/strimzi-series.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []strimziEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) != 3 {
			t.Fatalf("strimzi-series.txt: bad line %q", line)
		}
		out = append(out, strimziEntry{name: fields[0], source: fields[1], served: fields[2] == "served"})
	}
	if len(out) < 40 {
		t.Fatalf("strimzi-series.txt: %d series, expected more", len(out))
	}
	return out
}

var sampleName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)`)

// scrapeNames returns the names of the samples in addr's /metrics.
func scrapeNames(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := sampleName.FindString(sc.Text()); m != "" {
			names[m] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

type promServer struct {
	url string
}

// startPrometheus runs prometheus on a free loopback port with its data in
// a temporary directory, scraping every node of c every 3 seconds.
func startPrometheus(t *testing.T, bin string, c *samsa.Cluster) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fast := regexp.MustCompile(`for: \S+`).ReplaceAll(rules, []byte("for: 1s"))
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), fast, 0o644); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, id := range c.Brokers() {
		targets = append(targets, strconv.Quote(c.HTTPAddr(id)))
	}
	// A scrape of a node of this test process (three nodes, -race) took
	// 0.3-1.3 s at load 25 on 2 cores: with a 900 ms scrape_timeout the
	// targets went down for the test's whole minute (and, before
	// concurrent scrapes shared a gather, the abandoned scrapes, which the
	// node still finished, filled MaxScrapes: 503).
	cfg := fmt.Sprintf(`global:
  scrape_interval: 3s
  scrape_timeout: 3s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: samsa
    static_configs:
      - targets: [%s]
`, filepath.Join(dir, "alerts.yaml"), strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return &promServer{url: "http://" + addr}
}

// query evaluates expr now and returns its single value (ok false when the
// result is empty or Prometheus is not up yet).
func (p *promServer) query(expr string) (float64, bool) {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// waitValue waits until expr has a value for which ok holds. Prometheus is
// another process that scrapes every second: its state is polled. On a
// timeout it reports the last value and each target's last scrape.
func (p *promServer) waitValue(t *testing.T, expr string, ok func(float64) bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		v, got := p.query(expr)
		if got && ok(v) {
			return
		}
		select {
		case <-deadline.C:
			last := "no single value"
			if got {
				last = strconv.FormatFloat(v, 'g', -1, 64)
			}
			t.Fatalf("timed out after %v waiting for %s: last %s; targets:%s", time.Minute, expr, last, p.targets())
		case <-tick.C:
		}
	}
}

// targets describes Prometheus's last scrape of each target: health,
// duration and error.
func (p *promServer) targets() string {
	resp, err := http.Get(p.url + "/api/v1/targets")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL          string
				Health             string
				LastError          string
				LastScrape         string
				LastScrapeDuration float64
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, tg := range r.Data.ActiveTargets {
		fmt.Fprintf(&b, "\n  %s %s at %s in %.3fs %q", tg.ScrapeURL, tg.Health, tg.LastScrape, tg.LastScrapeDuration, tg.LastError)
	}
	return b.String()
}

// waitSeries waits until expr returns at least one series.
func (p *promServer) waitSeries(t *testing.T, title, expr string) {
	t.Helper()
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("dashboard panel %q: %s", title, expr), func() bool {
		resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			Data struct{ Result []json.RawMessage }
		}
		return json.NewDecoder(resp.Body).Decode(&r) == nil && len(r.Data.Result) > 0
	})
}

// waitAlert waits until the alert is firing (or, with firing false, no
// longer pending nor firing).
func (p *promServer) waitAlert(t *testing.T, name string, firing bool) {
	t.Helper()
	expr := fmt.Sprintf(`count(ALERTS{alertname=%q,alertstate="firing"}) or vector(0)`, name)
	p.waitValue(t, expr, func(v float64) bool { return (v > 0) == firing })
}

// TestLagQueriesWithoutPartitionSeries: the lag alert and the dashboard's
// lag panel read kafka_consumergroup_lag_sum, which is served with
// samsa.metrics.consumer.lag.partitions=false too; the per-partition
// kafka_consumergroup_lag is not, and an alert on it would never fire.
func TestLagQueriesWithoutPartitionSeries(t *testing.T) {
	perPartition := regexp.MustCompile(`kafka_consumergroup_lag\b[^_]`)
	for _, file := range []string{"deploy/prometheus/alerts.yaml", "deploy/grafana/samsa.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if m := perPartition.Find(b); m != nil {
			t.Errorf("%s queries the per-partition %q: use kafka_consumergroup_lag_sum", file, m)
		}
		if !strings.Contains(string(b), "kafka_consumergroup_lag_sum") {
			t.Errorf("%s has no kafka_consumergroup_lag_sum query", file)
		}
	}
}
