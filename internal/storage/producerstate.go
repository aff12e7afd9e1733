package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// This file is the producer state of a partition (Kafka's
// ProducerStateManager and ProducerAppendInfo): for each producer id the
// epoch, the metadata of its last batches, and the first offset of its open
// transaction; the transactions open in the partition (which bound the last
// stable offset); and the snapshot files that carry the state across
// restarts.

// Errors of appends that fail the producer checks (mapped to Kafka codes by
// the broker). Nothing is written when Append returns one of them.
var (
	// ErrOutOfOrderSequence: a batch whose base sequence does not follow the
	// producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("storage: out of order sequence number")
	// ErrInvalidProducerEpoch: a batch or marker with an epoch older than
	// the producer's current one (INVALID_PRODUCER_EPOCH): a fenced producer.
	ErrInvalidProducerEpoch = errors.New("storage: invalid producer epoch")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is open in the partition (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("storage: invalid transaction state")
	// ErrCoordinatorFenced: a transaction marker from a coordinator epoch
	// older than one already seen (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("storage: transaction coordinator fenced")
	// ErrCorruptSnapshot: a producer snapshot file that does not parse or
	// fails its CRC; Open falls back to an older one.
	ErrCorruptSnapshot = errors.New("storage: corrupt producer snapshot")
)

// Origin says who an append comes from (Kafka's AppendOrigin), which
// decides the producer checks applied to batches carrying a producer id.
type Origin int8

const (
	// OriginCoordinator: records written by the broker itself (coordinator
	// records, transaction markers): producer epochs and coordinator epochs
	// are checked, sequences are not.
	OriginCoordinator Origin = iota
	// OriginClient: a Produce request: retried batches are recognized
	// (AppendResult.Duplicate), sequences and epochs are checked.
	OriginClient
	// OriginReplication: batches from the leader, or replayed from the log
	// on open: the state follows them without checks.
	OriginReplication
)

// Producer state constants, Kafka's.
const (
	// producerBatchesKept is how many recent batches per producer are
	// remembered to recognize retries (ProducerStateEntry.NUM_BATCHES_TO_RETAIN,
	// matching max.in.flight.requests.per.connection=5).
	producerBatchesKept = 5
	// DefaultProducerIDExpiration is producer.id.expiration.ms (1 day).
	DefaultProducerIDExpiration = 24 * time.Hour
	// producerExpirationCheckInterval is
	// producer.id.expiration.check.interval.ms (10 min).
	producerExpirationCheckInterval = 10 * time.Minute

	snapshotSuffix      = ".snapshot"
	snapshotVersion     = 1
	snapshotHeaderSize  = 2 + 4 + 4 // version, crc, entry count
	snapshotEntrySize   = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	noProducerEpoch     = -1
	noSequence          = -1
	noCoordinatorEpoch  = -1
	maxSnapshotProducer = 1 << 24 // bounds the entries a snapshot may claim
)

// ProducerInfo is a producer's state in one partition (DescribeProducers,
// KIP-664).
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the last record of its last batch;
	// -1 when none is known (only markers were written).
	LastSequence int32
	// LastTimestamp is the max timestamp of its last batch or marker, ms.
	LastTimestamp int64
	// CoordinatorEpoch is that of the last transaction marker; -1 none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its open transaction in
	// the partition; -1 when none is open.
	CurrentTxnStartOffset int64
}

// batchMeta describes one batch a producer wrote.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64
}

// producerEntry is Kafka's ProducerStateEntry.
type producerEntry struct {
	id               int64
	epoch            int16
	batches          [producerBatchesKept]batchMeta // oldest first, nBatches of them
	nBatches         int
	lastTimestamp    int64
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1: no open transaction
	// lastSeen is the wall time of its last append (or of the load of the
	// state), which producer.id.expiration.ms counts from.
	lastSeen time.Time
}

func newProducerEntry(id int64) *producerEntry {
	return &producerEntry{id: id, epoch: noProducerEpoch, lastTimestamp: -1, coordinatorEpoch: noCoordinatorEpoch, txnFirstOffset: -1}
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	return &c
}

func (e *producerEntry) lastSeq() int32 {
	if e.nBatches > 0 {
		return e.batches[e.nBatches-1].lastSeq
	}
	return noSequence
}

func (e *producerEntry) info() ProducerInfo {
	return ProducerInfo{ProducerID: e.id, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp,
		CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirstOffset}
}

// setEpoch moves the entry to epoch, forgetting the batches of the old one.
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.nBatches = 0
		e.epoch = epoch
	}
}

func (e *producerEntry) addBatch(b batchMeta) {
	if e.nBatches == producerBatchesKept {
		copy(e.batches[:], e.batches[1:])
		e.nBatches--
	}
	e.batches[e.nBatches] = b
	e.nBatches++
}

// findDuplicate returns the remembered batch with the header's epoch and
// sequences, or nil.
func (e *producerEntry) findDuplicate(h *record.Header) *batchMeta {
	if e.epoch != h.ProducerEpoch {
		return nil
	}
	for i := range e.nBatches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == h.LastSequence() {
			return b
		}
	}
	return nil
}

// inSequence reports whether next follows last (sequences wrap to 0 after
// MaxInt32).
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// txnSpan is a transaction in the partition: its producer and first offset,
// and once complete the offset of its marker.
type txnSpan struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64
}

// producerBatch is a batch with a producer id, as the checks need it.
type producerBatch struct {
	h      record.Header
	marker *record.EndTxnMarker // for a transaction marker
	// markerErr is set for a control batch whose marker does not parse.
	markerErr error
}

// newProducerBatch extracts what the producer state needs from batch.
func newProducerBatch(batch []byte, h record.Header) producerBatch {
	pb := producerBatch{h: h}
	if !h.IsControl() {
		return pb
	}
	err := record.Records(batch, func(r record.Record) error {
		t, err := record.ParseControlKey(r.Key)
		if err != nil {
			return err
		}
		if t == record.ControlAbort || t == record.ControlCommit {
			m, err := record.ParseEndTxnMarker(r.Key, r.Value)
			if err != nil {
				return err
			}
			pb.marker = &m
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		pb.markerErr = err
	}
	return pb
}

// txnEvent is a transaction started or completed by an append, in order.
type txnEvent struct {
	span     txnSpan
	complete bool
	aborted  bool
}

// producerUpdate is the effect of an append on the producer state, computed
// before the write and applied after it.
type producerUpdate struct {
	entries []*producerEntry // the producers' new states, usually one
	events  []txnEvent
	// duplicate is the earlier batch a client retried; nothing is written.
	duplicate *batchMeta
}

// producerState is one partition's producer state. Its methods take mu;
// appends call them under Log.mu (lock order: Log.mu, producerState.mu).
type producerState struct {
	fsys       vfs.FS
	dir        string
	expiration time.Duration

	mu              sync.Mutex // guards the fields below
	producers       map[int64]*producerEntry
	ongoing         []txnSpan // open transactions by first offset
	unreplicated    []txnSpan // completed, marker maybe above the high-watermark, by first offset
	mapEndOffset    int64     // the state covers the log below it
	lastSnapOffset  int64     // offset of the latest snapshot written or loaded
	lastExpiryCheck time.Time
}

func newProducerState(fsys vfs.FS, dir string, expiration time.Duration) *producerState {
	if expiration <= 0 {
		expiration = DefaultProducerIDExpiration
	}
	return &producerState{fsys: fsys, dir: dir, expiration: expiration, producers: map[int64]*producerEntry{}}
}

// expiredLocked reports whether e may be forgotten at now.
func (ps *producerState) expiredLocked(e *producerEntry, now time.Time) bool {
	return e.txnFirstOffset < 0 && now.Sub(e.lastSeen) >= ps.expiration
}

// active returns the ids of the producers in the state that
// producer.id.expiration.ms has not expired at now (Kafka's
// activeProducers, whose last batches its cleaner keeps).
func (ps *producerState) active(now time.Time) map[int64]bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := make(map[int64]bool, len(ps.producers))
	for id, e := range ps.producers {
		if !ps.expiredLocked(e, now) {
			m[id] = true
		}
	}
	return m
}

// maybeExpire forgets the producers idle for producer.id.expiration.ms,
// at most every producer.id.expiration.check.interval.ms.
func (ps *producerState) maybeExpire(now time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if now.Sub(ps.lastExpiryCheck) < producerExpirationCheckInterval {
		return
	}
	ps.lastExpiryCheck = now
	ps.expireLocked(now)
}

func (ps *producerState) expireLocked(now time.Time) {
	for id, e := range ps.producers {
		if ps.expiredLocked(e, now) {
			delete(ps.producers, id)
		}
	}
}

// prepare checks pbs, the batches with a producer id of one append, in
// order, against the state (Kafka's analyzeAndValidateProducerState) and
// returns the update to apply once they are written. The offsets in the
// headers must be the ones they will be written at.
func (ps *producerState) prepare(pbs []producerBatch, origin Origin, now time.Time) (*producerUpdate, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	u := &producerUpdate{}
	entry := func(id int64) (e *producerEntry, known bool) {
		for _, e := range u.entries {
			if e.id == id {
				return e, true
			}
		}
		if cur := ps.producers[id]; cur != nil && (origin == OriginReplication || !ps.expiredLocked(cur, now)) {
			e = cur.clone()
			known = true
		} else {
			e = newProducerEntry(id)
		}
		u.entries = append(u.entries, e)
		return e, known
	}
	for i := range pbs {
		pb := &pbs[i]
		h := &pb.h
		e, known := entry(h.ProducerID)
		if h.IsControl() {
			if pb.marker == nil {
				if pb.markerErr != nil && origin != OriginReplication {
					return nil, fmt.Errorf("%w: control batch at %d: %v", record.ErrCorrupt, h.BaseOffset, pb.markerErr)
				}
				continue // not a transaction marker, or an emptied one
			}
			if origin != OriginReplication {
				if e.coordinatorEpoch > pb.marker.CoordinatorEpoch {
					return nil, fmt.Errorf("%w: producer %d: coordinator epoch %d, last seen %d", ErrCoordinatorFenced, h.ProducerID, pb.marker.CoordinatorEpoch, e.coordinatorEpoch)
				}
				if h.ProducerEpoch < e.epoch {
					return nil, fmt.Errorf("%w: producer %d: marker epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
				}
			}
			if e.txnFirstOffset >= 0 {
				u.events = append(u.events, txnEvent{span: txnSpan{h.ProducerID, e.txnFirstOffset, h.BaseOffset}, complete: true, aborted: !pb.marker.Commit})
			}
			e.setEpoch(h.ProducerEpoch)
			e.txnFirstOffset = -1
			e.coordinatorEpoch = pb.marker.CoordinatorEpoch
			e.lastTimestamp = h.MaxTimestamp
			e.lastSeen = now
			continue
		}
		if origin == OriginClient && known && len(pbs) == 1 {
			if d := e.findDuplicate(h); d != nil {
				dup := *d
				u.duplicate = &dup
				return u, nil
			}
		}
		if origin != OriginReplication && h.ProducerEpoch < e.epoch {
			return nil, fmt.Errorf("%w: producer %d: epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
		if origin == OriginClient && known && e.epoch != noProducerEpoch {
			if h.ProducerEpoch != e.epoch {
				if h.BaseSequence != 0 {
					return nil, fmt.Errorf("%w: producer %d: sequence %d for new epoch %d (current %d)", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, h.ProducerEpoch, e.epoch)
				}
			} else if last := e.lastSeq(); !inSequence(last, h.BaseSequence) {
				return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, last)
			}
		}
		e.setEpoch(h.ProducerEpoch)
		e.addBatch(batchMeta{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), timestamp: h.MaxTimestamp})
		e.lastTimestamp = h.MaxTimestamp
		e.lastSeen = now
		switch {
		case e.txnFirstOffset >= 0 && !h.IsTransactional():
			if origin != OriginReplication {
				return nil, fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction from offset %d is open", ErrInvalidTxnState, h.ProducerID, e.txnFirstOffset)
			}
		case e.txnFirstOffset < 0 && h.IsTransactional():
			e.txnFirstOffset = h.BaseOffset
			u.events = append(u.events, txnEvent{span: txnSpan{h.ProducerID, h.BaseOffset, -1}})
		}
	}
	return u, nil
}

// commit applies u after its batches were written (their .txnindex
// entries first, abortedTxns) and moves the map end offset to next. It
// changes memory only.
func (ps *producerState) commit(u *producerUpdate, next int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if u != nil {
		for _, e := range u.entries {
			ps.producers[e.id] = e
		}
		ps.ongoing = applyTxnEvents(ps.ongoing, u.events, func(ev txnEvent, _ int64) {
			ps.unreplicated = insertSpan(ps.unreplicated, ev.span)
		})
	}
	if next > ps.mapEndOffset {
		ps.mapEndOffset = next
	}
}

// abortedTxns returns the .txnindex entries of the transactions u aborts
// (nil u: none), as commit will apply it: the caller writes them before
// the batches holding their markers count as written.
func (ps *producerState) abortedTxns(u *producerUpdate) []AbortedTxn {
	if u == nil || !slices.ContainsFunc(u.events, func(ev txnEvent) bool { return ev.aborted }) {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []AbortedTxn
	applyTxnEvents(slices.Clone(ps.ongoing), u.events, func(ev txnEvent, lso int64) {
		if ev.aborted {
			out = append(out, AbortedTxn{ProducerID: ev.span.producerID, FirstOffset: ev.span.firstOffset, LastOffset: ev.span.lastOffset, LastStableOffset: lso})
		}
	})
	return out
}

// applyTxnEvents applies events, in order, to ongoing (the open
// transactions by first offset, modified in place) and returns it;
// completed is called for each transaction the events complete, with the
// last stable offset once its marker is written: the first offset of
// another producer's open transaction, or the offset after the marker.
func applyTxnEvents(ongoing []txnSpan, events []txnEvent, completed func(ev txnEvent, lso int64)) []txnSpan {
	for _, ev := range events {
		if !ev.complete {
			ongoing = insertSpan(ongoing, ev.span)
			continue
		}
		if i := slices.IndexFunc(ongoing, func(s txnSpan) bool { return s.firstOffset == ev.span.firstOffset }); i >= 0 {
			ongoing = slices.Delete(ongoing, i, i+1)
		}
		lso := ev.span.lastOffset + 1
		for _, o := range ongoing {
			if o.producerID != ev.span.producerID {
				lso = o.firstOffset
				break
			}
		}
		completed(ev, lso)
	}
	return ongoing
}

func insertSpan(spans []txnSpan, s txnSpan) []txnSpan {
	i, _ := slices.BinarySearchFunc(spans, s.firstOffset, func(a txnSpan, off int64) int { return cmp.Compare(a.firstOffset, off) })
	return slices.Insert(spans, i, s)
}

// firstUnstableOffset is the first offset of a transaction still open or
// whose marker is not below hw yet; ok is false when there is none.
func (ps *producerState) firstUnstableOffset(hw int64) (int64, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.unreplicated = slices.DeleteFunc(ps.unreplicated, func(s txnSpan) bool { return s.lastOffset < hw })
	first, ok := int64(0), false
	if len(ps.ongoing) > 0 {
		first, ok = ps.ongoing[0].firstOffset, true
	}
	if len(ps.unreplicated) > 0 && (!ok || ps.unreplicated[0].firstOffset < first) {
		first, ok = ps.unreplicated[0].firstOffset, true
	}
	return first, ok
}

// reset forgets everything and starts the state at offset.
func (ps *producerState) resetLocked(offset int64) {
	ps.producers = map[int64]*producerEntry{}
	ps.ongoing, ps.unreplicated = nil, nil
	ps.mapEndOffset = offset
}

// snapshotPath is the file of a snapshot of the state below offset.
func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, segmentName(offset)+snapshotSuffix)
}

// listSnapshots returns the offsets of the snapshot files of dir, sorted.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", dir, err)
	}
	var out []int64
	for _, e := range entries {
		if off, ok := parseBase(e.Name(), snapshotSuffix); ok && !e.IsDir() {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// EncodeProducerSnapshot returns a producer snapshot file in Kafka's format
// (version 1, see the package doc) holding entries, sorted by producer id.
func EncodeProducerSnapshot(entries []ProducerSnapshotEntry) []byte {
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(entries)*snapshotEntrySize)
	binary.BigEndian.PutUint16(b, snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint16(b, uint16(e.ProducerEpoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.LastSequence))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(e.OffsetDelta))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerSnapshotEntry is one producer in a snapshot file (the fields of
// Kafka's producer snapshot entry schema).
type ProducerSnapshotEntry struct {
	ProducerID    int64
	ProducerEpoch int16
	LastSequence  int32 // -1 when no batch is known
	LastOffset    int64 // last offset of its last batch, -1 when none
	// OffsetDelta is the last batch's last offset minus its first.
	OffsetDelta           int32
	Timestamp             int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64 // -1 when no transaction is open
}

// DecodeProducerSnapshot parses a producer snapshot file. Errors:
// ErrCorruptSnapshot (wrapped) for a wrong version, a bad CRC, a count that
// does not match the size, or trailing bytes.
func DecodeProducerSnapshot(b []byte) ([]ProducerSnapshotEntry, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptSnapshot, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptSnapshot, v)
	}
	if want, got := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], castagnoli); want != got {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptSnapshot, want, got)
	}
	n := int32(binary.BigEndian.Uint32(b[6:]))
	if n < 0 || n > maxSnapshotProducer || int64(len(b)-snapshotHeaderSize) != int64(n)*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, n, len(b))
	}
	out := make([]ProducerSnapshotEntry, n)
	p := b[snapshotHeaderSize:]
	for i := range out {
		out[i] = ProducerSnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(p)),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(p[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(p[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(p[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(p[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(p[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(p[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(p[38:])),
		}
		p = p[snapshotEntrySize:]
	}
	return out, nil
}

// snapshotEntriesLocked returns the state as snapshot entries.
func (ps *producerState) snapshotEntriesLocked() []ProducerSnapshotEntry {
	out := make([]ProducerSnapshotEntry, 0, len(ps.producers))
	for _, id := range slices.Sorted(maps.Keys(ps.producers)) {
		e := ps.producers[id]
		se := ProducerSnapshotEntry{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: noSequence, LastOffset: -1,
			Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnFirstOffset: e.txnFirstOffset}
		if n := e.nBatches; n > 0 {
			b := e.batches[n-1]
			se.LastSequence, se.LastOffset, se.OffsetDelta = b.lastSeq, b.lastOffset, int32(b.lastOffset-b.firstOffset)
		}
		out = append(out, se)
	}
	return out
}

// restoreLocked replaces the state with a snapshot's entries, as of offset.
func (ps *producerState) restoreLocked(entries []ProducerSnapshotEntry, offset int64, now time.Time) {
	ps.resetLocked(offset)
	for _, se := range entries {
		e := newProducerEntry(se.ProducerID)
		e.epoch = se.ProducerEpoch
		e.lastTimestamp = se.Timestamp
		e.coordinatorEpoch = se.CoordinatorEpoch
		e.txnFirstOffset = se.CurrentTxnFirstOffset
		e.lastSeen = now
		if se.LastOffset >= 0 {
			first := int64(se.LastSequence) - int64(se.OffsetDelta)
			if se.LastSequence >= 0 && first < 0 {
				first += 1 << 31 // sequences wrap after MaxInt32
			}
			e.batches[0] = batchMeta{firstSeq: int32(first), lastSeq: se.LastSequence,
				firstOffset: se.LastOffset - int64(se.OffsetDelta), lastOffset: se.LastOffset, timestamp: se.Timestamp}
			e.nBatches = 1
		}
		ps.producers[se.ProducerID] = e
		if e.txnFirstOffset >= 0 {
			ps.ongoing = insertSpan(ps.ongoing, txnSpan{se.ProducerID, e.txnFirstOffset, -1})
		}
	}
	ps.lastSnapOffset = offset
}

// lastSnapshot is the offset of the latest snapshot written or loaded,
// zero when there is none (the replay then starts at the log start).
func (ps *producerState) lastSnapshot() int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.lastSnapOffset
}

// takeSnapshot writes the state to <mapEndOffset>.snapshot unless a
// snapshot at that offset exists, then removes the snapshots below keepFrom
// except the latest. Expired producers are forgotten first. The file is
// written to a temporary name and renamed, without fsync: a snapshot lost
// or torn by a machine crash fails its CRC on the next Open, which then
// replays more of the log. The caller (holding Log.mu) marks the directory
// dirty when written is true.
func (ps *producerState) takeSnapshot(now time.Time, keepFrom int64) (written bool, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.mapEndOffset <= ps.lastSnapOffset {
		return false, nil
	}
	ps.expireLocked(now)
	path := snapshotPath(ps.dir, ps.mapEndOffset)
	tmp := path + ".tmp"
	if err := vfs.WriteFile(ps.fsys, tmp, EncodeProducerSnapshot(ps.snapshotEntriesLocked()), 0o644); err != nil {
		ps.fsys.Remove(tmp)
		return false, fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	if err := ps.fsys.Rename(tmp, path); err != nil {
		ps.fsys.Remove(tmp)
		return false, fmt.Errorf("storage: %w", err)
	}
	ps.lastSnapOffset = ps.mapEndOffset
	return true, ps.deleteSnapshotsLocked(func(off int64) bool { return off < keepFrom && off != ps.lastSnapOffset })
}

// deleteSnapshotsBelow removes the snapshots below logStart, those of
// deleted segments (Kafka's deleteProducerSnapshots), except the newest at
// or below logStart: loadProducerState starts from the latest snapshot at
// or below its limit, and that one still holds the producers of the
// deleted segments until they expire. Requires Log.mu.
func (ps *producerState) deleteSnapshotsBelow(logStart int64) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	offs, err := listSnapshots(ps.fsys, ps.dir)
	if err != nil {
		return err
	}
	keep := int64(-1)
	for _, off := range offs {
		if off <= logStart {
			keep = off
		}
	}
	return ps.deleteSnapshotsLocked(func(off int64) bool { return off < logStart && off != keep })
}

// deleteSnapshotsLocked removes the snapshot files whose offset matches.
func (ps *producerState) deleteSnapshotsLocked(match func(int64) bool) error {
	offs, err := listSnapshots(ps.fsys, ps.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, off := range offs {
		if match(off) {
			if err := ps.fsys.Remove(snapshotPath(ps.dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Producer returns the state of producer id in this partition; ok is false
// when the partition has none (never written, or expired after
// producer.id.expiration.ms). Safe for concurrent use.
func (l *Log) Producer(id int64) (info ProducerInfo, ok bool) {
	ps := l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e := ps.producers[id]
	if e == nil || ps.expiredLocked(e, l.now()) {
		return ProducerInfo{}, false
	}
	return e.info(), true
}

// Producers returns the state of every producer of the partition that has
// not expired, by producer id (DescribeProducers). Safe for concurrent use.
func (l *Log) Producers() []ProducerInfo {
	ps := l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := l.now()
	out := make([]ProducerInfo, 0, len(ps.producers))
	for _, id := range slices.Sorted(maps.Keys(ps.producers)) {
		if e := ps.producers[id]; !ps.expiredLocked(e, now) {
			out = append(out, e.info())
		}
	}
	return out
}

// FirstUnstableOffset returns the first offset of a transaction still open
// in the partition, or completed by a marker at or above highWatermark; ok
// is false when there is none. The last stable offset is the smaller of it
// and the high-watermark. Safe for concurrent use.
func (l *Log) FirstUnstableOffset(highWatermark int64) (offset int64, ok bool) {
	return l.producers.firstUnstableOffset(highWatermark)
}

// loadProducerState builds the producer state when the log opens: from the
// latest snapshot at or below limit (the log end, or the base of the first
// segment recovery re-checked), replaying the batches after it, whose
// markers' .txnindex entries are rewritten. Without any snapshot the whole
// log is replayed, except after a clean shutdown (data written before
// producer snapshots existed), where only the last two segments are, as
// Kafka does. Stray temporary files and snapshots past the log end are
// removed. Requires exclusive use of the log.
//
// entries is the log dir's listing when the caller has a current one (Open
// has), nil to read it.
func (l *Log) loadProducerState(limit int64, clean bool, entries []os.DirEntry) error {
	ps := l.producers
	now := l.now()
	leo := l.logEndOffset.Load()
	// At most one read of the directory (three were a tenth of opening a
	// log, at 100,000 logs seconds), none at Open.
	if entries == nil {
		var err error
		if entries, err = l.fsys.ReadDir(l.dir); err != nil {
			return fmt.Errorf("storage: read %s: %w", l.dir, err)
		}
	}
	var offs []int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), snapshotSuffix+".tmp") {
			l.fsys.Remove(filepath.Join(l.dir, e.Name()))
		}
		if off, ok := parseBase(e.Name(), snapshotSuffix); ok && !e.IsDir() {
			if off > leo {
				if err := l.fsys.Remove(snapshotPath(l.dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
				continue
			}
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	segs := l.segments()
	from := l.logStartOffset.Load()
	if len(segs) > 0 {
		from = segs[0].baseOffset
	}
	found := false
	for i := len(offs) - 1; i >= 0 && !found; i-- {
		off := offs[i]
		if off > leo || off > limit {
			continue
		}
		data, err := vfs.ReadFile(l.fsys, snapshotPath(l.dir, off))
		var se []ProducerSnapshotEntry
		if err == nil {
			if se, err = DecodeProducerSnapshot(data); err != nil {
				err = fmt.Errorf("%s: %w", snapshotPath(l.dir, off), err)
			}
		}
		if err != nil {
			l.logger.Warn("removing unreadable producer snapshot", "offset", off, "err", err)
			l.fsys.Remove(snapshotPath(l.dir, off))
			continue
		}
		ps.mu.Lock()
		ps.restoreLocked(se, off, now)
		ps.mu.Unlock()
		from, found = off, true
	}
	if !found && clean && len(offs) == 0 && len(segs) > 2 {
		from = segs[len(segs)-2].baseOffset
	}
	if !found {
		ps.mu.Lock()
		ps.resetLocked(from)
		ps.mu.Unlock()
	}
	return l.replayProducersLocked(from)
}

// replayProducersLocked brings the producer state from offset from to the
// log end by reading the batches with a producer id (headers, and the
// record of markers), and rewrites the .txnindex entries of the markers at
// or after from. Requires Log.mu or exclusive use.
func (l *Log) replayProducersLocked(from int64) error {
	leo := l.logEndOffset.Load()
	if from >= leo {
		l.producers.commit(nil, leo)
		return nil
	}
	start := time.Now()
	segs := l.segments()
	batches := 0
	for i := floorSegment(segs, from); i < len(segs); i++ {
		s := segs[i]
		if err := s.truncateTxnIndex(from); err != nil {
			return err
		}
		n, err := l.replaySegment(s, from)
		batches += n
		if err != nil {
			return err
		}
	}
	l.producers.commit(nil, leo)
	l.logger.Debug("rebuilt producer state", "from_offset", from, "log_end_offset", leo, "producer_batches", batches, "duration", time.Since(start))
	return nil
}

// replaySegment applies the producer batches of s at or after from.
func (l *Log) replaySegment(s *segment, from int64) (int, error) {
	s.rw.RLock()
	defer s.rw.RUnlock()
	if s.closed {
		return 0, nil
	}
	size := s.size.Load()
	pos, _, found, err := s.findBatchLocked(from, size)
	if err != nil || !found {
		return 0, err
	}
	n := 0
	now := l.now()
	for pos < size {
		h, err := s.readHeaderAt(pos, size)
		if err != nil {
			return n, err
		}
		if h.ProducerID >= 0 && h.LastOffset() >= from {
			pb := producerBatch{h: h}
			if h.IsControl() {
				batch, err := s.readBatchAt(pos, h)
				if err != nil {
					return n, err
				}
				pb = newProducerBatch(batch, h)
			}
			u, _ := l.producers.prepare([]producerBatch{pb}, OriginReplication, now)
			if aborted := l.producers.abortedTxns(u); len(aborted) > 0 {
				// Read-committed consumers depend on the entry: without it
				// they would read the aborted records.
				if err := s.appendAbortedTxns(aborted); err != nil {
					return n, err
				}
			}
			l.producers.commit(u, h.NextOffset())
			n++
		}
		pos += int64(h.Size())
	}
	return n, nil
}

// setExpiration changes producer.id.expiration.ms.
func (ps *producerState) setExpiration(d time.Duration) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if d > 0 {
		ps.expiration = d
	}
}

// reloadProducersLocked rebuilds the producer state after a truncation
// (Kafka's truncateAndReload): snapshots past the new log end are removed,
// and the state is read from the latest remaining one and the log after
// it. Requires Log.mu.
func (l *Log) reloadProducersLocked() error {
	ps := l.producers
	leo := l.logEndOffset.Load()
	if err := ps.deleteSnapshotsLocked(func(off int64) bool { return off > leo }); err != nil {
		return err
	}
	ps.mu.Lock()
	same := ps.mapEndOffset == leo
	ps.mu.Unlock()
	if same {
		return nil
	}
	return l.loadProducerState(leo, false, nil)
}

// truncateFully forgets the state and every snapshot; the state starts
// again at offset.
func (ps *producerState) truncateFully(offset int64) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.resetLocked(offset)
	ps.lastSnapOffset = 0
	return ps.deleteSnapshotsLocked(func(int64) bool { return true })
}
