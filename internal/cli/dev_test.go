package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/testutil"
)

// samsa dev starts a 3-node cluster, prints its bootstrap addresses,
// serves a replicated topic and stops cleanly when its context ends
// (SIGINT in the binary).
func TestDev(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	stopped := false
	t.Cleanup(func() {
		// Stop the cluster before its directory is removed.
		cancel()
		if !stopped {
			<-done
		}
	})
	go func() {
		root := newRoot()
		root.SetArgs([]string{"dev", "--nodes", "3", "--dir", dir})
		root.SetIn(strings.NewReader(""))
		root.SetOut(pw)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(ctx)
		pw.CloseWithError(io.EOF)
		done <- result{err: err}
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	var bootstrap, metricsURLs, consoleURLs string
	for bootstrap == "" || metricsURLs == "" || consoleURLs == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				r := <-done
				stopped = true
				t.Fatalf("samsa dev ended before printing its addresses: %v", r.err)
			}
			if b, ok := strings.CutPrefix(l, "bootstrap="); ok {
				bootstrap = b
			}
			if m, ok := strings.CutPrefix(l, "metrics="); ok {
				metricsURLs = m
			}
			if m, ok := strings.CutPrefix(l, "console="); ok {
				consoleURLs = m
			}
		case <-timeout.C:
			t.Fatalf("no bootstrap, metrics and console lines within a minute (bootstrap %q, metrics %q, console %q)", bootstrap, metricsURLs, consoleURLs)
		}
	}
	seeds := strings.Split(bootstrap, ",")
	if len(seeds) != 3 {
		t.Fatalf("bootstrap %q: want 3 addresses", bootstrap)
	}
	// Every node serves its own /metrics, every broker the console.
	for _, c := range []struct{ line, want string }{{metricsURLs, "kafka_server_replicamanager_partitioncount"}, {consoleURLs, "<h1>Overview</h1>"}} {
		urls := strings.Split(c.line, ",")
		if len(urls) != 3 || len(slices.Compact(slices.Sorted(slices.Values(urls)))) != 3 {
			t.Fatalf("%q: want 3 different URLs", c.line)
		}
		for _, u := range urls {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) {
				t.Fatalf("GET %s: %d %v, body has no %s", u, resp.StatusCode, err, c.want)
			}
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	resp, err := adm.CreateTopic(rctx, 1, -1, nil, "dev")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	// The client asks whichever broker it picks, which may not know the
	// new topic yet: wait until one answers with its partition.
	var td kadm.TopicDetails
	testutil.WaitFor(t, 30*time.Second, "topic dev in a broker's metadata", func() bool {
		td, err = adm.ListTopics(rctx, "dev")
		if err != nil {
			t.Fatal(err)
		}
		_, ok := td["dev"].Partitions[0]
		return td["dev"].Err == nil && ok
	})
	if rf := len(td["dev"].Partitions[0].Replicas); rf != 3 {
		t.Fatalf("default replication factor %d, want 3", rf)
	}
	if err := cl.ProduceSync(rctx, &kgo.Record{Topic: "dev", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()

	cancel()
	select {
	case r := <-done:
		stopped = true
		if r.err != nil {
			t.Fatalf("samsa dev: %v", r.err)
		}
	case <-timeout.C:
		t.Fatal("samsa dev did not stop")
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if !strings.Contains(strings.Join(rest, "\n"), "stopped") {
		t.Fatalf("no clean stop reported: %q", rest)
	}
}
