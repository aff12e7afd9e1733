package samsa_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupReadCommitted: share.isolation.level (KIP-932 group config)
// through franz-go share consumers. A transactional producer commits 10
// records, aborts 10, commits 10 more and leaves 5 in an open transaction.
// A read_committed share group is given the 20 committed records and
// nothing else: the aborted ones are archived without delivery, the open
// transaction's wait behind the last stable offset until it commits. A
// read_uncommitted group (the default) is given all 35.
func TestShareGroupReadCommitted(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(groupProps))
	admin := newClient(t, n)
	const topic = "jobs"
	createTopic(t, admin, topic, 1, nil)
	setShareGroupConfigs(t, n.Addr(), "committed", map[string]string{
		"share.auto.offset.reset": "earliest",
		"share.isolation.level":   "read_committed",
	})
	setShareGroupConfigs(t, n.Addr(), "uncommitted", map[string]string{"share.auto.offset.reset": "earliest"})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newClient(t, n, kgo.TransactionalID("share-txn"), kgo.DefaultProduceTopic(topic))
	txn := func(prefix string, from, count int, end *kgo.TransactionEndTry) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+count; i++ {
			k := fmt.Sprintf("%s-%d", prefix, i)
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", k, err)
			}
		}
		if end != nil {
			if err := p.EndTransaction(ctx, *end); err != nil {
				t.Fatalf("end of %s: %v", prefix, err)
			}
		}
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
	txn("committed", 0, 10, &commit)
	txn("aborted", 0, 10, &abort)
	txn("committed", 10, 10, &commit)
	txn("open", 0, 5, nil)

	count := func(seen map[string]int, prefix string) int {
		c := 0
		for k := range seen {
			if strings.HasPrefix(k, prefix+"-") {
				c++
			}
		}
		return c
	}
	rc := map[string]int{}
	cl := shareConsumer(t, []string{n.Addr()}, "committed", topic)
	defer cl.Close()
	shareConsumeUntil(ctx, t, cl, rc, func() bool { return count(rc, "committed") == 20 })
	// The aborted records precede the last 10 committed ones: a consumer
	// given those was given the aborted ones first, had they been
	// delivered.
	if a, o := count(rc, "aborted"), count(rc, "open"); a != 0 || o != 0 {
		t.Fatalf("read_committed share group given %d aborted and %d uncommitted records", a, o)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit of the open transaction: %v", err)
	}
	shareConsumeUntil(ctx, t, cl, rc, func() bool { return count(rc, "open") == 5 })
	if a := count(rc, "aborted"); a != 0 || len(rc) != 25 {
		t.Fatalf("read_committed share group: %d records, %d aborted; want the 25 committed", len(rc), a)
	}

	ru := map[string]int{}
	cu := shareConsumer(t, []string{n.Addr()}, "uncommitted", topic)
	defer cu.Close()
	shareConsumeUntil(ctx, t, cu, ru, func() bool { return len(ru) == 35 })
	if a := count(ru, "aborted"); a != 10 {
		t.Fatalf("read_uncommitted share group given %d aborted records, want 10", a)
	}
}
