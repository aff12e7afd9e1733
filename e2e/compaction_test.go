package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/record"
)

// compactedRecord is a record read back by fetchAll.
type compactedRecord struct {
	partition int32
	offset    int64
	key       string
	value     []byte
}

// fetchStats counts what fetchAll saw.
type fetchStats struct {
	batches, emptyBatches int
}

// fetchAll reads every partition from its log start to its high-watermark
// with raw Fetch requests, continuing after each batch (empty ones
// included); a fetch below the high-watermark that returns no batch fails
// the test, since a consumer would loop there.
func fetchAll(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32) ([]compactedRecord, fetchStats) {
	t.Helper()
	var out []compactedRecord
	var st fetchStats
	for p := range partitions {
		offset := int64(0)
		for {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 11
			req.ReplicaID = -1
			req.MaxWaitMillis = 0
			req.MaxBytes = 4 << 20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rp.FetchOffset = offset
			rp.PartitionMaxBytes = 4 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			fp := resp.Topics[0].Partitions[0]
			if fp.ErrorCode == kerr.OffsetOutOfRange.Code && offset < fp.LogStartOffset {
				offset = fp.LogStartOffset
				continue
			}
			if fp.ErrorCode != 0 {
				t.Fatalf("fetch %s/%d at %d: %v", topic, p, offset, kerr.ErrorForCode(fp.ErrorCode))
			}
			if offset >= fp.HighWatermark {
				break
			}
			if len(fp.RecordBatches) == 0 {
				t.Fatalf("fetch %s/%d at %d, below the high-watermark %d: no batch", topic, p, offset, fp.HighWatermark)
			}
			if _, err := record.Batches(fp.RecordBatches, func(b []byte, h record.Header) error {
				st.batches++
				if h.NumRecords == 0 {
					st.emptyBatches++
				}
				offset = h.NextOffset()
				return record.Records(b, func(r record.Record) error {
					out = append(out, compactedRecord{p, r.Offset, string(r.Key), slices.Clone(r.Value)})
					return nil
				})
			}); err != nil && !errors.Is(err, record.ErrTruncated) {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		}
	}
	return out, st
}

// onePerKey returns the records by key, or an error if a key repeats.
func onePerKey(recs []compactedRecord) (map[string]compactedRecord, error) {
	m := make(map[string]compactedRecord, len(recs))
	for _, r := range recs {
		if prev, dup := m[r.key]; dup {
			return nil, fmt.Errorf("key %q at %d/%d and %d/%d", r.key, prev.partition, prev.offset, r.partition, r.offset)
		}
		m[r.key] = r
	}
	return m, nil
}

// waitCompacted polls until the topic holds exactly want (key → value).
func waitCompacted(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32, want map[string][]byte) fetchStats {
	t.Helper()
	var lastErr error
	for {
		recs, st := fetchAll(t, ctx, cl, topic, partitions)
		got, err := onePerKey(recs)
		if err == nil && len(got) != len(want) {
			err = fmt.Errorf("%d keys, want %d", len(got), len(want))
		}
		if err == nil {
			for k, v := range want {
				if !bytes.Equal(got[k].value, v) {
					err = fmt.Errorf("key %s: %.60q, want %.60q", k, got[k].value, v)
					break
				}
			}
		}
		if err == nil {
			return st
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s never compacted: %v", topic, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// endWithTails waits until the active segment of every partition of topic
// (under dir) has rolled by segment.ms, then produces one record of key
// <name>-<partition> to each and adds it to want. The segment holding a
// partition's last batch is never cleaned (as Kafka never cleans its
// active segment), so a test that wants all it wrote compacted ends each
// partition with a record of a key of its own.
func endWithTails(t *testing.T, ctx context.Context, cl *kgo.Client, dir, topic string, partitions int32, name string, want map[string][]byte) {
	t.Helper()
	for p := range partitions {
		for {
			m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
			slices.Sort(m)
			if len(m) > 0 {
				if fi, err := os.Stat(m[len(m)-1]); err == nil && fi.Size() == 0 {
					break
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("partition %d: the active segment never rolled", p)
			case <-time.After(100 * time.Millisecond):
			}
		}
		key := fmt.Sprintf("%s-%d", name, p)
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(key)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want[key] = []byte(key)
	}
}

// compactedTopicConfigs makes a topic that rolls and cleans within a
// second of being written.
func compactedTopicConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{
		"cleanup.policy":        s("compact"),
		"segment.bytes":         s("65536"),
		"segment.ms":            s("300"),
		"max.compaction.lag.ms": s("500"),
		"file.delete.delay.ms":  s("0"),
	}
}

// TestKcatReadsCompactedTopic compacts a topic until it holds batches
// emptied by the cleaner (kept as headers) and gaps, and checks that kcat
// (librdkafka) reads it to its end, exactly the latest records, and stops.
func TestKcatReadsCompactedTopic(t *testing.T) {
	kcat := needKcat(t)
	dir := t.TempDir()
	srv := proctest.Start(t, dir, "log.cleaner.backoff.ms=50")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, compactedTopicConfigs(), "compacted"); err != nil {
		t.Fatal(err)
	}
	// Each ProduceSync is one batch of the same 20 keys: every batch but
	// the last is superseded whole. The first comes from another
	// (idempotent) producer: as that producer's last batch, it stays as an
	// empty batch that keeps its producer id, epoch and sequence.
	first, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	want := map[string][]byte{}
	for round := range 300 {
		var recs []*kgo.Record
		for k := range 20 {
			v := []byte(fmt.Sprintf("round %d key %d %0100d", round, k, round))
			recs = append(recs, &kgo.Record{Topic: "compacted", Key: []byte(fmt.Sprintf("key-%02d", k)), Value: v})
			want[fmt.Sprintf("key-%02d", k)] = v
		}
		producer := cl
		if round == 0 {
			producer = first
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	endWithTails(t, ctx, cl, dir, "compacted", 1, "tail", want)
	st := waitCompacted(t, ctx, cl, "compacted", 1, want)
	if st.emptyBatches == 0 {
		t.Fatalf("no empty batch in the compacted log (%d batches): the test does not test what it says", st.batches)
	}
	t.Logf("compacted log: %d batches, %d of them empty", st.batches, st.emptyBatches)

	out := proctest.Run(t, ctx, nil, kcat, "-C", "-b", srv.Addr, "-t", "compacted", "-o", "beginning", "-e",
		"-f", "%o\t%k\t%s\n")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("kcat read %d records, want %d:\n%s", len(lines), len(want), out)
	}
	for _, l := range lines {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 || string(want[f[1]]) != f[2] {
			t.Fatalf("kcat line %q: want %q", l, want[f[1]])
		}
	}
}

// TestKillDuringCleaning kills the server with SIGKILL while the cleaner
// rewrites segments, three times over, and checks that after each restart
// the compacted topic still holds, for every key, its latest acknowledged
// record: nothing is lost and nothing superseded comes back.
func TestKillDuringCleaning(t *testing.T) {
	lines, keys := debianLines(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const partitions = 3
	want := map[string][]byte{}
	caught := 0
	chunk := (len(lines) + 2) / 3
	for round := range 3 {
		srv := proctest.Start(t, dir, "log.cleaner.backoff.ms=20")
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.ProducerBatchMaxBytes(32<<10))
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, compactedTopicConfigs(), "debian"); err != nil {
				t.Fatal(err)
			}
		} else {
			// What the previous rounds acknowledged survived the kill.
			endWithTails(t, ctx, tails(t, srv.Addr), dir, "debian", partitions, fmt.Sprintf("tail%d", round), want)
			waitCompacted(t, ctx, cl, "debian", partitions, want)
		}
		lo, hi := round*chunk, min((round+1)*chunk, len(lines))
		var recs []*kgo.Record
		for i := lo; i < hi; i++ {
			recs = append(recs, &kgo.Record{Topic: "debian", Key: []byte(keys[i]), Value: lines[i]})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for i := lo; i < hi; i++ {
			want[keys[i]] = lines[i]
		}
		// Kill as soon as a cleaning is caught writing or swapping files.
		deadline := time.Now().Add(20 * time.Second)
		tick := time.NewTicker(time.Millisecond)
		var seen []string
		for time.Now().Before(deadline) && len(seen) == 0 {
			<-tick.C
			for p := range partitions {
				for _, pat := range []string{"*.cleaned", "*.swap"} {
					m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("debian-%d", p), pat))
					seen = append(seen, m...)
				}
			}
		}
		tick.Stop()
		srv.Kill()
		cl.Close()
		if len(seen) > 0 {
			caught++
			t.Logf("round %d: killed with %v on disk", round, baseNames(seen))
		} else {
			t.Logf("round %d: no cleaning caught in the act; killed anyway", round)
		}
	}
	srv := proctest.Start(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	endWithTails(t, ctx, tails(t, srv.Addr), dir, "debian", partitions, "tail", want)
	waitCompacted(t, ctx, cl, "debian", partitions, want)
	if len(want) != 63_678+3*partitions {
		t.Fatalf("%d keys, want 63,678 packages and %d tails", len(want), 3*partitions)
	}
	for p := range partitions {
		for _, pat := range []string{"*.cleaned", "*.swap", "*.deleted"} {
			if m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("debian-%d", p), pat)); len(m) > 0 {
				t.Errorf("left on disk after restart: %v", m)
			}
		}
	}
	if caught == 0 {
		t.Logf("no kill landed inside a cleaning; the storage tests cover each swap stage")
	}
	if err := srv.Stop(30 * time.Second); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cleaner-offset-checkpoint")); err != nil {
		t.Errorf("after clean stop: %v", err)
	}
}

// tails is a client that produces to the partition each record names.
func tails(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p)
	}
	return out
}
