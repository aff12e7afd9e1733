package samsa_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/dlq"
)

// Share groups (KIP-932) through franz-go's share consumer (kgo.ShareGroup).

// setShareGroupConfigs sets group configs (IncrementalAlterConfigs on a
// GROUP resource, kept in the metadata log) through the cluster seed
// belongs to, and waits until every broker describes them.
func setShareGroupConfigs(t *testing.T, seed string, group string, kv map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("alter group configs: %v %v", err, resp.Resources[0].ErrorMessage)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	dreq.Resources = append(dreq.Resources, dr)
	for _, b := range cl.DiscoveredBrokers() {
		waitFor(t, 10*time.Second, "the group configs on every broker", func() bool {
			resp, err := dreq.RequestWith(ctx, b)
			if err != nil || len(resp.Resources) != 1 {
				return false
			}
			got := map[string]string{}
			for _, c := range resp.Resources[0].Configs {
				if c.Value != nil {
					got[c.Name] = *c.Value
				}
			}
			for k, v := range kv {
				if got[k] != v {
					return false
				}
			}
			return true
		})
	}
}

// shareConsumer is a kgo share consumer of group on topic.
func shareConsumer(t *testing.T, seeds []string, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestShareGroupAcceptReleaseReject: one share consumer accepts most
// records, releases some (redelivered with a higher delivery count) and
// rejects others (archived, copied to the dead-letter topic with KIP-1191's
// headers); every record is accepted once or rejected, none lost.
func TestShareGroupAcceptReleaseReject(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	admin := newClient(t, n)
	const topic, group, total = "jobs", "workers", 200
	createTopic(t, admin, topic, 3, nil)
	createTopic(t, admin, "dlq.jobs", 1, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{
		"share.auto.offset.reset":           "earliest",
		"errors.deadletterqueue.topic.name": "dlq.jobs",
	})
	produceN(t, admin, topic, total)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := shareConsumer(t, []string{n.Addr()}, group, topic)
	defer cl.Close()
	accepted := map[string]int{}
	rejected := map[string]bool{}
	released := map[string]int{}
	for len(accepted)+len(rejected) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("accepted %d rejected %d of %d: %v", len(accepted), len(rejected), total, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s[%d]: %v", tp, p, err) })
		for _, r := range fs.Records() {
			k := string(r.Key)
			i, _ := strconv.Atoi(k[len("key-"):])
			switch {
			case i%10 == 3:
				rejected[k] = true
				r.Ack(kgo.AckReject)
			case i%10 == 7 && released[k] == 0:
				released[k]++
				r.Ack(kgo.AckRelease)
			default:
				accepted[k]++
				r.Ack(kgo.AckAccept)
			}
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	for k, c := range accepted {
		if c != 1 {
			t.Errorf("%s accepted %d times", k, c)
		}
	}
	if len(rejected) != total/10 {
		t.Errorf("rejected %d, want %d", len(rejected), total/10)
	}
	// The rejected records are in the dead-letter topic.
	dl := consumeAll(t, n, "dlq.jobs", total/10)
	for _, r := range dl {
		o, err := dlq.Decode(r.Headers)
		if err != nil || o.Topic != topic || o.Group != group || o.Reason != dlq.ReasonRejected || o.DeliveryCount != 1 {
			t.Errorf("dead letter %+v: %v", o, err)
		}
		if !rejected[string(r.Key)] {
			t.Errorf("dead letter for %s, which was not rejected", r.Key)
		}
	}
}

// shareConsumeUntil polls cl, accepting every record, until stop says so;
// it returns the keys accepted, counted.
func shareConsumeUntil(ctx context.Context, t *testing.T, cl *kgo.Client, seen map[string]int, stop func() bool) {
	t.Helper()
	for !stop() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d distinct records: %v", len(seen), ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("share fetch %s[%d]: %v", tp, p, err) })
		for _, r := range fs.Records() {
			seen[string(r.Key)]++
			r.Ack(kgo.AckAccept)
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatalf("flush acks: %v", err)
	}
}

// TestShareGroupRestartKeepsAcks: records accepted before the node
// restarts are not delivered again after it; the others are, once.
func TestShareGroupRestartKeepsAcks(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupProps)
	admin := newClient(t, n)
	const topic, group, total = "jobs", "workers", 300
	createTopic(t, admin, topic, 2, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, admin, topic, total)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]int{}
	cl := shareConsumer(t, []string{n.Addr()}, group, topic, kgo.ShareMaxRecords(50), kgo.ShareMaxRecordsStrict())
	shareConsumeUntil(ctx, t, cl, seen, func() bool { return len(seen) >= total/3 })
	cl.Close()
	first := len(seen)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, groupProps)
	cl = shareConsumer(t, []string{n.Addr()}, group, topic)
	defer cl.Close()
	shareConsumeUntil(ctx, t, cl, seen, func() bool { return len(seen) >= total })
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s accepted %d times", k, c)
		}
	}
	t.Logf("%d records accepted before the restart, %d after", first, len(seen)-first)
}

// TestShareGroupFailover: a 3-node cluster, the share-partition's leader
// stopped during consumption: the records accepted (and flushed) before
// are never delivered again, and every record is delivered.
func TestShareGroupFailover(t *testing.T) {
	c := startCluster(t, 3, groupProps)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := clusterClients(t, c)
	const topic, group, total = "jobs", "workers", 400
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "leaders", func() bool {
		td := describe(t, adm, topic)
		return len(td.Partitions) == 2 && td.Partitions[0].Leader >= 0 && td.Partitions[1].Leader >= 0
	})
	setShareGroupConfigs(t, c.Addrs()[0], group, map[string]string{"share.auto.offset.reset": "earliest"})
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	sc := shareConsumer(t, c.Addrs(), group, topic, kgo.ShareMaxRecords(40), kgo.ShareMaxRecordsStrict())
	defer sc.Close()
	shareConsumeUntil(ctx, t, sc, before, func() bool { return len(before) >= total/3 })

	leader := describe(t, adm, topic).Partitions[0].Leader
	if err := c.StopNode(leader); err != nil {
		t.Fatal(err)
	}
	after := map[string]int{}
	shareConsumeUntil(ctx, t, sc, after, func() bool {
		n := len(before)
		for k := range after {
			if before[k] == 0 {
				n++
			}
		}
		return n >= total
	})
	for k := range after {
		if before[k] > 0 {
			t.Errorf("record %s accepted before the failover was delivered again", k)
		}
	}
	if len(after) == 0 {
		t.Fatal("nothing consumed after the failover")
	}
	t.Logf("stopped node %d; %d records accepted before, %d after", leader, len(before), len(after))
}

// TestShareGroupPropertyKills: share consumers killed and restarted at
// random (gracefully: acks flushed, then closed; abruptly: closed with
// records in hand and acks unsent; or crashed: every connection cut and
// nothing said, no session close, no leave, acks lost), with some records
// always released (archived after the delivery limit) and some rejected.
// In the end every record was accepted or is in the dead-letter topic,
// nothing accepted and flushed is delivered again, dead letters are written
// once each with the right reason, and every share-partition start offset
// reached the log end.
func TestShareGroupPropertyKills(t *testing.T) {
	props := map[string]string{"group.share.min.record.lock.duration.ms": "1000"}
	maps.Copy(props, groupProps)
	n := startNode(t, t.TempDir(), props)
	admin := newClient(t, n)
	const topic, group, dlqTopic, total, workers, limit = "jobs", "workers", "dlq.jobs", 1000, 4, 3
	createTopic(t, admin, topic, 2, nil)
	createTopic(t, admin, dlqTopic, 1, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{
		"share.auto.offset.reset":           "earliest",
		"share.record.lock.duration.ms":     "1000",
		"share.delivery.count.limit":        strconv.Itoa(limit),
		"errors.deadletterqueue.topic.name": dlqTopic,
	})
	produceN(t, admin, topic, total)
	poison := func(k string) bool { i, _ := strconv.Atoi(k[len("key-"):]); return i%50 == 0 }
	reject := func(k string) bool { i, _ := strconv.Atoi(k[len("key-"):]); return i%37 == 5 }

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	accepted := map[string]int{}   // accepted by a consumer (acks maybe lost in a crash)
	confirmed := map[string]bool{} // accepted and flushed before a graceful close
	afterConfirm := map[string]int{}
	rejected := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	var crashes atomic.Int64

	const (
		graceful = iota // acks flushed, then Close
		abrupt          // Close with acks unsent
		crash           // connections cut, nothing sent
		stopModes
	)
	worker := func(stop <-chan int, done chan<- struct{}) {
		defer close(done)
		var ackErr atomic.Bool
		cctx, kill := context.WithCancel(ctx)
		defer kill()
		conns := &severableDialer{}
		cl := shareConsumer(t, []string{n.Addr()}, group, topic, kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict(),
			kgo.WithContext(cctx), kgo.Dialer(conns.DialContext),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if !rs.Ok() {
					ackErr.Store(true)
				}
			}))
		var mine []string
		for {
			select {
			case mode := <-stop:
				switch mode {
				case graceful:
					if cl.FlushAcks(ctx) == nil && !ackErr.Load() {
						mu.Lock()
						for _, k := range mine {
							confirmed[k] = true
						}
						mu.Unlock()
					}
				case crash:
					conns.sever()
					kill() // Close then sends nothing: no leave, no session close
					crashes.Add(1)
				}
				cl.Close()
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			mu.Lock()
			for _, r := range fs.Records() {
				k := string(r.Key)
				if confirmed[k] {
					afterConfirm[k]++
				}
				switch {
				case poison(k):
					r.Ack(kgo.AckRelease)
				case reject(k):
					rejected[k] = true
					r.Ack(kgo.AckReject)
				default:
					accepted[k]++
					mine = append(mine, k)
					r.Ack(kgo.AckAccept)
				}
			}
			mu.Unlock()
		}
	}
	type running struct {
		stop chan int // graceful, abrupt or crash
		done chan struct{}
	}
	start := func() running {
		r := running{make(chan int, 1), make(chan struct{})}
		go worker(r.stop, r.done)
		return r
	}
	var ws []running
	for range workers {
		ws = append(ws, start())
	}
	adm := kadm.NewClient(admin)
	finished := func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0, 1}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 {
			return false
		}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			e, _ := ends.Lookup(topic, p.Partition)
			if p.ErrorCode != 0 || p.StartOffset != e.Offset {
				return false
			}
		}
		return true
	}
	kills := 0
	for !finished() {
		if ctx.Err() != nil {
			t.Fatalf("not finished: %d accepted", len(accepted))
		}
		time.Sleep(50 * time.Millisecond) // the pace of the kills, not a wait for a condition
		i := rng.IntN(workers)
		ws[i].stop <- rng.IntN(stopModes)
		<-ws[i].done
		ws[i] = start()
		kills++
	}
	for _, w := range ws {
		w.stop <- graceful
		<-w.done
	}
	if crashes.Load() == 0 {
		t.Errorf("no consumer crashed in %d kills", kills)
	}

	ends, err := adm.ListEndOffsets(ctx, dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup(dlqTopic, 0)
	dead := map[string]dlq.Origin{}
	for _, r := range consumeAll(t, n, dlqTopic, int(e.Offset)) {
		o, err := dlq.Decode(r.Headers)
		if err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		k := string(r.Key)
		if _, dup := dead[k]; dup {
			t.Errorf("%s dead-lettered twice", k)
		}
		dead[k] = o
		switch {
		case poison(k) && (o.Reason != dlq.ReasonDeliveryLimited || o.DeliveryCount != limit):
			t.Errorf("poison %s: %+v", k, o)
		case !poison(k) && (o.Reason != dlq.ReasonRejected || !rejected[k]):
			t.Errorf("%s dead-lettered but not rejected: %+v", k, o)
		}
	}
	for i := range total {
		k := "key-" + strconv.Itoa(i)
		if _, ok := dead[k]; !ok && accepted[k] == 0 {
			t.Errorf("%s lost: neither accepted nor dead-lettered", k)
		}
		if poison(k) && accepted[k] > 0 {
			t.Errorf("poison %s accepted", k)
		}
	}
	for k, c := range afterConfirm {
		t.Errorf("%s delivered %d times after its acceptance was flushed", k, c)
	}
	t.Logf("%d kills (%d crashes), %d accepted (%d confirmed), %d dead letters", kills, crashes.Load(), len(accepted), len(confirmed), len(dead))
}

// severableDialer dials loopback TCP and can cut every connection it made
// at once, as a client process killed with SIGKILL; dials after the cut
// fail.
type severableDialer struct {
	mu    sync.Mutex // guards the fields below
	conns []net.Conn
	cut   bool
}

func (d *severableDialer) DialContext(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		c.Close()
		return nil, net.ErrClosed
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *severableDialer) sever() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		c.Close()
	}
}

// TestShareGroupDeleteStartsAfresh: DeleteGroups of an empty share group
// removes its share-partition state (tombstones in __share_group_state, as
// Kafka's DeleteShareGroupState), so a group created again under the same
// name starts as share.auto.offset.reset says, not where the old one
// stopped.
func TestShareGroupDeleteStartsAfresh(t *testing.T) {
	const topic, group, total = "jobs", "workers", 40
	n, admin := startShareNode(t, topic, 2, group, total)
	checkDeleteStartsAfresh(t, []string{n.Addr()}, admin, topic, group, total)
}

// startShareNode starts a node with topic (partitions partitions) holding
// total records, for share group group reading from the earliest offset
// (share.auto.offset.reset), and returns it with an admin client.
func startShareNode(t *testing.T, topic string, partitions int32, group string, total int) (*samsa.Node, *kgo.Client) {
	t.Helper()
	n := startNode(t, t.TempDir(), groupProps)
	admin := newClient(t, n)
	createTopic(t, admin, topic, partitions, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, admin, topic, total)
	return n, admin
}

// checkDeleteStartsAfresh: a share consumer of group reads the total
// records of topic, the group is deleted (DeleteGroups through admin), its
// configs stay (as in Kafka, they are in the metadata log, which the group
// coordinator does not write), and a new consumer of the group reads every
// record again.
func checkDeleteStartsAfresh(t *testing.T, seeds []string, admin *kgo.Client, topic, group string, total int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]int{}
	cl := shareConsumer(t, seeds, group, topic)
	shareConsumeUntil(ctx, t, cl, seen, func() bool { return len(seen) >= total })
	cl.Close()

	adm := kadm.NewClient(admin)
	waitFor(t, 30*time.Second, "the share group deleted", func() bool {
		res, err := adm.DeleteGroups(ctx, group)
		return err == nil && res[group].Err == nil
	})
	if c := describeGroupConfig(t, admin, group)["share.auto.offset.reset"]; c.Value == nil || *c.Value != "earliest" {
		t.Fatalf("share.auto.offset.reset after DeleteGroups: %v, want earliest", c.Value)
	}
	again := map[string]int{}
	cl = shareConsumer(t, seeds, group, topic)
	defer cl.Close()
	actx, acancel := context.WithTimeout(ctx, 20*time.Second)
	defer acancel()
	for len(again) < total {
		fs := cl.PollFetches(actx)
		if actx.Err() != nil {
			t.Fatalf("the recreated group got %d of %d records: it kept the deleted group's state", len(again), total)
		}
		for _, r := range fs.Records() {
			again[string(r.Key)]++
			r.Ack(kgo.AckAccept)
		}
	}
}

// rawShareMember is a share group member driven by raw requests on a
// client of its own (its own connection), so a test can drop it without
// the goodbyes kgo's share consumer sends on Close.
type rawShareMember struct {
	cl      *kgo.Client
	group   string
	id      string
	topicID [16]byte
}

func newRawShareMember(t *testing.T, n *samsa.Node, group, id, topic string) *rawShareMember {
	t.Helper()
	cl := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, td[topic].Err)
	}
	m := &rawShareMember{cl: cl, group: group, id: id, topicID: td[topic].ID}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, id, 0, []string{topic}
	// The coordinator answers COORDINATOR_LOAD_IN_PROGRESS while it loads
	// the group's __consumer_offsets partition: retry, as clients do.
	var resp *kmsg.ShareGroupHeartbeatResponse
	waitFor(t, 10*time.Second, "the join of "+id, func() bool {
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
		return !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode))
	})
	if resp.ErrorCode != 0 {
		t.Fatalf("join %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return m
}

// fetch opens a share session on partition 0 and returns how many records
// it acquired.
func (m *rawShareMember) fetch(t *testing.T, wait time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, 0
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share fetch of %s: %v %v", m.id, err, resp)
	}
	got := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("share fetch of %s: %v", m.id, kerr.ErrorForCode(p.ErrorCode))
			}
			for _, a := range p.AcquiredRecords {
				got += int(a.LastOffset - a.FirstOffset + 1)
			}
		}
	}
	return got
}

// TestShareGroupReleaseOnDisconnect: a member whose connection drops
// without closing its share session (a crash) has its acquired records
// released at once, not after the 60 s lock; one that leaves its group
// (a heartbeat with epoch -1, its fetch connection still open) too.
func TestShareGroupReleaseOnDisconnect(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	admin := newClient(t, n)
	const topic, group, total = "jobs", "workers", 20
	createTopic(t, admin, topic, 1, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "60000",
	})
	produceN(t, admin, topic, total)

	a := newRawShareMember(t, n, group, "member-a-0000000000001", topic)
	if got := a.fetch(t, 5*time.Second); got != total {
		t.Fatalf("a acquired %d, want %d", got, total)
	}
	a.cl.Close() // the connection drops, the session is not closed

	b := newRawShareMember(t, n, group, "member-b-0000000000002", topic)
	if got := b.fetch(t, 5*time.Second); got != total {
		t.Fatalf("after a's connection dropped, b acquired %d, want %d (released only at lock expiry)", got, total)
	}

	// b leaves the group over another connection; its fetch connection
	// stays open.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = group, b.id, -1
	if resp, err := leave.RequestWith(ctx, admin); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("leave: %v %v", err, resp)
	}
	c := newRawShareMember(t, n, group, "member-c-0000000000003", topic)
	if got := c.fetch(t, 5*time.Second); got != total {
		t.Fatalf("after b left, c acquired %d, want %d (released only at lock expiry)", got, total)
	}
	b.cl.Close()
}

// TestShareGroupDeadLetterOtherLeader: on a 3-node cluster, records
// rejected on a partition whose leader does not lead the dead-letter
// partition reach the dead-letter topic too (produced through its leader).
func TestShareGroupDeadLetterOtherLeader(t *testing.T) {
	c := startCluster(t, 3, groupProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := clusterClients(t, c)
	// The first metadata may come from a node that has not yet seen
	// every broker register.
	var ids []int32
	waitFor(t, 30*time.Second, "three brokers", func() bool {
		var err error
		ids, err = brokerIDs(ctx, cl)
		return err == nil && len(ids) == 3
	})
	const topic, dlqTopic, group, total = "jobs", "dlq.jobs", "workers", 30
	createAssigned(t, ctx, cl, topic, []int32{ids[0], ids[1], ids[2]}, nil)
	createAssigned(t, ctx, cl, dlqTopic, []int32{ids[1], ids[2], ids[0]}, nil)
	waitFor(t, 30*time.Second, "leaders", func() bool {
		return describe(t, adm, topic).Partitions[0].Leader == ids[0] && describe(t, adm, dlqTopic).Partitions[0].Leader == ids[1]
	})
	setShareGroupConfigs(t, c.Addrs()[0], group, map[string]string{
		"share.auto.offset.reset":           "earliest",
		"errors.deadletterqueue.topic.name": dlqTopic,
	})
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sc := shareConsumer(t, c.Addrs(), group, topic)
	defer sc.Close()
	rejected := map[string]bool{}
	for len(rejected) < total {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("rejected %d of %d: %v", len(rejected), total, ctx.Err())
		}
		for _, r := range fs.Records() {
			rejected[string(r.Key)] = true
			r.Ack(kgo.AckReject)
		}
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	dc, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(dlqTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
	defer dcancel()
	got := map[string]bool{}
	for len(got) < total {
		fs := dc.PollFetches(dctx)
		if dctx.Err() != nil {
			t.Fatalf("%d of %d rejected records in the dead-letter topic, led by another broker", len(got), total)
		}
		for _, r := range fs.Records() {
			o, err := dlq.Decode(r.Headers)
			if err != nil || o.Topic != topic || o.Reason != dlq.ReasonRejected {
				t.Errorf("dead letter %+v: %v", o, err)
			}
			got[string(r.Key)] = true
		}
	}
}

// TestShareGroupAlterDeleteOffsets: AlterShareGroupOffsets (API 91) moves
// an empty share group's start offset (NON_EMPTY_GROUP while it has a
// member) and DeleteShareGroupOffsets (API 92) deletes its state, after
// which it starts again as share.auto.offset.reset says.
func TestShareGroupAlterDeleteOffsets(t *testing.T) {
	n := startNode(t, t.TempDir(), groupProps)
	admin := newClient(t, n)
	const topic, group, total = "jobs", "workers", 20
	createTopic(t, admin, topic, 1, nil)
	setShareGroupConfigs(t, n.Addr(), group, map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, admin, topic, total)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consume := func(want int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		cl := shareConsumer(t, []string{n.Addr()}, group, topic)
		shareConsumeUntil(ctx, t, cl, seen, func() bool { return len(seen) >= want })
		cl.Close()
		return seen
	}
	consume(total)

	alter := func() *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = 0, 10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatalf("AlterShareGroupOffsets: %v", err)
		}
		return resp
	}
	m := newRawShareMember(t, n, group, "member-x-0000000000001", topic)
	if resp := alter(); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(resp.ErrorCode))
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = group, m.id, -1
	if _, err := leave.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the share group empty", func() bool {
		resp := alter()
		if resp.ErrorCode == kerr.NonEmptyGroup.Code {
			return false
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("alter: %+v", resp)
		}
		return true
	})
	seen := consume(total / 2)
	for i := range total {
		k := "key-" + strconv.Itoa(i)
		if (i >= total/2) != (seen[k] == 1) {
			t.Errorf("after the start offset moved to %d: %s delivered %d times", total/2, k, seen[k])
		}
	}

	var dresp *kmsg.DeleteShareGroupOffsetsResponse
	waitFor(t, 10*time.Second, "the share group offsets deleted", func() bool {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		req.Topics = append(req.Topics, rt)
		var err error
		if dresp, err = req.RequestWith(ctx, admin); err != nil {
			t.Fatalf("DeleteShareGroupOffsets: %v", err)
		}
		return dresp.ErrorCode != kerr.NonEmptyGroup.Code
	})
	if dresp.ErrorCode != 0 || len(dresp.Topics) != 1 || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete offsets: %+v", dresp)
	}
	if seen := consume(total); len(seen) != total {
		t.Fatalf("after the offsets were deleted, %d of %d records", len(seen), total)
	}
}

// TestShareGroupLagEveryLeader: DescribeShareGroupOffsets (v1, KIP-1226)
// gives the lag of every share-partition, also of those another broker
// than the group coordinator leads (their high-watermark asked of the
// leader); before, those had lag -1 and `samsa group describe` summed the
// rest into a wrong total.
func TestShareGroupLagEveryLeader(t *testing.T) {
	c := startCluster(t, 3, groupProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const topic, group, partitions = "jobs", "workers", 3
	if _, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	waitFor(t, 30*time.Second, "a leader for each partition", func() bool {
		td := describe(t, adm, topic)
		clear(leaders)
		for _, p := range td.Partitions {
			if p.Leader < 0 {
				return false
			}
			leaders[p.Leader] = true
		}
		return len(td.Partitions) == partitions
	})
	if len(leaders) < 2 {
		t.Fatalf("leaders %v: the test needs partitions led by different brokers", leaders)
	}
	setShareGroupConfigs(t, c.Addrs()[0], group, map[string]string{"share.auto.offset.reset": "earliest"})
	produce := func(perPartition int, prefix string) {
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := range perPartition {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(prefix + strconv.Itoa(int(p)) + "-" + strconv.Itoa(i))})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(10, "a")
	seen := map[string]int{}
	sc := shareConsumer(t, c.Addrs(), group, topic)
	defer sc.Close()
	shareConsumeUntil(ctx, t, sc, seen, func() bool { return len(seen) >= 10*partitions })
	produce(3, "b")

	// Each partition has its own leader, so at least two are led by a broker
	// other than the group coordinator; every one must have lag 3. A state
	// read as never initialized (start -1) is an acknowledgement lost on
	// its way to __share_group_state: before, in about one run of three,
	// the first write created the topic and the active controller's node
	// had not applied it yet, so the write failed and nothing wrote the
	// state again.
	waitFor(t, 20*time.Second, "lag 3 on the share-partitions", func() bool {
		res, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil || res[group].Err != nil {
			return false
		}
		for p := range int32(partitions) {
			o, ok := res[group].Offsets.Lookup(topic, p)
			switch {
			case !ok || o.Err != nil:
				return false
			case o.StartOffset < 0:
				t.Logf("partition %d: share state not found (start %d)", p, o.StartOffset)
				return false
			case o.Lag != 3:
				t.Logf("partition %d: start %d lag %d", p, o.StartOffset, o.Lag)
				return false
			}
		}
		return true
	})
}
