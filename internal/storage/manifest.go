package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
)

// ManifestFile is written into each log dir by a clean shutdown, before
// CleanShutdownFile, and describes every log of the dir as it was closed:
// what Open would otherwise learn from each partition directory (its
// listing, the .log sizes, the last batches, leader-epoch-checkpoint and
// the producer state). With it a restart sets each log up without a
// system call for most logs (Samsa's; Kafka has none). It is trusted only
// with CleanShutdownFile beside it, and OpenManager removes it (with the
// marker, one fsync of the dir) before the Manager takes a write: a stale
// manifest is never read.
const ManifestFile = ".samsa_log_manifest"

// manifest format (all integers big-endian):
//
//	magic    8  "SAMSAMF2" (version 2; "SAMSAMF1", version 1, is read too)
//	crc      4  CRC-32C (Castagnoli) of everything after it
//	id      16  random, also in the marker (cleanShutdown.ManifestID, hex)
//	count    4  logs
//	count times a log:
//	  name              2+n  the partition directory's name
//	  topicID           1, then 16 when 1: the topic id of partition.metadata
//	                         (0: not known, the file is read on first use);
//	                         version 2 only
//	  logStartOffset    8
//	  logEndOffset      8    also the recovery point
//	  epochs            4, then per entry: epoch 4, startOffset 8
//	  segments          4, then per segment:
//	    baseOffset 8, size 8, maxTimestamp 8, offsetOfMaxTimestamp 8,
//	    rollingBasedTimestamp 8, bytesSinceLastIndexEntry 8,
//	    indexEntries 4, timeIndexEntries 4, flags 1 (bit 0: a .txnindex may exist)
//	  mapEndOffset      8    producer state
//	  lastSnapOffset    8
//	  producers         4, then per producer:
//	    id 8, epoch 2, lastTimestamp 8, coordinatorEpoch 4, txnFirstOffset 8,
//	    batches 1 (at most 5), per batch: firstSeq 4, lastSeq 4, firstOffset 8, lastOffset 8, timestamp 8
//	  ongoing           4, then per transaction: producerID 8, firstOffset 8, lastOffset 8
//	  unreplicated      4, the same
const manifestMagic = "SAMSAMF2"

// manifestMagicV1 is the magic of version 1, written by Samsa before
// version 2 added each log's topic id: such a file is read as holding no
// topic id (each log reads its partition.metadata on first use).
const manifestMagicV1 = "SAMSAMF1"

// ErrCorruptManifest reports a ManifestFile that does not decode.
var ErrCorruptManifest = errors.New("storage: corrupt log manifest")

// logManifest is one log's entry of a ManifestFile.
type logManifest struct {
	name string
	// topicID is the topic id of the log's partition.metadata when
	// hasTopicID (Log.KnownTopicID at close): a restart from the
	// manifest knows it without reading the file.
	topicID        [16]byte
	hasTopicID     bool
	logStartOffset int64
	logEndOffset   int64
	epochs         []EpochEntry
	segments       []segmentManifest
	producers      producerManifest
}

type segmentManifest struct {
	baseOffset, size                   int64
	maxTimestamp, offsetOfMaxTimestamp int64
	rollingBasedTimestamp              int64
	bytesSinceLastIndexEntry           int64
	indexEntries, timeIndexEntries     int32
	txnIndex                           bool // a .txnindex may exist: it is read on first use
}

type producerManifest struct {
	mapEndOffset, lastSnapOffset int64
	producers                    []*producerEntry // sorted by id
	ongoing, unreplicated        []txnSpan
}

// manifestScratch is what appendManifest reuses from one log to the
// next on a close worker: the log's entry, pointing into the log's own
// state while it is encoded, and the sorted producer ids.
type manifestScratch struct {
	m   logManifest
	ids []int64
}

// appendManifest appends the entry of the closed log l, named name, to b
// as encodeManifest lays it out, encoding from the log's state under its
// locks (no copy of it); ok is false, and b returned as it was, when the
// next Open must look at its files instead: files left to remove
// (segments deleted by retention, still pending), a failed flush, a
// recovery point short of the log end.
func (l *Log) appendManifest(b []byte, name string, sc *manifestScratch) (_ []byte, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	leo := l.logEndOffset.Load()
	segs := l.segments()
	if !l.closed.Load() || len(l.pendingDeletes) > 0 || len(l.retired) > 0 || l.flushFailed.Load() != nil ||
		l.recoveryPoint.Load() != leo || len(segs) == 0 || l.epochsStale || l.producers == nil ||
		segs[len(segs)-1].nextOffset != leo {
		return b, false
	}
	m := &sc.m
	*m = logManifest{name: name, logStartOffset: l.logStartOffset.Load(), logEndOffset: leo, segments: m.segments[:0],
		epochs: m.epochs[:0], producers: producerManifest{producers: m.producers.producers[:0]}}
	m.topicID, m.hasTopicID = l.KnownTopicID()
	l.epochs.mu.Lock()
	for _, e := range l.epochs.entries {
		// An epoch assigned at the log end (AssignEpoch) with nothing
		// written in it is left out, as loadEpochCache drops it from
		// the file: the partition's leader assigns it again, and
		// writes the file, after the restart.
		if e.StartOffset < leo {
			m.epochs = append(m.epochs, e)
		}
	}
	l.epochs.mu.Unlock()
	for _, s := range segs {
		s.txn.mu.Lock()
		txn := !s.txn.loaded || len(s.txn.entries) > 0
		s.txn.mu.Unlock()
		m.segments = append(m.segments, segmentManifest{
			baseOffset: s.baseOffset, size: s.size.Load(),
			maxTimestamp: s.maxTimestamp.Load(), offsetOfMaxTimestamp: s.offsetOfMaxTimestamp.Load(),
			rollingBasedTimestamp: s.rollingBasedTimestamp, bytesSinceLastIndexEntry: s.bytesSinceLastIndexEntry,
			indexEntries: int32(s.index.len()), timeIndexEntries: int32(s.timeIndex.len()), txnIndex: txn,
		})
	}
	ps := l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m.producers.mapEndOffset, m.producers.lastSnapOffset = ps.mapEndOffset, ps.lastSnapOffset
	m.producers.ongoing, m.producers.unreplicated = ps.ongoing, ps.unreplicated
	sc.ids = sc.ids[:0]
	for id := range ps.producers {
		sc.ids = append(sc.ids, id)
	}
	slices.Sort(sc.ids)
	for _, id := range sc.ids {
		m.producers.producers = append(m.producers.producers, ps.producers[id])
	}
	b = appendManifestEntry(b, m, manifestVersion)
	// The scratch keeps no hold on the log.
	clear(m.producers.producers)
	m.producers.ongoing, m.producers.unreplicated = nil, nil
	return b, true
}

// loadManifest sets up the segments, offsets, leader epochs, producer
// state and topic id of the new log l from m, as the load of a cleanly
// closed log would find them, opening no file except the index files of
// segments that have entries (a topic id the manifest does not hold is
// read from partition.metadata on first use, see Log.TopicID). l takes m's slices and producer entries (m is not
// used again). An error (an index file that does not hold the entries m
// counts) means the log must be opened from its files.
func (l *Log) loadManifest(m *logManifest) error {
	now := l.now()
	segs := make([]*segment, 0, len(m.segments))
	fail := func(err error) error {
		for _, s := range segs {
			s.closeFiles()
		}
		return err
	}
	for i, sm := range m.segments {
		s, err := openSegmentFiles(l.files, l.dir, sm.baseOffset, l.cfg, now)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
		// One stat a segment: a .log file that is not there, not a
		// regular file or not the size the manifest says (changed or
		// damaged since the clean shutdown) is opened from its files,
		// where a log that cannot be opened goes offline at start
		// (KAFKA_STORAGE_ERROR) instead of failing at its first read.
		if fi, err := l.fsys.Stat(s.log.name()); err != nil {
			return fail(err)
		} else if !fi.Mode().IsRegular() || fi.Size() != int64(sm.size) {
			return fail(fmt.Errorf("storage: %s: %v of %d bytes, the manifest says a file of %d", s.log.name(), fi.Mode().Type(), fi.Size(), sm.size))
		}
		s.size.Store(sm.size)
		s.txn.loaded = !sm.txnIndex
		if s.index.entries, err = readIndexEntries(s.index.f, s.index.path, sm.indexEntries, DecodeOffsetIndex); err != nil {
			return fail(err)
		}
		if s.timeIndex.entries, err = readIndexEntries(s.timeIndex.f, s.timeIndex.path, sm.timeIndexEntries, DecodeTimeIndex); err != nil {
			return fail(err)
		}
		s.maxTimestamp.Store(sm.maxTimestamp)
		s.offsetOfMaxTimestamp.Store(sm.offsetOfMaxTimestamp)
		s.rollingBasedTimestamp = sm.rollingBasedTimestamp
		s.bytesSinceLastIndexEntry = sm.bytesSinceLastIndexEntry
		if i == len(m.segments)-1 {
			s.nextOffset = m.logEndOffset
		}
	}
	l.segs.Store(&segs)
	l.logStartOffset.Store(m.logStartOffset)
	l.logEndOffset.Store(m.logEndOffset)
	l.recoveryPoint.Store(m.logEndOffset)
	l.epochs = &epochCache{fsys: l.fsys, path: filepath.Join(l.dir, LeaderEpochCheckpointFile), entries: m.epochs}
	ps := l.producers
	ps.mu.Lock()
	ps.resetLocked(m.producers.mapEndOffset)
	ps.lastSnapOffset = m.producers.lastSnapOffset
	for _, e := range m.producers.producers {
		e.lastSeen = now
		ps.producers[e.id] = e
	}
	ps.ongoing, ps.unreplicated = m.producers.ongoing, m.producers.unreplicated
	ps.mu.Unlock()
	if m.hasTopicID {
		l.idMu.Lock()
		l.topicID, l.idState = m.topicID, topicIDKnown
		l.idMu.Unlock()
	}
	l.logger.Debug("opened log from the manifest", "segments", len(segs), "log_start_offset", m.logStartOffset, "log_end_offset", m.logEndOffset)
	return nil
}

// manifestID is the random id of a ManifestFile.
type manifestID [16]byte

// readIndexEntries reads the n entries of the index file f at path with
// decode; none when n is zero (the file is not opened). A file that does
// not hold n entries is an error wrapping ErrCorruptManifest.
func readIndexEntries[E any](f *cachedFile, path string, n int32, decode func([]byte) ([]E, error)) ([]E, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := f.readAll()
	if err != nil {
		return nil, err
	}
	entries, err := decode(b)
	if err != nil || len(entries) != int(n) {
		return nil, fmt.Errorf("%w: %s holds %d entries, the manifest %d (%v)", ErrCorruptManifest, path, len(entries), n, err)
	}
	return entries, nil
}

// encodeManifest returns the ManifestFile id holding logs, of the
// current version.
func encodeManifest(id manifestID, logs []logManifest) []byte {
	return encodeManifestVersion(manifestVersion, id, logs)
}

// manifestVersion is the version of the ManifestFile Samsa writes:
// 2 (manifestMagic); 1 (manifestMagicV1) has no topic ids.
const manifestVersion = 2

// encodeManifestVersion is encodeManifest in the format of version 1 or
// 2 (1 drops the topic ids): what an older Samsa wrote, for tests.
func encodeManifestVersion(version int, id manifestID, logs []logManifest) []byte {
	size := manifestHeaderSize
	for i := range logs {
		size += manifestEntrySize(&logs[i], version)
	}
	b := make([]byte, manifestHeaderSize, size)
	putManifestHeader(b, id, len(logs))
	if version == 1 {
		copy(b, manifestMagicV1)
	}
	for i := range logs {
		b = appendManifestEntry(b, &logs[i], version)
	}
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[12:], castagnoli))
	return b
}

// manifestHeaderSize is the size of a ManifestFile's header: magic, crc,
// id and count.
const manifestHeaderSize = 8 + 4 + 16 + 4

// putManifestHeader fills in the header of a ManifestFile, id holding
// count logs, but for its CRC (h[8:12], of all bytes after it).
func putManifestHeader(h []byte, id manifestID, count int) {
	copy(h, manifestMagic)
	copy(h[12:], id[:])
	binary.BigEndian.PutUint32(h[28:], uint32(count))
}

// manifestEntrySize is the size of m's entry in a ManifestFile of
// version (1 or 2).
func manifestEntrySize(m *logManifest, version int) int {
	size := 2 + len(m.name) + 8 + 8 + 4 + 12*len(m.epochs) + 4 + 57*len(m.segments) + 8 + 8 + 4 +
		4 + 24*len(m.producers.ongoing) + 4 + 24*len(m.producers.unreplicated)
	if version >= 2 {
		size++
		if m.hasTopicID {
			size += 16
		}
	}
	for _, e := range m.producers.producers {
		size += 31 + 32*e.nBatches
	}
	return size
}

// appendManifestEntry appends m's entry of a ManifestFile of version (1
// or 2) to b.
func appendManifestEntry(b []byte, m *logManifest, version int) []byte {
	b = slices.Grow(b, manifestEntrySize(m, version))
	be := binary.BigEndian
	b = be.AppendUint16(b, uint16(len(m.name)))
	b = append(b, m.name...)
	if version >= 2 {
		if m.hasTopicID {
			b = append(b, 1)
			b = append(b, m.topicID[:]...)
		} else {
			b = append(b, 0)
		}
	}
	b = be.AppendUint64(b, uint64(m.logStartOffset))
	b = be.AppendUint64(b, uint64(m.logEndOffset))
	b = be.AppendUint32(b, uint32(len(m.epochs)))
	for _, e := range m.epochs {
		b = be.AppendUint32(b, uint32(e.Epoch))
		b = be.AppendUint64(b, uint64(e.StartOffset))
	}
	b = be.AppendUint32(b, uint32(len(m.segments)))
	for _, s := range m.segments {
		b = be.AppendUint64(b, uint64(s.baseOffset))
		b = be.AppendUint64(b, uint64(s.size))
		b = be.AppendUint64(b, uint64(s.maxTimestamp))
		b = be.AppendUint64(b, uint64(s.offsetOfMaxTimestamp))
		b = be.AppendUint64(b, uint64(s.rollingBasedTimestamp))
		b = be.AppendUint64(b, uint64(s.bytesSinceLastIndexEntry))
		b = be.AppendUint32(b, uint32(s.indexEntries))
		b = be.AppendUint32(b, uint32(s.timeIndexEntries))
		flags := byte(0)
		if s.txnIndex {
			flags |= 1
		}
		b = append(b, flags)
	}
	p := &m.producers
	b = be.AppendUint64(b, uint64(p.mapEndOffset))
	b = be.AppendUint64(b, uint64(p.lastSnapOffset))
	b = be.AppendUint32(b, uint32(len(p.producers)))
	for _, e := range p.producers {
		b = be.AppendUint64(b, uint64(e.id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.txnFirstOffset))
		b = append(b, byte(e.nBatches))
		for _, bm := range e.batches[:e.nBatches] {
			b = be.AppendUint32(b, uint32(bm.firstSeq))
			b = be.AppendUint32(b, uint32(bm.lastSeq))
			b = be.AppendUint64(b, uint64(bm.firstOffset))
			b = be.AppendUint64(b, uint64(bm.lastOffset))
			b = be.AppendUint64(b, uint64(bm.timestamp))
		}
	}
	for _, ss := range [][]txnSpan{p.ongoing, p.unreplicated} {
		b = be.AppendUint32(b, uint32(len(ss)))
		for _, s := range ss {
			b = be.AppendUint64(b, uint64(s.producerID))
			b = be.AppendUint64(b, uint64(s.firstOffset))
			b = be.AppendUint64(b, uint64(s.lastOffset))
		}
	}
	return b
}

// manifestReader reads the fields of a manifest, remembering the first
// short read.
type manifestReader struct {
	b   []byte
	err error
}

func (r *manifestReader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		if r.err == nil {
			r.err = fmt.Errorf("%w: truncated", ErrCorruptManifest)
		}
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *manifestReader) u64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *manifestReader) u32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *manifestReader) u16() uint16 {
	if p := r.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *manifestReader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

// count reads a count of items of at least size bytes each, bounded by
// the bytes left so that a corrupt count allocates nothing.
func (r *manifestReader) count(size int) int {
	n := r.u32()
	if r.err == nil && (n < 0 || int64(n)*int64(size) > int64(len(r.b))) {
		r.err = fmt.Errorf("%w: %d items of %d bytes in %d bytes", ErrCorruptManifest, n, size, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *manifestReader) spans() []txnSpan {
	n := r.count(24)
	var out []txnSpan
	for range n {
		out = append(out, txnSpan{producerID: r.u64(), firstOffset: r.u64(), lastOffset: r.u64()})
	}
	return out
}

// decodeManifest parses a ManifestFile of version 1 or 2: its id,
// version and logs (those of version 1 hold no topic id). Errors:
// ErrCorruptManifest (wrapped) for a wrong magic or CRC, a count past the
// end, a topic id flag other than 0 or 1 or a zero topic id, a segment
// list that is empty or out of order, trailing bytes.
func decodeManifest(b []byte) (id manifestID, version int, logs []logManifest, err error) {
	if len(b) >= 8 {
		switch string(b[:8]) {
		case manifestMagic:
			version = 2
		case manifestMagicV1:
			version = 1
		}
	}
	if len(b) < 32 || version == 0 {
		return id, 0, nil, fmt.Errorf("%w: no header", ErrCorruptManifest)
	}
	if want, got := binary.BigEndian.Uint32(b[8:]), crc32.Checksum(b[12:], castagnoli); want != got {
		return id, 0, nil, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptManifest, want, got)
	}
	copy(id[:], b[12:28])
	r := &manifestReader{b: b[28:]}
	n := r.count(2 + 8 + 8 + 4 + 4 + 16 + 12)
	logs = make([]logManifest, 0, n)
	for range n {
		m := logManifest{name: string(r.take(int(r.u16())))}
		if version >= 2 {
			switch flag := r.u8(); {
			case flag == 1:
				if p := r.take(16); p != nil {
					copy(m.topicID[:], p)
				}
				m.hasTopicID = true
				if r.err == nil && m.topicID == ([16]byte{}) {
					r.err = fmt.Errorf("%w: %s: zero topic id", ErrCorruptManifest, m.name)
				}
			case flag > 1 && r.err == nil:
				r.err = fmt.Errorf("%w: %s: topic id flag %d", ErrCorruptManifest, m.name, flag)
			}
		}
		m.logStartOffset, m.logEndOffset = r.u64(), r.u64()
		for range r.count(12) {
			m.epochs = append(m.epochs, EpochEntry{Epoch: r.u32(), StartOffset: r.u64()})
		}
		ns := r.count(57)
		for i := range ns {
			s := segmentManifest{baseOffset: r.u64(), size: r.u64(), maxTimestamp: r.u64(), offsetOfMaxTimestamp: r.u64(),
				rollingBasedTimestamp: r.u64(), bytesSinceLastIndexEntry: r.u64(), indexEntries: r.u32(), timeIndexEntries: r.u32()}
			flags := r.u8()
			s.txnIndex = flags == 1
			if r.err == nil && (s.baseOffset < 0 || s.size < 0 || s.indexEntries < 0 || s.timeIndexEntries < 0 || flags > 1 ||
				i > 0 && s.baseOffset <= m.segments[i-1].baseOffset) {
				r.err = fmt.Errorf("%w: %s: segment %d at %d of %d bytes", ErrCorruptManifest, m.name, i, s.baseOffset, s.size)
			}
			m.segments = append(m.segments, s)
		}
		if r.err == nil && (ns == 0 || m.logStartOffset < 0 || m.logEndOffset < m.segments[ns-1].baseOffset) {
			r.err = fmt.Errorf("%w: %s: %d segments, log end offset %d", ErrCorruptManifest, m.name, ns, m.logEndOffset)
		}
		p := &m.producers
		p.mapEndOffset, p.lastSnapOffset = r.u64(), r.u64()
		for range r.count(31) {
			e := newProducerEntry(r.u64())
			e.epoch = int16(r.u16())
			e.lastTimestamp = r.u64()
			e.coordinatorEpoch = r.u32()
			e.txnFirstOffset = r.u64()
			e.nBatches = int(r.u8())
			if e.nBatches > producerBatchesKept {
				if r.err == nil {
					r.err = fmt.Errorf("%w: %s: producer %d with %d batches", ErrCorruptManifest, m.name, e.id, e.nBatches)
				}
				e.nBatches = 0
			}
			for j := range e.nBatches {
				e.batches[j] = batchMeta{firstSeq: r.u32(), lastSeq: r.u32(), firstOffset: r.u64(), lastOffset: r.u64(), timestamp: r.u64()}
			}
			p.producers = append(p.producers, e)
		}
		p.ongoing, p.unreplicated = r.spans(), r.spans()
		if r.err != nil {
			return id, 0, nil, r.err
		}
		logs = append(logs, m)
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrCorruptManifest, len(r.b))
	}
	if r.err != nil {
		return id, 0, nil, r.err
	}
	return id, version, logs, nil
}
