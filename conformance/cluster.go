package conformance

import (
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterNodes is the size of the cluster the group scenarios also run
// on (Scenario.Nodes).
const ClusterNodes = 3

// ClusterOverrides are the --override flags of every node of the cluster,
// after ServerOverrides: the scenarios' topics, __consumer_offsets and
// __share_group_state have 3 replicas, so that a group's coordinator sits
// on one of the three nodes and the runner, given one node as bootstrap,
// must find it (FindCoordinator) and follow NOT_COORDINATOR. KIP-848
// sessions of 6 s (Kafka's default 45 s) let a killed member's partitions
// move within the crash scenarios' time; classic runners ask for 10 s
// sessions themselves (session.timeout.ms).
var ClusterOverrides = []string{
	"default.replication.factor=3",
	"min.insync.replicas=2",
	"offsets.topic.replication.factor=3",
	"share.coordinator.state.topic.replication.factor=3",
	"group.consumer.min.session.timeout.ms=6000",
	"group.consumer.session.timeout.ms=6000",
	"group.consumer.min.heartbeat.interval.ms=1000",
	"group.consumer.heartbeat.interval.ms=1000",
}

// Cluster is a cluster of samsa processes: internal/proctest's, which
// the main module's 3-node process tests (e2e) use too.
type Cluster = proctest.Cluster

// StartCluster starts ClusterNodes combined nodes of bin with their data
// under dir (no comma in it: log.dirs is a list), on free loopback ports,
// with ServerOverrides and ClusterOverrides. The nodes are killed at t's
// cleanup; a failure to start is fatal to t.
func StartCluster(t testing.TB, bin, dir string) *Cluster {
	t.Helper()
	return proctest.StartCluster(t, proctest.ClusterConfig{
		Nodes:        ClusterNodes,
		Dir:          dir,
		Overrides:    append(append([]string{}, ServerOverrides...), ClusterOverrides...),
		StartTimeout: 90 * time.Second,
		Command:      func(*proctest.Node) []string { return []string{bin} },
	})
}

// onCluster returns s as a column that runs on the cluster: ID and
// title marked, Nodes set.
func onCluster(s Scenario) Scenario {
	s.ID += "-3n"
	s.Title = "on 3 nodes (RF 3, the coordinator on any node): " + s.Title
	s.Nodes = ClusterNodes
	return s
}

// clusterScenarios are the group scenarios again on the cluster, and the
// crash scenarios, which run on the cluster only.
func clusterScenarios(single []Scenario) []Scenario {
	var out []Scenario
	for _, s := range single {
		switch s.ID {
		case "group", "group-kip848", "group-migration", "share-group":
			out = append(out, onCluster(s))
		}
	}
	crashNeeds := append(append([]kmsg.Key{}, produceNeeds...), groupNeeds...)
	out = append(out,
		onCluster(Scenario{ID: "group-crash", Runner: "group-crash", Needs: crashNeeds, Partitions: 4,
			Title: "a member's process (a child runner) consumes and commits, then is killed with SIGKILL mid-consumption; the other member takes its partitions after its session (10 s) and resumes from its commits: every record received by one of them, none lost"}),
		onCluster(Scenario{ID: "group-crash-kip848", Runner: "group-crash-kip848",
			Needs: append(append([]kmsg.Key{}, produceNeeds...), kmsg.FindCoordinator, kmsg.ConsumerGroupHeartbeat, kmsg.OffsetCommit, kmsg.OffsetFetch), Partitions: 4,
			Title: "the group-crash scenario with the KIP-848 consumer protocol (the broker's 6 s session)"}),
	)
	return out
}
