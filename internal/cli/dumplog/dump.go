// Package dumplog decodes the files of a partition directory for
// samsa dump-log, as Kafka's kafka-dump-log does: segment files (.log),
// offset indexes (.index), time indexes (.timeindex), producer state
// snapshots (.snapshot) and transaction indexes (.txnindex), the last two
// in the formats of package storage.
//
// It reads files it does not trust: every length is bounded by the bytes
// left in the file before anything is allocated, a torn or corrupt batch
// ends the listing with a report, and nothing panics on bad input.
//
// # Index layouts (big-endian, as Kafka's OffsetIndex and TimeIndex)
//
//	.index      8-byte entries: int32 offset relative to the segment's base
//	            offset (the last offset of the batch), int32 position of the
//	            batch in the .log
//	.timeindex  12-byte entries: int64 timestamp in milliseconds (the
//	            largest batch max timestamp so far), int32 relative offset
//
// Kafka preallocates index files with zeros and trims them when the segment
// is closed; an all-zero entry after the first marks the unused tail.
//
// The base offset of a segment is its file name: 00000000000000000042.log.
package dumplog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/samsahq/samsa/internal/record"
)

// Sizes of the index entries.
const (
	offsetIndexEntrySize = 8
	timeIndexEntrySize   = 12
)

// ErrProblems is returned (wrapped, with a count) when a dumped file had
// problems: a bad CRC, a torn or corrupt batch, an index entry that does not
// match the log. The details are in the output.
var ErrProblems = errors.New("problems found")

// Options select what File shows. The zero value shows batches only.
type Options struct {
	// PrintRecords lists the records of each batch of a .log, decompressed,
	// after the batch's line (kafka-dump-log --print-data-log).
	PrintRecords bool
	// MaxDecompressedBytes bounds the decompressed records of one batch;
	// zero or negative means record.DefaultMaxDecompressedBytes.
	MaxDecompressedBytes int
}

// File writes the decoded contents of the file name to w, choosing the
// decoder by the file's extension (.log, .index or .timeindex). For an
// index, the .log beside it, when present, is read to check every entry.
// It returns the error that stopped it (a file that cannot be read, an
// unknown extension) or ErrProblems.
func File(w *bufio.Writer, name string, opts Options) error {
	fmt.Fprintf(w, "Dumping %s\n", name)
	switch filepath.Ext(name) {
	case ".log":
		return dumpSegment(w, name, opts)
	case ".index":
		return dumpOffsetIndex(w, name)
	case ".timeindex":
		return dumpTimeIndex(w, name)
	case ".snapshot":
		return dumpProducerSnapshot(w, name)
	case ".txnindex":
		return dumpTxnIndex(w, name)
	}
	return fmt.Errorf("unknown file type %q: want .log, .index, .timeindex, .snapshot or .txnindex", filepath.Ext(name))
}

// baseOffsetOf parses the base offset from a segment file name; ok is false
// when the name is not a number.
func baseOffsetOf(name string) (int64, bool) {
	stem := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	off, err := strconv.ParseInt(stem, 10, 64)
	return off, err == nil && off >= 0
}

// segmentBatch is what the index checks need of one batch of a segment.
type segmentBatch struct {
	position     int64
	header       record.Header
	crcValid     bool
	maxTimestamp int64
}

// segmentReader reads the batches of a segment file one at a time, never
// holding more than one batch in memory.
type segmentReader struct {
	r    io.ReaderAt
	size int64 // file size in bytes
	pos  int64 // position of the next batch
	buf  []byte
}

// openSegment opens a segment file; the caller closes the file.
func openSegment(name string) (*os.File, *segmentReader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, &segmentReader{r: f, size: st.Size()}, nil
}

// errTornTail reports that the bytes left in the file do not hold a whole
// batch.
var errTornTail = errors.New("torn tail")

// next reads the batch at s.pos. With whole set it reads the entire batch
// (to check its CRC), else only its header. It returns io.EOF at the end of
// the file, errTornTail when the rest of the file is shorter than a batch
// says it is, and a record error (ErrCorrupt, ErrUnsupportedMagic) for a
// header that cannot be a batch.
func (s *segmentReader) next(whole bool) (segmentBatch, []byte, error) {
	rest := s.size - s.pos
	if rest == 0 {
		return segmentBatch{}, nil, io.EOF
	}
	const prefix = record.LogOverhead + 5 // up to and including magic
	n := min(rest, record.HeaderSize)
	if cap(s.buf) < record.HeaderSize {
		s.buf = make([]byte, record.HeaderSize)
	}
	head := s.buf[:n]
	if _, err := s.r.ReadAt(head, s.pos); err != nil {
		return segmentBatch{}, nil, err
	}
	if n < prefix {
		return segmentBatch{}, nil, errTornTail
	}
	h, err := record.ParseHeader(head)
	if errors.Is(err, record.ErrTruncated) {
		return segmentBatch{}, nil, errTornTail
	}
	if err != nil {
		return segmentBatch{}, nil, err
	}
	if h.BatchLength < record.HeaderSize-record.LogOverhead {
		return segmentBatch{}, nil, fmt.Errorf("%w: batch length %d", record.ErrCorrupt, h.BatchLength)
	}
	size := int64(h.Size())
	if size > rest {
		return segmentBatch{}, nil, errTornTail
	}
	b := segmentBatch{position: s.pos, header: h, maxTimestamp: h.MaxTimestamp}
	var batch []byte
	if whole {
		// size is at most the bytes left in the file.
		if int64(cap(s.buf)) < size {
			s.buf = make([]byte, size)
		}
		batch = s.buf[:size]
		if _, err := s.r.ReadAt(batch, s.pos); err != nil {
			return segmentBatch{}, nil, err
		}
		b.crcValid = record.CRCValid(batch)
	}
	s.pos += size
	return b, batch, nil
}

func dumpSegment(w *bufio.Writer, name string, opts Options) error {
	f, s, err := openSegment(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if base, ok := baseOffsetOf(name); ok {
		fmt.Fprintf(w, "Log starting offset: %d\n", base)
	}
	return dumpBatches(w, s, filepath.Base(name), opts)
}

// dumpBatches writes a line for each batch of s, a segment named name.
func dumpBatches(w *bufio.Writer, s *segmentReader, name string, opts Options) error {
	var badCRC, badRecords int
	for {
		b, batch, err := s.next(true)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTornTail) {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s (a torn batch at position %d)\n",
				s.size-s.pos, name, s.pos)
			return fmt.Errorf("%w: %d invalid bytes at position %d", ErrProblems, s.size-s.pos, s.pos)
		}
		if err != nil {
			fmt.Fprintf(w, "Stopped at position %d: %v\n", s.pos, err)
			return fmt.Errorf("position %d: %w", s.pos, err)
		}
		writeBatchLine(w, &b)
		if !b.crcValid {
			badCRC++
		}
		if opts.PrintRecords {
			if err := writeRecords(w, &b.header, batch, opts.MaxDecompressedBytes); err != nil {
				fmt.Fprintf(w, "| cannot decode the records: %v\n", err)
				badRecords++
			}
		}
	}
	var errs []error
	if badCRC > 0 {
		errs = append(errs, fmt.Errorf("%w: %d batches with a bad CRC", ErrProblems, badCRC))
	}
	if badRecords > 0 {
		errs = append(errs, fmt.Errorf("%w: %d batches whose records cannot be decoded", ErrProblems, badRecords))
	}
	return errors.Join(errs...)
}

// writeRecords writes a line for each record of batch, in the style of
// kafka-dump-log --print-data-log: offset, timestamp, sizes, sequence,
// headers, then the key and value as text (quoted when they are not
// printable UTF-8), or the transaction marker of a control record.
func writeRecords(w *bufio.Writer, h *record.Header, batch []byte, maxBytes int) error {
	tsType := "CreateTime"
	if h.IsLogAppendTime() {
		tsType = "LogAppendTime"
	}
	return record.RecordsMax(batch, maxBytes, func(r record.Record) error {
		seq := int64(-1)
		if h.BaseSequence >= 0 {
			seq = (int64(h.BaseSequence) + int64(r.OffsetDelta)) % (1 << 31) // sequences wrap to 0
		}
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headers: [",
			r.Offset, tsType, r.Timestamp, size(r.Key), size(r.Value), seq)
		for i, hd := range r.Headers {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(text([]byte(hd.Key)))
			w.WriteByte('=')
			w.WriteString(text(hd.Value))
		}
		w.WriteString("]")
		if h.IsControl() {
			writeControl(w, r)
		} else {
			fmt.Fprintf(w, " key: %s payload: %s", text(r.Key), text(r.Value))
		}
		w.WriteByte('\n')
		return nil
	})
}

// writeControl describes a control record: its type and, for a
// transaction marker, the coordinator epoch.
func writeControl(w *bufio.Writer, r record.Record) {
	t, err := record.ParseControlKey(r.Key)
	if err != nil {
		fmt.Fprintf(w, " controlKey: %s (%v)", text(r.Key), err)
		return
	}
	if t != record.ControlAbort && t != record.ControlCommit {
		fmt.Fprintf(w, " controlType: %s payload: %s", t, text(r.Value))
		return
	}
	m, err := record.ParseEndTxnMarker(r.Key, r.Value)
	if err != nil {
		fmt.Fprintf(w, " endTxnMarker: %s (%v)", t, err)
		return
	}
	fmt.Fprintf(w, " endTxnMarker: %s coordinatorEpoch: %d", t, m.CoordinatorEpoch)
}

// size is len(b), or -1 for null.
func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// text shows b as it is when it is printable UTF-8 (spaces included, no
// control characters such as newlines), Go-quoted otherwise or when empty,
// and null as null.
func text(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 0 && utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// writeBatchLine writes one batch in kafka-dump-log's key: value style.
func writeBatchLine(w *bufio.Writer, b *segmentBatch) {
	h := &b.header
	tsType := "CreateTime"
	if h.IsLogAppendTime() {
		tsType = "LogAppendTime"
	}
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t",
		h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch,
		h.PartitionLeaderEpoch, h.IsTransactional(), h.IsControl())
	firstTimestamp := strconv.FormatInt(h.BaseTimestamp, 10)
	if h.Attributes&record.DeleteHorizonBit != 0 {
		// KIP-534: the base timestamp holds the delete horizon.
		fmt.Fprintf(w, " deleteHorizonMs: %d", h.BaseTimestamp)
		firstTimestamp = "none"
	}
	fmt.Fprintf(w, " position: %d timestampType: %s firstTimestamp: %s maxTimestamp: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		b.position, tsType, firstTimestamp, h.MaxTimestamp, h.Size(), h.Magic, h.Codec(), h.CRC, b.crcValid)
}

// scanSegment reads the headers of every batch of a segment, for the index
// checks. A torn or corrupt tail ends the scan without an error: the
// entries pointing there are reported as mismatches.
func scanSegment(name string) ([]segmentBatch, error) {
	f, s, err := openSegment(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return scanBatches(s)
}

func scanBatches(s *segmentReader) ([]segmentBatch, error) {
	var bs []segmentBatch
	for {
		b, _, err := s.next(false)
		if errors.Is(err, io.EOF) || errors.Is(err, errTornTail) ||
			errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrUnsupportedMagic) {
			return bs, nil
		}
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
}

// siblingLog returns the batches of the .log beside an index file, or nil
// and a note when there is none.
func siblingLog(w *bufio.Writer, name string) ([]segmentBatch, bool, error) {
	logName := strings.TrimSuffix(name, filepath.Ext(name)) + ".log"
	bs, err := scanSegment(logName)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(w, "(no %s beside it: entries not checked)\n", filepath.Base(logName))
		return nil, false, nil
	}
	return bs, err == nil, err
}

// usedEntries returns how many of the entries of an index file are in use:
// Kafka preallocates index files with zeros and trims them on close, so an
// all-zero entry after the first marks the unused tail (as kafka-dump-log
// assumes). An all-zero first entry counts only when firstValid says the
// log agrees with it (an entry for offset base at position 0 is rare: the
// first batch of a segment is not indexed unless index.interval.bytes is 0).
func usedEntries(b []byte, entrySize int, firstValid bool) int {
	n := len(b) / entrySize
	if n > 0 && allZero(b[:entrySize]) && !firstValid {
		return 0
	}
	for i := 1; i < n; i++ {
		if allZero(b[i*entrySize : (i+1)*entrySize]) {
			return i
		}
	}
	return n
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func dumpOffsetIndex(w *bufio.Writer, name string) error {
	// Index files are small (segment.index.bytes, 10 MiB by default); the
	// file's size bounds the allocation.
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	base, _ := baseOffsetOf(name)
	batches, check, err := siblingLog(w, name)
	if err != nil {
		return err
	}
	return dumpOffsetEntries(w, b, base, batches, check)
}

// dumpOffsetEntries writes the entries of an .index file b whose segment
// starts at base, checking them against batches when check is set.
func dumpOffsetEntries(w *bufio.Writer, b []byte, base int64, batches []segmentBatch, check bool) error {
	firstValid := len(batches) > 0 && batches[0].position == 0 && batches[0].header.LastOffset() == base
	used := usedEntries(b, offsetIndexEntrySize, firstValid)
	problems := 0
	var lastOff, lastPos int64 = -1, -1
	for i := range used {
		e := b[i*offsetIndexEntrySize:]
		rel := int32(binary.BigEndian.Uint32(e))
		pos := int32(binary.BigEndian.Uint32(e[4:]))
		off := base + int64(rel)
		fmt.Fprintf(w, "offset: %d position: %d\n", off, pos)
		if rel < 0 || pos < 0 || off <= lastOff || int64(pos) <= lastPos {
			fmt.Fprintf(w, "  out of order or negative: entry %d follows offset %d position %d\n", i, lastOff, lastPos)
			problems++
		}
		lastOff, lastPos = off, int64(pos)
		if !check {
			continue
		}
		switch bt := batchAt(batches, int64(pos)); {
		case bt == nil:
			fmt.Fprintf(w, "  mismatch: no batch starts at position %d of the log\n", pos)
			problems++
		case bt.header.LastOffset() != off:
			fmt.Fprintf(w, "  mismatch: index offset %d, log offset %d (last offset of the batch at position %d)\n", off, bt.header.LastOffset(), pos)
			problems++
		}
	}
	return indexTail(w, b, offsetIndexEntrySize, used, problems)
}

// indexTail reports the unused entries and trailing bytes of an index file
// and returns ErrProblems when there were problems.
func indexTail(w *bufio.Writer, b []byte, entrySize, used, problems int) error {
	if n := len(b)/entrySize - used; n > 0 {
		fmt.Fprintf(w, "(%d unused zero entries at the end: preallocated)\n", n)
	}
	if r := len(b) % entrySize; r != 0 {
		fmt.Fprintf(w, "%d trailing bytes are not a whole entry\n", r)
		problems++
	}
	if problems > 0 {
		return fmt.Errorf("%w: %d in the index", ErrProblems, problems)
	}
	return nil
}

// batchAt returns the batch starting at pos, or nil.
func batchAt(bs []segmentBatch, pos int64) *segmentBatch {
	lo, hi := 0, len(bs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bs[m].position < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(bs) && bs[lo].position == pos {
		return &bs[lo]
	}
	return nil
}

func dumpTimeIndex(w *bufio.Writer, name string) error {
	b, err := os.ReadFile(name) // small, see dumpOffsetIndex
	if err != nil {
		return err
	}
	base, _ := baseOffsetOf(name)
	batches, check, err := siblingLog(w, name)
	if err != nil {
		return err
	}
	return dumpTimeEntries(w, b, base, batches, check)
}

// dumpTimeEntries writes the entries of a .timeindex file b whose segment
// starts at base, checking them against batches when check is set.
func dumpTimeEntries(w *bufio.Writer, b []byte, base int64, batches []segmentBatch, check bool) error {
	// maxSoFar[i] is the largest max timestamp of batches 0..i.
	maxSoFar := make([]int64, len(batches))
	for i, bt := range batches {
		maxSoFar[i] = bt.maxTimestamp
		if i > 0 {
			maxSoFar[i] = max(maxSoFar[i], maxSoFar[i-1])
		}
	}
	used := usedEntries(b, timeIndexEntrySize, false)
	problems := 0
	var lastTS, lastOff int64 = -1 << 63, -1
	for i := range used {
		e := b[i*timeIndexEntrySize:]
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int32(binary.BigEndian.Uint32(e[8:]))
		off := base + int64(rel)
		fmt.Fprintf(w, "timestamp: %d offset: %d\n", ts, off)
		if rel < 0 || ts <= lastTS || off < lastOff {
			fmt.Fprintf(w, "  out of order: entry %d follows timestamp %d offset %d\n", i, lastTS, lastOff)
			problems++
		}
		lastTS, lastOff = ts, off
		if !check {
			continue
		}
		j := batchHolding(batches, off)
		switch {
		case j < 0:
			fmt.Fprintf(w, "  mismatch: no batch of the log holds offset %d\n", off)
			problems++
		case maxSoFar[j] != ts:
			fmt.Fprintf(w, "  mismatch: index timestamp %d, log max timestamp %d up to the batch holding offset %d\n", ts, maxSoFar[j], off)
			problems++
		}
	}
	return indexTail(w, b, timeIndexEntrySize, used, problems)
}

// batchHolding returns the index of the batch whose offsets include off,
// or -1.
func batchHolding(bs []segmentBatch, off int64) int {
	lo, hi := 0, len(bs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bs[m].header.LastOffset() < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(bs) && bs[lo].header.BaseOffset <= off {
		return lo
	}
	return -1
}
