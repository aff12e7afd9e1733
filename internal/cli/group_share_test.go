package cli

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupShare: `samsa group list` and `describe` show a share group
// (KIP-932), its members and share-partition start offsets, also once it
// is empty.
func TestGroupShare(t *testing.T) {
	addr := startSamsa(t, "")
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "tasks", b, "--partitions", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "crew"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set group config: %v %+v", err, resp)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tasks", Partition: int32(i % 2), Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("crew"), kgo.ConsumeTopics("tasks"), kgo.ClientID("worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for got := 0; got < 10; {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 10", got)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			got++
		}
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, nil, "group", "list", b, "--long")
	if re := `(?m)^crew\s+share\s+Stable\s+share\s+\d+$`; !regexp.MustCompile(re).MatchString(r.stdout) {
		t.Errorf("list: no match for %s:\n%s", re, r.stdout)
	}
	for typ, want := range map[string]string{"share": "crew\n", "consumer": "", "classic": ""} {
		if out := mustRun(t, nil, "group", "list", b, "--type", typ).stdout; out != want {
			t.Errorf("list --type %s: %q, want %q", typ, out, want)
		}
	}
	r = mustRun(t, nil, "group", "describe", "crew", b)
	for _, re := range []string{
		`(?m)^Group: crew\s+Type: share\s+State: Stable\s+Epoch: \d+\s+Assignment-Epoch: \d+\s+Assignor: simple`,
		`(?m)^tasks\s+0\s+5\s+0$`,
		`(?m)^tasks\s+1\s+5\s+0$`,
		`(?m)^\S+\s+worker-1\s+/127\.0\.0\.1\s+\d+\s+tasks\s+tasks\[0,1\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe: no match for %s:\n%s", re, r.stdout)
		}
	}

	// Start offsets are reset only while the share group is inactive.
	if r := run(t, nil, "group", "reset-offsets", "crew", b, "--topic", "tasks", "--to-offset", "2", "--execute"); r.err == nil || !regexp.MustCompile("inactive").MatchString(r.err.Error()) {
		t.Errorf("reset of a live share group: %v", r.err)
	}
	sc.Close() // leaves the group
	mustRun(t, nil, "group", "reset-offsets", "crew", b, "--topic", "tasks", "--to-offset", "2", "--execute")
	// The empty group shows the partitions it has state for, as Kafka
	// (DescribeShareGroupOffsets of all topics: the partitions the group
	// initialized; it showed none without members).
	r = mustRun(t, nil, "group", "describe", "crew", b)
	for _, re := range []string{
		`(?m)^Group: crew\s+Type: share\s+State: Empty\s`,
		`(?m)^tasks\s+0\s+2\s+3$`,
		`(?m)^tasks\s+1\s+2\s+3$`,
		`(?m)^Total lag: 6$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe of the empty group: no match for %s:\n%s", re, r.stdout)
		}
	}
	dreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "crew"
	dt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	dt.Topic, dt.Partitions = "tasks", []int32{0, 1}
	dg.Topics = append(dg.Topics, dt)
	dreq.Groups = append(dreq.Groups, dg)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Groups) != 1 || len(dresp.Groups[0].Topics) != 1 {
		t.Fatalf("describe share group offsets: %v %+v", err, dresp)
	}
	for _, p := range dresp.Groups[0].Topics[0].Partitions {
		if p.ErrorCode != 0 || p.StartOffset != 2 {
			t.Errorf("after reset-offsets --to-offset 2: partition %d start offset %d, error %d", p.Partition, p.StartOffset, p.ErrorCode)
		}
	}
}
