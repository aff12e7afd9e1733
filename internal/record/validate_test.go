package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/record/recordtest"
)

const now = 1_700_000_000_000

func noBounds() *record.Policy {
	return &record.Policy{NowMillis: now, TimestampBeforeMaxMs: record.NoTimestampBound, TimestampAfterMaxMs: record.NoTimestampBound}
}

func TestCheckMalformed(t *testing.T) {
	cases := recordtest.Malformed(now)
	if len(cases) < 150 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			before := bytes.Clone(c.Batch)
			_, err := record.Check(c.Batch, noBounds())
			if !errors.Is(err, c.Err) {
				t.Fatalf("Check = %v, want %v", err, c.Err)
			}
			var ve *record.ValidationError
			if !errors.As(err, &ve) || ve.Message == "" {
				t.Fatalf("error %T %v is not a ValidationError with a message", err, err)
			}
			if c.RecordErrors && len(ve.Records) == 0 {
				t.Fatalf("no record errors: %v", err)
			}
			if !bytes.Equal(before, c.Batch) {
				t.Fatal("Check modified the batch")
			}
			// Every reader refuses it as well, or reads other records
			// than the header announces: none of them may be stored.
		})
	}
}

// TestCheckAcceptsValid: what Build writes, in every codec, with nulls,
// empty values and headers, passes, and the decoder reads every record.
func TestCheckAcceptsValid(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		for _, n := range []int{1, 7, 3000} {
			t.Run(fmt.Sprintf("%v/%d", codec, n), func(t *testing.T) {
				recs := make([]record.Record, n)
				for i := range recs {
					recs[i] = record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i)}
					switch i % 3 {
					case 0:
						recs[i].Key, recs[i].Value = []byte("key"), bytes.Repeat([]byte("v"), i%500)
					case 1:
						recs[i].Value = []byte{}
						recs[i].Headers = []record.RecordHeader{{Key: "h", Value: nil}, {Key: "", Value: []byte("x")}}
					case 2:
						recs[i].Key = []byte("tombstone")
					}
				}
				b, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: now, ProducerID: 3, ProducerEpoch: 0, BaseSequence: 0}, recs)
				if err != nil {
					t.Fatal(err)
				}
				vb, err := record.Check(b, noBounds())
				if err != nil {
					t.Fatal(err)
				}
				if !vb.Checked() || vb.Header.NumRecords != int32(n) || &vb.Bytes[0] != &b[0] {
					t.Fatalf("batch %+v", vb.Header)
				}
				got := 0
				if err := record.Records(b, func(record.Record) error { got++; return nil }); err != nil || got != n {
					t.Fatalf("Records read %d: %v", got, err)
				}
			})
		}
	}
}

func TestCheckTopicRules(t *testing.T) {
	keyless := recordtest.Rec([]byte{0}, recordtest.V(0), recordtest.V(1), recordtest.V(-1), recordtest.V(1), []byte("v"), recordtest.V(0))
	body := append(recordtest.Good(0), keyless...)
	spec := recordtest.Plain(2, now)
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		spec.Codec = codec
		b := recordtest.Raw(spec, body)
		pol := noBounds()
		if _, err := record.Check(b, pol); err != nil {
			t.Fatalf("%v: delete policy: %v", codec, err)
		}
		pol.Compacted = true
		_, err := record.Check(b, pol)
		var ve *record.ValidationError
		if !errors.Is(err, record.ErrInvalidRecord) || !errors.As(err, &ve) || len(ve.Records) != 1 || ve.Records[0].BatchIndex != 1 {
			t.Fatalf("%v: compacted: %v %+v", codec, err, ve)
		}
	}

	ts := func(base int64) []byte {
		s := recordtest.Plain(1, base)
		return recordtest.Raw(s, recordtest.Good(0))
	}
	for _, tc := range []struct {
		name          string
		base          int64
		before, after int64
		logAppend     bool
		want          error
	}{
		{"within bounds", now - 1000, 1000, 0, false, nil},
		{"too old", now - 1001, 1000, record.NoTimestampBound, false, record.ErrInvalidTimestamp},
		{"too new", now + 3_600_001, record.NoTimestampBound, 3_600_000, false, record.ErrInvalidTimestamp},
		{"future within after.max.ms", now + 3_600_000, record.NoTimestampBound, 3_600_000, false, nil},
		{"no timestamp", -1, 0, 0, false, nil},
		{"MinInt64 with a bound", -1 << 63, 1000, record.NoTimestampBound, false, record.ErrInvalidTimestamp},
		{"MaxInt64 with a bound", 1<<63 - 1, record.NoTimestampBound, 1000, false, record.ErrInvalidTimestamp},
		{"LogAppendTime topic ignores bounds", now - 1e9, 0, 0, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &record.Policy{NowMillis: now, TimestampBeforeMaxMs: tc.before, TimestampAfterMaxMs: tc.after, LogAppendTime: tc.logAppend}
			if _, err := record.Check(ts(tc.base), pol); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
	// A client batch marked LogAppendTime on a LogAppendTime topic.
	s := recordtest.Plain(1, now)
	s.Attributes = record.TimestampTypeBit
	if _, err := record.Check(recordtest.Raw(s, recordtest.Good(0)), &record.Policy{LogAppendTime: true}); !errors.Is(err, record.ErrInvalidTimestamp) {
		t.Fatalf("LogAppendTime batch: %v", err)
	}
	// The same on a CreateTime topic, where readers would otherwise give
	// every record the header's max timestamp.
	if _, err := record.Check(recordtest.Raw(s, recordtest.Good(0)), noBounds()); !errors.Is(err, record.ErrInvalidTimestamp) {
		t.Fatalf("LogAppendTime batch on a CreateTime topic: %v", err)
	}
	// A delete horizon is the cleaner's to set.
	s = recordtest.Plain(1, now)
	s.Attributes = record.DeleteHorizonBit
	if _, err := record.Check(recordtest.Raw(s, recordtest.Good(0)), noBounds()); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("delete horizon batch: %v", err)
	}
}

// TestCheckBomb: records that decompress past the bound are ErrTooLarge,
// found while streaming (no buffer of the decompressed size).
func TestCheckBomb(t *testing.T) {
	big := bytes.Repeat([]byte{'a'}, 4<<20)
	body := recordtest.Rec([]byte{0}, recordtest.V(0), recordtest.V(0), recordtest.V(-1), recordtest.V(int64(len(big))), big, recordtest.V(0))
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		spec := recordtest.Plain(1, now)
		spec.Codec = codec
		b := recordtest.Raw(spec, body)
		pol := noBounds()
		if _, err := record.Check(b, pol); err != nil {
			t.Fatalf("%v: %d KiB under the default bound: %v", codec, len(b)>>10, err)
		}
		pol.MaxDecompressedBytes = 1 << 20
		if _, err := record.Check(b, pol); !errors.Is(err, record.ErrTooLarge) {
			t.Fatalf("%v: %v, want ErrTooLarge", codec, err)
		}
	}
}

// TestCheckMaxTimestamp: the header's max timestamp, stored as sent and
// read by time retention and the time index, is held to the bounds of
// message.timestamp.after/before.max.ms as the records are; under
// LogAppendTime the broker sets it.
func TestCheckMaxTimestamp(t *testing.T) {
	good := recordtest.Raw(recordtest.Plain(1, now), recordtest.Good(0))
	withMax := func(ts int64) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint64(b[35:], uint64(ts))
		recordtest.FixCRC(b)
		return b
	}
	pol := &record.Policy{NowMillis: now, TimestampBeforeMaxMs: record.NoTimestampBound, TimestampAfterMaxMs: 3_600_000}
	for _, tc := range []struct {
		name string
		max  int64
		want error
	}{
		{"the record's", now, nil},
		{"within after.max.ms", now + 3_600_000, nil},
		{"a century ahead", now + 100*365*86_400_000, record.ErrInvalidTimestamp},
		{"MaxInt64", 1<<63 - 1, record.ErrInvalidTimestamp},
		{"none", -1, nil},
	} {
		_, err := record.Check(withMax(tc.max), pol)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Check = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := record.Check(withMax(1<<63-1), &record.Policy{NowMillis: now, LogAppendTime: true}); err != nil {
		t.Errorf("LogAppendTime topic: %v", err)
	}
}

// TestCheckSnappyClaim: a snappy block whose header claims far more than
// its elements produce is refused before the decoder allocates what it
// claims (a 67-byte batch claiming 128 MiB made the broker allocate and
// zero 128 MiB).
func TestCheckSnappyClaim(t *testing.T) {
	block := append(binary.AppendUvarint(nil, 90<<20), 0, 'x') // a 1-byte literal
	spec := recordtest.Plain(1, now)
	spec.Codec = record.CodecSnappy
	b := recordtest.RawCompressed(spec, block)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := record.Check(b, noBounds())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("%v, want ErrInvalidRecord", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("checking a %d-byte batch allocated %d bytes", len(b), got)
	}
	if _, err := record.Decompress(record.CodecSnappy, block, 0); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Decompress: %v, want ErrCorrupt", err)
	}
}

// TestCheckLibrdkafkaBound: by default a batch is refused whose records
// decompress past 100,000,000 bytes, which librdkafka cannot decode in a
// zstd batch (kcat stopped at one of 100 MiB the broker had accepted).
func TestCheckLibrdkafkaBound(t *testing.T) {
	for _, n := range []int{record.MaxCheckDecompressedBytes - 1000, record.MaxCheckDecompressedBytes + 1} {
		val := make([]byte, n) // the record is a few bytes longer
		body := recordtest.Rec([]byte{0}, recordtest.V(0), recordtest.V(0), recordtest.V(-1), recordtest.V(int64(len(val))), val, recordtest.V(0))
		spec := recordtest.Plain(1, now)
		spec.Codec = record.CodecZstd
		_, err := record.Check(recordtest.Raw(spec, body), noBounds())
		if tooLarge := len(body) > record.MaxCheckDecompressedBytes; tooLarge != errors.Is(err, record.ErrTooLarge) || (!tooLarge && err != nil) {
			t.Errorf("records of %d bytes: %v", len(body), err)
		}
	}
}

// TestCheckAllocs: an uncompressed batch is checked without allocating,
// a compressed one with a few allocations per batch, none per record.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are not the program's")
	}
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 100), Headers: []record.RecordHeader{{Key: "h", Value: []byte("v")}}}
	}
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		b, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		pol := noBounds()
		pol.Compacted = true
		record.Check(b, pol) //nolint:errcheck // warm the pools
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := record.Check(b, pol); err != nil {
				t.Fatal(err)
			}
		})
		if limit := 0.0; codec != record.CodecNone && allocs > 5 || codec == record.CodecNone && allocs > limit {
			t.Errorf("%v: %.1f allocations per Check of 1000 records", codec, allocs)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	recs := make([]record.Record, 100)
	for i := range recs {
		v := bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 200)[:1000]
		recs[i] = record.Record{OffsetDelta: int32(i), Key: []byte("key"), Value: v}
	}
	for _, codec := range []record.Codec{record.CodecNone, record.CodecLZ4, record.CodecZstd, record.CodecSnappy, record.CodecGzip} {
		batch, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(100 * 1000) // decompressed record bytes
			b.ReportAllocs()
			for b.Loop() {
				if _, err := record.Check(batch, noBounds()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzCheck mutates valid batches (and recomputes the CRC, so that the
// mutations reach the records): either Check refuses the batch, or the
// decoder every reader uses reads it whole, with as many records as the
// header says, offsets 0 to n-1 in order.
func FuzzCheck(f *testing.F) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		recs := []record.Record{
			{OffsetDelta: 0, Key: []byte("k"), Value: []byte("value")},
			{OffsetDelta: 1, TimestampDelta: 5, Value: []byte{}, Headers: []record.RecordHeader{{Key: "h", Value: nil}}},
			{OffsetDelta: 2, Key: []byte("t")},
		}
		b, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: now, ProducerID: 4, ProducerEpoch: 1, BaseSequence: 9}, recs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= record.HeaderSize {
			b = bytes.Clone(b)
			recordtest.FixCRC(b)
		}
		vb, err := record.Check(b, noBounds())
		if err != nil {
			var ve *record.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		n := int32(0)
		err = record.Records(b, func(r record.Record) error {
			if r.OffsetDelta != n {
				return fmt.Errorf("offset delta %d at record %d", r.OffsetDelta, n)
			}
			n++
			return nil
		})
		if err != nil || n != vb.Header.NumRecords || vb.Header.LastOffsetDelta != n-1 {
			t.Fatalf("accepted batch reads %d of %d records (last offset delta %d): %v", n, vb.Header.NumRecords, vb.Header.LastOffsetDelta, err)
		}
	})
}

// TestCheckLargeRecords: records larger than the streaming read buffer
// are walked field by field from the stream, with the same rules.
func TestCheckLargeRecords(t *testing.T) {
	V, Rec := recordtest.V, recordtest.Rec
	big := bytes.Repeat([]byte("z"), 40<<10)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"valid", Rec([]byte{0}, V(0), V(0), V(1), []byte("k"), V(int64(len(big))), big, V(0)), true},
		{"value length past the record", Rec([]byte{0}, V(0), V(0), V(1), []byte("k"), V(int64(len(big))+10), big, V(0)), false},
		{"byte left in the record", Rec([]byte{0}, V(0), V(0), V(1), []byte("k"), V(int64(len(big))), big, V(0), []byte{1}), false},
		{"record longer than the stream", append(V(int64(len(big))+100), append([]byte{0, 0, 0, 2, 'k'}, big...)...), false},
		{"header count too large", Rec([]byte{0}, V(0), V(0), V(1), []byte("k"), V(int64(len(big))), big, V(1000)), false},
		{"garbage after the record", append(Rec([]byte{0}, V(0), V(0), V(1), []byte("k"), V(int64(len(big))), big, V(0)), 7, 7), false},
	} {
		for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
			spec := recordtest.Plain(1, now)
			spec.Codec = codec
			_, err := record.Check(recordtest.Raw(spec, tc.body), noBounds())
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, record.ErrInvalidRecord)) {
				t.Errorf("%s/%v: %v", tc.name, codec, err)
			}
		}
	}
}
