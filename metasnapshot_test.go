package samsa_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// A node writes metadata snapshots as its metadata log grows and reports
// them as Kafka does (SnapshotEmitter, MetadataLoader); restarted, it
// loads one and has every topic.
func TestMetadataSnapshotMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := samsa.Config{Dir: dir, HTTPListener: "127.0.0.1:0", Properties: map[string]string{"metadata.log.max.record.bytes.between.snapshots": "1024"}}
	gauge := func(n *samsa.Node, name string) int64 {
		t.Helper()
		_, body := httpGet(t, "http://"+n.HTTPAddr()+"/metrics", "")
		m := regexp.MustCompile(`\n` + name + ` (\S+)\n`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return int64(v)
	}
	n, err := samsa.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	for i := range 5 {
		if _, err := adm.CreateTopic(ctx, 10, 1, nil, fmt.Sprint("snap-", i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "a metadata snapshot", func() bool {
		return gauge(n, "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes") > 0
	})
	if got := gauge(n, "kafka_server_metadataloader_handleloadsnapshotcount"); got != 0 {
		t.Fatalf("%d snapshots loaded at the first start", got)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = samsa.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := gauge(n, "kafka_server_metadataloader_handleloadsnapshotcount"); got != 1 {
		t.Fatalf("%d snapshots loaded at restart, want 1", got)
	}
	if got := gauge(n, "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes"); got <= 0 {
		t.Fatalf("latest snapshot of %d bytes after loading one", got)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if td, ok := topics[fmt.Sprint("snap-", i)]; !ok || len(td.Partitions) != 10 {
			t.Fatalf("topic snap-%d after restart: %+v", i, td)
		}
	}
}
