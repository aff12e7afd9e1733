package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// recompressInput is a batch of n records with keys, values, headers, a
// null value and gaps in offset and timestamp deltas.
func recompressInput(t testing.TB, codec Codec, n int) ([]byte, []Record) {
	t.Helper()
	var recs []Record
	for i := range n {
		r := Record{
			TimestampDelta: int64(i * 3),
			OffsetDelta:    int32(i * 2),
			Key:            fmt.Appendf(nil, "key-%d", i),
			Value:          bytes.Repeat([]byte("value "), 20+i%7),
		}
		if i%5 == 0 {
			r.Value = nil
		}
		if i%3 == 0 {
			r.Headers = []RecordHeader{{Key: "h", Value: []byte{byte(i)}}, {Key: "null"}}
		}
		recs = append(recs, r)
	}
	b, err := Build(Spec{
		BaseOffset: 100, PartitionLeaderEpoch: 7, Codec: codec, Transactional: true,
		BaseTimestamp: 1_700_000_000_000, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 11,
		LastOffsetDelta: int32(2*n + 5),
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b, recs
}

// TestRecompress: every codec pair keeps the header fields and records and
// gives a batch that validates, in the codec asked for.
func TestRecompress(t *testing.T) {
	codecs := []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}
	for _, from := range codecs {
		for _, to := range codecs {
			t.Run(from.String()+"-to-"+to.String(), func(t *testing.T) {
				in, recs := recompressInput(t, from, 50)
				prefix := []byte("keep")
				out, err := Recompress(prefix, in, to, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("dst prefix lost")
				}
				out = out[len(prefix):]
				if from == to && !bytes.Equal(out, in) {
					t.Fatalf("same codec: batch changed")
				}
				h, err := Validate(out)
				if err != nil {
					t.Fatal(err)
				}
				hin, _ := ParseHeader(in)
				if h.Codec() != to {
					t.Errorf("codec %v, want %v", h.Codec(), to)
				}
				// Everything but the codec bits, the length and the CRC stays.
				hin.Attributes, h.Attributes = hin.Attributes&^CodecMask, h.Attributes&^CodecMask
				hin.BatchLength, h.BatchLength, hin.CRC, h.CRC = 0, 0, 0, 0
				if h != hin {
					t.Errorf("header %+v, want %+v", h, hin)
				}
				var got []Record
				if err := Records(out, func(r Record) error {
					r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
					got = append(got, r)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(recs) {
					t.Fatalf("%d records, want %d", len(got), len(recs))
				}
				for i := range recs {
					g, w := got[i], recs[i]
					if g.OffsetDelta != w.OffsetDelta || g.TimestampDelta != w.TimestampDelta || !bytes.Equal(g.Key, w.Key) ||
						!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) || len(g.Headers) != len(w.Headers) {
						t.Fatalf("record %d: %+v, want %+v", i, g, w)
					}
				}
			})
		}
	}
}

// TestRecompressLogAppendTime: the max timestamp of a LogAppendTime batch
// is kept.
func TestRecompressLogAppendTime(t *testing.T) {
	in, _ := recompressInput(t, CodecNone, 3)
	SetMaxTimestampLogAppendTime(in, 1_800_000_000_000)
	out, err := Recompress(nil, in, CodecZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Validate(out)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsLogAppendTime() || h.MaxTimestamp != 1_800_000_000_000 {
		t.Fatalf("header %+v: want LogAppendTime 1800000000000", h)
	}
}

// TestRecompressErrors: records that do not decode fail, and the limit on
// the decompressed size holds.
func TestRecompressErrors(t *testing.T) {
	in, _ := recompressInput(t, CodecLZ4, 50)
	bad := bytes.Clone(in)
	bad[len(bad)-3] ^= 0xff
	if _, err := Recompress(nil, bad, CodecNone, 0); err == nil {
		t.Error("damaged lz4 records: no error")
	}
	if _, err := Recompress(nil, in, CodecNone, 100); err == nil {
		t.Error("records above the limit: no error")
	}
	if _, err := Recompress(nil, in[:30], CodecNone, 0); err == nil {
		t.Error("truncated header: no error")
	}
}

func TestParseCodec(t *testing.T) {
	for v, want := range map[string]Codec{"uncompressed": CodecNone, "gzip": CodecGzip, "snappy": CodecSnappy, "lz4": CodecLZ4, "zstd": CodecZstd} {
		if c, ok := ParseCodec(v); !ok || c != want {
			t.Errorf("ParseCodec(%q) = %v, %v", v, c, ok)
		}
	}
	if _, ok := ParseCodec("producer"); ok {
		t.Error("producer parsed as a codec")
	}
}

// BenchmarkRecompress measures the broker's cost of changing a 1 MiB-ish
// batch of 1 KB records from the producer's codec to the topic's.
func BenchmarkRecompress(b *testing.B) {
	// Values of words in random order, about 2x compressible, as samsa
	// perf's text payload.
	words := strings.Fields("the broker appends record batches to segment files and consumers fetch them from page cache " +
		"with zero copy offset partition leader epoch high watermark timestamp key value null 12345 67890 true false " +
		"user order event created updated deleted")
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []Record
	for i := range 1000 {
		var val []byte
		for len(val) < 1000 {
			val = append(append(val, words[rng.IntN(len(words))]...), ' ')
		}
		recs = append(recs, Record{OffsetDelta: int32(i), Value: val[:1000]})
	}
	for _, c := range []struct{ from, to Codec }{{CodecNone, CodecLZ4}, {CodecLZ4, CodecNone}, {CodecLZ4, CodecZstd}, {CodecNone, CodecZstd}, {CodecNone, CodecGzip}} {
		in, err := Build(Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Codec: c.from}, recs)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.from.String()+"-to-"+c.to.String(), func(b *testing.B) {
			b.SetBytes(int64(len(recs) * 1000))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				if dst, err = Recompress(dst[:0], in, c.to, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzRecompress: any input that validates either fails to recompress
// with an error or gives a valid batch with as many records.
func FuzzRecompress(f *testing.F) {
	for _, c := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		in, _ := recompressInput(f, c, 4)
		f.Add(in, uint8(CodecZstd))
		f.Add(in, uint8(CodecNone))
	}
	f.Fuzz(func(t *testing.T, in []byte, to uint8) {
		if _, err := Validate(in); err != nil {
			return
		}
		codec := Codec(to % 5)
		out, err := Recompress(nil, in, codec, 1<<20)
		if err != nil {
			return
		}
		h, err := Validate(out)
		if err != nil {
			t.Fatalf("recompressed batch does not validate: %v", err)
		}
		hin, _ := ParseHeader(in)
		if h.NumRecords != hin.NumRecords {
			t.Fatalf("%d records, want %d", h.NumRecords, hin.NumRecords)
		}
	})
}
