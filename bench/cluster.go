package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterNodes is the size of the replicated cluster: three combined
// nodes (broker and controller), replication factor 3.
const clusterNodes = 3

// samsaCluster starts clusterNodes samsa server processes on loopback
// forming one cluster (node ids 1..3, every node a voter of the metadata
// quorum), and returns once each accepts connections on its broker
// listener.
func samsaCluster(s settings) ([]*server, error) {
	dir, err := os.MkdirTemp(s.tmp, "cluster-")
	if err != nil {
		return nil, err
	}
	type ports struct{ broker, controller int }
	var ps []ports
	var voters []string
	for i := range clusterNodes {
		p := ports{freePort(), freePort()}
		ps = append(ps, p)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p.controller))
	}
	id := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var nodes []*server
	for i, p := range ps {
		nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(i+1))
		addr := "127.0.0.1:" + strconv.Itoa(p.broker)
		// Started one after another: startServer waits for the broker
		// listener, which opens before the quorum has a leader.
		srv, err := startServer(fmt.Sprintf("samsa node %d", i+1), addr, nodeDir, s.samsa, "server", "--log-level", "warn",
			"--override", "node.id="+strconv.Itoa(i+1),
			"--override", "process.roles=broker,controller",
			"--override", "cluster.id="+id,
			"--override", "log.dirs="+nodeDir,
			"--override", fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d", addr, p.controller),
			"--override", "controller.quorum.voters="+strings.Join(voters, ","),
			"--override", "http.listener=")
		if err != nil {
			stopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, srv)
	}
	return nodes, nil
}

func stopAll(nodes []*server) {
	for _, n := range nodes {
		n.stop()
	}
}

// createReplicated creates topic with partitions partitions of
// replication factor clusterNodes on the cluster whose first node is at
// addr. With leaderOnFirst every partition's replicas are [1, 2, 3], so
// node 1 leads them all and nodes 2 and 3 only follow; otherwise the
// controller places them (leaders spread over the nodes, as `samsa perf
// produce --replication-factor 3` does). It waits, up to a minute, until
// every node is registered and then until every partition has a leader
// and all clusterNodes replicas in its ISR.
func createReplicated(addr, topic string, partitions int, leaderOnFirst bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = topic
		t.NumPartitions, t.ReplicationFactor = int32(partitions), clusterNodes
		if leaderOnFirst {
			t.NumPartitions, t.ReplicationFactor = -1, -1
			for p := range partitions {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition = int32(p)
				for id := range clusterNodes {
					a.Replicas = append(a.Replicas, int32(id+1))
				}
				t.ReplicaAssignment = append(t.ReplicaAssignment, a)
			}
		}
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
			if err == nil || err == kerr.TopicAlreadyExists {
				break
			}
		}
		// Until the three brokers have registered: INVALID_REPLICATION_FACTOR
		// or a broker that is not known yet.
		if ctx.Err() != nil {
			return fmt.Errorf("creating %s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == partitions {
			ready := true
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != clusterNodes || leaderOnFirst && p.Leader != 1 {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: partitions without a leader or a full ISR after a minute (last error %v)", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logBytes is the size of the .log files under dir: what a replica
// holds of the records.
func logBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") && !strings.Contains(path, "__cluster_metadata") {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// clusterProduce produces with acks=all to a topic of replication factor 3
// on a fresh three-node cluster. With leaderOnFirst node 1 leads every
// partition and the client talks to it alone; nodes 2 and 3 only follow,
// so their CPU time over the run, divided by the bytes their logs grew
// by, is the followers' cost of replication (row.FollowerCPUPerGB).
// Otherwise leadership is spread over the nodes by the controller, as a
// topic created with `samsa perf produce --replication-factor 3` or
// `samsa dev --nodes 3` has it.
func clusterProduce(s settings, leaderOnFirst bool) row {
	workload := "produce acks=all none, 3 nodes RF 3, leaders spread"
	if leaderOnFirst {
		workload = "produce acks=all none, 3 nodes RF 3, leader node 1"
	}
	r := row{Target: targetNames["samsa"], Workload: workload}
	nodes, err := samsaCluster(s)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer stopAll(nodes)
	if err := createReplicated(nodes[0].addr, "bench", s.partitions, leaderOnFirst); err != nil {
		r.Err = err.Error()
		return r
	}
	var seeds []string
	before := make([]usage, len(nodes))
	logsBefore := make([]int64, len(nodes))
	for i, n := range nodes {
		seeds = append(seeds, n.addr)
		before[i] = n.sample()
		logsBefore[i] = logBytes(n.dir)
	}
	c, err := runClient(clientLimit, append([]string{s.samsa, "perf", "produce", "bench", "-b", strings.Join(seeds, ","),
		"--records", strconv.Itoa(s.records), "--acks", "all", "--compression", "none"}, kafkaArgs(s)...)...)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r = fromResult(r.Target, workload, c)
	var followerCPU float64
	var replicated int64
	for i, n := range nodes {
		d := delta(before[i], n.sample())
		r.Server.CPUSeconds += d.CPUSeconds
		r.Server.PeakRSSMB = max(r.Server.PeakRSSMB, d.PeakRSSMB)
		if leaderOnFirst && i > 0 {
			followerCPU += d.CPUSeconds
			replicated += logBytes(n.dir) - logsBefore[i]
		}
	}
	if replicated > 0 {
		r.FollowerCPUPerGB = followerCPU / (float64(replicated) / 1e9)
		r.ReplicatedMB = float64(replicated) / 1e6
	}
	return r
}
