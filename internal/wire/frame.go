package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of ReadFrame and ParseRequest; the connection is closed on any.
var (
	ErrFrameTooLarge = errors.New("wire: request larger than socket.request.max.bytes")
	ErrMalformed     = errors.New("wire: malformed request")
)

// firstFrameChunk is what ReadFrame allocates first for a frame larger
// than the buffer it is given; it doubles as the bytes arrive.
const firstFrameChunk = 64 << 10

// ReadFrame reads one size-prefixed frame from r into buf (grown as needed)
// and returns the frame body. Frames larger than maxBytes, or with a
// negative size, give ErrFrameTooLarge before anything is allocated.
//
// A frame larger than cap(buf) is read into a buffer that starts at 64 KiB
// and doubles as its bytes arrive, so a peer that announces a large frame
// and sends less (then stalls or closes) holds at most twice what it sent.
// Kafka allocates the announced size at once; here that let 20
// connections at a time, each announcing 100 MB, sending 70 KB and
// closing, take the broker to 24 GB resident and the OOM killer within
// 15 seconds.
func ReadFrame(r io.Reader, buf []byte, maxBytes int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n < 4 { // a correlation id at least
		return nil, fmt.Errorf("%w: %d-byte frame", ErrMalformed, n)
	}
	buf = buf[:0]
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(int(n)-len(buf), max(len(buf), firstFrameChunk)))
		}
		end := min(cap(buf), int(n))
		if _, err := io.ReadFull(r, buf[len(buf):end]); err != nil {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = buf[:end]
	}
	return buf, nil
}

// Header is a decoded request header.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// Request is a decoded request header and its body. Body is nil when the
// API key or version is not supported; the caller answers or closes.
type Request struct {
	Header
	Body kmsg.Request
	// Raw is the body bytes after the header; valid until the next frame.
	Raw []byte
}

// ParseRequest decodes a frame's header and, when the key and version are in
// the supported table, its body. The body may alias frame (byte fields
// such as produce records point into it).
func ParseRequest(frame []byte, versions *Versions) (*Request, error) {
	if len(frame) < 8 {
		return nil, ErrMalformed
	}
	r := &Request{}
	r.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	r.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	r.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	b := kbin.Reader{Src: frame[8:]}
	r.ClientID = b.NullableString()
	if !b.Ok() {
		return nil, fmt.Errorf("%w: header", ErrMalformed)
	}
	body := kmsg.RequestForKey(r.Key)
	if body == nil {
		return r, nil
	}
	if !versions.Supports(r.Key, r.Version) {
		return r, nil
	}
	body.SetVersion(r.Version)
	if body.IsFlexible() {
		kmsg.SkipTags(&b)
		if !b.Ok() {
			return nil, fmt.Errorf("%w: header tags", ErrMalformed)
		}
	}
	r.Raw = b.Src
	if err := body.ReadFrom(b.Src); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", ErrMalformed, kmsg.NameForKey(r.Key), r.Version, err)
	}
	r.Body = body
	return r, nil
}

// AppendResponse appends the frame of resp, answering correlationID, to dst.
// resp must have its version set to the request's.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0) // empty tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
