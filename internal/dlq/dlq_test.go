package dlq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/dlq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func springHeaders(topic string, p int32, off int64) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: dlq.SpringTopic, Value: []byte(topic)},
		{Key: dlq.SpringPartition, Value: be32(p)},
		{Key: dlq.SpringOffset, Value: be64(off)},
		{Key: dlq.SpringTimestamp, Value: be64(1700000000123)},
		{Key: dlq.SpringExceptionFQCN, Value: []byte("java.lang.IllegalStateException")},
		{Key: dlq.SpringExceptionMsg, Value: []byte("bad order")},
		{Key: dlq.SpringConsumerGroup, Value: []byte("billing")},
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []kgo.RecordHeader
		want    dlq.Origin
		err     error
	}{
		{
			name:    "kip-1191",
			headers: dlq.Headers("orders", 3, 42, "workers", 5, dlq.ReasonDeliveryLimited),
			want: dlq.Origin{Format: dlq.FormatShare, Topic: "orders", Partition: 3, Offset: 42, Group: "workers",
				DeliveryCount: 5, Reason: dlq.ReasonDeliveryLimited},
		},
		{
			name:    "kip-1191 without delivery count",
			headers: dlq.Headers("orders", 0, 7, "workers", -1, dlq.ReasonRejected),
			want: dlq.Origin{Format: dlq.FormatShare, Topic: "orders", Offset: 7, Group: "workers",
				DeliveryCount: -1, Reason: dlq.ReasonRejected},
		},
		{
			name:    "spring",
			headers: springHeaders("orders", 2, 1<<40),
			want: dlq.Origin{Format: dlq.FormatSpring, Topic: "orders", Partition: 2, Offset: 1 << 40,
				Timestamp: time.UnixMilli(1700000000123), Group: "billing", DeliveryCount: -1,
				Reason: "bad order", Exception: "java.lang.IllegalStateException"},
		},
		{name: "plain record", headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("x")}}, err: dlq.ErrNotDeadLetter},
		{
			name: "spring partition as text",
			headers: []kgo.RecordHeader{{Key: dlq.SpringTopic, Value: []byte("t")},
				{Key: dlq.SpringPartition, Value: []byte("1")}, {Key: dlq.SpringOffset, Value: be64(1)}},
			err: dlq.ErrBadHeader,
		},
		{
			name:    "spring without offset",
			headers: []kgo.RecordHeader{{Key: dlq.SpringTopic, Value: []byte("t")}, {Key: dlq.SpringPartition, Value: be32(1)}},
			err:     dlq.ErrBadHeader,
		},
		{
			name: "kip-1191 partition not a number",
			headers: []kgo.RecordHeader{{Key: dlq.HeaderTopic, Value: []byte("t")},
				{Key: dlq.HeaderPartition, Value: []byte{0, 0, 0, 1}}, {Key: dlq.HeaderOffset, Value: []byte("1")}},
			err: dlq.ErrBadHeader,
		},
		{
			name: "kip-1191 negative offset",
			headers: []kgo.RecordHeader{{Key: dlq.HeaderTopic, Value: []byte("t")},
				{Key: dlq.HeaderPartition, Value: []byte("1")}, {Key: dlq.HeaderOffset, Value: []byte("-1")}},
			err: dlq.ErrBadHeader,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dlq.Decode(tc.headers)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Decode: err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !got.Timestamp.Equal(tc.want.Timestamp) {
				t.Errorf("timestamp %v, want %v", got.Timestamp, tc.want.Timestamp)
			}
			got.Timestamp, tc.want.Timestamp = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("Decode:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	enc := func(hs []kgo.RecordHeader) []byte {
		var b []byte
		for _, h := range hs {
			b = append(b, byte(len(h.Key)))
			b = append(b, h.Key...)
			b = append(b, byte(len(h.Value)))
			b = append(b, h.Value...)
		}
		return b
	}
	f.Add(enc(dlq.Headers("orders", 3, 42, "g", 5, dlq.ReasonRejected)))
	f.Add(enc(springHeaders("orders", 1, 9)))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The input is a list of (1-byte length, key, 1-byte length, value).
		var hs []kgo.RecordHeader
		for len(b) > 0 {
			n := min(int(b[0]), len(b)-1)
			key := string(b[1 : 1+n])
			b = b[1+n:]
			var v []byte
			if len(b) > 0 {
				m := min(int(b[0]), len(b)-1)
				v = b[1 : 1+m]
				b = b[1+m:]
			}
			hs = append(hs, kgo.RecordHeader{Key: key, Value: v})
		}
		o, err := dlq.Decode(hs)
		if err == nil && (o.Topic == "" || o.Partition < 0 || o.Offset < 0) {
			t.Fatalf("Decode accepted %+v", o)
		}
		if err == nil {
			if _, _, err := dlq.Restore(&kgo.Record{Headers: hs}); err != nil {
				t.Fatalf("Restore refused what Decode accepted: %v", err)
			}
		}
	})
}

// TestReplay writes dead-letter records of both families to a real Samsa
// node, replays them, and reads them back from their source partitions
// with the key, value and non-DLQ headers intact.
func TestReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders.DLT"); err != nil {
		t.Fatal(err)
	}
	trace := kgo.RecordHeader{Key: "trace-id", Value: []byte("abc")}
	dead := []*kgo.Record{
		{Topic: "orders.DLT", Key: []byte("k1"), Value: []byte("v1"),
			Headers: append([]kgo.RecordHeader{trace}, dlq.Headers("orders", 2, 10, "workers", 5, dlq.ReasonDeliveryLimited)...)},
		{Topic: "orders.DLT", Key: []byte("k2"), Value: []byte("v2"),
			Headers: append(springHeaders("orders", 1, 11), trace)},
	}
	if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Read them back, as samsa dlq replay does, then replay.
	got := consume(ctx, t, n.Addr(), "orders.DLT", 2)
	if k, err := dlq.Replay(ctx, cl, got); err != nil || k != 2 {
		t.Fatalf("Replay: %d, %v", k, err)
	}
	back := consume(ctx, t, n.Addr(), "orders", 2)
	byKey := map[string]*kgo.Record{}
	for _, r := range back {
		byKey[string(r.Key)] = r
	}
	for key, want := range map[string]struct {
		p     int32
		value string
	}{"k1": {2, "v1"}, "k2": {1, "v2"}} {
		r := byKey[key]
		if r == nil {
			t.Fatalf("%s not replayed; got %v", key, back)
		}
		if r.Partition != want.p || string(r.Value) != want.value {
			t.Errorf("%s: partition %d value %q, want %d %q", key, r.Partition, r.Value, want.p, want.value)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "trace-id" {
			t.Errorf("%s: headers %v, want only trace-id", key, r.Headers)
		}
	}
	// A record without origin headers stops the replay before anything is produced.
	if k, err := dlq.Replay(ctx, cl, []*kgo.Record{{Topic: "x", Value: []byte("y")}}); !errors.Is(err, dlq.ErrNotDeadLetter) || k != 0 {
		t.Errorf("Replay of a plain record: %d, %v", k, err)
	}
}

func consume(ctx context.Context, t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d of %d records: %v", topic, len(out), n, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}
