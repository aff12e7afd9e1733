package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// pidBatch builds a batch of n records from producer pid/epoch
// starting at sequence seq.
func pidBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("p%d-s%d", pid, int(seq)+i))}
	}
	b, err := record.Build(record.Spec{BaseTimestamp: testEpoch.UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: txn}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func markerBatch(t testing.TB, pid int64, epoch int16, coordEpoch int32, commit bool) []byte {
	t.Helper()
	b, err := record.BuildEndTxnMarker(pid, epoch, coordEpoch, commit, testEpoch.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openClock(t testing.TB, dir string, cfg Config, rp int64, clk *fakeClock) *Log {
	t.Helper()
	l, err := Open(OpenOptions{Dir: dir, Config: cfg, RecoveryPoint: rp, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte, origin Origin) AppendResult {
	t.Helper()
	res, err := l.AppendWith(b, 3, origin)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func TestIdempotentProducerChecks(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	l := openClock(t, t.TempDir(), Config{}, 0, clk)
	const pid = 7
	first := mustAppend(t, l, pidBatch(t, pid, 0, 0, 3, false), OriginClient)
	second := mustAppend(t, l, pidBatch(t, pid, 0, 3, 2, false), OriginClient)
	if first.BaseOffset != 0 || second.BaseOffset != 3 || second.LastOffset != 4 {
		t.Fatalf("offsets %+v %+v", first, second)
	}
	// Retries of either of the last batches are answered with their offsets.
	for _, want := range []AppendResult{first, second} {
		seq := int32(want.BaseOffset)
		res := mustAppend(t, l, pidBatch(t, pid, 0, seq, int(want.LastOffset-want.BaseOffset+1), false), OriginClient)
		if !res.Duplicate || res.BaseOffset != want.BaseOffset || res.LastOffset != want.LastOffset {
			t.Fatalf("retry of %+v: %+v", want, res)
		}
	}
	if leo := l.LogEndOffset(); leo != 5 {
		t.Fatalf("duplicates written: log end %d", leo)
	}
	cases := []struct {
		name  string
		batch []byte
		err   error
	}{
		{"gap", pidBatch(t, pid, 0, 7, 1, false), ErrOutOfOrderSequence},
		{"seq below", pidBatch(t, pid, 0, 4, 1, false), ErrOutOfOrderSequence},
		{"new epoch not at 0", pidBatch(t, pid, 1, 5, 1, false), ErrOutOfOrderSequence},
	}
	for _, c := range cases {
		_, err := l.AppendWith(c.batch, 3, OriginClient)
		if !errors.Is(err, c.err) {
			t.Fatalf("%s: err %v, want %v", c.name, err, c.err)
		}
	}
	// A bump to epoch 1 from sequence 0, then epoch 0 is fenced.
	mustAppend(t, l, pidBatch(t, pid, 1, 0, 1, false), OriginClient)
	if _, err := l.AppendWith(pidBatch(t, pid, 0, 6, 1, false), 3, OriginClient); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	// An unknown producer may start at any sequence.
	mustAppend(t, l, pidBatch(t, 99, 4, 1234, 2, false), OriginClient)
	info, ok := l.Producer(pid)
	if !ok || info.ProducerEpoch != 1 || info.LastSequence != 0 || info.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer %+v %v", info, ok)
	}
	if got := len(l.Producers()); got != 2 {
		t.Fatalf("%d producers", got)
	}
	// The coordinator's origin checks epochs only.
	if _, err := l.AppendWith(pidBatch(t, pid, 1, 100, 1, false), 3, OriginCoordinator); err != nil {
		t.Fatalf("coordinator origin: %v", err)
	}
}

func TestProducerExpiration(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	l := openClock(t, t.TempDir(), Config{ProducerIDExpiration: time.Hour}, 0, clk)
	mustAppend(t, l, pidBatch(t, 1, 0, 0, 1, false), OriginClient)
	clk.t = clk.t.Add(59 * time.Minute)
	if _, err := l.AppendWith(pidBatch(t, 1, 0, 5, 1, false), 3, OriginClient); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("before expiry: %v", err)
	}
	clk.t = clk.t.Add(time.Hour)
	if _, ok := l.Producer(1); ok {
		t.Fatal("producer not expired")
	}
	mustAppend(t, l, pidBatch(t, 1, 0, 5, 1, false), OriginClient)
}

func TestTransactionsLSOAndTxnIndex(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	dir := t.TempDir()
	l := openClock(t, dir, Config{}, 0, clk)
	// offsets: 0-1 pid 1 txn; 2 pid 2 txn; 3 non-txn; 4 abort pid 1; 5 pid 2 more; 6 commit pid 2
	mustAppend(t, l, pidBatch(t, 1, 0, 0, 2, true), OriginClient)
	if off, ok := l.FirstUnstableOffset(2); !ok || off != 0 {
		t.Fatalf("first unstable %d %v", off, ok)
	}
	mustAppend(t, l, pidBatch(t, 2, 0, 0, 1, true), OriginClient)
	mustAppend(t, l, testBatch(t, 1, testEpoch.UnixMilli(), "plain"), OriginClient)
	if _, err := l.AppendWith(pidBatch(t, 1, 0, 2, 1, false), 3, OriginClient); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in a transaction: %v", err)
	}
	if _, err := l.AppendWith(markerBatch(t, 1, 0, 5, false), 3, OriginCoordinator); err != nil {
		t.Fatal(err)
	}
	// The aborted transaction is unstable until the high-watermark passes
	// its marker; then the open one of producer 2 bounds the LSO.
	if off, _ := l.FirstUnstableOffset(4); off != 0 {
		t.Fatalf("first unstable before the marker is replicated: %d", off)
	}
	if off, _ := l.FirstUnstableOffset(5); off != 2 {
		t.Fatalf("first unstable: %d", off)
	}
	mustAppend(t, l, pidBatch(t, 2, 0, 1, 1, true), OriginClient)
	// Coordinator epochs are per producer: 4 after producer 1's 5 is fine.
	mustAppend(t, l, markerBatch(t, 2, 0, 4, true), OriginCoordinator)
	if off, ok := l.FirstUnstableOffset(7); ok {
		t.Fatalf("unstable offset %d after both ended", off)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 4, LastStableOffset: 2}}
	got, err := l.AbortedTransactions(0, 7)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v %v, want %+v", got, err, want)
	}
	if got, _ := l.AbortedTransactions(5, 7); len(got) != 0 {
		t.Fatalf("aborted after the marker: %+v", got)
	}
	// A late marker from an older coordinator epoch is fenced; an older
	// producer epoch too.
	if _, err := l.AppendWith(markerBatch(t, 1, 0, 4, false), 3, OriginCoordinator); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("old coordinator epoch: %v", err)
	}
	if _, err := l.AppendWith(markerBatch(t, 1, 1, 5, false), 3, OriginCoordinator); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendWith(pidBatch(t, 1, 0, 3, 1, true), 3, OriginClient); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, segmentName(0)+txnIndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != txnEntrySize {
		t.Fatalf(".txnindex of %d bytes", len(b))
	}
	if d, err := DecodeTxnIndex(b); err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf(".txnindex %+v %v", d, err)
	}
}

// state captures what a test compares across restarts.
func stateOf(t testing.TB, l *Log) ([]ProducerInfo, []AbortedTxn, int64) {
	t.Helper()
	ab, err := l.AbortedTransactions(0, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	fu, ok := l.FirstUnstableOffset(l.LogEndOffset())
	if !ok {
		fu = -1
	}
	return l.Producers(), ab, fu
}

func writeTxns(t testing.TB, l *Log) {
	t.Helper()
	for i := range 6 {
		pid := int64(i%3 + 1)
		info, _ := l.Producer(pid)
		seq := info.LastSequence + 1
		mustAppend(t, l, pidBatch(t, pid, 0, seq, 3, true), OriginClient)
		if i%3 != 2 {
			mustAppend(t, l, markerBatch(t, pid, 0, 1, i%2 == 0), OriginCoordinator)
		}
	}
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			clk := &fakeClock{t: testEpoch}
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 400}
			l := openClock(t, dir, cfg, 0, clk)
			writeTxns(t, l)
			wantP, wantA, wantU := stateOf(t, l)
			if len(wantA) == 0 || wantU < 0 || len(l.Segments()) < 3 {
				t.Fatalf("setup: aborted %v, unstable %d, %d segments", wantA, wantU, len(l.Segments()))
			}
			segs := l.segments()
			activeBase := segs[len(segs)-1].baseOffset
			rp := int64(-1)
			if crash {
				// A crash: no snapshot at the log end, the last .txnindex
				// lost, recovery from the start.
				l.mu.Lock()
				l.producers.mu.Lock()
				l.producers.lastSnapOffset = l.producers.mapEndOffset // no snapshot on close
				l.producers.mu.Unlock()
				l.mu.Unlock()
				rp = 0
			}
			l.Close()
			if crash {
				for _, f := range segmentFiles(t, dir, txnIndexSuffix) {
					os.Remove(f)
				}
				snaps := segmentFiles(t, dir, snapshotSuffix)
				if len(snaps) == 0 {
					t.Fatal("no snapshots taken at rolls")
				}
			} else if _, err := os.Stat(snapshotPath(dir, activeBase)); err != nil {
				// A small active segment gets no snapshot at close
				// (closeSnapshotWorthLocked): the one taken when it
				// rolled in bounds the replay.
				t.Fatalf("no snapshot at the active segment's base after close: %v", err)
			}
			l2 := openClock(t, dir, cfg, rp, clk)
			gotP, gotA, gotU := stateOf(t, l2)
			if crash {
				// Batches before the latest snapshot are known only by
				// their last batch: compare what a snapshot keeps.
				for i := range gotP {
					gotP[i].LastTimestamp, wantP[i].LastTimestamp = 0, 0
				}
			}
			if !reflect.DeepEqual(gotP, wantP) || gotU != wantU {
				t.Fatalf("producers %+v unstable %d, want %+v %d", gotP, gotU, wantP, wantU)
			}
			if !crash && !reflect.DeepEqual(gotA, wantA) {
				t.Fatalf("aborted %+v, want %+v", gotA, wantA)
			}
			// A retry of the last batch is still recognized.
			info, _ := l2.Producer(3)
			res := mustAppend(t, l2, pidBatch(t, 3, 0, info.LastSequence-2, 3, true), OriginClient)
			if !res.Duplicate {
				t.Fatalf("retry after restart written: %+v", res)
			}
		})
	}
}

func TestTxnIndexRebuiltOnRecovery(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	dir := t.TempDir()
	l := openClock(t, dir, Config{}, 0, clk)
	writeTxns(t, l)
	_, want, _ := stateOf(t, l)
	l.Close()
	for _, f := range append(segmentFiles(t, dir, txnIndexSuffix), segmentFiles(t, dir, snapshotSuffix)...) {
		os.Remove(f)
	}
	l2 := openClock(t, dir, Config{}, 0, clk)
	_, got, _ := stateOf(t, l2)
	if !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
}

func TestProducerStateTruncate(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	l := openClock(t, t.TempDir(), Config{SegmentBytes: 300}, 0, clk)
	mustAppend(t, l, pidBatch(t, 1, 0, 0, 2, false), OriginClient)
	cut := l.LogEndOffset()
	mustAppend(t, l, pidBatch(t, 1, 0, 2, 2, true), OriginClient)
	mustAppend(t, l, pidBatch(t, 2, 0, 0, 2, true), OriginClient)
	mustAppend(t, l, markerBatch(t, 1, 0, 0, false), OriginCoordinator)
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	if off, ok := l.FirstUnstableOffset(cut); ok {
		t.Fatalf("unstable offset %d after truncation", off)
	}
	if ab, _ := l.AbortedTransactions(0, 100); len(ab) != 0 {
		t.Fatalf("aborted transactions after truncation: %+v", ab)
	}
	if _, ok := l.Producer(2); ok {
		t.Fatal("producer 2 survived the truncation")
	}
	info, _ := l.Producer(1)
	if info.LastSequence != 1 || info.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer 1 after truncation: %+v", info)
	}
	mustAppend(t, l, pidBatch(t, 1, 0, 2, 1, false), OriginClient)
}

func TestProducerStateKeptAfterRetention(t *testing.T) {
	clk := &fakeClock{t: testEpoch}
	l := openClock(t, t.TempDir(), Config{SegmentBytes: 300}, 0, clk)
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	mustAppend(t, l, pidBatch(t, 1, 0, 0, 2, false), OriginClient)
	for range 5 {
		fill(t, l, &appended{}, 1, testEpoch.UnixMilli())
	}
	if err := l.SetLogStartOffset(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteOldSegments(); err != nil || n == 0 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	res := mustAppend(t, l, pidBatch(t, 1, 0, 0, 2, false), OriginClient)
	if !res.Duplicate {
		t.Fatalf("retry after retention: %+v", res)
	}
	if _, err := l.AppendWith(pidBatch(t, 1, 0, 5, 1, false), 3, OriginClient); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after retention: %v", err)
	}
}

func TestProducerSnapshotCodec(t *testing.T) {
	entries := []ProducerSnapshotEntry{
		{ProducerID: 1, ProducerEpoch: 2, LastSequence: 9, LastOffset: 100, OffsetDelta: 4, Timestamp: 1234, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 1 << 40, ProducerEpoch: 0, LastSequence: -1, LastOffset: -1, Timestamp: 5, CoordinatorEpoch: 3, CurrentTxnFirstOffset: 77},
	}
	b := EncodeProducerSnapshot(entries)
	if len(b) != snapshotHeaderSize+2*snapshotEntrySize {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := DecodeProducerSnapshot(b)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("%+v %v", got, err)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, err := DecodeProducerSnapshot(c); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	if _, err := DecodeProducerSnapshot(b[:len(b)-1]); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("short: %v", err)
	}
}

func FuzzDecodeProducerSnapshot(f *testing.F) {
	f.Add(EncodeProducerSnapshot(nil))
	f.Add(EncodeProducerSnapshot([]ProducerSnapshotEntry{{ProducerID: 3, LastSequence: 4, LastOffset: 5, CurrentTxnFirstOffset: -1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeProducerSnapshot(b)
		if err != nil {
			return
		}
		if again := EncodeProducerSnapshot(es); string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(EncodeTxnIndex([]AbortedTxn{{1, 2, 3, 4}}))
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeTxnIndex(b)
		if err != nil {
			return
		}
		if again := EncodeTxnIndex(es); string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// BenchmarkAppendIdempotent is BenchmarkAppend with a producer id and
// sequences checked as a client's (OriginClient), to compare with the
// plain append: the cost of the producer state on the produce path.
func BenchmarkAppendIdempotent(b *testing.B) {
	l := openTest(b, b.TempDir(), Config{SegmentBytes: 64 << 20}, 0)
	defer l.Close()
	batch, err := record.Build(record.Spec{BaseTimestamp: 1, ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0},
		[]record.Record{{Value: make([]byte, 1024)}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	seq := uint32(0)
	for b.Loop() {
		binary.BigEndian.PutUint32(batch[53:], seq) // base sequence
		binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
		seq++
		if _, err := l.AppendWith(batch, 0, OriginClient); err != nil {
			b.Fatal(err)
		}
	}
}
