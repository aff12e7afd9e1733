package conformance

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	flagClients   = flag.String("clients", "", "comma-separated client IDs to run (default all)")
	flagScenarios = flag.String("scenarios", "", "comma-separated scenario IDs to run (default all)")
	flagParallel  = flag.Int("parallel", 2, "clients run at once, each with its own server")
	flagDoc       = flag.String("doc", "../docs/COMPATIBILITY.md", "compatibility doc to rewrite; empty to leave it (always left when -clients or -scenarios filter)")
	flagSamsa     = flag.String("samsa", "", "prebuilt samsa binary (default: build ../cmd/samsa)")
)

// clients returns the table's rows; goclients is the built cmd/goclients.
func clients(goclients string) []Client {
	py := "/usr/bin/python3" // Debian's python3-* packages live there
	return []Client{
		{ID: "kcat", Library: "librdkafka (Debian)", Argv: []string{goclients, "--client", "kcat"}},
		{ID: "confluent-kafka-python", Library: "librdkafka (Debian)", Argv: []string{py, "python/runner.py", "--client", "confluent"}},
		{ID: "kafka-python", Library: "kafka-python (Debian)", Argv: []string{py, "python/runner.py", "--client", "kafka-python"}},
		{ID: "kafkajs", Library: "kafkajs (npm)", Argv: []string{"node", "js/runner.js"}},
		{ID: "sarama", Library: "IBM/sarama", Argv: []string{goclients, "--client", "sarama"}},
		{ID: "kafka-go", Library: "segmentio/kafka-go", Argv: []string{goclients, "--client", "kafka-go"}},
		{ID: "confluent-kafka-go", Library: "librdkafka (bundled, cgo)", Argv: []string{goclients, "--client", "confluent"}},
		{ID: "franz-go", Library: "twmb/franz-go", Argv: []string{goclients, "--client", "franz"}},
	}
}

func filter[T any](all []T, list string, id func(T) string) []T {
	if list == "" {
		return all
	}
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var out []T
	for _, x := range all {
		if want[id(x)] {
			out = append(out, x)
		}
	}
	return out
}

// TestConformance runs every scenario for every client and rewrites the
// scenarios section of docs/COMPATIBILITY.md. It fails when a scenario
// whose APIs the broker advertises fails, unless known-failures.txt lists
// it, and when a listed failure passes.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite: not in -short")
	}
	ctx := context.Background()
	tmp := t.TempDir()
	out, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	commit := strings.TrimSpace(string(out))
	bin := *flagSamsa
	if bin == "" {
		var err error
		if bin, err = BuildSamsa(ctx, "..", tmp); err != nil {
			t.Fatal(err)
		}
	}
	goclients := filepath.Join(tmp, "goclients")
	if out, err := exec.Command("go", "build", "-o", goclients, "./cmd/goclients").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/goclients: %v\n%s", err, out)
	}
	known, err := KnownFailures("known-failures.txt")
	if err != nil {
		t.Fatal(err)
	}
	cls := filter(clients(goclients), *flagClients, func(c Client) string { return c.ID })
	scs := filter(Scenarios, *flagScenarios, func(s Scenario) string { return s.ID })
	if len(cls) == 0 || len(scs) == 0 {
		t.Fatal("no client or no scenario selected")
	}

	// The failures again, after everything else (the 3-node cluster's
	// cleanup prints its nodes' logs on failure): CI shows the end of
	// long output only. Cleanups run last-registered first.
	var failed []string
	t.Cleanup(func() {
		if len(failed) > 0 {
			t.Logf("failed (details above):\n%s", strings.Join(failed, "\n"))
		}
	})

	// One cluster for every client's group scenarios on 3 nodes.
	var cluster *Cluster
	for _, s := range scs {
		if s.Nodes > 1 {
			cluster = StartCluster(t, bin, filepath.Join(tmp, "cluster"))
			break
		}
	}

	results := map[string]map[string]Result{}
	var mu sync.Mutex
	sem := make(chan struct{}, max(1, *flagParallel))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cls {
		c := &cls[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := RunClient(ctx, bin, filepath.Join(tmp, "data-"+c.ID), c, scs, cluster, t.Logf)
			if err != nil {
				t.Errorf("%s: %v", c.ID, err)
				res = map[string]Result{}
				for _, s := range scs {
					res[s.ID] = Result{Status: Fail, Detail: "client did not run: " + firstLine(err.Error())}
				}
			}
			mu.Lock()
			results[c.ID] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("all clients ran in %v", time.Since(start).Round(time.Second))

	for _, c := range cls {
		for _, s := range scs {
			r := results[c.ID][s.ID]
			key := c.ID + " " + s.ID
			reason, isKnown := known[key]
			switch {
			case r.Status == Fail && isKnown:
				r.Known = reason
				results[c.ID][s.ID] = r
				t.Logf("known failure %s: %s (known: %s)", key, r.Detail, reason)
			case r.Status == Fail:
				t.Errorf("%s: FAIL: %s", key, r.Detail)
				failed = append(failed, key+": "+firstLine(r.Detail))
			case isKnown && r.Status == Pass:
				t.Errorf("%s passes now: remove it from known-failures.txt", key)
				failed = append(failed, key+": passes now")
			}
		}
	}

	if *flagDoc != "" && *flagClients == "" && *flagScenarios == "" {
		body := RenderScenarios(Meta{Date: time.Now(), Commit: commit, Prebuilt: *flagSamsa != ""}, cls, scs, results)
		if err := WriteScenarios(*flagDoc, body); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *flagDoc)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func TestReplaceSection(t *testing.T) {
	doc := ReplaceSection("", ScenariosBegin, ScenariosEnd, "table 1")
	if !strings.HasPrefix(doc, "# Compatibility") || !strings.Contains(doc, ScenariosBegin+"\ntable 1\n"+ScenariosEnd) {
		t.Fatalf("new doc:\n%s", doc)
	}
	doc = ReplaceSection(doc, SuitesBegin, SuitesEnd, "suites 1")
	doc = ReplaceSection(doc, ScenariosBegin, ScenariosEnd, "table 2\n")
	if strings.Contains(doc, "table 1") || !strings.Contains(doc, "table 2") || !strings.Contains(doc, "suites 1") {
		t.Fatalf("after replace:\n%s", doc)
	}
	if strings.Count(doc, ScenariosBegin) != 1 || strings.Count(doc, SuitesEnd) != 1 {
		t.Fatalf("markers duplicated:\n%s", doc)
	}
}

func TestKnownFailures(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k.txt")
	os.WriteFile(p, []byte("# comment\n\nkcat group needs a thing\n"), 0o644)
	k, err := KnownFailures(p)
	if err != nil || k["kcat group"] != "needs a thing" || len(k) != 1 {
		t.Fatalf("got %v, %v", k, err)
	}
	os.WriteFile(p, []byte("kcat group\n"), 0o644)
	if _, err := KnownFailures(p); err == nil {
		t.Fatal("a line without a reason was accepted")
	}
}

func TestRenderScenarios(t *testing.T) {
	cls := []Client{{ID: "a", Library: "x", Version: "1"}, {ID: "b", Library: "y", Version: "2"}}
	scs := []Scenario{{ID: "s1", Title: "one"}, {ID: "s2", Title: "two"}}
	res := map[string]map[string]Result{
		"a": {"s1": {Status: Pass}, "s2": {Status: Fail, Detail: "boom | bang"}},
		"b": {"s1": {Status: NotYet, Detail: "no API"}, "s2": {Status: NA, Detail: "no API"}},
	}
	out := RenderScenarios(Meta{Date: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)}, cls, scs, res)
	for _, want := range []string{
		"Generated 2025-01-02 03:04 UTC.",
		"| a | pass | **FAIL** [1] |",
		"| b | not yet [2] | n/a [2] |", // same text, same note
		"1. boom \\| bang",
		"Totals: 1 pass, 1 fail, 1 not yet, 1 n/a.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// TestClusterScenarios checks which columns run on the cluster: the group
// scenarios a second time and the crash scenarios only there.
func TestClusterScenarios(t *testing.T) {
	nodes := map[string]int{}
	for _, s := range Scenarios {
		if _, dup := nodes[s.ID]; dup {
			t.Errorf("scenario %s twice", s.ID)
		}
		nodes[s.ID] = s.Nodes
	}
	for _, id := range []string{"group", "group-kip848", "group-migration", "share-group"} {
		if n, ok := nodes[id]; !ok || n != 0 {
			t.Errorf("%s: on %d nodes (present %v), want the single node", id, n, ok)
		}
		if n := nodes[id+"-3n"]; n != ClusterNodes {
			t.Errorf("%s-3n: on %d nodes, want %d", id, n, ClusterNodes)
		}
	}
	for _, id := range []string{"group-crash-3n", "group-crash-kip848-3n"} {
		if nodes[id] != ClusterNodes {
			t.Errorf("%s: on %d nodes, want %d", id, nodes[id], ClusterNodes)
		}
	}
	if _, ok := nodes["produce-none-3n"]; ok {
		t.Error("produce-none runs on the cluster: only the group scenarios should (CI time)")
	}
}
