package storage

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/samsahq/samsa/internal/record"
)

// FuzzClean feeds the cleaner batches whose framing and CRC are right but
// whose records area is arbitrary (what a disk or a buggy producer could
// hold): cleaning and reading back may fail, never panic or hang.
func FuzzClean(f *testing.F) {
	seed := kvBatch(f, record.CodecNone, 1000, noProducer, put("a", "1"), del("b"), put("a", "2"))
	f.Add(seed[record.HeaderSize:], uint8(3), uint8(0))
	z := kvBatch(f, record.CodecZstd, 1000, producer{id: 1, epoch: 0, seq: 0}, put("k", "v"))
	f.Add(z[record.HeaderSize:], uint8(1), uint8(4))
	f.Add([]byte{0x02, 0x00, 0x00, 0x00, 0x02, 0x61, 0x01}, uint8(1), uint8(0))
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, body []byte, n, attrs uint8) {
		clock := &fakeClock{t: testEpoch}
		l := compactedLog(t, t.TempDir(), clock, 1<<20)
		for i := range 3 {
			b := kvBatch(t, record.CodecNone, 1000, noProducer)
			b = append(b[:record.HeaderSize], body...)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
			a := int16(attrs&0x57) | int16(i&1)<<6 // codec, timestamp type, transactional, delete horizon
			binary.BigEndian.PutUint16(b[21:], uint16(a))
			binary.BigEndian.PutUint32(b[23:], uint32(n%8)) // last offset delta
			binary.BigEndian.PutUint32(b[57:], uint32(n%5)) // record count
			binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
			if _, err := l.Append(b, 0); err != nil {
				return
			}
			if err := l.roll(); err != nil {
				t.Fatal(err)
			}
		}
		l.Append(kvBatch(t, record.CodecNone, 1000, noProducer, put("z", "z")), 0)
		if _, err := l.Clean(context.Background(), CleanOptions{Force: true}); err != nil {
			return
		}
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			res, err := l.Read(off, 1<<20, 1<<62, true)
			if err != nil || len(res.Records) == 0 {
				t.Fatalf("read at %d after a successful cleaning: %v", off, err)
			}
			h, err := record.ParseHeader(res.Records)
			if err != nil {
				t.Fatal(err)
			}
			off = h.NextOffset()
		}
	})
}
