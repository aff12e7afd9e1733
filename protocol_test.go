package samsa_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
)

// rawRequest writes one request frame on conn and reads the response body
// (after the correlation id).
func rawRequest(t *testing.T, conn net.Conn, req kmsg.Request, correlationID int32) []byte {
	t.Helper()
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, correlationID)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != correlationID {
		t.Fatalf("correlation id %d, want %d", got, correlationID)
	}
	return buf[4:]
}

func dial(t *testing.T, addr string) net.Conn { return testutil.Dial(t, addr) }

// expectClosed checks the server closed conn.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection not closed: read %d, %v", n, err)
	}
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	conn := dial(t, n.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(99) // encoded as v3+; the broker must answer in v0
	body := rawRequest(t, conn, req, 5)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	// The same connection then works with a supported version.
	ok := kmsg.NewPtrApiVersionsRequest()
	ok.SetVersion(0)
	body = rawRequest(t, conn, ok, 6)
	resp = kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("v0: %v %d", err, resp.ErrorCode)
	}
	// Produce v3+ and Fetch v4+ are advertised with the old versions that
	// kafkajs and kafka-python use.
	for _, k := range resp.ApiKeys {
		if (k.ApiKey == 0 && (k.MinVersion > 3 || k.MaxVersion < 7)) || (k.ApiKey == 1 && (k.MinVersion > 4 || k.MaxVersion < 11)) {
			t.Errorf("key %d: %d-%d", k.ApiKey, k.MinVersion, k.MaxVersion)
		}
	}
}

func TestBadFramesCloseOnlyThatConnection(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"socket.request.max.bytes": "1000"})
	cl := newClient(t, n)
	createTopic(t, cl, "t", 1, nil)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, 5000)},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xfffffff0)},
		{"garbage body", append(binary.BigEndian.AppendUint32(nil, 12), 0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff)},
		{"unknown key", append(binary.BigEndian.AppendUint32(nil, 10), 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, n.Addr())
			conn.Write(tc.frame)
			expectClosed(t, conn)
		})
	}
	// The broker still serves other connections.
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Value: []byte("still here")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestFetchWaitsAndWakesOnAppend(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "w", 1, nil)
	ctx := context.Background()

	fetch := func(offset int64, minBytes, maxWait, partMax, maxBytes int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		req.ReplicaID = -1
		req.MinBytes, req.MaxWaitMillis, req.MaxBytes = minBytes, maxWait, maxBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "w"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, partMax, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// An empty partition answers with zero-length, non-null records.
	resp := fetch(0, 0, 0, 1<<20, 1<<20)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.RecordBatches == nil || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("empty fetch: %+v", p)
	}
	if resp.SessionID != 0 {
		t.Fatalf("session id %d, sessions are declined", resp.SessionID)
	}

	// A waiting fetch returns when a record arrives, well before max wait.
	got := make(chan *kmsg.FetchResponse, 1)
	go func() { got <- fetch(0, 1, 30000, 1<<20, 1<<20) }()
	time.AfterFunc(200*time.Millisecond, func() {
		cl.Produce(ctx, &kgo.Record{Topic: "w", Value: []byte("wake")}, nil)
	})
	select {
	case resp = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("fetch did not wake on append")
	}
	if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
		t.Fatalf("woken fetch: %+v", p)
	}

	// KIP-74: a batch larger than the partition limit is returned whole.
	big := make([]byte, 10000)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "w", Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp = fetch(1, 1, 0, 100, 100)
	if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) < 100 {
		t.Fatalf("KIP-74: got %d bytes", len(p.RecordBatches))
	}

	// Past the end: OFFSET_OUT_OF_RANGE.
	resp = fetch(100, 1, 0, 1<<20, 1<<20)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.RecordBatches == nil {
		t.Fatalf("out of range: %+v", p)
	}
}

func TestCorruptBatchRejected(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "c", 2, nil)
	ctx := context.Background()
	good := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, LastOffsetDelta: 0,
		Records: (&kmsg.Record{Length: 6, Value: []byte("x")}).AppendTo(nil)}
	// Compute a valid batch through the client, then corrupt a copy.
	raw := good.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "c"
	bad := append([]byte(nil), raw...)
	bad[len(bad)-1] ^= 0xff // CRC no longer matches
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: bad}, {Partition: 1, Records: []byte{1, 2, 3}}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// A bad CRC is CORRUPT_MESSAGE; three bytes hold no batch at all,
	// INVALID_RECORD as in Kafka's ProduceRequest.validateRecords.
	for _, p := range resp.Topics[0].Partitions {
		if want := []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}[p.Partition]; p.ErrorCode != want {
			t.Errorf("partition %d: error %v, want %v", p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
		}
	}
	// Nothing was written.
	lo, _ := kadm.NewClient(cl).ListEndOffsets(ctx, "c")
	lo.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("partition %d end offset %d after rejected batches", o.Partition, o.Offset)
		}
	})
}

// roundTrip sends req (at its version) on conn and decodes the response,
// whose header has tagged fields from the request's first flexible version
// (ApiVersions aside).
func roundTrip(t *testing.T, conn net.Conn, req kmsg.Request, correlationID int32) kmsg.Response {
	t.Helper()
	body := rawRequest(t, conn, req, correlationID)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("response header tags %x", body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// legacyMessageSet is a message set of one magic 0 or 1 message (the
// formats before KIP-98), CRC-32 (IEEE) computed.
func legacyMessageSet(magic int8, value string) []byte {
	var body []byte
	if magic == 0 {
		m := kmsg.MessageV0{Magic: 0, Value: []byte(value)}
		body = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Magic: 1, Timestamp: time.Now().UnixMilli(), Value: []byte(value)}
		body = m.AppendTo(nil)
	}
	// body: offset (8), size (4), crc (4), then what the CRC and size cover.
	binary.BigEndian.PutUint32(body[8:], uint32(len(body)-12))
	binary.BigEndian.PutUint32(body[12:], crc32.ChecksumIEEE(body[16:]))
	return body
}

// TestProduceRecordsChecks: as Kafka's ProduceRequest.validateRecords, a
// partition's records in Produce v3+ must be exactly one batch of magic 2,
// whatever the batches (with or without producer ids, compressed or not);
// magic 0 and 1 message sets get INVALID_RECORD. Nothing of a refused
// partition is written; the other partitions of the request are.
// plainBatch builds one batch of values without keys or producer id, with
// codec.
func plainBatch(t *testing.T, codec record.Codec, values ...string) []byte {
	t.Helper()
	var recs []record.Record
	for i, v := range values {
		recs = append(recs, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	b, err := record.Build(record.Spec{Codec: codec, ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch,
		BaseSequence: record.NoSequence, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProduceRecordsChecks(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "p", 2, nil)
	batch := func(codec record.Codec, values ...string) []byte { return plainBatch(t, codec, values...) }
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	plain, gzip, zstd := batch(record.CodecNone, "a", "b"), batch(record.CodecGzip, "c"), batch(record.CodecZstd, "z")
	badMagic := append([]byte(nil), plain...)
	badMagic[16] = 3

	conn := dial(t, n.Addr())
	var corr int32
	produce := func(version int16, parts map[int32][]byte) map[int32]kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		req.Acks, req.TimeoutMillis = 1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "p"
		for p, recs := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recs
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		corr++
		resp := roundTrip(t, conn, req, corr).(*kmsg.ProduceResponse)
		out := map[int32]kmsg.ProduceResponseTopicPartition{}
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				out[sp.Partition] = sp
			}
		}
		return out
	}
	written := int64(0) // records accepted into partition 0
	for _, tc := range []struct {
		name    string
		version int16
		records []byte
		want    *kerr.Error
		msg     string // in the error message from v8
	}{
		{"two uncompressed batches without producer ids", 9, join(plain, plain), kerr.InvalidRecord, "exactly one record batch per partition"},
		{"two compressed batches", 11, join(gzip, gzip), kerr.InvalidRecord, "exactly one record batch per partition"},
		{"two batches at v3", 3, join(plain, gzip), kerr.InvalidRecord, ""},
		{"magic 1 message set", 9, legacyMessageSet(1, "old"), kerr.InvalidRecord, "magic version 2"},
		{"magic 0 message set", 3, legacyMessageSet(0, "older"), kerr.InvalidRecord, ""},
		{"magic 1 message set, then a batch", 8, join(legacyMessageSet(1, "old"), plain), kerr.InvalidRecord, "magic version 2"},
		{"no records", 9, []byte{}, kerr.InvalidRecord, "at least one record batch"},
		{"null records", 9, nil, kerr.InvalidRecord, "at least one record batch"},
		{"a partial batch", 9, plain[:40], kerr.InvalidRecord, "at least one record batch"},
		{"magic 3", 9, badMagic, kerr.CorruptMessage, "invalid magic"},
		{"zstd before v7", 6, zstd, kerr.UnsupportedCompressionType, ""},
		{"zstd at v7", 7, zstd, nil, ""},
		{"one batch at v3", 3, plain, nil, ""},
		{"one compressed batch at v11", 11, gzip, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := produce(tc.version, map[int32][]byte{0: tc.records})[0]
			if tc.want == nil {
				if sp.ErrorCode != 0 || sp.BaseOffset != written {
					t.Fatalf("error %v, base offset %d, want %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, written)
				}
				_, _ = record.Batches(tc.records, func(_ []byte, h record.Header) error { written += int64(h.NumRecords); return nil })
				return
			}
			if sp.ErrorCode != tc.want.Code || sp.BaseOffset != -1 {
				t.Fatalf("error %v, base offset %d, want %v", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, tc.want)
			}
			if tc.version >= 8 && (sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, tc.msg)) {
				t.Fatalf("error message %v, want one with %q", sp.ErrorMessage, tc.msg)
			}
		})
	}
	// One partition refused, the other written, in the same request.
	got := produce(9, map[int32][]byte{0: join(plain, plain), 1: plain})
	if got[0].ErrorCode != kerr.InvalidRecord.Code || got[1].ErrorCode != 0 || got[1].BaseOffset != 0 {
		t.Fatalf("mixed request: %+v", got)
	}
	lo, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) {
		if want := map[int32]int64{0: written, 1: 2}[o.Partition]; o.Offset != want {
			t.Errorf("partition %d ends at %d, want %d", o.Partition, o.Offset, want)
		}
	})
}

// TestProduceV0toV2Closes: ApiVersions advertises Produce from v0 (as Kafka
// 4 does for librdkafka, KAFKA-18659), but v0-v2, the versions that carried
// magic 0 and 1 message sets, were removed (KIP-896): the connection is
// closed, as Kafka's SocketServer does for a version it does not serve.
func TestProduceV0toV2Closes(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newClient(t, n), "old", 1, nil)
	for v := int16(0); v <= 2; v++ {
		conn := dial(t, n.Addr())
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "old"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = legacyMessageSet(int8(min(v, 1)), "old")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, conn)
	}
}

// TestDescribeConfigsSynonyms checks sources and synonyms against Kafka's
// ConfigHelper: a topic config lists its own value (DYNAMIC_TOPIC_CONFIG),
// then the broker properties of its synonym chain that are set
// (STATIC_BROKER_CONFIG), then those with a default (DEFAULT_CONFIG), from
// the first entry named as the chain's head (log.retention.ms for
// retention.ms); the source is that of the first synonym.
func TestDescribeConfigsSynonyms(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"log.retention.ms":    "7200000",
		"log.retention.hours": "1", // below log.retention.ms
		"log.roll.hours":      "2",
		"message.max.bytes":   "2000000",
	})
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, "plain", 1, nil)
	createTopic(t, cl, "own", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")})

	type syn struct {
		name, value string
		src         kmsg.ConfigSource
	}
	const (
		static  = kmsg.ConfigSourceStaticBrokerConfig
		def     = kmsg.ConfigSourceDefaultConfig
		dynamic = kmsg.ConfigSourceDynamicTopicConfig
	)
	check := func(t *testing.T, rcs kadm.ResourceConfigs, resource, name string, value *string, src kmsg.ConfigSource, want []syn) {
		t.Helper()
		rc, err := rcs.On(resource, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("%s: %v %v", resource, err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key != name {
				continue
			}
			var got []syn
			for _, s := range c.Synonyms {
				got = append(got, syn{s.Key, orNull(s.Value), s.Source})
			}
			if orNull(c.Value) != orNull(value) || c.Source != src || !slices.Equal(got, want) {
				t.Errorf("%s %s = %s (%v), synonyms %v; want %s (%v), %v", resource, name, orNull(c.Value), c.Source, got, orNull(value), src, want)
			}
			return
		}
		t.Errorf("%s: no config %s", resource, name)
	}
	str := kmsg.StringPtr

	topics, err := adm.DescribeTopicConfigs(ctx, "plain", "own")
	if err != nil {
		t.Fatal(err)
	}
	retention := []syn{{"log.retention.ms", "7200000", static}, {"log.retention.hours", "1", static}, {"log.retention.hours", "168", def}}
	check(t, topics, "plain", "retention.ms", str("7200000"), static, retention)
	check(t, topics, "own", "retention.ms", str("1000"), dynamic, append([]syn{{"retention.ms", "1000", dynamic}}, retention...))
	// log.roll.ms (the head of segment.ms's chain) is neither set nor has
	// a default: Kafka drops the log.roll.hours entries before it.
	check(t, topics, "plain", "segment.ms", str("7200000"), def, nil)
	check(t, topics, "plain", "segment.bytes", str("1073741824"), def, []syn{{"log.segment.bytes", "1073741824", def}})
	check(t, topics, "plain", "max.message.bytes", str("2000000"), static, []syn{{"message.max.bytes", "2000000", static}, {"message.max.bytes", "1048588", def}})
	check(t, topics, "plain", "flush.ms", str("9223372036854775807"), def, nil)
	check(t, topics, "plain", "leader.replication.throttled.replicas", str(""), def, nil)

	// flush.ms set neither on the topic nor by log.flush.interval.ms is
	// log.flush.scheduler.interval.ms, the interval the broker fsyncs at
	// (KafkaConfig.logFlushIntervalMs); as for segment.ms above, Kafka
	// drops the synonyms before the chain's head, log.flush.interval.ms,
	// so the source is DEFAULT_CONFIG with no synonym.
	sched := startNode(t, t.TempDir(), map[string]string{"log.flush.scheduler.interval.ms": "2000"})
	scl := newClient(t, sched)
	createTopic(t, scl, "sched", 1, nil)
	createTopic(t, scl, "sched-own", 1, map[string]*string{"flush.ms": kmsg.StringPtr("500")})
	schedTopics, err := kadm.NewClient(scl).DescribeTopicConfigs(ctx, "sched", "sched-own")
	if err != nil {
		t.Fatal(err)
	}
	check(t, schedTopics, "sched", "flush.ms", str("2000"), def, nil)
	check(t, schedTopics, "sched-own", "flush.ms", str("500"), dynamic, []syn{{"flush.ms", "500", dynamic}})
	both := startNode(t, t.TempDir(), map[string]string{"log.flush.scheduler.interval.ms": "2000", "log.flush.interval.ms": "3000"})
	bcl := newClient(t, both)
	createTopic(t, bcl, "both", 1, nil)
	bothTopics, err := kadm.NewClient(bcl).DescribeTopicConfigs(ctx, "both")
	if err != nil {
		t.Fatal(err)
	}
	check(t, bothTopics, "both", "flush.ms", str("3000"), static, []syn{{"log.flush.interval.ms", "3000", static},
		{"log.flush.scheduler.interval.ms", "2000", static}, {"log.flush.scheduler.interval.ms", "9223372036854775807", def}})

	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// As Kafka's DynamicBrokerReconfigurationTest expects of these.
	check(t, brokers, "1", "log.retention.ms", str("7200000"), static, retention)
	check(t, brokers, "1", "log.retention.hours", str("1"), static, retention[1:])
	check(t, brokers, "1", "log.roll.hours", str("2"), static, []syn{{"log.roll.hours", "2", static}, {"log.roll.hours", "168", def}})
	check(t, brokers, "1", "log.roll.ms", nil, def, nil)
	check(t, brokers, "1", "log.retention.minutes", nil, def, nil)
	check(t, brokers, "1", "num.partitions", str("1"), def, []syn{{"num.partitions", "1", def}})

	// The empty name is the cluster-wide dynamic defaults: none. Another
	// broker's id, or no id, is INVALID_REQUEST.
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"", "7", "x"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, r)
	}
	// An empty list of names asks for all, as null does.
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "plain", []string{}
	req.Resources = append(req.Resources, r)
	req.SetVersion(4)
	// Raw, since clients send a broker resource to the broker it names.
	resp := roundTrip(t, dial(t, n.Addr()), req, 1).(*kmsg.DescribeConfigsResponse)
	if got := resp.Resources[0]; got.ErrorCode != 0 || len(got.Configs) != 0 {
		t.Errorf("cluster defaults: %v, %d configs", kerr.ErrorForCode(got.ErrorCode), len(got.Configs))
	}
	for _, got := range resp.Resources[1:3] {
		if got.ErrorCode != kerr.InvalidRequest.Code || got.ErrorMessage == nil {
			t.Errorf("broker %q: %v %v", got.ResourceName, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
		}
	}
	if got := resp.Resources[3]; got.ErrorCode != 0 || len(got.Configs) < 20 {
		t.Errorf("topic with an empty list of names: %v, %d configs", kerr.ErrorForCode(got.ErrorCode), len(got.Configs))
	}
}

// orNull is *s, or "<null>".
func orNull(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
