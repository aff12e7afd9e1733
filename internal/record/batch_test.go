package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// legacyMessage is a magic 0 or 1 message set entry (before KIP-98) with a
// null key and the value "v", offset 0, CRC-32 (IEEE) over magic onwards.
func legacyMessage(magic int8) []byte {
	body := []byte{byte(magic), 0} // magic, attributes
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, 1700000000000)
	}
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, 1)
	body = append(body, 'v')
	msg := binary.BigEndian.AppendUint64(nil, 0)
	msg = binary.BigEndian.AppendUint32(msg, uint32(4+len(body)))
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(body))
	return append(msg, body...)
}

func TestNextBatch(t *testing.T) {
	v2, err := Build(Spec{ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, BaseSequence: NoSequence}, sampleRecords(3))
	if err != nil {
		t.Fatal(err)
	}
	badSize := append([]byte(nil), v2...)
	binary.BigEndian.PutUint32(badSize[offBatchLength:], 13)
	badMagic := append([]byte(nil), v2...)
	badMagic[offMagic] = 3
	for _, tc := range []struct {
		name    string
		b       []byte
		size    int
		magic   int8
		corrupt bool
	}{
		{name: "empty", b: nil},
		{name: "shorter than the size field", b: v2[:LogOverhead-1]},
		{name: "shorter than the magic", b: v2[:offMagic]},
		{name: "truncated v2 batch", b: v2[:len(v2)-1]},
		{name: "v2 batch", b: v2, size: len(v2), magic: 2},
		{name: "v2 batch and more", b: append(append([]byte(nil), v2...), v2[:20]...), size: len(v2), magic: 2},
		{name: "magic 0 message", b: legacyMessage(0), size: len(legacyMessage(0)), magic: 0},
		{name: "magic 1 message", b: legacyMessage(1), size: len(legacyMessage(1)), magic: 1},
		{name: "size below the minimum overhead", b: badSize, corrupt: true},
		{name: "size below the minimum overhead, magic not yet read", b: badSize[:LogOverhead], corrupt: true},
		{name: "magic 3", b: badMagic, corrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, magic, err := NextBatch(tc.b)
			if tc.corrupt != errors.Is(err, ErrCorrupt) || (!tc.corrupt && err != nil) {
				t.Fatalf("err %v, want corrupt %t", err, tc.corrupt)
			}
			if size != tc.size || magic != tc.magic {
				t.Fatalf("size %d magic %d, want %d %d", size, magic, tc.size, tc.magic)
			}
		})
	}
}
