package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/storage"
)

type acked struct {
	partition int32
	offset    int64
	value     string
}

// TestKillDuringProduce kills the server with SIGKILL while a producer is
// writing, damages the active segment's tail and indexes as a crash could,
// and checks after restart that every acknowledged record is there at its
// acknowledged offset and that producing and consuming carry on.
func TestKillDuringProduce(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Start(t, dir, "log.segment.bytes=262144", "log.index.interval.bytes=1024")
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.RecordRetries(0), kgo.ProducerLinger(time.Millisecond),
		// Uncompressed: the records are mostly zeros, and the large batches
		// a loaded machine makes compress 20,000 of them (4.6 MB) into less
		// than one 256 KiB segment a partition.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Small batches: on a loaded machine kgo fills batches up to
		// 1 MB, and a 256 KiB segment of one batch has no offset index
		// at all, so there would be nothing to lose and rebuild.
		kgo.ProducerBatchMaxBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		acks   []acked
		done   = make(chan struct{})
		enough = make(chan struct{})
	)
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			default:
			}
			v := fmt.Sprintf("record-%08d-%0200d", i, i)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: "crash", Key: []byte(fmt.Sprint(i % 97)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					return
				}
				mu.Lock()
				acks = append(acks, acked{r.Partition, r.Offset, string(r.Value)})
				if len(acks) == 20000 {
					close(enough)
				}
				mu.Unlock()
			})
			if i%2000 == 1999 {
				// Keep some produce requests in flight at the kill.
				select {
				case <-enough:
					srv.Kill()
					cl.Close() // fails what is still buffered
					wg.Wait()
					return
				default:
				}
			}
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("producer did not finish")
	}
	mu.Lock()
	got := append([]acked(nil), acks...)
	mu.Unlock()
	if len(got) < 20000 {
		t.Fatalf("only %d acknowledged before the kill", len(got))
	}

	// Damage what a crash can damage: a torn batch at the tail of the
	// active segment and a missing offset index.
	p0 := filepath.Join(dir, "crash-0")
	logs, _ := filepath.Glob(filepath.Join(p0, "*.log"))
	sort.Strings(logs)
	if len(logs) < 2 {
		t.Fatalf("expected several segments, got %v", logs)
	}
	active := logs[len(logs)-1]
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 2, 1, 2, 3}) // a header promising 256 bytes
	f.Close()
	index0 := logs[0][:len(logs[0])-len(".log")] + ".index"
	before, err := os.ReadFile(index0)
	if err != nil || len(before) == 0 {
		t.Fatalf("the first segment has no offset index to lose (%d bytes): %v", len(before), err)
	}
	os.Remove(index0)

	// Same configs: the index is rebuilt with the same index.interval.bytes.
	srv2 := proctest.Start(t, dir, "log.segment.bytes=262144", "log.index.interval.bytes=1024")
	cl2, err := kgo.NewClient(kgo.SeedBrokers(srv2.Addr), kgo.ConsumeTopics("crash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ends, err := kadm.NewClient(cl2).ListEndOffsets(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]int64]string{}
	for _, a := range got {
		want[[2]int64{int64(a.partition), a.offset}] = a.value
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total < int64(len(got)) {
		t.Fatalf("log ends hold %d records, %d were acknowledged", total, len(got))
	}
	seen := 0
	last := map[int32]int64{}
	for read := int64(0); read < total; {
		fs := cl2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d", read, total)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch: %v", err) })
		for _, r := range fs.Records() {
			read++
			if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
			}
			last[r.Partition] = r.Offset
			if v, ok := want[[2]int64{int64(r.Partition), r.Offset}]; ok {
				if v != string(r.Value) {
					t.Fatalf("record %d/%d changed", r.Partition, r.Offset)
				}
				seen++
			}
		}
	}
	if seen != len(got) {
		t.Fatalf("%d of %d acknowledged records read back", seen, len(got))
	}
	// Producing carries on.
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "crash", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := srv2.Stop(30 * time.Second); err != nil {
		t.Fatalf("clean stop: %v\n%s", err, srv2.Logs())
	}
	for _, f := range []string{"recovery-point-offset-checkpoint", "meta.properties"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after clean stop: %v", err)
		}
	}
	// The rebuilt index is written by the clean stop at the latest: the
	// node opens index files as it needs them (a descriptor cache), so
	// while it runs the file may not exist yet.
	if after, err := os.ReadFile(index0); err != nil {
		t.Errorf("index not rebuilt: %v", err)
	} else if !bytes.Equal(after, before) {
		a, _ := storage.DecodeOffsetIndex(after)
		b, _ := storage.DecodeOffsetIndex(before)
		t.Errorf("rebuilt index differs: %d bytes, %d before the crash\nafter %v\nbefore %v", len(after), len(before), a, b)
	}
}

// TestKillKeepsRecentHighWatermark kills a server with SIGKILL and checks
// that the replication-offset-checkpoint it restarts from holds the
// high-watermark it served 6 s before the kill: Kafka's
// replica.high.watermark.checkpoint.interval.ms (5 s) bounds how old it is,
// where Samsa used to write it only on the 60 s recovery-point schedule.
func TestKillKeepsRecentHighWatermark(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Start(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "hwckpt"); err != nil {
		t.Fatal(err)
	}
	produce := func(n int) int64 {
		t.Helper()
		var last int64
		for i := range n {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "hwckpt", Value: fmt.Appendf(nil, "v%d", i)}).First()
			if err != nil {
				t.Fatal(err)
			}
			last = r.Offset
		}
		return last + 1
	}
	served := produce(100)
	// One checkpoint interval and a second of slack pass; what is written
	// after (the next 100 records) may be lost with the kill.
	<-time.After(6 * time.Second)
	produce(100)
	srv.Kill()

	hws, err := storage.ReadOffsetCheckpoint(nil, filepath.Join(dir, storage.ReplicationOffsetCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := hws[storage.TopicPartition{Topic: "hwckpt", Partition: 0}]; got < served {
		t.Fatalf("checkpointed high-watermark %d after SIGKILL, want >= %d (served 6 s before)", got, served)
	}

	srv = proctest.Start(t, dir)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ends, err := kadm.NewClient(cl2).ListEndOffsets(ctx, "hwckpt")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("hwckpt", 0); o.Err != nil || o.Offset < served {
		t.Fatalf("restarted node's high-watermark %d (%v), want >= %d", o.Offset, o.Err, served)
	}
}
