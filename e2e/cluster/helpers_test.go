package cluster

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/testutil"
	"github.com/samsahq/samsa/internal/wire"
)

var (
	longRun    = flag.Bool("long", os.Getenv("SAMSA_LONG_FAULTS") != "", "run the long fault variants (also SAMSA_LONG_FAULTS=1)")
	throughput = flag.Bool("throughput", os.Getenv("SAMSA_THROUGHPUT") != "", "measure acks=all on 3 nodes beside acks=1 on 1 node (also SAMSA_THROUGHPUT=1)")
)

// Timings of the fault clusters: small, so that failures are detected in
// seconds, yet several times the heartbeat and fetch periods.
var faultOverrides = []string{
	"replica.lag.time.max.ms=2000",
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=300",
	"log.segment.bytes=1048576",
}

// startCluster starts 3 combined nodes with the fault timings and extra
// overrides.
func startCluster(t *testing.T, proxied bool, extra ...string) *proctest.Cluster {
	t.Helper()
	return proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3, Proxied: proxied, Overrides: append(slices.Clone(faultOverrides), extra...)})
}

// layouts are the cluster shapes a fault test runs on: 3 combined nodes,
// and 3 controller-only nodes with 3 broker-only nodes.
var layouts = []struct {
	name string
	cfg  proctest.ClusterConfig
}{
	{"combined", proctest.ClusterConfig{Nodes: 3}},
	{"separate", proctest.ClusterConfig{Controllers: 3, Brokers: 3}},
}

// startLayout starts a cluster of the given shape with the fault timings.
func startLayout(t *testing.T, cfg proctest.ClusterConfig) *proctest.Cluster {
	t.Helper()
	cfg.Overrides = slices.Clone(faultOverrides)
	return proctest.StartCluster(t, cfg)
}

// dataset returns up to n lines of the Debian data set as record values
// with their package names as keys (testutil.DebianLines).
func dataset(t testing.TB, n int) (keys, values [][]byte) {
	t.Helper()
	for _, l := range testutil.DebianLines(t, n) {
		keys = append(keys, []byte(l.Package))
		values = append(values, l.Line)
	}
	return keys, values
}

// newClient returns a franz-go client of the cluster that dials around
// proxies; it is closed at test cleanup.
func newClient(t testing.TB, c *proctest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.Dialer(c.Dial), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	if os.Getenv("FAULT_KGO_LOG") != "" {
		// Client logs for debugging a test (not a server property).
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic with RF 3 and the configs, and waits until a
// leader and a full ISR are known everywhere.
func createTopic(t *testing.T, c *proctest.Cluster, cl *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kmsg.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 3, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, id := range c.Brokers() {
		n := c.Node(id)
		waitFor(t, 30*time.Second, fmt.Sprintf("topic %s with full ISRs on node %d", topic, n.ID), func() bool {
			v, err := view(n.Addr(), topic)
			if err != nil || len(v.parts) != int(partitions) {
				return false
			}
			for _, p := range v.parts {
				if p.leader < 0 || len(p.isr) != 3 {
					return false
				}
			}
			return true
		})
	}
}

// waitFor is testutil.WaitFor.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, d, what, cond)
}

// partState is one partition as a node's Metadata response shows it.
type partState struct {
	leader, epoch int32
	isr, replicas []int32
}

// clusterView is one node's Metadata answer for a topic.
type clusterView struct {
	controller int32
	parts      map[int32]partState
}

// view asks the node at addr (and only it) for its metadata of topic,
// within 2 s (a paused node does not answer).
func view(addr, topic string) (clusterView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl := wire.NewClient(addr, "fault-test", 16<<20)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	if topic != "" {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	r, err := cl.Request(ctx, req)
	if err != nil {
		return clusterView{}, err
	}
	resp := r.(*kmsg.MetadataResponse)
	v := clusterView{controller: resp.ControllerID, parts: map[int32]partState{}}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return v, kerr.ErrorForCode(t.ErrorCode)
		}
		for _, p := range t.Partitions {
			v.parts[p.Partition] = partState{leader: p.Leader, epoch: p.LeaderEpoch, isr: p.ISR, replicas: p.Replicas}
		}
	}
	return v, nil
}

// quorumLeader is proctest.QuorumLeader.
func quorumLeader(addr string) (int32, error) { return proctest.QuorumLeader(addr) }

// mustView is view from the first of nodes that answers.
func mustView(t testing.TB, c *proctest.Cluster, topic string, nodes ...int32) clusterView {
	t.Helper()
	var last error
	for range 50 {
		for _, id := range nodes {
			v, err := view(c.Node(id).Addr(), topic)
			if err == nil {
				return v
			}
			last = err
		}
	}
	t.Fatalf("no metadata from nodes %v: %v", nodes, last)
	return clusterView{}
}

// others are the ids of the broker nodes of c other than ids.
func others(c *proctest.Cluster, ids ...int32) []int32 {
	var out []int32
	for _, id := range c.Brokers() {
		if !slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// ack is where an acknowledged record was written.
type ack struct {
	partition int32
	offset    int64
}

// producer writes records with a unique seq header at a bounded rate and
// remembers which were acknowledged. The client does not retry (nor use
// idempotence), so a record is written at most once: every record read
// back is then checked against the acknowledgements.
type producer struct {
	t      testing.TB
	c      *proctest.Cluster
	cl     *kgo.Client
	topic  string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards the fields below
	acked  map[int64]ack
	failed map[string]int // by error text
	sent   int64
	cond   *sync.Cond
}

// startProducer produces keys/values round and round to topic, about
// perSecond records a second, with acks=all, until stop. The client
// neither retries nor uses idempotence: every record is sent once.
func startProducer(t testing.TB, c *proctest.Cluster, topic string, keys, values [][]byte, perSecond int) *producer {
	t.Helper()
	return startProducerMode(t, c, topic, keys, values, perSecond, false)
}

// startProducerMode is startProducer, or with idempotent the client's
// defaults: an idempotent producer that retries until the delivery
// timeout, relying on the brokers to drop the duplicates of its retries
// (KIP-98), also across leader changes.
func startProducerMode(t testing.TB, c *proctest.Cluster, topic string, keys, values [][]byte, perSecond int, idempotent bool) *producer {
	t.Helper()
	p := &producer{t: t, c: c, topic: topic, done: make(chan struct{}), acked: map[int64]ack{}, failed: map[string]int{}}
	p.cond = sync.NewCond(&p.mu)
	opts := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// A record that fails for good does not trigger a metadata
		// update in franz-go: refresh often so that the producer finds
		// new leaders after a kill.
		kgo.MetadataMaxAge(500 * time.Millisecond),
		kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.RecordDeliveryTimeout(20 * time.Second),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(2000),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	}
	p.cl = newClient(t, c, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.run(ctx, keys, values, perSecond)
	t.Cleanup(p.stop)
	return p
}

func (p *producer) run(ctx context.Context, keys, values [][]byte, perSecond int) {
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	const period = 20 * time.Millisecond
	per := max(1, perSecond*int(period/time.Millisecond)/1000)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for seq := int64(0); ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range per {
			i := int(seq % int64(len(values)))
			r := &kgo.Record{Topic: p.topic, Key: keys[i], Value: values[i],
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.FormatInt(seq, 10))}}}
			s := seq
			wg.Add(1)
			// The producer's own context: records still buffered at stop
			// fail rather than wait.
			p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed[err.Error()]++
					return
				}
				p.acked[s] = ack{r.Partition, r.Offset}
				p.cond.Broadcast()
			})
			seq++
			p.mu.Lock()
			p.sent = seq
			p.mu.Unlock()
		}
	}
}

// stop ends production and waits for every callback.
func (p *producer) stop() {
	p.cancel()
	<-p.done
}

// acks is the number of records acknowledged so far.
func (p *producer) acks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// waitAcks waits until n more records than now are acknowledged.
func (p *producer) waitAcks(t testing.TB, n int, d time.Duration) {
	t.Helper()
	want := p.acks() + n
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for p.acks() < want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %d acknowledged records, have %d (failures so far: %v)\n%s", d, want, p.acks(), p.failures(), views(p.c, p.topic))
		}
		<-tick.C
	}
}

// views describes topic as every node sees it, for failure messages.
func views(c *proctest.Cluster, topic string) string {
	var b strings.Builder
	for _, id := range c.Brokers() {
		n := c.Node(id)
		v, err := view(n.Addr(), topic)
		if err != nil {
			fmt.Fprintf(&b, "node %d: %v\n", n.ID, err)
			continue
		}
		fmt.Fprintf(&b, "node %d: controller %d", n.ID, v.controller)
		for i := int32(0); i < int32(len(v.parts)); i++ {
			ps := v.parts[i]
			fmt.Fprintf(&b, "; p%d leader %d epoch %d isr %v", i, ps.leader, ps.epoch, ps.isr)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// failures summarizes the errors of records that were not acknowledged.
func (p *producer) failures() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.failed)
}

// verify reads every partition of the topic from its start to its end
// and checks that every acknowledged record is there once, at its
// acknowledged offset, that no record appears twice (the producer never
// sends one twice), that offsets are dense and that every partition holds
// acknowledged records in the order they were produced. absent lists
// record values that must not be in the log at all (unacknowledged
// records a stale leader alone held).
func (p *producer) verify(t testing.TB, c *proctest.Cluster, partitions int32, absent map[string]bool) {
	t.Helper()
	p.mu.Lock()
	acked := make(map[int64]ack, len(p.acked))
	for k, v := range p.acked {
		acked[k] = v
	}
	sent := p.sent
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c))
	var ends kadm.ListedOffsets
	waitFor(t, 30*time.Second, "end offsets", func() bool {
		var err error
		ends, err = adm.ListEndOffsets(ctx, p.topic)
		return err == nil && ends.Error() == nil
	})
	starts := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		starts[o.Partition] = kgo.NewOffset().AtStart()
		end[o.Partition] = o.Offset
	})
	if len(end) != int(partitions) {
		t.Fatalf("end offsets of %d partitions, want %d", len(end), partitions)
	}
	for s, a := range acked {
		if a.offset >= end[a.partition] {
			t.Fatalf("record %d acknowledged at %d/%d, beyond the high-watermark %d", s, a.partition, a.offset, end[a.partition])
		}
	}
	cons := newClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.topic: starts}), kgo.FetchMaxWait(500*time.Millisecond))
	seen := map[int64]ack{}
	next := map[int32]int64{}
	lastSeq := map[int32]int64{}
	read := 0
	done := func() bool {
		for part, e := range end {
			if next[part] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v (positions %v, ends %v)", ctx.Err(), next, end)
		}
		fs.EachError(func(_ string, part int32, err error) { t.Logf("fetch partition %d: %v", part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] {
				return
			}
			if n, ok := next[r.Partition]; ok && r.Offset != n {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, n-1)
			}
			next[r.Partition] = r.Offset + 1
			read++
			if absent[string(r.Value)] {
				t.Fatalf("partition %d offset %d: a record that was never acknowledged and should have been truncated: %s", r.Partition, r.Offset, r.Value)
			}
			var seq int64 = -1
			for _, h := range r.Headers {
				if h.Key == "seq" {
					seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			if seq < 0 {
				return // not from this producer
			}
			if prev, ok := seen[seq]; ok {
				t.Fatalf("record %d read twice: %d/%d and %d/%d", seq, prev.partition, prev.offset, r.Partition, r.Offset)
			}
			seen[seq] = ack{r.Partition, r.Offset}
			if a, ok := acked[seq]; ok {
				if a != (ack{r.Partition, r.Offset}) {
					t.Fatalf("record %d acknowledged at %d/%d, read at %d/%d", seq, a.partition, a.offset, r.Partition, r.Offset)
				}
				if l, ok := lastSeq[r.Partition]; ok && seq < l {
					t.Fatalf("partition %d: acknowledged record %d after %d", r.Partition, seq, l)
				}
				lastSeq[r.Partition] = seq
			}
		})
	}
	missing := 0
	for s := range acked {
		if _, ok := seen[s]; !ok {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged record %d at %d/%d not read back", s, acked[s].partition, acked[s].offset)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records missing", missing, len(acked))
	}
	t.Logf("%d records sent, %d acknowledged, %d read back (%d unacknowledged ones among them); failures: %v",
		sent, len(acked), read, len(seen)-len(acked), p.failures())
}

// hasLine reports whether logs hold a line with every one of parts.
func hasLine(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
