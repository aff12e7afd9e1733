package samsa_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa/internal/cli/dumplog"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/record/recordtest"
)

// produceBatch sends records as partition of topic in a Produce request of
// version (transactional when txnID is not empty), acks=all, to cl's seed
// brokers, and returns the partition's response. kgo sends a request at
// the highest version both sides support whatever its SetVersion says, so
// the version is pinned with a client of its own.
func produceBatch(t *testing.T, cl *kgo.Client, topic string, partition int32, version int16, txnID string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.Produce.Int16(), version)
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	pinned, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	cl = pinned
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if txnID != "" {
		req.TransactionID = &txnID
	}
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != version {
		t.Fatalf("Produce sent at v%d, not v%d", resp.Version, version)
	}
	return resp.Topics[0].Partitions[0]
}

// endOffset is partition 0's log end offset.
func endOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	lo, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := lo.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// zstdBomb is a zstd batch of one record whose value is n zero bytes: a
// few KiB that decompress to n.
func zstdBomb(t *testing.T, n int64) []byte {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	vl := recordtest.V(n)
	bodyLen := int64(1+1+1+1+len(vl)+1) + n
	prefix := append(recordtest.V(bodyLen), 0, 0, 0, 1) // length, attributes, timestamp delta, offset delta, key -1
	prefix = append(prefix, vl...)
	w.Write(prefix) //nolint:errcheck // a bytes.Buffer
	if _, err := io.CopyN(w, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	w.Write(recordtest.V(0)) //nolint:errcheck // headers
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	spec := recordtest.Plain(1, time.Now().UnixMilli())
	spec.Codec = record.CodecZstd
	return recordtest.RawCompressed(spec, buf.Bytes())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestProduceValidation: every malformed batch of the table is refused
// with its Kafka error code, a message and the records at fault, and the
// log does not move; the topic's rules (compacted keys, timestamp bounds,
// LogAppendTime) and a decompression bomb get theirs; what is accepted
// afterwards, in every codec, reads back with franz-go, kcat,
// confluent-kafka and dump-log.
func TestProduceValidation(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	cl := newClient(t, n)
	str := func(s string) *string { return &s }
	createTopic(t, cl, "v", 1, nil)
	createTopic(t, cl, "vc", 1, map[string]*string{"cleanup.policy": str("compact")})
	createTopic(t, cl, "vt", 1, map[string]*string{"message.timestamp.before.max.ms": str("60000")})
	createTopic(t, cl, "vl", 1, map[string]*string{"message.timestamp.type": str("LogAppendTime")})
	now := time.Now().UnixMilli()

	for _, c := range recordtest.Malformed(now) {
		sp := produceBatch(t, cl, "v", 0, 11, "", c.Batch)
		if sp.ErrorCode != c.Code {
			t.Errorf("%s: %v (%s), want %v", c.Name, kerr.ErrorForCode(sp.ErrorCode), deref(sp.ErrorMessage), kerr.ErrorForCode(c.Code))
			continue
		}
		if sp.ErrorMessage == nil || *sp.ErrorMessage == "" {
			t.Errorf("%s: no error message", c.Name)
		}
		if c.RecordErrors && len(sp.ErrorRecords) == 0 {
			t.Errorf("%s: no record errors (%s)", c.Name, deref(sp.ErrorMessage))
		}
		if sp.BaseOffset != -1 {
			t.Errorf("%s: base offset %d", c.Name, sp.BaseOffset)
		}
		if end := endOffset(t, cl, "v"); end != 0 {
			t.Fatalf("%s: log end offset %d after the refusal", c.Name, end)
		}
	}

	keyless := recordtest.Rec([]byte{0}, recordtest.V(0), recordtest.V(1), recordtest.V(-1), recordtest.V(1), []byte("v"), recordtest.V(0))
	old := recordtest.Plain(1, now-120_000)
	future := recordtest.Plain(1, now+2*3_600_000)
	lat := recordtest.Plain(1, now)
	lat.Attributes = record.TimestampTypeBit
	for _, tc := range []struct {
		name, topic string
		batch       []byte
		code        int16
		index       int32 // of the record error, -1 none
	}{
		{"compacted topic, record 1 without a key", "vc", recordtest.Raw(recordtest.Plain(2, now), append(recordtest.Good(0), keyless...)), kerr.InvalidRecord.Code, 1},
		{"older than message.timestamp.before.max.ms", "vt", recordtest.Raw(old, recordtest.Good(0)), kerr.InvalidTimestamp.Code, 0},
		{"two hours ahead (after.max.ms default)", "v", recordtest.Raw(future, recordtest.Good(0)), kerr.InvalidTimestamp.Code, 0},
		{"LogAppendTime from the client on a LogAppendTime topic", "vl", recordtest.Raw(lat, recordtest.Good(0)), kerr.InvalidTimestamp.Code, 0},
		{"zstd bomb of 130 MiB", "v", zstdBomb(t, 130<<20), kerr.RecordListTooLarge.Code, -1},
	} {
		sp := produceBatch(t, cl, tc.topic, 0, 11, "", tc.batch)
		if sp.ErrorCode != tc.code {
			t.Errorf("%s: %v (%s), want %v", tc.name, kerr.ErrorForCode(sp.ErrorCode), deref(sp.ErrorMessage), kerr.ErrorForCode(tc.code))
			continue
		}
		if tc.index >= 0 && (len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != tc.index) {
			t.Errorf("%s: record errors %+v", tc.name, sp.ErrorRecords)
		}
		if end := endOffset(t, cl, tc.topic); end != 0 {
			t.Errorf("%s: log end offset %d", tc.name, end)
		}
	}
	// Before v8 the response has no message or record errors; the code
	// is the same.
	if sp := produceBatch(t, cl, "v", 0, 7, "", recordtest.Malformed(now)[0].Batch); sp.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("v7: %v", kerr.ErrorForCode(sp.ErrorCode))
	}

	// What real clients write is accepted, in every codec, and every
	// reader reads it.
	var want []string
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		p := newClient(t, n, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("v"))
		var recs []*kgo.Record
		for i := range 20 {
			v := fmt.Sprintf("%d-%d-%s", len(want), i, strings.Repeat("x", i*10))
			want = append(want, v)
			recs = append(recs, &kgo.Record{Key: []byte("k"), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}})
		}
		if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatalf("franz-go produce: %v", err)
		}
	}
	got := readTopic(t, n.Addr(), "v", kgo.ReadUncommitted(), len(want), 30*time.Second)
	if len(got) != len(want) {
		t.Fatalf("franz-go read %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if string(r.Value) != want[i] {
			t.Fatalf("franz-go record %d: %q, want %q", i, r.Value, want[i])
		}
	}
	if kcat, err := exec.LookPath("kcat"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, kcat, "-C", "-b", n.Addr(), "-t", "v", "-o", "beginning", "-e", "-q", "-f", "%s\n").Output()
		if err != nil {
			t.Fatalf("kcat: %v", err)
		}
		if lines := strings.Fields(string(out)); strings.Join(lines, ",") != strings.Join(want, ",") {
			t.Fatalf("kcat read %d records: %v", len(lines), lines)
		}
	} else {
		t.Log("kcat not installed: skipping its read")
	}
	if out, ok := pythonConsume(t, n.Addr(), "v", "read_uncommitted"); ok && strings.Join(out, ",") != strings.Join(want, ",") {
		t.Fatalf("confluent-kafka read %d records: %v", len(out), out)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "v-0", "*.log"))
	if len(segs) == 0 {
		t.Fatal("no segment of v-0")
	}
	for _, s := range segs {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		err := dumplog.File(w, s, dumplog.Options{PrintRecords: true})
		w.Flush()
		if err != nil {
			t.Fatalf("dump-log %s: %v\n%s", s, err, buf.String())
		}
		if c := strings.Count(buf.String(), "payload: "); c != len(want) {
			t.Fatalf("dump-log printed %d records, want %d", c, len(want))
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestProduceToInternalTopics: a client's Produce to the coordinators'
// topics is refused as Kafka refuses it (INVALID_TOPIC_EXCEPTION), and
// writes nothing, while the coordinators' own appends (an offset commit,
// a transaction) still land there.
func TestProduceToInternalTopics(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(nil))
	cl := newClient(t, n)
	createTopic(t, cl, "data", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The coordinators create and write their topics.
	tx := newClient(t, n, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("data"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.AddOffset("data", 0, 1, -1)
	if r, err := adm.CommitOffsets(ctx, "g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	for _, topic := range []string{"__consumer_offsets", "__transaction_state"} {
		before := map[int32]int64{}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		written := int64(0)
		ends.Each(func(o kadm.ListedOffset) { before[o.Partition] = o.Offset; written += o.Offset })
		if written == 0 {
			t.Fatalf("%s: the coordinator wrote nothing", topic)
		}
		// A well-formed record, as a forger would write it.
		b, err := record.Build(record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.Record{{Key: []byte{0, 1, 0, 1, 'g'}, Value: []byte{0, 3}}})
		if err != nil {
			t.Fatal(err)
		}
		sp := produceBatch(t, cl, topic, 0, 11, "", b)
		if sp.ErrorCode != kerr.InvalidTopicException.Code || deref(sp.ErrorMessage) != "Cannot append to internal topic "+topic {
			t.Fatalf("%s: %v %q", topic, kerr.ErrorForCode(sp.ErrorCode), deref(sp.ErrorMessage))
		}
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset != before[o.Partition] {
				t.Errorf("%s-%d: end offset %d, was %d", topic, o.Partition, o.Offset, before[o.Partition])
			}
		})
	}
}

var captureCorpus = flag.Bool("capture-corpus", false, "write the client batches of TestClientBatchesPassCheck to internal/record/testdata/fuzz/FuzzCheck")

// TestClientBatchesPassCheck: what librdkafka (kcat) and franz-go write, in
// every codec, passes the broker's checks and reads back; each stored
// batch passes record.Check again. With -capture-corpus the batches become
// FuzzCheck's seeds.
func TestClientBatchesPassCheck(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	cl := newClient(t, n)
	createTopic(t, cl, "clients", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []string
	var origin []string // which client and codec wrote each batch, in order
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := range 30 {
			v := fmt.Sprintf("kcat-%s-%d-%s", codec, i, strings.Repeat("y", i*7))
			want = append(want, v)
			fmt.Fprintf(&in, "k%d\t%s\n", i%3, v)
		}
		// -K: key<TAB>value; one linger so that the records share a batch.
		c := exec.CommandContext(ctx, kcat, "-P", "-b", n.Addr(), "-t", "clients", "-p", "0", "-K", "\t", "-z", codec,
			"-X", "linger.ms=100", "-X", "enable.idempotence=true")
		c.Stdin = strings.NewReader(in.String())
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("kcat -z %s: %v\n%s", codec, err, out)
		}
		origin = append(origin, "librdkafka-"+codec)
	}
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		p := newClient(t, n, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("clients"), kgo.ProducerLinger(50*time.Millisecond))
		var recs []*kgo.Record
		for i := range 30 {
			v := fmt.Sprintf("franz-%d-%d-%s", len(origin), i, strings.Repeat("z", i*5))
			want = append(want, v)
			recs = append(recs, &kgo.Record{Key: []byte{byte(i)}, Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte{byte(i)}}}})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("franz-go: %v", err)
		}
		origin = append(origin, fmt.Sprintf("franz-go-%d", len(origin)-5))
	}
	got := readTopic(t, n.Addr(), "clients", kgo.ReadUncommitted(), len(want), 30*time.Second)
	if len(got) != len(want) {
		t.Fatalf("read %d of %d records", len(got), len(want))
	}
	seg, err := os.ReadFile(filepath.Join(dir, "clients-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	_, err = record.Batches(seg, func(b []byte, h record.Header) error {
		pol := record.Policy{NowMillis: time.Now().UnixMilli(), TimestampBeforeMaxMs: record.NoTimestampBound, TimestampAfterMaxMs: record.NoTimestampBound}
		if _, err := record.Check(b, &pol); err != nil {
			return fmt.Errorf("stored batch at offset %d: %w", h.BaseOffset, err)
		}
		if *captureCorpus {
			name := fmt.Sprintf("client-%02d-%v", i, h.Codec())
			data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join("internal", "record", "testdata", "fuzz", "FuzzCheck", name), []byte(data), 0o644); err != nil {
				return err
			}
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i < len(origin) {
		t.Fatalf("%d batches for %d producers", i, len(origin))
	}
}
