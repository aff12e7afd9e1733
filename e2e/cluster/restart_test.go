package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// TestRestartWholeCluster stops three nodes together (SIGTERM, controlled
// shutdown) with a few hundred partitions of replication factor 3, starts
// them together, and checks that the cluster settles quietly (issue 13:
// about 780 partitions logged 73,000 "AlterPartition failed" warnings and
// fenced brokers for a minute): every node stops cleanly, every partition
// gets a leader and a full ISR again, few AlterPartition failures are
// logged, and no broker is fenced once settled.
func TestRestartWholeCluster(t *testing.T) {
	const topics, partitions = 3, 100
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 3})
	cl := newClient(t, c)
	var names []string
	for i := range topics {
		name := fmt.Sprintf("restart-%d", i)
		names = append(names, name)
		createTopic(t, c, cl, name, partitions, nil)
	}
	cl.Close()

	mark := map[int32]int{}
	for _, n := range c.Nodes {
		mark[n.ID] = len(n.Logs())
	}
	start := time.Now()
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Stop(60 * time.Second) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d did not stop cleanly: %v", c.Nodes[i].ID, err)
		}
	}
	t.Logf("3 nodes, %d partitions: stopped together in %v", topics*partitions, time.Since(start).Round(time.Millisecond))

	for _, n := range c.Nodes {
		// Every node finished its controlled shutdown, the last ones
		// too (the quorum must outlive the leadership moves).
		if logs := n.Logs()[mark[n.ID]:]; strings.Contains(logs, "controlled shutdown did not finish") {
			t.Errorf("node %d: controlled shutdown did not finish when the nodes stopped together", n.ID)
		}
	}
	start = time.Now()
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// lastSeen is what the last look at a node found missing, logged
	// with every node's view of the topic should the wait time out.
	var lastSeen, lastTopic string
	defer func() {
		if t.Failed() && lastTopic != "" {
			t.Logf("last look: %s\nevery node's view of %s:\n%s", lastSeen, lastTopic, views(c, lastTopic))
		}
	}()
	for _, n := range c.Nodes {
		for _, name := range names {
			lastTopic = name
			waitFor(t, 90*time.Second, fmt.Sprintf("%s with leaders and full ISRs on node %d", name, n.ID), func() bool {
				v, err := view(n.Addr(), name)
				if err != nil || len(v.parts) != partitions {
					lastSeen = fmt.Sprintf("node %d: %d partitions, err %v", n.ID, len(v.parts), err)
					return false
				}
				var missing []string
				for i, p := range v.parts {
					if p.leader < 0 || len(p.isr) != 3 {
						missing = append(missing, fmt.Sprintf("p%d leader %d epoch %d isr %v", i, p.leader, p.epoch, p.isr))
					}
				}
				lastSeen = fmt.Sprintf("node %d: %d partitions without a leader or a full ISR: %v", n.ID, len(missing), missing)
				return len(missing) == 0
			})
		}
	}
	lastTopic = ""
	t.Logf("restarted together: every ISR full after %v", time.Since(start).Round(time.Millisecond))
	for _, n := range c.Nodes {
		waitFor(t, 30*time.Second, fmt.Sprintf("3 unfenced brokers in node %d's metadata", n.ID), func() bool {
			return liveBrokers(n.Addr()) == 3
		})
	}

	failures, fenced := 0, 0
	for _, n := range c.Nodes {
		logs := n.Logs()[mark[n.ID]:]
		failures += strings.Count(logs, "AlterPartition failed")
		fenced += strings.Count(logs, "broker session expired")
	}
	t.Logf("after the restart: %d AlterPartition failures, %d session expiries logged", failures, fenced)
	// A few refusals are expected while the brokers' metadata catches up
	// (a stale partition epoch), not one or more per partition.
	if failures > topics*partitions/10 {
		t.Errorf("%d AlterPartition failures logged for %d partitions", failures, topics*partitions)
	}
	if fenced > 0 {
		t.Errorf("%d broker sessions expired during the restart", fenced)
	}
}

// liveBrokers is the number of brokers the Metadata answer of the node at
// addr lists (fenced brokers are left out), -1 on error.
func liveBrokers(addr string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl := wire.NewClient(addr, "restart-test", 16<<20)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.Topics = []kmsg.MetadataRequestTopic{}
	r, err := cl.Request(ctx, req)
	if err != nil {
		return -1
	}
	return len(r.(*kmsg.MetadataResponse).Brokers)
}

// TestRecreatedTopicSurvivesCrash: on a node that is its own metadata
// quorum (one voter), a topic deleted, the node killed (SIGKILL), the
// topic created again under the same name, records acknowledged and the
// node killed again keeps those records. The commit point the voter stores
// is not fsynced on its own, so it lagged the quorum's: the node replayed
// an old committed log at start, hosted the deleted topic under its old
// id and deleted the new topic's log (the acknowledged records) as a
// stray of another topic id. The voter now catches up with its leader's
// commit (a read index) before the node builds its first image.
func TestRecreatedTopicSurvivesCrash(t *testing.T) {
	c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: 1})
	n := c.Nodes[0]
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func() {
		t.Helper()
		waitFor(t, 30*time.Second, "topic t created", func() bool {
			resp, err := adm.CreateTopic(ctx, 1, 1, nil, "t")
			return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
		})
	}
	produce := func(n int, tag string) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "%s-%d", tag, i)}).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", tag, i, err)
			}
		}
	}
	create()
	produce(100, "old")
	if err := n.Stop(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "topic t deleted", func() bool {
		resp, err := adm.DeleteTopic(ctx, "t")
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.UnknownTopicOrPartition))
	})
	n.Restart()
	create()
	produce(3, "new")
	n.Restart()

	var end int64 = -1
	waitFor(t, 30*time.Second, "the end offset of t after the crash", func() bool {
		ends, err := adm.ListEndOffsets(ctx, "t")
		if err != nil {
			return false
		}
		o, ok := ends.Lookup("t", 0)
		if !ok || o.Err != nil {
			return false
		}
		end = o.Offset
		return true
	})
	if end != 3 {
		t.Fatalf("end offset of t %d after the crash, want 3 (the acknowledged records of the new topic)", end)
	}
	cons := newClient(t, c, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	waitFor(t, 30*time.Second, "the 3 acknowledged records of the new topic t", func() bool {
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		defer fcancel()
		cons.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return len(got) >= 3
	})
	if want := []string{"new-0", "new-1", "new-2"}; !slices.Equal(got, want) {
		t.Fatalf("read %v after the crash, want %v", got, want)
	}
}
