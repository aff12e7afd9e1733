package testutil

import "encoding/binary"

// AppendKV appends key and value to dst framed as the fuzz targets of the
// coordinators' records take their input: a 2-byte big-endian key length,
// the key, a 2-byte big-endian signed value length (-1 for a nil value, a
// tombstone) and the value. Lengths past 32,767 bytes do not fit.
func AppendKV(dst, key, value []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	if value == nil {
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(value)))
	return append(dst, value...)
}

// SplitKV calls fn with each key and value of data, framed as AppendKV
// frames them, in order; it stops at the first length that runs past the
// end of data, or with fewer than 4 bytes left. A negative value length
// gives a nil value. The slices alias data.
func SplitKV(data []byte, fn func(key, value []byte)) {
	for len(data) >= 4 {
		kl := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		if kl > len(data) {
			return
		}
		key := data[:kl]
		data = data[kl:]
		if len(data) < 2 {
			return
		}
		vl := int(int16(binary.BigEndian.Uint16(data)))
		data = data[2:]
		var value []byte
		if vl >= 0 {
			if vl > len(data) {
				return
			}
			value = data[:vl]
			data = data[vl:]
		}
		fn(key, value)
	}
}
