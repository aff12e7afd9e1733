package cli

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestClusterHealth: a healthy 3-node cluster exits 0; with a node stopped
// the command names it down and the partitions it held under-replicated,
// and fails; once it is back the cluster is healthy again.
func TestClusterHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(), Properties: map[string]string{
		"broker.heartbeat.interval.ms": "200",
		"broker.session.timeout.ms":    "2000",
		"replica.lag.time.max.ms":      "2000",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := "--brokers=" + strings.Join(c.Addrs(), ",")
	mustRun(t, nil, "topic", "create", "h", "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=3", b)
	waitHealth := func(want func(r result) bool) result {
		t.Helper()
		var r result
		testutil.WaitFor(t, time.Minute, "cluster health", func() bool {
			r = runCtx(ctx, nil, "cluster", "health", b)
			return want(r)
		})
		return r
	}
	r := waitHealth(func(r result) bool { return r.err == nil })
	if !strings.Contains(r.stdout, "Healthy:                            true") || !strings.Contains(r.stdout, "Brokers up:                         [1 2 3]") {
		t.Fatalf("healthy cluster:\n%s", r.stdout)
	}
	if err := c.StopNode(3); err != nil {
		t.Fatal(err)
	}
	r = waitHealth(func(r result) bool { return r.err != nil && strings.Contains(r.stdout, "Under-min-ISR partitions (3)") })
	if !errors.Is(r.err, errUnhealthy) {
		t.Fatalf("err %v, want errUnhealthy", r.err)
	}
	for _, want := range []string{"Healthy:                            false", "Brokers down:                       [3]", "Under-replicated partitions (3):    [h/0 h/1 h/2]", "nodes_down"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
	if err := c.StartNode(ctx, 3); err != nil {
		t.Fatal(err)
	}
	r = waitHealth(func(r result) bool { return r.err == nil })
	controller := regexp.MustCompile(`Controller ID: +(\d+)`).FindStringSubmatch(r.stdout)
	if controller == nil || controller[1] != strconv.Itoa(int(c.ActiveController())) {
		t.Errorf("controller %q, want the quorum leader %d:\n%s", controller, c.ActiveController(), r.stdout)
	}

	// Without a metadata quorum (two of three voters stopped) node 1 still
	// answers Metadata from its last image, with itself as controller (a
	// killed node's image would even show every broker up and every
	// partition replicated): DescribeQuorum finds no controller.
	for _, id := range []int32{2, 3} {
		if err := c.StopNode(id); err != nil {
			t.Fatal(err)
		}
	}
	// A leader that lost its quorum steps down after an election timeout.
	b = "--brokers=" + c.Addrs()[0]
	r = waitHealth(func(r result) bool { return strings.Contains(r.stdout, "[no_controller ") })
	if !errors.Is(r.err, errUnhealthy) || !strings.Contains(r.stdout, "[no_controller ") || !strings.Contains(r.stdout, "Controller ID:                      -1") {
		t.Fatalf("without a quorum: err %v, want errUnhealthy for no_controller:\n%s", r.err, r.stdout)
	}
}
