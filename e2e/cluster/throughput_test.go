package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestThroughput measures, in one run, producing the Debian data set with
// acks=all to 3 nodes (replication factor 3, min.insync.replicas=2)
// beside acks=1 to a single node, and acks=1 to 3 nodes for reference,
// each against real server processes with franz-go's default batching,
// with its default snappy compression and without compression. It prints
// MB/s of record payload (keys and values, uncompressed) and records/s; it
// asserts nothing about speed. The producer runs on the same machine and
// shares its cores. Run with -throughput (see docs/testing.md).
func TestThroughput(t *testing.T) {
	if !*throughput {
		t.Skip("run with -throughput (or SAMSA_THROUGHPUT=1)")
	}
	keys, values := dataset(t, 0)
	// The data set (33 MB) 15 times over: long enough to measure.
	passes := 15
	var payload int64
	for i := range values {
		payload += int64(len(keys[i]) + len(values[i]))
	}
	payload *= int64(passes)
	records := passes * len(values)
	type run struct {
		name  string
		nodes int
		acks  kgo.Acks
		codec kgo.CompressionCodec
		cname string
	}
	var runs []run
	for _, codec := range []struct {
		c    kgo.CompressionCodec
		name string
	}{{kgo.SnappyCompression(), "snappy"}, {kgo.NoCompression(), "none"}} {
		runs = append(runs,
			run{"1 node, acks=1", 1, kgo.LeaderAck(), codec.c, codec.name},
			run{"3 nodes RF 3, acks=all", 3, kgo.AllISRAcks(), codec.c, codec.name},
			run{"3 nodes RF 3, acks=1", 3, kgo.LeaderAck(), codec.c, codec.name})
	}
	var lines []string
	for _, r := range runs {
		t.Run(r.name+" "+r.cname, func(t *testing.T) {
			c := proctest.StartCluster(t, proctest.ClusterConfig{Nodes: r.nodes})
			rf := int16(r.nodes)
			cl := newClient(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			resp, err := kadm.NewClient(cl).CreateTopic(ctx, 6, rf, map[string]*string{"min.insync.replicas": kmsg.StringPtr(fmt.Sprint(min(2, r.nodes)))}, "perf")
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			opts := []kgo.Opt{kgo.RequiredAcks(r.acks), kgo.ProducerBatchMaxBytes(1 << 20), kgo.ProducerBatchCompression(r.codec)}
			if r.acks != kgo.AllISRAcks() {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			prod := newClient(t, c, opts...)
			// Warm up connections and metadata.
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "perf", Value: []byte("warm")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var failed atomic.Int64
			start := time.Now()
			for n := range records {
				i := n % len(values)
				wg.Add(1)
				prod.Produce(ctx, &kgo.Record{Topic: "perf", Key: keys[i], Value: values[i]}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
					wg.Done()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d records failed", n)
			}
			// With acks=all everything acknowledged is below the
			// high-watermarks at once; with acks=1 once the followers
			// caught up.
			hws := func() int64 {
				ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "perf")
				if err != nil {
					t.Fatal(err)
				}
				var hw int64
				ends.Each(func(o kadm.ListedOffset) { hw += o.Offset })
				return hw
			}
			if r.acks == kgo.AllISRAcks() {
				if hw := hws(); hw != int64(records)+1 {
					t.Fatalf("high-watermarks sum to %d after acks=all, want %d", hw, records+1)
				}
			}
			waitFor(t, time.Minute, "every record below the high-watermarks", func() bool { return hws() == int64(records)+1 })
			mbs := float64(payload) / elapsed.Seconds() / 1e6
			line := fmt.Sprintf("%-24s %-7s %8.1f MB/s %9.0f records/s (%d records, %.1f MB in %v)", r.name, r.cname, mbs,
				float64(records)/elapsed.Seconds(), records, float64(payload)/1e6, elapsed.Round(time.Millisecond))
			t.Log(line)
			lines = append(lines, line)
		})
	}
	for _, l := range lines {
		t.Log(l)
	}
}
