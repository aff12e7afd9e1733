package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/proctest"
)

var clusterIdle = flag.Duration("cluster.idle", 0, "TestClusterIdle: how long to measure the CPU of an idle cluster (0 skips the test); -cluster.topics and -cluster.partitions size it, -cluster.profile takes a CPU profile of each node over the first 30 s")

// TestClusterIdle measures what an idle cluster costs (issue 13): three
// nodes with -cluster.topics x -cluster.partitions partitions of
// replication factor 3 and no client, each node's CPU time over
// -cluster.idle once every replica's log exists, reported per minute
// (scripts/idle-cluster.sh). The followers' fetch sessions then carry
// nothing, and a leader's work per fetch should not grow with the
// partitions.
func TestClusterIdle(t *testing.T) {
	if *clusterIdle <= 0 {
		t.Skip("-cluster.idle not set")
	}
	if *clusterProfile != "" {
		if err := os.MkdirAll(*clusterProfile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3, Pprof: *clusterProfile != "", StartTimeout: 5 * time.Minute})
	report := reporter(t)
	createScaleTopics(t, c, *clusterTopics, *clusterPartitions, true, report)
	// What creating the partitions left to do (logs, first fetches,
	// metadata) settles first.
	time.Sleep(10 * time.Second) // an idle cluster is the subject: nothing to poll for
	if *clusterProfile != "" {
		for _, n := range c.Nodes {
			go func() {
				path := filepath.Join(*clusterProfile, fmt.Sprintf("idle-node-%d.pprof", n.ID))
				if err := n.Profile(context.Background(), min(*clusterIdle, 30*time.Second), path); err != nil {
					t.Logf("profile %s: %v", path, err)
				}
			}()
		}
	}
	before := make([]time.Duration, len(c.Nodes))
	for i, n := range c.Nodes {
		before[i] = n.CPU()
	}
	start := time.Now()
	time.Sleep(*clusterIdle) // the measurement window of an idle cluster
	elapsed := time.Since(start)
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	line := fmt.Sprintf("idle 3 nodes, %d partitions RF 3, over %v (load %.1f %.1f %.1f): CPU per minute", *clusterTopics**clusterPartitions, elapsed.Round(time.Second), load[0], load[1], load[2])
	var sum time.Duration
	for i, n := range c.Nodes {
		d := n.CPU() - before[i]
		sum += d
		line += fmt.Sprintf(" node %d %.2f s;", n.ID, d.Seconds()*float64(time.Minute)/float64(elapsed))
	}
	report("%s total %.2f s", line, sum.Seconds()*float64(time.Minute)/float64(elapsed))
}
