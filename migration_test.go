package samsa_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Online migration between the classic and the consumer protocol
// (group.consumer.migration.policy=bidirectional, Kafka's default), with
// franz-go consumers of one group: two classic members (cooperative-sticky,
// kgo without the KIP-848 option) consume; a KIP-848 member joins and the
// group becomes a consumer group (upgrade), the classic members giving it
// partitions through JoinGroup/SyncGroup; it leaves and the group is a
// classic group again (downgrade). Records are produced in each phase;
// none is consumed twice or lost, and the committed offsets reach the end.
func TestGroupMigration(t *testing.T) {
	n := startNode(t, t.TempDir(), kip848Props())
	admin := newClient(t, n)
	const topic, groupID, partitions, batch = "migrate", "migrating", 6, 600
	createTopic(t, admin, topic, partitions, nil)
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := &groupRun{t: t, topic: topic, want: batch, seen: map[tpo]string{}, changed: make(chan struct{})}
	var wg sync.WaitGroup
	stops := map[*member]func(){}
	start := func(name string, extra ...kgo.Opt) *member {
		m, stop := r.startMember(ctx, &wg, []string{n.Addr()}, name, groupID, nil, extra...)
		stops[m] = func() {
			stop()
			if err := m.cl.CommitMarkedOffsets(ctx); err != nil {
				t.Errorf("%s: final commit: %v", m.name, err)
			}
			m.cl.Close()
		}
		return m
	}
	// more produces another batch and waits until it is consumed.
	more := func(what string) {
		r.mu.Lock()
		r.want += batch
		r.mu.Unlock()
		produceN(t, admin, topic, batch)
		r.waitFor(ctx, what, r.done)
	}
	groupType := func() string {
		lg, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lg[groupID].ProtocolType + "/" + lg[groupID].GroupType
	}
	produceN(t, admin, topic, batch)
	c1 := start("c1")
	c2 := start("c2")
	r.waitFor(ctx, "c1 and c2 share the partitions", func() bool { return disjointCover(r.assignment(c1, c2), partitions) })
	r.waitFor(ctx, "the first records consumed", r.done)
	if gt := groupType(); gt != "consumer/classic" {
		t.Fatalf("group before the upgrade: %s", gt)
	}

	// Upgrade: a KIP-848 member joins.
	k1 := start("k1", kgo.ServerSideBalancer())
	r.waitFor(ctx, "c1, c2 and k1 share the partitions", func() bool {
		a := r.assignment(k1)
		return len(a[0]) > 0 && disjointCover(r.assignment(c1, c2, k1), partitions)
	})
	if gt := groupType(); gt != "consumer/consumer" {
		t.Fatalf("group after the upgrade: %s", gt)
	}
	d, err := adm.DescribeConsumerGroups(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if g := d[groupID]; g.Err != nil || len(g.Members) != 3 {
		t.Fatalf("ConsumerGroupDescribe after the upgrade: %+v", g)
	}
	more("the records of the mixed group consumed")

	// Downgrade: the KIP-848 member leaves.
	stops[k1]()
	r.waitFor(ctx, "c1 and c2 share the partitions again", func() bool { return disjointCover(r.assignment(c1, c2), partitions) })
	waitFor(t, 20*time.Second, "the group classic again", func() bool { return groupType() == "consumer/classic" })
	more("the records after the downgrade consumed")
	stops[c1]()
	stops[c2]()
	wg.Wait()
	if r.dups != 0 || r.count() != 3*batch {
		t.Fatalf("consumed %d records (%d twice), want %d", r.count(), r.dups, 3*batch)
	}
	offs, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 3*batch {
		t.Fatalf("committed offsets sum to %d, want %d", sum, 3*batch)
	}
}
