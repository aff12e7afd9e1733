package samsa_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestMetricsEndpoints: /healthz and /readyz answer 200 on a running node,
// /metrics speaks OpenMetrics to a scraper that asks for it, and the
// storage and request metrics move: a compacted topic with tiny segments
// rolls segments, flushes them and gets cleaned; produces show in the
// Produce latency histograms and the topic's counters, a record refused
// by validation as a failed produce request.
func TestMetricsEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), HTTPListener: "127.0.0.1:0", Properties: map[string]string{
		"log.cleaner.backoff.ms": "50",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	base := "http://" + n.HTTPAddr()
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, base+p, ""); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	code, body := httpGet(t, base+"/metrics", "application/openmetrics-text; version=1.0.0")
	if code != 200 || !strings.HasSuffix(body, "# EOF\n") || !strings.Contains(body, "kafka_server_replicamanager_underreplicatedpartitions 0") {
		t.Fatalf("OpenMetrics: %d, ends %q", code, body[max(len(body)-20, 0):])
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	segment, dirty := "1024", "0.01"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact"), "segment.bytes": &segment, "min.cleanable.dirty.ratio": &dirty}, "compacted"); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		r := &kgo.Record{Topic: "compacted", Key: []byte(fmt.Sprint(i % 5)), Value: []byte(strings.Repeat("v", 100))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A record without a key on a compacted topic fails validation
	// (INVALID_RECORD): a failed produce request.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("a record without a key was appended to a compacted topic")
	}
	want := map[string]func(float64) bool{
		`samsa_log_segment_rolls_total`:                                                  func(v float64) bool { return v > 0 },
		`samsa_log_flush_seconds_count`:                                                  func(v float64) bool { return v > 0 },
		`samsa_log_cleaner_runs_total`:                                                   func(v float64) bool { return v > 0 },
		`samsa_request_local_time_seconds_count{request="Produce"}`:                      func(v float64) bool { return v >= 200 },
		`kafka_server_brokertopicmetrics_messagesin_total{topic="compacted"}`:            func(v float64) bool { return v == 200 },
		`kafka_server_brokertopicmetrics_failedproducerequests_total{topic="compacted"}`: func(v float64) bool { return v == 1 },
		`kafka_server_brokertopicmetrics_totalproducerequests_total{topic=""}`:           func(v float64) bool { return v >= 200 },
		`kafka_server_replicamanager_leadercount`:                                        func(v float64) bool { return v >= 1 },
		`kafka_cluster_partition_replicascount{partition="0",topic="compacted"}`:         func(v float64) bool { return v == 1 },
	}
	var missing []string
	testutil.WaitFor(t, 30*time.Second, "metrics as expected", func() bool {
		_, body := httpGet(t, base+"/metrics", "")
		values := map[string]float64{}
		for _, line := range strings.Split(body, "\n") {
			if name, v, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				var f float64
				fmt.Sscan(v, &f)
				values[name] = f
			}
		}
		missing = missing[:0]
		for name, ok := range want {
			if v, found := values[name]; !found || !ok(v) {
				missing = append(missing, fmt.Sprintf("%s=%v", name, v))
			}
		}
		if len(missing) > 0 {
			t.Logf("not yet: %s", strings.Join(missing, ", "))
		}
		return len(missing) == 0
	})
}

// TestReadyz: a node that loses the metadata quorum (two of three voters
// stopped) stops being ready, and is ready again once they are back.
func TestReadyz(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Dir: t.TempDir(), HTTPListeners: true, Properties: map[string]string{
		"broker.heartbeat.interval.ms": "200",
		"broker.session.timeout.ms":    "2000",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "http://" + c.HTTPAddr(1) + "/readyz"
	waitCode := func(want int) string {
		t.Helper()
		var body string
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("/readyz %d", want), func() bool {
			var code int
			code, body = httpGet(t, url, "")
			return code == want
		})
		return body
	}
	waitCode(200)
	for _, id := range []int32{2, 3} {
		if err := c.StopNode(id); err != nil {
			t.Fatal(err)
		}
	}
	if body := waitCode(503); !strings.Contains(body, "not ready") {
		t.Errorf("503 body %q", body)
	}
	for _, id := range []int32{2, 3} {
		if err := c.StartNode(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	waitCode(200)
}

// TestReadyzCatchingUp: a voter started while the two others are down
// waits for a quorum to catch up with, and /readyz says so; it starts once
// a second voter does.
func TestReadyzCatchingUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Dir: t.TempDir(), HTTPListeners: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, id := range c.Controllers() {
		if err := c.StopNode(id); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan error, 1)
	go func() { started <- c.StartNode(ctx, 1) }()
	var body string
	testutil.WaitFor(t, 30*time.Second, "/readyz saying node 1 catches up", func() bool {
		resp, err := http.Get("http://" + c.HTTPAddr(1) + "/readyz")
		if err != nil {
			return false // not listening yet
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "catching up with the metadata quorum")
	})
	t.Logf("/readyz: %s", strings.TrimSpace(body))
	if err := c.StartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestMetricsPartitionSeriesOff: samsa.metrics.partition.series=false
// leaves out the per-partition series and keeps the broker-wide counts.
func TestMetricsPartitionSeriesOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), HTTPListener: "127.0.0.1:0", Properties: map[string]string{
		"samsa.metrics.partition.series": "false",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "quiet"); err != nil {
		t.Fatal(err)
	}
	var body string
	testutil.WaitFor(t, 20*time.Second, "partitioncount 4", func() bool {
		_, body = httpGet(t, "http://"+n.HTTPAddr()+"/metrics", "")
		return strings.Contains(body, "\nkafka_server_replicamanager_partitioncount 4\n")
	})
	for _, name := range []string{"kafka_log_log_size{", "kafka_cluster_partition_", "kafka_topic_partition_", "kafka_topic_partitions{"} {
		if strings.Contains(body, "\n"+name) {
			t.Errorf("%s served with samsa.metrics.partition.series=false", name)
		}
	}
}
