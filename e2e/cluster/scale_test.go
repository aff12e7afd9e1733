package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/wire"
)

var (
	clusterTopics     = flag.Int("cluster.topics", 15, "TestClusterScale: topics to create")
	clusterPartitions = flag.Int("cluster.partitions", 100, "TestClusterScale: partitions per topic")
	clusterReport     = flag.String("cluster.report", "", "TestClusterScale: file to append the figures to")
	clusterSession    = flag.Int("cluster.session", 3000, "TestClusterScale: broker.session.timeout.ms (heartbeats every tenth of it)")
	clusterWaitLogs   = flag.Bool("cluster.waitlogs", true, "TestClusterScale: kill the active controller only once DescribeLogDirs shows every replica's log (false: as soon as Metadata shows full ISRs, while the brokers may still be creating logs)")
	clusterProfile    = flag.String("cluster.profile", "", "TestClusterScale: directory for CPU profiles and goroutine dumps (every 250 ms) of the nodes during the failover and the controlled shutdown, and their logs")
)

// profileNodes, with -cluster.profile, takes CPU profiles of the running
// nodes of ids over d in the background (<dir>/<name>-node-<id>.pprof)
// and dumps their goroutines meanwhile (dumpGoroutines); the returned
// func waits for both.
func profileNodes(t *testing.T, c *proctest.Cluster, name string, d time.Duration, ids ...int32) (wait func()) {
	if *clusterProfile == "" {
		return func() {}
	}
	done := make(chan struct{}, len(ids))
	for _, id := range ids {
		go func() {
			defer func() { done <- struct{}{} }()
			path := filepath.Join(*clusterProfile, fmt.Sprintf("%s-node-%d.pprof", name, id))
			if err := c.Node(id).Profile(context.Background(), d, path); err != nil {
				t.Logf("profile %s: %v", path, err)
			}
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			dumpGoroutines(t, c.Node(id), filepath.Join(*clusterProfile, fmt.Sprintf("%s-node-%d-goroutines", name, id)), d)
		}()
	}
	return func() {
		for range 2 * len(ids) {
			<-done
		}
	}
}

// dumpGoroutines writes the goroutine stacks of n (pprof's debug=2) every
// 250 ms over d to prefix-NNN.txt: what a listener waits on shows in the
// dumps taken while it waits.
func dumpGoroutines(t *testing.T, n *proctest.Node, prefix string, d time.Duration) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=2", n.PprofPort))
		if err != nil {
			t.Logf("goroutines of node %d: %v", n.ID, err)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(fmt.Sprintf("%s-%03d.txt", prefix, i), b, 0o644)
		}
		if err != nil {
			t.Logf("goroutines of node %d: %v", n.ID, err)
			return
		}
		<-tick.C
	}
}

// whenAll polls the node at addr every 50 ms until every partition of
// topics satisfies ok, asking only for the topics it has not yet seen do
// so (leadership moves away from a broker in chunks of one metadata
// commit each: a Metadata request of every partition, seconds at 30,000,
// only at first), and returns the time since start of the answer that
// showed the last of them, an upper bound of when it happened; -1 when
// that did not happen within limit.
func whenAll(addr string, topics []string, n int, ok func(partState) bool, start time.Time, limit time.Duration) time.Duration {
	remaining := slices.Clone(topics)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < limit {
		if st, err := topicsState(addr, remaining); err == nil {
			remaining = slices.DeleteFunc(remaining, func(name string) bool { return topicOK(st, name, n, ok) })
			if len(remaining) == 0 {
				return time.Since(start)
			}
		}
		<-tick.C
	}
	return -1
}

// produceWhile produces acks=all records to the partitions of topics (n
// each) in turn, at most 100 in flight, until the returned func is
// called; that func waits for the records in flight and fails the test
// on any produce error, and returns how many were acknowledged and how
// many failed. The
// client retries retriable errors itself (a leader moving,
// NOT_ENOUGH_REPLICAS, a connection closed by a stopping broker), so an
// error is one a client would see: not retriable, or a record not
// acknowledged within its 60 s delivery timeout.
func produceWhile(t *testing.T, c *proctest.Cluster, topics []string, n int) (stop func() (acked, failed int)) {
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MaxBufferedRecords(100))
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		acked int
		errs  []error
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topics[(i/n)%len(topics)], Partition: int32(i % n), Value: []byte("during the restart")}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					acked++
				case !errors.Is(err, context.Canceled):
					errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err))
				}
			})
		}
	}()
	return func() (int, int) {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer fcancel()
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("flushing the producer: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("%d produce errors (%d acknowledged), the first: %v", len(errs), acked, errs[0])
		}
		if acked == 0 {
			t.Error("no record acknowledged")
		}
		return acked, len(errs)
	}
}

// clusterState is one node's Metadata answer for every topic.
type clusterState struct {
	controller int32
	brokers    []int32
	parts      map[string]map[int32]partState
}

// allState asks the node at addr for the metadata of every topic.
func allState(addr string) (clusterState, error) { return topicsState(addr, nil) }

// topicsState asks the node at addr for the metadata of topics, every
// topic when nil.
func topicsState(addr string, topics []string) (clusterState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := wire.NewClient(addr, "cluster-scale", 256<<20)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	r, err := cl.Request(ctx, req)
	if err != nil {
		return clusterState{}, err
	}
	resp := r.(*kmsg.MetadataResponse)
	st := clusterState{controller: resp.ControllerID, parts: map[string]map[int32]partState{}}
	for _, b := range resp.Brokers {
		st.brokers = append(st.brokers, b.NodeID)
	}
	for _, t := range resp.Topics {
		m := map[int32]partState{}
		for _, p := range t.Partitions {
			m[p.Partition] = partState{leader: p.Leader, epoch: p.LeaderEpoch, isr: p.ISR, replicas: p.Replicas}
		}
		st.parts[*t.Topic] = m
	}
	return st, nil
}

// every reports whether the node at addr knows all n partitions of the
// topics and each satisfies ok.
func every(addr string, topics []string, n int, ok func(partState) bool) bool {
	st, err := allState(addr)
	if err != nil {
		return false
	}
	for _, name := range topics {
		if !topicOK(st, name, n, ok) {
			return false
		}
	}
	return true
}

// topicOK reports whether topic name has n partitions in st and ok holds
// for each.
func topicOK(st clusterState, name string, n int, ok func(partState) bool) bool {
	ps := st.parts[name]
	if len(ps) != n {
		return false
	}
	for _, p := range ps {
		if !ok(p) {
			return false
		}
	}
	return true
}

// TestClusterScale is the three-node target of issue 13 at CI size (15
// topics of 100 partitions, replication factor 3; scripts/scale-cluster.sh
// runs 30,000): kill -9 of the active controller gives a new active
// controller and a live leader for every partition; a controlled shutdown
// of a broker moves every partition it leads; its restart brings it back
// into every ISR. It asserts the properties and reports the times.
// logsOnEvery reports whether DescribeLogDirs shows, on each node of c,
// a log of n partitions of topics (replication factor 3 on 3 nodes: every
// partition on every node).
func logsOnEvery(adm *kadm.Client, c *proctest.Cluster, topics []string, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil || len(all) != len(c.Nodes) {
		return false
	}
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	for _, dirs := range all {
		got := 0
		for _, d := range dirs {
			for t, ps := range d.Topics {
				if want[t] {
					got += len(ps)
				}
			}
		}
		if got != n {
			return false
		}
	}
	return true
}

// reporter logs a line of figures and appends it to -cluster.report.
func reporter(t *testing.T) func(format string, args ...any) {
	return func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log(line)
		if *clusterReport != "" {
			if f, err := os.OpenFile(*clusterReport, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintln(f, line)
				f.Close()
			}
		}
	}
}

// createScaleTopics creates nTopics topics cs-N of nParts partitions
// with replication factor 3, 20 topics a request, and waits until every
// node shows every partition with a full ISR and, with waitLogs, until
// every replica's log is on its node; it reports the times and returns
// the topics.
func createScaleTopics(t *testing.T, c *proctest.Cluster, nTopics, nParts int, waitLogs bool, report func(string, ...any)) []string {
	cl := newClient(t, c)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var topics []string
	start := time.Now()
	for i := 0; i < nTopics; i += 20 {
		var batch []string
		for j := i; j < min(i+20, nTopics); j++ {
			batch = append(batch, fmt.Sprintf("cs-%d", j))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		resp, err := adm.CreateTopics(ctx, int32(nParts), 3, nil, batch...)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp {
			// A retry of a request that timed out on a loaded machine
			// finds the topic the first attempt created.
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				t.Fatalf("create %s: %v", r.Topic, r.Err)
			}
		}
		topics = append(topics, batch...)
	}
	total := nTopics * nParts
	full := func(p partState) bool { return p.leader >= 0 && len(p.isr) == 3 }
	for _, n := range c.Nodes {
		waitFor(t, 10*time.Minute, fmt.Sprintf("every partition with full ISR on node %d", n.ID), func() bool { return every(n.Addr(), topics, nParts, full) })
	}
	isrs := time.Since(start)
	// A new partition's ISR is every replica from its creation, before
	// the brokers made its log: the kill waits for the logs, so that the
	// failover's figures do not include creating them.
	if waitLogs {
		waitFor(t, 10*time.Minute, "every replica's log on its node", func() bool { return logsOnEvery(adm, c, topics, total) })
	}
	report("3 nodes, %d partitions RF 3: created with full ISRs in %v, every log on every node after %v", total, isrs.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return topics
}

func TestClusterScale(t *testing.T) {
	nTopics, nParts := *clusterTopics, *clusterPartitions
	if *clusterProfile != "" {
		if err := os.MkdirAll(*clusterProfile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3, Pprof: *clusterProfile != "", Overrides: []string{
		// A killed broker's partitions move once its session expires.
		fmt.Sprintf("broker.session.timeout.ms=%d", *clusterSession), fmt.Sprintf("broker.heartbeat.interval.ms=%d", *clusterSession/10),
	}, StartTimeout: 5 * time.Minute})
	if *clusterProfile != "" {
		t.Cleanup(func() {
			for _, n := range c.Nodes {
				os.WriteFile(filepath.Join(*clusterProfile, fmt.Sprintf("node-%d.log", n.ID)), []byte(n.Logs()), 0o644)
			}
		})
	}
	report := reporter(t)
	topics := createScaleTopics(t, c, nTopics, nParts, *clusterWaitLogs, report)
	full := func(p partState) bool { return p.leader >= 0 && len(p.isr) == 3 }
	var start time.Time

	// kill -9 of the active controller.
	ctrl, err := proctest.QuorumLeader(c.Nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	rest := others(c, ctrl)
	// CPU time (user and system) of nodes, summed.
	cpu := func(ids ...int32) time.Duration {
		var d time.Duration
		for _, id := range ids {
			d += c.Node(id).CPU()
		}
		return d
	}
	profiled := profileNodes(t, c, "failover", 10*time.Second, rest...)
	cpu0 := cpu(rest...)
	c.Node(ctrl).Kill()
	start = time.Now()
	var newCtrl int32
	waitFor(t, 2*time.Minute, "a new active controller", func() bool {
		l, err := proctest.QuorumLeader(c.Node(rest[0]).Addr())
		newCtrl = l
		return err == nil && l >= 0 && l != ctrl
	})
	elected := time.Since(start)
	liveLeader := func(p partState) bool { return p.leader >= 0 && p.leader != ctrl }
	led := whenAll(c.Node(rest[0]).Addr(), topics, nParts, liveLeader, start, 2*time.Minute)
	if led < 0 {
		t.Fatal("not every partition has a live leader 2 minutes after the kill -9")
	}
	report("kill -9 of active controller %d: node %d active after %v, every partition led by a live broker after %v (broker.session.timeout.ms=%d); CPU of nodes %v meanwhile %v",
		ctrl, newCtrl, elected.Round(time.Millisecond), led.Round(time.Millisecond), *clusterSession, rest, (cpu(rest...) - cpu0).Round(10*time.Millisecond))
	profiled()
	stop := produceWhile(t, c, topics[:min(5, len(topics))], nParts)
	start = time.Now()
	if err := c.Node(ctrl).Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Minute, "every ISR full again", func() bool { return every(c.Node(rest[0]).Addr(), topics, nParts, full) })
	rejoined := time.Since(start)
	acked, failed := stop()
	report("node %d restarted: back in every ISR after %v; %d acks=all records acknowledged meanwhile, %d failed", ctrl, rejoined.Round(time.Millisecond), acked, failed)

	// Leadership back to the preferred replicas (a third of the
	// partitions each), then a controlled shutdown of the broker other
	// than the active controller that leads the most.
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	if _, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
		t.Fatalf("preferred leader election: %v", err)
	}
	cancel()
	cl.Close()
	l, err := proctest.QuorumLeader(c.Nodes[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	watch := l
	st, err := allState(c.Node(watch).Addr())
	if err != nil {
		t.Fatal(err)
	}
	leads := map[int32]int{}
	for _, ps := range st.parts {
		for _, p := range ps {
			leads[p.leader]++
		}
	}
	victim := others(c, l)[0]
	for _, id := range others(c, l) {
		if leads[id] > leads[victim] {
			victim = id
		}
	}
	nLed := leads[victim]
	if nLed == 0 {
		t.Fatalf("no broker but the controller leads a partition: %v", leads)
	}
	profiled = profileNodes(t, c, "shutdown", 10*time.Second, 1, 2, 3)
	stay := others(c, victim)
	cpu0 = cpu(stay...)
	start = time.Now()
	moved := make(chan time.Duration, 1)
	var movedCPU time.Duration
	go func() {
		// Leadership moves before the process exits.
		notVictim := func(p partState) bool { return p.leader >= 0 && p.leader != victim }
		d := whenAll(c.Node(watch).Addr(), topics, nParts, notVictim, start, 2*time.Minute)
		movedCPU = cpu(stay...) - cpu0
		moved <- d
	}()
	if err := c.Node(victim).Stop(2 * time.Minute); err != nil {
		t.Fatalf("controlled shutdown of node %d: %v", victim, err)
	}
	stopped := time.Since(start)
	d := <-moved
	if d < 0 {
		t.Fatalf("leadership of node %d did not move", victim)
	}
	report("controlled shutdown of node %d leading %d partitions: moved in %v, process exited after %v; CPU of nodes %v until moved %v",
		victim, nLed, d.Round(time.Millisecond), stopped.Round(time.Millisecond), stay, movedCPU.Round(10*time.Millisecond))
	profiled()
	stop = produceWhile(t, c, topics[:min(5, len(topics))], nParts)
	start = time.Now()
	if err := c.Node(victim).Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Minute, "every ISR full again", func() bool { return every(c.Node(watch).Addr(), topics, nParts, full) })
	rejoined = time.Since(start)
	acked, failed = stop()
	report("node %d restarted: back in every ISR after %v; %d acks=all records acknowledged meanwhile, %d failed", victim, rejoined.Round(time.Millisecond), acked, failed)
	st, _ = allState(c.Node(watch).Addr())
	if len(st.brokers) != 3 {
		t.Errorf("brokers %v after settling, want 3 unfenced", st.brokers)
	}
}
