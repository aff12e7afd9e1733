package cli

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// TestConsumeGroupSurvivesBrokerRestart: `samsa consume --group` keeps
// going while the broker restarts, as Kafka's console consumer does.
func TestConsumeGroupSurvivesBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	props := map[string]string{"listeners": "PLAINTEXT://" + addr + ",CONTROLLER://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
	start := func() *samsa.Node {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := samsa.Start(ctx, samsa.Config{Dir: dir, Properties: props})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "restart", "--partitions", "1", b)
	mustRun(t, strings.NewReader("one\n"), "produce", "restart", b)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- runCtx(ctx, nil, "consume", "restart", "--group", "g", "--from-beginning", "--max-messages", "2", b)
	}()
	// Wait until the group consumed the first record (its offset is
	// committed), then restart the broker under it.
	waitCommitted := func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			offs, err := adm.FetchOffsets(ctx, "g")
			if o, ok := offs.Lookup("restart", 0); err == nil && ok && o.At == 1 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the group never committed offset 1: %v %v", offs, err)
			case <-tick.C:
			}
		}
	}
	waitCommitted()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("consume exited while the broker was down: %v\n%s", r.err, r.stderr)
	case <-time.After(3 * time.Second):
	}
	n = start()
	defer n.Close()
	mustRun(t, strings.NewReader("two\n"), "produce", "restart", b)
	r := <-done
	if r.err != nil || r.stdout != "one\ntwo\n" {
		t.Fatalf("consume: %q %v\n%s", r.stdout, r.err, r.stderr)
	}
}
