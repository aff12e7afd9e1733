package samsa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// debianPackage is one line of the data set, as far as the tests look.
type debianPackage struct {
	Package string `json:"package"`
	Version string `json:"version"`
	Suite   string `json:"suite"`
}

// readDebianRecords returns the data set as records keyed by package, in
// file order.
func readDebianRecords(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for _, l := range testutil.DebianLines(t, 0) {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(l.Package), Value: l.Line})
	}
	return recs
}

// pollUntil calls cond until it returns nil or timeout passes, then fails
// with cond's last error.
func pollUntil(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		<-tick.C
	}
}

// readToEnd reads every partition of topic from its log start to its
// high-watermark with raw Fetch requests, moving to the next offset after
// each batch returned, empty ones included, and fails if a fetch below the
// high-watermark returns nothing (a consumer would loop there). It returns
// the records, tombstones included.
func readToEnd(t *testing.T, cl *kgo.Client, topic string, partitions int32) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for p := range partitions {
		offset := int64(0)
		for {
			fp := fetchAt(t, cl, topic, p, offset)
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
				t.Fatalf("fetch %s/%d at %d below the high-watermark %d: no batch", topic, p, offset, fp.HighWatermark)
			}
			if _, err := record.Batches(fp.RecordBatches, func(b []byte, h record.Header) error {
				offset = h.NextOffset()
				return record.Records(b, func(r record.Record) error {
					out = append(out, &kgo.Record{Topic: topic, Partition: p, Offset: r.Offset,
						Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)})
					return nil
				})
			}); err != nil && !errors.Is(err, record.ErrTruncated) {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		}
	}
	return out
}

// consumeCount consumes topic with franz-go from the start until it has
// want records, failing on a fetch error or after a minute.
func consumeCount(t *testing.T, n *samsa.Node, topic string, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go consumer read %d of %d records: %v", len(out), want, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// latestByKey checks that recs hold one record per key and returns them.
func latestByKey(recs []*kgo.Record) (map[string]*kgo.Record, error) {
	m := make(map[string]*kgo.Record, len(recs))
	for _, r := range recs {
		if prev, dup := m[string(r.Key)]; dup {
			return nil, fmt.Errorf("key %q at %d/%d and %d/%d", r.Key, prev.Partition, prev.Offset, r.Partition, r.Offset)
		}
		m[string(r.Key)] = r
	}
	return m, nil
}

func alterTopicConfig(t *testing.T, cl *kgo.Client, topic string, ops ...kadm.AlterConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, ops, topic)
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		t.Fatalf("alter configs of %s: %v", topic, err)
	}
}

func topicConfigValue(t *testing.T, cl *kgo.Client, topic, name string) kadm.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("no config %s", name)
	return kadm.Config{}
}

func ptr(s string) *string { return &s }

// TestCompactDebian produces the Debian data set keyed by package into a
// compacted topic with small segments and checks that, once cleaned, a
// consumer from offset 0 reads exactly one record per package, the latest;
// then that tombstones for 1,000 packages remove them once
// delete.retention.ms (changed at runtime) has passed, and that all of it
// survives a restart.
func TestCompactDebian(t *testing.T) {
	const topic = "debian"
	recs := readDebianRecords(t, topic)
	want := map[string][]byte{}
	for _, r := range recs {
		want[string(r.Key)] = r.Value
	}
	if len(want) != 63_678 {
		t.Fatalf("data set has %d packages, the README says 63,678", len(want))
	}

	dir := t.TempDir()
	props := map[string]string{"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "200"}
	n := startNode(t, dir, props)
	cl := newClient(t, n, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(64<<10))
	createTopic(t, cl, topic, 3, map[string]*string{
		"cleanup.policy": ptr("compact"),
		"segment.bytes":  ptr("262144"),
		"segment.ms":     ptr("500"), // the active segment rolls, so that it gets cleaned
		// Clean whatever has been dirty for a second, whatever the dirty
		// ratio (1,000 tombstones are far below min.cleanable.dirty.ratio).
		"max.compaction.lag.ms": ptr("1000"),
		"file.delete.delay.ms":  ptr("0"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	appendTails(t, n, dir, topic, 3, "tail", want)

	// A record without a key is rejected on a compacted topic.
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}

	check := func(cl *kgo.Client, want map[string][]byte) func() error {
		return func() error {
			got, err := latestByKey(readToEnd(t, cl, topic, 3))
			if err != nil {
				return err
			}
			if len(got) != len(want) {
				return fmt.Errorf("%d records, want %d", len(got), len(want))
			}
			for k, v := range want {
				r := got[k]
				if r == nil || string(r.Value) != string(v) {
					return fmt.Errorf("package %s: %q, want %q", k, r.Value, v)
				}
			}
			return nil
		}
	}
	start := time.Now()
	pollUntil(t, 90*time.Second, check(cl, want))
	t.Logf("compacted %d records to %d in %v", len(recs), len(want), time.Since(start))
	latest := map[string]string{}
	for _, r := range consumeCount(t, n, topic, len(want)) {
		if strings.HasPrefix(string(r.Key), "tail") {
			continue
		}
		var p debianPackage
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatal(err)
		}
		latest[p.Package] = p.Version
	}
	if latest["openssl"] != "3.0.22-1~deb12u2" || latest["curl"] != "7.88.1-10+deb12u5" {
		t.Fatalf("openssl %s, curl %s", latest["openssl"], latest["curl"])
	}

	// Tombstones for 1,000 packages; delete.retention.ms changed at
	// runtime from its default of a day.
	alterTopicConfig(t, cl, topic, kadm.AlterConfig{Name: "delete.retention.ms", Value: ptr("1000")})
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	var tombs []*kgo.Record
	for _, k := range names[:1000] {
		tombs = append(tombs, &kgo.Record{Topic: topic, Key: []byte(k)})
		delete(want, k)
	}
	if err := cl.ProduceSync(ctx, tombs...).FirstErr(); err != nil {
		t.Fatalf("produce tombstones: %v", err)
	}
	appendTails(t, n, dir, topic, 3, "tail2", want)
	pollUntil(t, 90*time.Second, check(cl, want))
	if got, err := latestByKey(consumeCount(t, n, topic, len(want))); err != nil || len(got) != len(want) {
		t.Fatalf("franz-go consumer after the tombstones: %d records, %v", len(got), err)
	}

	// The runtime config and the compacted data survive a restart.
	n.Close()
	n2 := startNode(t, dir, props)
	cl2 := newClient(t, n2)
	if c := topicConfigValue(t, cl2, topic, "delete.retention.ms"); c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("delete.retention.ms after restart: %v from %v", c.Value, c.Source)
	}
	if err := check(cl2, want)(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// appendTails waits until the active segment of every partition of topic
// (under dir) has rolled by segment.ms and then produces one record with
// key <name>-<partition> to each, adding them to want. The segment holding a
// partition's last batch is never cleaned (as Kafka never cleans its active
// segment), so a test that wants everything before compacted ends the log
// with records that leave nothing to compact.
func appendTails(t *testing.T, n *samsa.Node, dir, topic string, partitions int32, name string, want map[string][]byte) {
	t.Helper()
	pollUntil(t, 30*time.Second, func() error {
		for p := range partitions {
			if bases, _, sizes := segmentBases(t, filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p))); len(bases) == 0 || sizes[len(sizes)-1] != 0 {
				return fmt.Errorf("partition %d: segments %v of %v bytes: the active segment has not rolled", p, bases, sizes)
			}
		}
		return nil
	})
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p := range partitions {
		key := fmt.Sprintf("%s-%d", name, p)
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(key)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want[key] = []byte(key)
	}
}

// segmentBases lists the base offsets of the .log files of a partition
// directory, in order, and their total size.
func segmentBases(t *testing.T, dir string) (bases []int64, size int64, sizes []int64) {
	t.Helper()
	// The broker renames segments (cleaner swaps, retention's .deleted)
	// while this lists them: a file gone between the listing and its stat
	// means the listing is stale, so list again.
	for attempt := 0; ; attempt++ {
		bases, size, sizes = nil, 0, nil
		m, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(m)
		stale := false
		for _, f := range m {
			b, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(f), ".log"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(f)
			if errors.Is(err, os.ErrNotExist) && attempt < 100 {
				stale = true
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, b)
			sizes = append(sizes, fi.Size())
			size += fi.Size()
		}
		if !stale {
			return bases, size, sizes
		}
	}
}

func startOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err != nil || lo.Error() != nil {
		t.Fatalf("list start offsets: %v %v", err, lo.Error())
	}
	o, _ := lo.Lookup(topic, 0)
	return o.Offset
}

// fetchAt sends one Fetch at offset of a partition and returns the
// partition's response.
func fetchAt(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	p, err := fetchAtErr(cl, topic, partition, offset)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fetchAtErr is fetchAt returning the request's error.
func fetchAtErr(cl *kgo.Client, topic string, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	return resp.Topics[0].Partitions[0], nil
}

// TestRetention deletes whole closed segments by time and then by size
// (retention.bytes set at runtime), checks what consumers at a deleted
// offset see, and that DeleteRecords moves the log start, persistently.
func TestRetention(t *testing.T) {
	const topic = "ret"
	dir := t.TempDir()
	props := map[string]string{"log.retention.check.interval.ms": "100"}
	n := startNode(t, dir, props)
	cl := newClient(t, n, kgo.ProducerLinger(time.Millisecond))
	createTopic(t, cl, topic, 1, map[string]*string{
		"retention.ms":         ptr("3600000"),
		"segment.bytes":        ptr("16384"),
		"file.delete.delay.ms": ptr("0"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := time.Now().Add(-2 * time.Hour)
	var recs []*kgo.Record
	for i := range 600 {
		ts := time.Now()
		if i < 300 {
			ts = old.Add(time.Duration(i) * time.Millisecond)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%0200d", i)), Timestamp: ts})
	}
	// One at a time: batches never mix old and new records.
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pdir := filepath.Join(dir, topic+"-0")

	// By time: every segment of old records only goes, and no other.
	var start int64
	pollUntil(t, 30*time.Second, func() error {
		if start = startOffset(t, cl, topic); start == 0 {
			return errors.New("log start offset still 0")
		}
		return nil
	})
	bases, _, _ := segmentBases(t, pdir)
	if bases[0] != start || start > 300 {
		t.Fatalf("log start %d, segments %v: want the first segment's base, at most 300", start, bases)
	}
	for _, b := range bases[1:] {
		if b <= 300 && b > start {
			t.Fatalf("segment %d of only old records left after retention: %v", b, bases)
		}
	}

	// A consumer at a deleted offset gets OFFSET_OUT_OF_RANGE with the
	// log start offset, and resets by auto.offset.reset.
	p := fetchAt(t, cl, topic, 0, 0)
	if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != start {
		t.Fatalf("fetch at 0: error %d, log start %d; want OFFSET_OUT_OF_RANGE, %d", p.ErrorCode, p.LogStartOffset, start)
	}
	reset := newClient(t, n,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(1)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := reset.PollFetches(ctx)
	fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
	if rs := fs.Records(); len(rs) == 0 || rs[0].Offset != start {
		t.Fatalf("after reset: first record %v, want offset %d", rs, start)
	}
	// ListOffsets by timestamp never answers below the log start.
	lo, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, old.Add(-time.Hour).UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup(topic, 0); o.Offset != start {
		t.Fatalf("offset for an old timestamp: %d, want the log start %d", o.Offset, start)
	}

	// By size, set at runtime: the oldest segments go while the rest is
	// larger than retention.bytes.
	_, size, _ := segmentBases(t, pdir)
	limit := size / 2
	alterTopicConfig(t, cl, topic, kadm.AlterConfig{Name: "retention.bytes", Value: ptr(strconv.FormatInt(limit, 10))})
	pollUntil(t, 30*time.Second, func() error {
		bases, size, sizes := segmentBases(t, pdir)
		if size-sizes[0] >= limit {
			return fmt.Errorf("%d bytes in segments %v, retention.bytes %d", size, bases, limit)
		}
		if s := startOffset(t, cl, topic); s != bases[0] {
			return fmt.Errorf("log start %d, first segment %d", s, bases[0])
		}
		return nil
	})
	if _, size, _ := segmentBases(t, pdir); size < limit {
		t.Fatalf("%d bytes left, below retention.bytes %d: a segment too many went", size, limit)
	}

	// DeleteRecords moves the log start inside a segment; it persists.
	start = startOffset(t, cl, topic)
	target := start + 7
	dr, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: target}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := dr.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != target {
		t.Fatalf("delete records: %+v", r)
	}
	if p := fetchAt(t, cl, topic, 0, target-1); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != target {
		t.Fatalf("fetch below the new log start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
	n.Close()
	n2 := startNode(t, dir, props)
	cl2 := newClient(t, n2)
	if s := startOffset(t, cl2, topic); s != target {
		t.Fatalf("log start after restart: %d, want %d", s, target)
	}
	if c := topicConfigValue(t, cl2, topic, "retention.bytes"); c.Value == nil || *c.Value != strconv.FormatInt(limit, 10) {
		t.Fatalf("retention.bytes after restart: %v", c.Value)
	}

	// On a compact-only topic DeleteRecords is refused, as in Kafka.
	createTopic(t, cl2, "compacted", 1, map[string]*string{"cleanup.policy": ptr("compact")})
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dr, err = kadm.NewClient(cl2).DeleteRecords(ctx, kadm.Offsets{"compacted": {0: {Topic: "compacted", Partition: 0, At: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("compacted", 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("delete records on a compacted topic: %v", r.Err)
	}
}

// TestCompactEmptiedSegments compacts a topic with tiny segments
// (segment.bytes 200: two batches each) where most records overwrite one
// key, so that the first segments and most middle ones keep nothing: the
// cleaner replaces them with empty segments, as Kafka does. Fetches at
// every offset below the high-watermark move on to the next batch, a
// franz-go consumer reads exactly the latest record of each key, the log
// start stays 0, ListOffsets by timestamp skips the emptied offsets, and
// all of it holds after a restart.
func TestCompactEmptiedSegments(t *testing.T) {
	const topic = "emptied"
	dir := t.TempDir()
	props := map[string]string{
		"log.cleaner.backoff.ms":              "100",
		"log.retention.check.interval.ms":     "200",
		"log.cleaner.io.max.bytes.per.second": "10485760",
	}
	n := startNode(t, dir, props)
	cl := newClient(t, n)
	// Compaction is switched on once every segment is closed, so that one
	// cleaning covers them all: later ones would merge the empty segments
	// into their neighbours (segment.bytes allows it).
	createTopic(t, cl, topic, 1, map[string]*string{
		"segment.bytes":        ptr("200"),
		"segment.ms":           ptr("500"),
		"file.delete.delay.ms": ptr("0"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	want := map[string]string{}
	for i := range 60 {
		key := "hot"
		if i%15 == 7 {
			key = fmt.Sprintf("keep-%d", i)
		}
		value := strconv.Itoa(i)
		want[key] = value
		// One at a time: one batch each.
		r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pdir := filepath.Join(dir, topic+"-0")
	pollUntil(t, 10*time.Second, func() error {
		if bases, _, sizes := segmentBases(t, pdir); len(bases) < 20 || sizes[len(sizes)-1] != 0 {
			return fmt.Errorf("segments %v of %v bytes: the active segment has not rolled", bases, sizes)
		}
		return nil
	})
	// A last record of its own key: the segment holding the log's last
	// batch is never cleaned.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("tail"), Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want["tail"] = "t"
	alterTopicConfig(t, cl, topic, kadm.AlterConfig{Name: "cleanup.policy", Value: ptr("compact")})

	check := func(cl *kgo.Client) error {
		// Not segmentBases: the cleaner renames files under the listing.
		entries, err := os.ReadDir(pdir)
		if err != nil {
			return err
		}
		var empty, bases []int64
		for _, e := range entries {
			b, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".log"), 10, 64)
			if err != nil || !strings.HasSuffix(e.Name(), ".log") {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			bases = append(bases, b)
			if fi.Size() == 0 {
				empty = append(empty, b)
			}
		}
		if len(empty) < 10 || empty[0] != 0 || slices.Equal(empty, bases) {
			return fmt.Errorf("empty segments %v of %v: want the first ones and most middle ones", empty, bases)
		}
		got, err := latestByKey(readToEnd(t, cl, topic, 1))
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d records, want %d", len(got), len(want))
		}
		for k, v := range want {
			if r := got[k]; r == nil || string(r.Value) != v {
				return fmt.Errorf("key %s: %v, want %s", k, r, v)
			}
		}
		return nil
	}
	pollUntil(t, 30*time.Second, func() error { return check(cl) })
	bases, _, sizes := segmentBases(t, pdir)
	t.Logf("compacted into segments %v of %v bytes", bases, sizes)

	verify := func(n *samsa.Node, cl *kgo.Client) {
		t.Helper()
		// Every offset below the high-watermark answers with the batch
		// holding or following it.
		hw := fetchAt(t, cl, topic, 0, 0).HighWatermark
		for off := int64(0); off < hw; off++ {
			p := fetchAt(t, cl, topic, 0, off)
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("fetch at %d (high-watermark %d): error %d, %d bytes", off, hw, p.ErrorCode, len(p.RecordBatches))
			}
			if h, err := record.ParseHeader(p.RecordBatches); err != nil || h.LastOffset() < off || h.NumRecords == 0 {
				t.Fatalf("fetch at %d: batch %+v %v", off, h, err)
			}
		}
		if s := startOffset(t, cl, topic); s != 0 {
			t.Fatalf("log start %d, want 0: compaction must not move it", s)
		}
		// ListOffsets by timestamp: record 3's time finds keep-7.
		lo, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, base.Add(3*time.Second).UnixMilli(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := lo.Lookup(topic, 0); o.Offset != 7 {
			t.Fatalf("offset for the time of offset 3: %d, want 7", o.Offset)
		}
		got, err := latestByKey(consumeCount(t, n, topic, len(want)))
		if err != nil || len(got) != len(want) {
			t.Fatalf("franz-go consumer: %d records, %v", len(got), err)
		}
		for k, v := range want {
			if r := got[k]; r == nil || string(r.Value) != v {
				t.Fatalf("franz-go consumer, key %s: %v, want %s", k, r, v)
			}
		}
	}
	verify(n, cl)

	n.Close()
	n2 := startNode(t, dir, props)
	cl2 := newClient(t, n2)
	if err := check(cl2); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	verify(n2, cl2)
}

// TestCompactTombstoneAtLogEnd: a compacted partition whose last batch is
// a tombstone, rolled by segment.ms without a later append, keeps that
// batch however often the cleaner runs (the segment holding the log's last
// batch counts as active), so that a consumer reads to the log end: with
// nothing left after the last surviving record, fetches below the
// high-watermark would come back empty forever.
func TestCompactTombstoneAtLogEnd(t *testing.T) {
	const topic = "tail-tombstone"
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{
		"log.cleaner.backoff.ms":          "50",
		"log.retention.check.interval.ms": "200",
	})
	cl := newClient(t, n, kgo.DisableIdempotentWrite())
	createTopic(t, cl, topic, 1, map[string]*string{
		"cleanup.policy":        ptr("compact"),
		"segment.bytes":         ptr("100"), // one batch a segment
		"segment.ms":            ptr("300"),
		"delete.retention.ms":   ptr("300"),
		"max.compaction.lag.ms": ptr("100"),
		"file.delete.delay.ms":  ptr("0"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, kv := range [][2]string{{"keep", "old"}, {"keep", "v"}, {"gone", "v"}, {"gone", ""}} {
		r := &kgo.Record{Topic: topic, Key: []byte(kv[0])}
		if kv[1] != "" {
			r.Value = []byte(kv[1])
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pdir := filepath.Join(dir, topic+"-0")
	// The first segment empties once a cleaning ran; by then the active
	// segment rolled (the cleaning started after the log's last roll).
	pollUntil(t, 20*time.Second, func() error {
		if bases, _, sizes := segmentBases(t, pdir); len(bases) < 2 || sizes[0] != 0 || sizes[len(sizes)-1] != 0 {
			return fmt.Errorf("segments %v of %v bytes: not cleaned yet", bases, sizes)
		}
		return nil
	})
	// The tombstone's delete horizon passes 300 ms after that cleaning and
	// the cleaner looks every 50 ms: give it time to remove the tombstone
	// had it been cleanable, reading to the end all along.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		recs := readToEnd(t, cl, topic, 1)
		if len(recs) == 0 || recs[0].Offset != 1 || string(recs[0].Value) != "v" {
			t.Fatalf("read %v: want keep=v at 1 first", recs)
		}
		time.Sleep(100 * time.Millisecond) // the pace of the reads over a window in which nothing may change
	}
	if hw := fetchAt(t, cl, topic, 0, 0).HighWatermark; hw != 4 {
		t.Fatalf("high-watermark %d, want 4", hw)
	}
	fp := fetchAt(t, cl, topic, 0, 3)
	var last record.Header
	if _, err := record.Batches(fp.RecordBatches, func(_ []byte, h record.Header) error {
		last = h
		return nil
	}); err != nil || last.BaseOffset != 3 || last.NumRecords != 1 {
		t.Fatalf("fetch at 3: last batch %+v (%v), want the tombstone at 3", last, err)
	}
}
