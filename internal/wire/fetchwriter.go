package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// FileRegion is a partition's records as a byte range of a segment file,
// written to the socket without passing through the response encoder.
// Release is called once the response is written (or dropped).
type FileRegion struct {
	File     *os.File
	Position int64
	Length   int64
	Release  func()
}

// FetchResponse is a Fetch response whose records are written straight
// from segment files: everything else is encoded by kmsg, with a unique
// 16-byte marker standing in for each partition's records; writing splices
// the file regions in place of the markers.
type FetchResponse struct {
	*kmsg.FetchResponse
	// Sendfile writes regions with sendfile(2) at explicit offsets;
	// otherwise they are read with pread(2) into one pooled 1 MiB
	// buffer and written with writev(2) each time it fills.
	Sendfile bool
	// Unsent, when set, is called by whoever replaces the response's
	// topics with none before it is sent (a consumer's fetch over its
	// quota), before it does: the fetch session forgets what the
	// response answered. Not safe for concurrent use with the
	// response.
	Unsent  func()
	regions []markedRegion
}

type markedRegion struct {
	marker [markerLen]byte
	FileRegion
}

const markerLen = 16

var (
	markerPrefix [8]byte
	markerSeq    atomic.Uint64
)

func init() { rand.Read(markerPrefix[:]) }

// SetRecords makes region the records of p, a partition of the response.
// The response owns region from then on: Release releases it.
func (f *FetchResponse) SetRecords(p *kmsg.FetchResponseTopicPartition, region FileRegion) {
	var m markedRegion
	copy(m.marker[:8], markerPrefix[:])
	binary.BigEndian.PutUint64(m.marker[8:], markerSeq.Add(1))
	m.FileRegion = region
	p.RecordBatches = m.marker[:]
	f.regions = append(f.regions, m)
}

// RecordBytes is the length of the records of the file regions set.
func (f *FetchResponse) RecordBytes() int64 {
	var n int64
	for _, r := range f.regions {
		n += r.Length
	}
	return n
}

// Regions is the number of file regions set.
func (f *FetchResponse) Regions() int { return len(f.regions) }

// Reset releases the regions and forgets them, for a response built again.
func (f *FetchResponse) Reset() {
	f.Release()
	f.regions = f.regions[:0]
}

// Release releases every region; safe to call more than once.
func (f *FetchResponse) Release() {
	for i := range f.regions {
		if r := f.regions[i].Release; r != nil {
			r()
			f.regions[i].Release = nil
		}
	}
}

// bufSize is the buffer the buffered path reads records into: one a
// response being written, whatever its number of partitions, refilled
// for records past its size.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// WriteFramed writes the response framed for correlationID to c, splicing
// in the file regions, and releases them. It calls progress, when not
// nil, each time some bytes were written, and goes on when a write
// reaches c's deadline after some bytes, as ProgressWriter does.
func (f *FetchResponse) WriteFramed(c net.Conn, correlationID int32, progress func()) error {
	defer f.Release()
	head := AppendResponse(nil, correlationID, f.FetchResponse)
	flexible := f.IsFlexible()

	// Split the encoded response at each marker: pieces[i] ends just
	// before region i's length prefix.
	var pieces []piece
	rest := head[4:]
	total := 0
	for i := range f.regions {
		r := &f.regions[i]
		at := bytes.Index(rest, r.marker[:])
		plen := 4
		if flexible {
			plen = 1 // uvarint(markerLen+1)
		}
		if at < plen {
			return fmt.Errorf("wire: fetch response marker %d not found", i)
		}
		var prefix []byte
		if flexible {
			prefix = binary.AppendUvarint(nil, uint64(r.Length)+1)
		} else {
			prefix = binary.BigEndian.AppendUint32(nil, uint32(r.Length))
		}
		pieces = append(pieces, piece{bytes: rest[:at-plen], prefix: prefix, region: r})
		total += at - plen + len(prefix) + int(r.Length)
		rest = rest[at+markerLen:]
	}
	pieces = append(pieces, piece{bytes: rest})
	total += len(rest)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(total))

	if !f.Sendfile {
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		return writeBuffered(c, size[:], pieces, *bp, progress)
	}

	pending := net.Buffers{size[:]}
	for _, p := range pieces {
		pending = append(pending, p.bytes)
		if p.region == nil {
			break
		}
		pending = append(pending, p.prefix)
		if err := writeBuffers(c, &pending, progress); err != nil {
			return err
		}
		pending = pending[:0]
		if err := sendfile(c, p.region.File, p.region.Position, p.region.Length, progress); err != nil {
			return err
		}
	}
	return writeBuffers(c, &pending, progress)
}

// ProgressWriter writes to Conn, calling Progress, when set, each time
// some bytes were written: when a write returns, and when it reaches the
// connection's deadline after writing some bytes, in which case it goes
// on with the rest. A write that writes nothing before the deadline fails
// with os.ErrDeadlineExceeded. Progress may push the deadline back: the
// deadline then bounds the time the peer takes no bytes (to within twice
// the time it is pushed back by), not the time the whole write takes
// (the server's connections.max.idle.ms).
type ProgressWriter struct {
	Conn     net.Conn
	Progress func()
}

func (w ProgressWriter) Write(p []byte) (int, error) {
	written := 0
	for {
		n, err := w.Conn.Write(p[written:])
		written += n
		if !progressed(n, err, w.Progress) {
			return written, err
		}
	}
}

// writeBuffers writes bufs to c, with writev(2) where c supports it, as
// ProgressWriter does. It consumes bufs.
func writeBuffers(c net.Conn, bufs *net.Buffers, progress func()) error {
	for {
		n, err := bufs.WriteTo(c)
		if !progressed(n, err, progress) {
			return err
		}
	}
}

// progressed calls progress, when set, after a write that wrote n > 0
// bytes and returned err, and tells whether the write reached its
// deadline after those bytes and should go on.
func progressed[N int | int64](n N, err error, progress func()) bool {
	if n == 0 || progress == nil {
		return false
	}
	progress()
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// piece is a part of an encoded Fetch response: bytes, then when region
// is set the region's length prefix and its records.
type piece struct {
	bytes  []byte
	prefix []byte
	region *markedRegion
}

// writeBuffered writes size and pieces to c, reading the regions' records
// with pread(2) into buf and writing with writev(2) each time buf is full
// and at the end. Memory stays len(buf) however many partitions or bytes
// the response holds (Kafka writes from the files, holding none).
func writeBuffered(c net.Conn, size []byte, pieces []piece, buf []byte, progress func()) error {
	bufs := append(make(net.Buffers, 0, 64), size)
	used := 0
	flush := func() error {
		w := bufs // WriteTo consumes its receiver
		err := writeBuffers(c, &w, progress)
		bufs, used = bufs[:0], 0
		return err
	}
	for _, p := range pieces {
		bufs = append(bufs, p.bytes)
		if p.region == nil {
			continue
		}
		bufs = append(bufs, p.prefix)
		pos, left := p.region.Position, p.region.Length
		for left > 0 {
			if used == len(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
			b := buf[used:min(int64(len(buf)), int64(used)+left)]
			if _, err := p.region.File.ReadAt(b, pos); err != nil {
				return fmt.Errorf("wire: reading records: %w", err)
			}
			bufs = append(bufs, b)
			used += len(b)
			pos += int64(len(b))
			left -= int64(len(b))
		}
	}
	return flush()
}

// sendfile copies n bytes of f at off to c with sendfile(2), using an
// explicit offset so that the file's shared position never moves. It
// calls progress, when not nil, as ProgressWriter does.
func sendfile(c net.Conn, f *os.File, off, n int64, progress func()) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		_, err := io.Copy(ProgressWriter{c, progress}, io.NewSectionReader(f, off, n))
		return err
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for {
		left := n
		var serr error // of sendfile(2); rc.Write's own is the socket's
		var werr error
		ferr := fc.Control(func(infd uintptr) {
			werr = rc.Write(func(outfd uintptr) bool {
				for n > 0 {
					chunk := min(n, 1<<30)
					w, err := unix.Sendfile(int(outfd), int(infd), &off, int(chunk))
					if w > 0 {
						n -= int64(w)
					}
					switch {
					case errors.Is(err, unix.EAGAIN):
						return false // wait until the socket is writable
					case errors.Is(err, unix.EINTR):
						continue
					case err != nil:
						serr = err
						return true
					case w == 0:
						serr = io.ErrUnexpectedEOF
						return true
					}
				}
				return true
			})
		})
		switch {
		case ferr != nil:
			return ferr
		case serr != nil:
			return serr
		case !progressed(left-n, werr, progress):
			return werr
		}
	}
}
