package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressedBytes bounds the decompressed size of one batch's
// records when the caller gives no limit (Records).
const DefaultMaxDecompressedBytes = 128 << 20

// ErrTooLarge reports records that decompress to more than the limit.
var ErrTooLarge = errors.New("record: decompressed records too large")

// xerialMagic starts the framing Java clients (xerial snappy-java's
// SnappyOutputStream) put around snappy blocks: magic, int32 version, int32
// minimum compatible version, then blocks each prefixed by an int32 length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// zstdMaxWindow bounds the window a zstd frame may ask for (Kafka's
// producers use far smaller ones).
const zstdMaxWindow = 64 << 20

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow))
	if err != nil {
		return err
	}
	return d
}}

// Decompress returns the records of a batch (the bytes after the header)
// decompressed with codec; CodecNone returns src itself. The output is at
// most maxBytes long (zero or negative means DefaultMaxDecompressedBytes);
// more gives ErrTooLarge. A malformed input gives ErrCorrupt (wrapped) and an
// unknown codec ErrCorrupt too.
func Decompress(codec Codec, src []byte, maxBytes int) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxDecompressedBytes
	}
	var out []byte
	var err error
	switch codec {
	case CodecNone:
		if len(src) > maxBytes {
			return nil, ErrTooLarge
		}
		return src, nil
	case CodecGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readLimited(r, maxBytes)
		}
	case CodecSnappy:
		out, err = decodeSnappy(nil, src, maxBytes)
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(src))
		out, err = readLimited(r, maxBytes)
		r.Reset(nil)
		lz4Readers.Put(r)
	case CodecZstd:
		out, err = decodeZstd(src, maxBytes)
	default:
		return nil, fmt.Errorf("%w: unknown codec %d", ErrCorrupt, codec)
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v: %w", ErrCorrupt, codec, err)
	}
	return out, nil
}

// readLimited reads r to its end, failing with ErrTooLarge past max bytes.
func readLimited(r io.Reader, max int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > max {
		return nil, ErrTooLarge
	}
	return out, nil
}

func decodeZstd(src []byte, max int) ([]byte, error) {
	v := zstdDecoders.Get()
	d, ok := v.(*zstd.Decoder)
	if !ok {
		return nil, v.(error)
	}
	defer zstdDecoders.Put(d)
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		return nil, err
	}
	out, err := readLimited(d, max)
	d.Reset(nil) //nolint:errcheck // only drops the reference to src
	return out, err
}

// decodeSnappy appends to dst the decoding of a raw snappy block or of
// xerial-framed blocks, at most max bytes in all.
func decodeSnappy(dst, src []byte, max int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(dst, src, max)
	}
	if len(src) < xerialHeaderSize {
		return nil, errors.New("short xerial header")
	}
	out := dst
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return nil, errors.New("short xerial block length")
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n < 0 || n > len(src)-p {
			return nil, fmt.Errorf("xerial block of %d bytes with %d left", n, len(src)-p)
		}
		var err error
		if out, err = decodeSnappyBlock(out, src[p:p+n], max); err != nil {
			return nil, err
		}
		p += n
	}
	return out, nil
}

// decodeSnappyBlock appends the decoded block to dst, keeping the total at
// most max bytes.
func decodeSnappyBlock(dst, block []byte, max int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > max-len(dst) {
		return nil, ErrTooLarge
	}
	// The decoder (s2's) also reads S2's extensions, which no Kafka client
	// reads, and allocates the length the block claims: check the tags
	// first, so that a few bytes claiming 128 MiB allocate nothing.
	if err := checkSnappyTags(block, n); err != nil {
		return nil, err
	}
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	dec, err := snappy.Decode(dst[start:start+n], block)
	if err != nil {
		return nil, err
	}
	if len(dec) != n {
		return nil, fmt.Errorf("snappy block decoded to %d bytes, header says %d", len(dec), n)
	}
	return dst[:start+n], nil
}

// checkSnappyTags checks that block, a raw snappy block whose header says
// it decodes to n bytes, holds only the snappy format's elements (a copy
// with a 1-byte offset of 0 is S2's "repeat", which snappy-java and
// librdkafka refuse) and that they produce exactly n bytes. It reads the
// tags only; the decoder checks the offsets.
func checkSnappyTags(block []byte, n int) error {
	_, hdr := binary.Uvarint(block)
	if hdr <= 0 {
		return errors.New("snappy: bad block header")
	}
	var out int64
	for s := hdr; s < len(block); {
		tag := block[s]
		var length, size int
		switch tag & 3 {
		case 0: // literal
			x := int(tag >> 2)
			size = 1
			if x >= 60 {
				extra := x - 59
				if s+1+extra > len(block) {
					return errors.New("snappy: truncated literal length")
				}
				x = 0
				for i := extra - 1; i >= 0; i-- {
					x = x<<8 | int(block[s+1+i])
				}
				size += extra
			}
			length = x + 1
			size += length
		case 1: // copy, 1-byte offset
			size, length = 2, 4+int(tag>>2&7)
			if s+1 < len(block) && tag&0xe0 == 0 && block[s+1] == 0 {
				return errors.New("snappy: copy with offset 0 (S2's repeat, not snappy)")
			}
		case 2: // copy, 2-byte offset
			size, length = 3, 1+int(tag>>2)
		case 3: // copy, 4-byte offset
			size, length = 5, 1+int(tag>>2)
		}
		if size > len(block)-s {
			return errors.New("snappy: truncated element")
		}
		s += size
		if out += int64(length); out > int64(n) {
			return fmt.Errorf("snappy: block decodes past the %d bytes its header says", n)
		}
	}
	if out != int64(n) {
		return fmt.Errorf("snappy: block decodes to %d bytes, its header says %d", out, n)
	}
	return nil
}

// lz4FrameMagic starts an LZ4 frame (little endian); the legacy format's
// 0x184C2102 and skippable frames are not read by Kafka's Java client or
// librdkafka.
const lz4FrameMagic = 0x184D2204

// checkLZ4Frame checks that data is one LZ4 frame and nothing more, as
// Kafka's KafkaLZ4BlockInputStream and librdkafka read it: the frame
// magic (not the legacy format, not a skippable frame), version 01, and
// the frame's end mark (and content checksum) at the end of data. A
// second frame would be read by our decoder and not by theirs. It walks
// the block sizes only; the decoder checks the blocks.
func checkLZ4Frame(data []byte) error {
	if len(data) < 7 || binary.LittleEndian.Uint32(data) != lz4FrameMagic {
		return errors.New("lz4: not an LZ4 frame")
	}
	flg := data[4]
	if flg>>6 != 1 {
		return fmt.Errorf("lz4: frame version %d", flg>>6)
	}
	p := 7 // magic, FLG, BD, header checksum
	if flg&0x08 != 0 {
		p += 8 // content size
	}
	if flg&0x01 != 0 {
		p += 4 // dictionary id
	}
	blockSum := flg&0x10 != 0
	for {
		if len(data)-p < 4 {
			return errors.New("lz4: frame cut short")
		}
		size := int64(binary.LittleEndian.Uint32(data[p:]) &^ (1 << 31))
		p += 4
		if size == 0 && binary.LittleEndian.Uint32(data[p-4:]) == 0 {
			break // end mark
		}
		if blockSum {
			size += 4
		}
		if size > int64(len(data)-p) {
			return errors.New("lz4: frame cut short")
		}
		p += int(size)
	}
	if flg&0x04 != 0 {
		p += 4 // content checksum
	}
	if p != len(data) {
		return fmt.Errorf("lz4: %d bytes after the frame", len(data)-p)
	}
	return nil
}

// lz4Readers and lz4Writers keep lz4 frame readers and writers, whose
// block buffers are large, for reuse (Reset between uses).
var (
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	lz4Writers = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
)

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithWindowSize(64<<10),
		zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true))
})

// Compress appends src compressed with codec to dst: gzip and lz4 (frame
// format) streams, a raw snappy block (which Kafka, Java and librdkafka
// clients read as well as xerial framing), one zstd frame. CodecNone
// appends src as is. An unknown codec gives ErrCorrupt.
func Compress(dst []byte, codec Codec, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		buf := bytes.NewBuffer(dst)
		w := gzip.NewWriter(buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		return append(dst, snappy.Encode(nil, src)...), nil
	case CodecLZ4:
		buf := bytes.NewBuffer(dst)
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		w.Reset(nil)
		return buf.Bytes(), nil
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", ErrCorrupt, codec)
}
