package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

func sampleRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := Record{OffsetDelta: int32(i), TimestampDelta: int64(i * 3)}
		switch i % 4 {
		case 0:
			r.Key, r.Value = []byte(fmt.Sprintf("key-%d", i)), bytes.Repeat([]byte{byte(i)}, i*7)
		case 1:
			r.Value = []byte{} // empty, not null
		case 2:
			r.Key = []byte("k") // null value: a tombstone
		case 3:
			r.Value = []byte("v")
			r.Headers = []RecordHeader{{Key: "h1", Value: []byte("x")}, {Key: "", Value: nil}}
		}
		recs[i] = r
	}
	return recs
}

func TestBuildRecordsRoundTrip(t *testing.T) {
	spec := Spec{
		BaseOffset:           100,
		PartitionLeaderEpoch: 4,
		BaseTimestamp:        1_700_000_000_000,
		ProducerID:           77,
		ProducerEpoch:        2,
		BaseSequence:         10,
		Transactional:        true,
	}
	for _, codec := range allCodecs {
		for _, n := range []int{0, 1, 5, 1000} {
			t.Run(fmt.Sprintf("%v/%d", codec, n), func(t *testing.T) {
				spec := spec
				spec.Codec = codec
				recs := sampleRecords(n)
				b, err := Build(spec, recs)
				if err != nil {
					t.Fatal(err)
				}
				h, err := Validate(b)
				if err != nil {
					t.Fatal(err)
				}
				wantLast := int32(max(n-1, 0))
				if h.BaseOffset != 100 || h.Codec() != codec || h.NumRecords != int32(n) || h.LastOffsetDelta != wantLast ||
					h.ProducerID != 77 || h.ProducerEpoch != 2 || h.BaseSequence != 10 || !h.IsTransactional() || h.IsControl() {
					t.Fatalf("header %+v", h)
				}
				if n > 0 && h.MaxTimestamp != spec.BaseTimestamp+int64(3*(n-1)) {
					t.Fatalf("max timestamp %d", h.MaxTimestamp)
				}
				var got []Record
				err = Records(b, func(r Record) error {
					if r.Offset != 100+int64(r.OffsetDelta) || r.Timestamp != spec.BaseTimestamp+r.TimestampDelta {
						return fmt.Errorf("record %+v", r)
					}
					r.Offset, r.Timestamp = 0, 0
					got = append(got, r)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					recs = nil
				}
				if !reflect.DeepEqual(got, recs) {
					t.Fatalf("records differ:\n%+v\n%+v", got[:min(3, len(got))], recs[:min(3, len(recs))])
				}
			})
		}
	}
}

func TestLogAppendTime(t *testing.T) {
	b, err := Build(Spec{BaseTimestamp: 5, ProducerID: -1}, sampleRecords(3))
	if err != nil {
		t.Fatal(err)
	}
	SetMaxTimestampLogAppendTime(b, 999)
	if _, err := Validate(b); err != nil {
		t.Fatal(err)
	}
	Records(b, func(r Record) error {
		if r.Timestamp != 999 {
			t.Errorf("timestamp %d", r.Timestamp)
		}
		return nil
	})
}

// TestMatchesKmsg checks record and batch encoding against franz-go's
// independent kmsg encoder.
func TestMatchesKmsg(t *testing.T) {
	recs := sampleRecords(20)
	var body []byte
	for _, r := range recs {
		kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		body = kr.AppendTo(body)
	}
	spec := Spec{BaseOffset: 9, PartitionLeaderEpoch: 3, BaseTimestamp: 1000, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0}
	b, err := Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[HeaderSize:], body) {
		t.Fatal("records differ from kmsg's encoding")
	}
	kb := kmsg.RecordBatch{
		FirstOffset: 9, PartitionLeaderEpoch: 3, Magic: 2, LastOffsetDelta: 19,
		FirstTimestamp: 1000, MaxTimestamp: 1000 + 57, ProducerID: 5, ProducerEpoch: 1,
		NumRecords: 20, Records: body,
	}
	kb.Length = int32(len(kb.AppendTo(nil)) - LogOverhead)
	h, _ := ParseHeader(b)
	kb.CRC = int32(h.CRC)
	if !bytes.Equal(kb.AppendTo(nil), b) {
		t.Fatal("batch differs from kmsg's encoding")
	}
	var parsed kmsg.RecordBatch
	if err := parsed.ReadFrom(b); err != nil || parsed.NumRecords != 20 {
		t.Fatalf("kmsg cannot read our batch: %v", err)
	}
}

func TestRecordsErrors(t *testing.T) {
	good, _ := Build(Spec{ProducerID: -1}, sampleRecords(4))
	withBody := func(body []byte, count int32) []byte {
		b := append(append([]byte(nil), good[:HeaderSize]...), body...)
		binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
		binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
		return b
	}
	body := good[HeaderSize:]
	cases := []struct {
		name  string
		batch []byte
		err   error
	}{
		{"short header", good[:20], ErrTruncated},
		{"cut batch", good[:len(good)-1], ErrTruncated},
		{"count too high", withBody(body, 5), ErrCorrupt},
		{"count too low", withBody(body, 3), ErrCorrupt},
		{"negative count", withBody(body, -1), ErrCorrupt},
		{"record length past end", withBody([]byte{0x7e, 0}, 1), ErrCorrupt},
		{"negative record length", withBody([]byte{0x01}, 1), ErrCorrupt},
		{"varint overflow", withBody(bytes.Repeat([]byte{0xff}, 11), 1), ErrCorrupt},
		{"key length past record", withBody([]byte{8, 0, 0, 0, 0x20, 0, 0, 0}, 1), ErrCorrupt},
		{"record trailing bytes", withBody([]byte{12, 0, 0, 0, 1, 1, 0, 0, 0, 0}, 1), ErrCorrupt},
		{"null header key", withBody([]byte{14, 0, 0, 0, 1, 1, 2, 1, 1, 0, 0, 0, 0, 0}, 1), ErrCorrupt},
		{"huge header count", withBody([]byte{8, 0, 0, 0, 1, 1, 0xfe, 0xff}, 1), ErrCorrupt},
		{"bad codec", func() []byte {
			b := append([]byte(nil), good...)
			b[offAttributes+1] |= 7
			return b
		}(), ErrCorrupt},
		{"bad gzip", func() []byte {
			b := withBody([]byte("not gzip"), 1)
			b[offAttributes+1] |= byte(CodecGzip)
			return b
		}(), ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Records(tc.batch, func(Record) error { return nil })
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
	stop := errors.New("stop")
	if err := Records(good, func(Record) error { return stop }); err != stop {
		t.Fatalf("fn error not returned: %v", err)
	}
}

func TestDecompressLimit(t *testing.T) {
	big := bytes.Repeat([]byte("abcdefgh"), 1<<16) // 512 KiB, compresses well
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			c, err := Compress(nil, codec, big)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Decompress(codec, c, len(big))
			if err != nil || !bytes.Equal(out, big) {
				t.Fatalf("at the limit: %v", err)
			}
			if _, err := Decompress(codec, c, len(big)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("past the limit: %v", err)
			}
			if codec != CodecNone {
				if _, err := Decompress(codec, c[:len(c)/2], 0); err == nil {
					t.Fatal("truncated input decoded")
				}
			}
		})
	}
}

// xerial frames blocks as snappy-java's SnappyOutputStream does.
func xerial(blocks ...[]byte) []byte {
	out := append([]byte(nil), xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for _, b := range blocks {
		enc := snappy.Encode(nil, b)
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
	}
	return out
}

func TestSnappyXerial(t *testing.T) {
	a, b := bytes.Repeat([]byte("a"), 40000), []byte("tail of the records")
	out, err := Decompress(CodecSnappy, xerial(a, b), 0)
	if err != nil || !bytes.Equal(out, append(append([]byte(nil), a...), b...)) {
		t.Fatalf("xerial: %v", err)
	}
	if _, err := Decompress(CodecSnappy, xerial(a, b), len(a)+len(b)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("xerial limit: %v", err)
	}
	bad := xerial(a)
	if _, err := Decompress(CodecSnappy, bad[:len(bad)-3], 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cut xerial block: %v", err)
	}
	// A whole batch whose records are xerial-framed, as a Java producer sends.
	recs := sampleRecords(10)
	plain, _ := Build(Spec{ProducerID: -1}, recs)
	batch := append([]byte(nil), plain[:HeaderSize]...)
	batch = append(batch, xerial(plain[HeaderSize:])...)
	binary.BigEndian.PutUint32(batch[offBatchLength:], uint32(len(batch)-LogOverhead))
	batch[offAttributes+1] |= byte(CodecSnappy)
	n := 0
	if err := Records(batch, func(r Record) error {
		if !reflect.DeepEqual(r.Value, recs[n].Value) {
			return fmt.Errorf("record %d differs", n)
		}
		n++
		return nil
	}); err != nil || n != 10 {
		t.Fatalf("%d records: %v", n, err)
	}
}

func TestEndTxnMarker(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b, err := BuildEndTxnMarker(42, 3, 7, commit, 1234)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Validate(b)
		if err != nil || !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.NumRecords != 1 {
			t.Fatalf("%+v %v", h, err)
		}
		Records(b, func(r Record) error {
			m, err := ParseEndTxnMarker(r.Key, r.Value)
			if err != nil || m.Commit != commit || m.CoordinatorEpoch != 7 {
				t.Fatalf("%+v %v", m, err)
			}
			return nil
		})
	}
	if _, err := ParseEndTxnMarker(ControlKey(ControlLeaderChange), make([]byte, 6)); !errors.Is(err, ErrCorrupt) {
		t.Fatal("leader change parsed as a marker")
	}
	if _, err := ParseControlKey([]byte{0}); !errors.Is(err, ErrCorrupt) {
		t.Fatal("short key")
	}
}
