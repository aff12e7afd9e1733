package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTxnListDescribe(t *testing.T) { eachBackend(t, testTxnListDescribe) }

func testTxnListDescribe(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "orders", b, "--partitions", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One transaction committed, one left open.
	for _, id := range []string{"done-1", "open-1"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(id), Partition: 1}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", id, err)
		}
		if id == "done-1" {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
	}
	r := mustRun(t, nil, "txn", "list", b)
	for _, re := range []string{
		`(?m)^TRANSACTIONAL ID\s+COORDINATOR\s+PRODUCER ID\s+STATE$`,
		`(?m)^done-1\s+\d+\s+\d+\s+(CompleteCommit|Empty)$`, // kfake keeps no Complete states
		`(?m)^open-1\s+\d+\s+\d+\s+Ongoing$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("list: output does not match %s:\n%s", re, r.stdout)
		}
	}
	r = mustRun(t, nil, "txn", "list", b, "--state", "Ongoing")
	if strings.Contains(r.stdout, "done-1") || !strings.Contains(r.stdout, "open-1") {
		t.Errorf("list --state Ongoing:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "txn", "describe", "open-1", b)
	if re := `(?m)^open-1\s+\d+\s+\d+\s+\d+\s+Ongoing\s+\d+\s+\S+Z\s+\d+\s+orders-1$`; !regexp.MustCompile(re).MatchString(r.stdout) {
		t.Errorf("describe: output does not match %s:\n%s", re, r.stdout)
	}
	r = mustRun(t, nil, "txn", "producers", "orders", b, "-p", "1")
	if re := `(?m)^1\s+\d+\s+\d+\s+0\s+\d+\s+-?\d+\s+\d+$`; !regexp.MustCompile(re).MatchString(r.stdout) {
		t.Errorf("producers: no open transaction listed (%s):\n%s", re, r.stdout)
	}
	if r := run(t, nil, "txn", "describe", "nobody", b); r.err == nil || !strings.Contains(r.err.Error(), "TRANSACTIONAL_ID_NOT_FOUND") {
		t.Errorf("describe unknown: err %v", r.err)
	}
}
