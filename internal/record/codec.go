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
