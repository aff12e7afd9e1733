package samsa_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/testutil"
)

// TestDescribeLogDirs: each node lists its log dir with the partitions it
// hosts and their sizes, the volume's total and usable bytes (v4), only
// the partitions asked for when Topics is set; DescribeCluster v2 lists a
// stopped broker as fenced when IncludeFencedBrokers asks, and leaves it
// out otherwise (KIP-1073).
func TestDescribeLogDirs(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "sized"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sized", Partition: 1, Value: noise(1000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("%d brokers answered, want 3", len(all))
	}
	for broker, dirs := range all {
		if len(dirs) != 1 {
			t.Fatalf("broker %d: %d dirs, want 1", broker, len(dirs))
		}
		for _, d := range dirs {
			if d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
				t.Errorf("broker %d dir %s: err %v total %d usable %d", broker, d.Dir, d.Err, d.TotalBytes, d.UsableBytes)
			}
			p0, ok0 := d.Topics["sized"][0]
			p1, ok1 := d.Topics["sized"][1]
			if !ok0 || !ok1 || p0.Size != 0 || p1.Size < 1000 {
				t.Errorf("broker %d: sized partitions %+v", broker, d.Topics["sized"])
			}
		}
	}
	one, err := adm.DescribeBrokerLogDirs(ctx, 2, kadm.TopicsSet{"sized": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range one {
		if len(d.Topics) != 1 || len(d.Topics["sized"]) != 1 {
			t.Errorf("asked for sized[1], got %+v", d.Topics)
		}
	}

	if err := c.StopNode(3); err != nil {
		t.Fatal(err)
	}
	describe := func(fenced bool) map[int32]bool {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = fenced
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]bool{}
		for _, b := range resp.Brokers {
			out[b.NodeID] = b.IsFenced
		}
		return out
	}
	testutil.WaitFor(t, 30*time.Second, "node 3 fenced", func() bool {
		f, ok := describe(true)[3]
		return ok && f
	})
	if bs := describe(false); len(bs) != 2 || bs[1] || bs[2] {
		t.Errorf("without IncludeFencedBrokers: %v, want nodes 1 and 2 unfenced", bs)
	}
}

// noise is n incompressible bytes.
func noise(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}
