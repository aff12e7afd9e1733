package samsa_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

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
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.CorruptMessage.Code {
			t.Errorf("partition %d: error %d, want CORRUPT_MESSAGE", p.Partition, p.ErrorCode)
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
