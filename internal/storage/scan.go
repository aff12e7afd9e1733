package storage

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// SegmentBatch is one batch of a .log file as ScanSegment finds it.
type SegmentBatch struct {
	// Position is the byte position of the batch in the file.
	Position int64
	// Header is the decoded header; meaningful only when Err is nil.
	Header record.Header
	// CRCValid reports whether the CRC-32C matches the batch bytes.
	CRCValid bool
	// Batch is the whole batch, valid only during the callback.
	Batch []byte
	// Err is set, for the last call, when the bytes at Position are not a
	// whole batch: a torn tail (record.ErrTruncated) or a length or magic
	// that cannot be a batch (record.ErrCorrupt, record.ErrUnsupportedMagic).
	Err error
}

// SegmentInfo describes a scanned segment file.
type SegmentInfo struct {
	Size int64 // bytes in the file
}

// maxScanBatch bounds the batch size ScanSegment allocates for, beyond the
// bound the file size gives.
const maxScanBatch = 1 << 30

// ScanSegment walks the batches of the .log file at path in order, calling
// fn for each with its position and CRC validity (for samsa dump-log and
// tests); it reads sequentially and never holds more than one batch. It
// stops at the end of the file, after a call whose Err is set, or at the
// first error of fn, which it returns. It does not check that offsets
// increase. Errors: fn's, I/O errors.
func ScanSegment(path string, fn func(SegmentBatch) error) (SegmentInfo, error) {
	return scanSegment(vfs.Default, path, fn)
}

// scanSegment is ScanSegment on fsys.
func scanSegment(fsys vfs.FS, path string, fn func(SegmentBatch) error) (SegmentInfo, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("storage: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("storage: %w", err)
	}
	info := SegmentInfo{Size: fi.Size()}
	r := bufio.NewReaderSize(f, 1<<20)
	var buf []byte
	for pos := int64(0); pos < info.Size; {
		left := info.Size - pos
		if left < record.HeaderSize {
			return info, fn(SegmentBatch{Position: pos, Err: fmt.Errorf("%w: %d bytes at the end", record.ErrTruncated, left)})
		}
		var head [record.HeaderSize]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return info, fmt.Errorf("storage: read %s at %d: %w", path, pos, err)
		}
		h, err := record.ParseHeader(head[:])
		if err != nil {
			return info, fn(SegmentBatch{Position: pos, Header: h, Err: err})
		}
		length := int64(int32(binary.BigEndian.Uint32(head[8:])))
		switch {
		case length < record.HeaderSize-record.LogOverhead || length > maxScanBatch:
			return info, fn(SegmentBatch{Position: pos, Header: h, Err: fmt.Errorf("%w: batch length %d", record.ErrCorrupt, length)})
		case length+record.LogOverhead > left:
			return info, fn(SegmentBatch{Position: pos, Header: h, Err: fmt.Errorf("%w: batch of %d bytes with %d left", record.ErrTruncated, length+record.LogOverhead, left)})
		}
		size := int(length) + record.LogOverhead
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, head[:])
		if _, err := io.ReadFull(r, buf[record.HeaderSize:]); err != nil {
			return info, fmt.Errorf("storage: read %s at %d: %w", path, pos, err)
		}
		if err := fn(SegmentBatch{Position: pos, Header: h, CRCValid: record.CRCValid(buf), Batch: buf}); err != nil {
			return info, err
		}
		pos += int64(size)
	}
	return info, nil
}
