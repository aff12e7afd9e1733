package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestReassign moves a partition between the brokers of a 3-node cluster
// with `samsa reassign execute`, waits with `verify`, and checks `list`
// and `cancel` answers.
func TestReassign(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(), Properties: map[string]string{"broker.heartbeat.interval.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := "--brokers=" + strings.Join(c.Addrs(), ",")
	mustRun(t, nil, "topic", "create", "moving", "--partitions", "1", "--replication-factor", "1", b)
	// CreateTopics answers once the controller committed the topic (as
	// Kafka); the broker that describe asks may not have applied it yet
	// and answers UNKNOWN_TOPIC_OR_PARTITION meanwhile.
	var desc string
	testutil.WaitFor(t, 30*time.Second, "topic moving in a broker's metadata", func() bool {
		r := run(t, nil, "topic", "describe", "moving", b)
		desc = r.stdout
		return r.err == nil && strings.Contains(desc, "Replicas: ")
	})
	// Move the replica to the two other brokers, whichever holds it now.
	target := `[2,3]`
	if !strings.Contains(desc, "Replicas: 1") {
		target = `[1,` + map[bool]string{true: "2", false: "3"}[strings.Contains(desc, "Replicas: 3")] + `]`
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":`+target+`}]}`), 0o644)
	if out := mustRun(t, nil, "reassign", "execute", plan, b).stdout; !strings.Contains(out, "moving-0: started") {
		t.Fatalf("execute: %q", out)
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		r := run(t, nil, "reassign", "verify", plan, b)
		if r.err == nil && strings.Contains(r.stdout, "moving-0: complete") {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("reassignment did not complete: %q %v", r.stdout, r.err)
		case <-tick.C:
		}
	}
	if out := mustRun(t, nil, "reassign", "list", b).stdout; out != "" {
		t.Fatalf("list after completion: %q", out)
	}
	if r := run(t, nil, "reassign", "cancel", "--plan", plan, b); r.err == nil || !strings.Contains(r.stdout, "NO_REASSIGNMENT_IN_PROGRESS") {
		t.Fatalf("cancel: %q %v", r.stdout, r.err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[9]}]}`), 0o644)
	if r := run(t, nil, "reassign", "execute", "--plan", bad, b); r.err == nil || !strings.Contains(r.stdout, "INVALID_REPLICATION_FACTOR") {
		t.Fatalf("unknown broker: %q %v", r.stdout, r.err)
	}
}

// TestReassignPlanArgument: the plan is the argument or --plan; without
// either the error says how to give it.
func TestReassignPlanArgument(t *testing.T) {
	for _, sub := range []string{"execute", "verify", "cancel"} {
		if r := run(t, nil, "reassign", sub, "--brokers", "127.0.0.1:1"); r.err == nil || !strings.Contains(r.err.Error(), "samsa reassign "+sub+" PLAN.json (or --plan PLAN.json)") {
			t.Errorf("%s without a plan: %v", sub, r.err)
		}
		if r := run(t, nil, "reassign", sub, "a.json", "--plan", "b.json", "--brokers", "127.0.0.1:1"); r.err == nil || !strings.Contains(r.err.Error(), "two plans") {
			t.Errorf("%s with two plans: %v", sub, r.err)
		}
		missing := filepath.Join(t.TempDir(), "missing.json")
		if r := run(t, nil, "reassign", sub, missing, "--brokers", "127.0.0.1:1"); r.err == nil || !strings.Contains(r.err.Error(), missing) {
			t.Errorf("%s with a missing plan file: %v", sub, r.err)
		}
	}
}
