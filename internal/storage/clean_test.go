package storage

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// kv is one record for kvBatch; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

func put(k, v string) kv { return kv{k, []byte(v)} }
func del(k string) kv    { return kv{k, nil} }

// producer identifies the writer of a batch for kvBatch.
type producer struct {
	id    int64
	epoch int16
	seq   int32
	txn   bool
}

var noProducer = producer{id: record.NoProducerID, epoch: record.NoProducerEpoch, seq: record.NoSequence}

// kvBatch builds a batch of kvs with timestamps ts, ts+1, …, compressed with
// codec.
func kvBatch(t testing.TB, codec record.Codec, ts int64, p producer, kvs ...kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, x := range kvs {
		recs[i] = record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(x.key), Value: x.value}
	}
	b, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: ts, ProducerID: p.id, ProducerEpoch: p.epoch, BaseSequence: p.seq, Transactional: p.txn}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compactCleanup() Cleanup {
	c := DefaultCleanup()
	c.Delete = false
	c.Compact = true
	c.DeleteRetention = time.Hour
	c.FileDeleteDelay = 0
	return c
}

// compactedLog opens a log of small segments with bounds at its end.
func compactedLog(t testing.TB, dir string, clock *fakeClock, segmentBytes int64) *Log {
	t.Helper()
	l, err := Open(OpenOptions{Dir: dir, Now: clock.now, Config: Config{
		SegmentBytes: segmentBytes, IndexIntervalBytes: 100, Cleanup: compactCleanup(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	return l
}

// logRecord is one record as read back.
type logRecord struct {
	offset int64
	key    string
	value  string
	tomb   bool
	batch  record.Header
}

// readRecords reads every record from the log start, checking that every
// offset in between can be fetched (a consumer at a removed offset moves on
// to the next batch) and that offsets increase.
func readRecords(t testing.TB, l *Log) []logRecord {
	t.Helper()
	return readRecordsUntil(t, l, false)
}

// readRecordsUntil is readRecords; with tailGap it stops at an offset with
// nothing to read (a truncation can leave the log end past the last batch)
// rather than failing.
func readRecordsUntil(t testing.TB, l *Log, tailGap bool) []logRecord {
	t.Helper()
	var out []logRecord
	off := l.LogStartOffset()
	last := int64(-1)
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Records) == 0 && tailGap {
			break
		}
		if len(res.Records) == 0 {
			t.Fatalf("read at %d (log end %d): nothing", off, l.LogEndOffset())
		}
		var next int64
		if _, err := record.Batches(res.Records, func(b []byte, h record.Header) error {
			if _, err := record.Validate(b); err != nil {
				return err
			}
			if h.LastOffset() < off {
				return fmt.Errorf("batch ending at %d returned for offset %d", h.LastOffset(), off)
			}
			next = h.NextOffset()
			return record.Records(b, func(r record.Record) error {
				if r.Offset <= last {
					return fmt.Errorf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				if r.Offset >= off {
					out = append(out, logRecord{r.Offset, string(r.Key), string(r.Value), r.Value == nil, h})
				}
				return nil
			})
		}); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		off = next
	}
	return out
}

// latest returns, for records below limit, each key's last record.
func latest(recs []logRecord, limit int64) map[string]logRecord {
	m := map[string]logRecord{}
	for _, r := range recs {
		if r.offset < limit {
			m[r.key] = r
		}
	}
	return m
}

// checkCompacted checks that below limit the log holds exactly want: one
// record per key, at the same offset and with the same value.
func checkCompacted(t testing.TB, l *Log, limit int64, want map[string]logRecord) {
	t.Helper()
	seen := map[string]bool{}
	n := 0
	for _, r := range readRecords(t, l) {
		if r.offset >= limit {
			continue
		}
		n++
		w, ok := want[r.key]
		if !ok {
			t.Fatalf("key %q at %d should be gone", r.key, r.offset)
		}
		if seen[r.key] {
			t.Fatalf("key %q twice below %d", r.key, limit)
		}
		seen[r.key] = true
		if w.offset != r.offset || w.value != r.value || w.tomb != r.tomb {
			t.Fatalf("key %q: got offset %d value %q, want offset %d value %q", r.key, r.offset, r.value, w.offset, w.value)
		}
	}
	if n != len(want) {
		t.Fatalf("%d records below %d, want %d", n, limit, len(want))
	}
}

func clean(t testing.TB, l *Log, opts CleanOptions) CleanResult {
	t.Helper()
	res, err := l.Clean(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// writeDups appends n batches of 1..4 records over keys k0..k(keys-1) and
// returns the log end offset of the last closed segment after rolling.
func writeDups(t testing.TB, l *Log, clock *fakeClock, rng *rand.Rand, n, keys int, codec record.Codec) {
	t.Helper()
	for i := range n {
		var kvs []kv
		for j := range 1 + rng.IntN(4) {
			k := fmt.Sprintf("k%d", rng.IntN(keys))
			if rng.IntN(10) == 0 {
				kvs = append(kvs, del(k))
			} else {
				kvs = append(kvs, put(k, fmt.Sprintf("v%d.%d", i, j)))
			}
		}
		if _, err := l.Append(kvBatch(t, codec, clock.t.UnixMilli(), noProducer, kvs...), 3); err != nil {
			t.Fatal(err)
		}
	}
}

func activeBase(l *Log) int64 { s := l.Segments(); return s[len(s)-1] }

func TestCleanKeepsLatestPerKey(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecSnappy, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			clock := &fakeClock{t: testEpoch}
			l := compactedLog(t, t.TempDir(), clock, 700)
			rng := rand.New(rand.NewPCG(1, uint64(codec)))
			writeDups(t, l, clock, rng, 300, 40, codec)
			before := readRecords(t, l)
			limit := activeBase(l)
			want := latest(before, limit)
			nsegs := len(l.Segments())

			res := clean(t, l, CleanOptions{Force: true})
			if res.Groups == 0 || res.EndOffset != limit || res.RecordsKept >= res.RecordsRead {
				t.Fatalf("clean result %+v, active segment at %d", res, limit)
			}
			checkCompacted(t, l, limit, want)
			// The active segment is untouched.
			after := readRecords(t, l)
			if a, b := after[len(after)-1], before[len(before)-1]; a != b {
				t.Fatalf("last record %+v, want %+v", a, b)
			}
			for _, f := range segmentFiles(t, l.Dir(), logSuffix) {
				if fileSize(t, f) > 700 {
					t.Fatalf("%s is %d bytes, over segment.bytes", f, fileSize(t, f))
				}
			}
			if l.CleanerCheckpoint() != limit {
				t.Fatalf("cleaner checkpoint %d, want %d", l.CleanerCheckpoint(), limit)
			}
			// Cleaning again finds nothing dirty; the result is stable.
			if _, ok := l.CleanPriority(); ok {
				t.Fatal("log still due for cleaning")
			}
			// A second cleaning merges the shrunk segments (groups are
			// made from the segments' sizes before cleaning, as Kafka).
			clean(t, l, CleanOptions{Force: true})
			checkCompacted(t, l, limit, want)
			if got := len(l.Segments()); got*2 > nsegs {
				t.Fatalf("%d segments after cleaning twice, %d before: small segments should merge", got, nsegs)
			}

			// More writes, then a second cleaning merges them in; the
			// indexes still find every offset after reopening.
			writeDups(t, l, clock, rng, 200, 40, codec)
			before = readRecords(t, l)
			limit = activeBase(l)
			want = latest(before, limit)
			clean(t, l, CleanOptions{})
			checkCompacted(t, l, limit, want)
			dir := l.Dir()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := compactedLog(t, dir, clock, 700)
			checkCompacted(t, l2, limit, want)
			for _, r := range readRecords(t, l2) {
				if off, ts, ok, err := l2.OffsetForTimestamp(r.batch.MaxTimestamp); err != nil || !ok || off > r.offset || ts < r.batch.MaxTimestamp {
					t.Fatalf("offset for timestamp %d: %d %d %v %v (record at %d)", r.batch.MaxTimestamp, off, ts, ok, err, r.offset)
				}
			}
		})
	}
}

func TestCleanTombstonesAfterDeleteRetention(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 400)
	for i := range 30 {
		if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, put(fmt.Sprintf("k%d", i%10), fmt.Sprint(i))), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, del("k1"), del("k2"), put("k3", "x"), del("k4")), 0); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(8 * 24 * time.Hour) // past segment.ms
	if err := l.MaybeRoll(); err != nil {
		t.Fatal(err)
	}
	// An append after the roll: the segment holding the log's last batch
	// is never cleaned (TestCleanKeepsLastBatchAfterAgeRoll).
	if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, put("z", "after")), 0); err != nil {
		t.Fatal(err)
	}
	before := readRecords(t, l)
	want := latest(before, l.LogEndOffset())

	clean(t, l, CleanOptions{Force: true})
	checkCompacted(t, l, l.LogEndOffset(), want)
	if p, ok := l.CleanPriority(); ok {
		t.Fatalf("due at priority %v right after cleaning", p)
	}

	clock.t = clock.t.Add(time.Hour + time.Millisecond)
	if p, ok := l.CleanPriority(); !ok || p < 1 {
		t.Fatalf("not due after delete.retention.ms: %v %v", p, ok)
	}
	res := clean(t, l, CleanOptions{})
	if res.Groups == 0 {
		t.Fatalf("no cleaning after the delete horizon: %+v", res)
	}
	for _, k := range []string{"k1", "k2", "k4"} {
		delete(want, k)
	}
	checkCompacted(t, l, l.LogEndOffset(), want)
	if _, ok := l.CleanPriority(); ok {
		t.Fatal("still due after removing the tombstones")
	}
}

// TestCleanKeepsProducerState checks that a producer's last batch survives
// as an empty batch with its identity, while its earlier emptied batches
// go.
func TestCleanKeepsProducerState(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 1<<20)
	ts := clock.t.UnixMilli()
	p5 := producer{id: 5, epoch: 2, seq: 0}
	appendB := func(p producer, kvs ...kv) int64 {
		res, err := l.Append(kvBatch(t, record.CodecNone, ts, p, kvs...), 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	appendB(p5, put("a", "1"), put("b", "1")) // 0-1: superseded, not p5's last: dropped
	p5.seq = 2
	last5 := appendB(p5, put("a", "2"), put("b", "2"), put("c", "2")) // 2-4: superseded, p5's last: kept empty
	appendB(producer{id: 6, epoch: 0, seq: 0}, put("a", "3"), put("b", "3"), put("c", "3"), put("d", "3"))
	appendB(noProducer, put("z", "1"), put("z", "2")) // 9-10: last of the group, first record goes
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendB(noProducer, put("y", "0"))

	clean(t, l, CleanOptions{Force: true})
	var batches []record.Header
	for off := int64(0); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1, 1<<62, true)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("read at %d: %v", off, err)
		}
		h, _ := record.ParseHeader(res.Records)
		batches = append(batches, h)
		off = h.NextOffset()
	}
	if len(batches) != 4 {
		t.Fatalf("%d batches, want 4: %+v", len(batches), batches)
	}
	e := batches[0]
	if e.BaseOffset != last5 || e.LastOffset() != last5+2 || e.NumRecords != 0 ||
		e.ProducerID != 5 || e.ProducerEpoch != 2 || e.BaseSequence != 2 || e.PartitionLeaderEpoch != 0 {
		t.Fatalf("producer 5's last batch: %+v", e)
	}
	if z := batches[2]; z.BaseOffset != 9 || z.LastOffsetDelta != 1 || z.NumRecords != 1 {
		t.Fatalf("last batch of the group: %+v", z)
	}
	// A consumer fetching inside the emptied batch moves past it.
	res, err := l.Read(last5+1, 1<<20, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := record.ParseHeader(res.Records); h.BaseOffset != last5 {
		t.Fatalf("read at %d returned the batch at %d", last5+1, h.BaseOffset)
	}
	if _, err := l.Read(0, 1<<20, 1<<62, true); err != nil {
		t.Fatalf("read at 0 (a dropped batch): %v", err)
	}
}

// roll rolls the active segment (tests).
func (l *Log) roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.rollLocked(l.logEndOffset.Load())
	return err
}

func TestCleanTransactions(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 1<<20)
	ts := clock.t.UnixMilli()
	appendB := func(b []byte) int64 {
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	marker := func(pid int64, commit bool) []byte {
		b, err := record.BuildEndTxnMarker(pid, 0, 1, commit, ts)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	aborted := producer{id: 9, epoch: 0, seq: 0, txn: true}
	committed := producer{id: 10, epoch: 0, seq: 0, txn: true}
	appendB(kvBatch(t, record.CodecNone, ts, aborted, put("a", "aborted"), put("x", "aborted")))
	appendB(kvBatch(t, record.CodecNone, ts, committed, put("b", "committed")))
	abortAt := appendB(marker(9, false))
	commitAt := appendB(marker(10, true))
	appendB(kvBatch(t, record.CodecNone, ts, noProducer, put("c", "plain")))
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendB(kvBatch(t, record.CodecNone, ts, noProducer, put("d", "active")))

	type view struct {
		data    []string
		markers map[int64]int32 // offset → records
	}
	look := func() view {
		v := view{markers: map[int64]int32{}}
		for off := int64(0); off < l.LogEndOffset(); {
			res, err := l.Read(off, 1, 1<<62, true)
			if err != nil || len(res.Records) == 0 {
				t.Fatalf("read at %d: %v", off, err)
			}
			h, _ := record.ParseHeader(res.Records)
			if h.IsControl() {
				v.markers[h.BaseOffset] = h.NumRecords
			} else if err := record.Records(res.Records, func(r record.Record) error {
				v.data = append(v.data, string(r.Key)+"="+string(r.Value))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			off = h.NextOffset()
		}
		return v
	}
	clean(t, l, CleanOptions{Force: true})
	v := look()
	if fmt.Sprint(v.data) != "[b=committed c=plain d=active]" {
		t.Fatalf("data after cleaning: %v", v.data)
	}
	if v.markers[abortAt] != 1 || v.markers[commitAt] != 1 {
		t.Fatalf("markers before the delete horizon: %v", v.markers)
	}
	clock.t = clock.t.Add(2 * time.Hour)
	clean(t, l, CleanOptions{Force: true})
	v = look()
	// The ABORT marker is producer 9's last batch: its header stays,
	// emptied. The COMMIT marker stays whole: its transaction kept data.
	if v.markers[abortAt] != 0 || v.markers[commitAt] != 1 {
		t.Fatalf("markers after the delete horizon: %v", v.markers)
	}
	if _, ok := v.markers[abortAt]; !ok {
		t.Fatalf("producer 9's last batch is gone: %v", v.markers)
	}
}

func TestCleanBounds(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 300)
	for i := range 40 {
		if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, put("k", fmt.Sprint(i))), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) < 5 {
		t.Fatalf("segments %v", segs)
	}
	// Nothing at or above the last stable offset is cleaned: only the
	// segments wholly below segs[2]+1.
	lso := segs[2] + 1
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), lso })
	res := clean(t, l, CleanOptions{Force: true})
	if res.EndOffset != segs[2] {
		t.Fatalf("cleaned up to %d, want %d (the last stable offset is %d)", res.EndOffset, segs[2], lso)
	}
	recs := readRecords(t, l)
	if recs[0].offset != segs[2]-1 {
		t.Fatalf("first record at %d, want %d", recs[0].offset, segs[2]-1)
	}
	// min.compaction.lag.ms keeps young segments out.
	cfg := l.Config()
	cfg.Cleanup.MinCompactionLag = time.Minute
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	if res := clean(t, l, CleanOptions{Force: true}); res.Groups != 0 {
		t.Fatalf("cleaned records younger than min.compaction.lag.ms: %+v", res)
	}
	clock.t = clock.t.Add(time.Minute + time.Millisecond)
	if res := clean(t, l, CleanOptions{Force: true}); res.EndOffset != activeBase(l) {
		t.Fatalf("after the lag: %+v", res)
	}
	// Without bounds nothing is cleaned.
	l.SetBounds(nil)
	if _, ok := l.CleanPriority(); ok {
		t.Fatal("due without bounds")
	}
}

// TestCleanSmallDedupeBuffer cleans with a map too small for the dirty
// keys: each cleaning covers part of the dirty section, and repeated
// cleanings reach the same result as one big one.
func TestCleanSmallDedupeBuffer(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 600)
	rng := rand.New(rand.NewPCG(7, 7))
	writeDups(t, l, clock, rng, 300, 60, record.CodecNone)
	limit := activeBase(l)
	want := latest(readRecords(t, l), limit)
	prev := int64(-1)
	for i := 0; l.CleanerCheckpoint() < limit; i++ {
		if i > 100 {
			t.Fatal("no progress")
		}
		res := clean(t, l, CleanOptions{MaxKeys: 10, Force: true})
		if res.EndOffset <= prev {
			t.Fatalf("cleaning %d ended at %d after %d", i, res.EndOffset, prev)
		}
		prev = res.EndOffset
	}
	checkCompacted(t, l, limit, want)
}

// TestCleanCrashAtEachStage copies the log directory at each step of the
// swap, as a crash would leave it, and checks that opening the copy gives
// either the old segments or the cleaned one: the same latest record per
// key, no leftover files.
func TestCleanCrashAtEachStage(t *testing.T) {
	for _, stage := range []string{"cleaned", "swap", "deleted", "final"} {
		t.Run(stage, func(t *testing.T) {
			clock := &fakeClock{t: testEpoch}
			l := compactedLog(t, t.TempDir(), clock, 800)
			rng := rand.New(rand.NewPCG(3, 3))
			writeDups(t, l, clock, rng, 200, 30, record.CodecSnappy)
			clock.t = clock.t.Add(8 * 24 * time.Hour)
			if err := l.MaybeRoll(); err != nil {
				t.Fatal(err)
			}
			want := latest(readRecords(t, l), l.LogEndOffset())
			crash := t.TempDir()
			copied := false
			testHookSwap = func(s string) {
				if s == stage && !copied {
					copied = true
					copyDir(t, l.Dir(), crash)
				}
			}
			defer func() { testHookSwap = func(string) {} }()
			clean(t, l, CleanOptions{Force: true})
			if !copied {
				t.Fatal("stage not reached")
			}
			r, err := Open(OpenOptions{Dir: crash, Now: clock.now})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := latest(readRecords(t, r), r.LogEndOffset()); len(got) != len(want) {
				t.Fatalf("%d keys after the crash, want %d", len(got), len(want))
			} else {
				for k, w := range want {
					if g := got[k]; g.offset != w.offset || g.value != w.value {
						t.Fatalf("key %s: %+v, want %+v", k, g, w)
					}
				}
			}
			for _, suf := range []string{cleanedSuffix, swapSuffix, deletedSuffix} {
				if left := segmentFiles(t, crash, suf); len(left) > 0 {
					t.Fatalf("left after open: %v", left)
				}
			}
		})
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// TestCleanRacesRetention deletes the segments being cleaned before the
// swap: the cleaning gives up and the log stays consistent.
func TestCleanRacesRetention(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 600)
	rng := rand.New(rand.NewPCG(5, 5))
	writeDups(t, l, clock, rng, 100, 20, record.CodecNone)
	segs := l.Segments()
	ctx := context.Background()
	p, _, _ := l.plan(clock.now())
	c := &cleaning{l: l, ctx: ctx, cfg: l.Config(), now: clock.t.UnixMilli(), om: newOffsetMap(1000), txnKept: map[int64]bool{}}
	var err error
	if c.tx, err = scanProducers(ctx, p.segs); err != nil {
		t.Fatal(err)
	}
	if err := c.buildOffsetMap(p); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLogStartOffset(segs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteOldSegments(); err != nil {
		t.Fatal(err)
	}
	if err := c.cleanGroup(p.segs[:1], p.segs[1]); err == nil {
		t.Fatal("cleaning a deleted segment succeeded")
	}
	if left := segmentFiles(t, l.Dir(), cleanedSuffix); len(left) > 0 {
		t.Fatalf("cleaned files left: %v", left)
	}
	readRecords(t, l)
}

// TestManagerCleanerTask runs the Manager's cleaner in a bubble: it cleans
// a dirty compacted log by itself and checkpoints its progress, which a
// reopened Manager reads back.
func TestManagerCleanerTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, Cleaner: CleanerOptions{Backoff: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		closed := false
		defer func() {
			if !closed {
				m.Close()
			}
		}()
		tp := TopicPartition{Topic: "c", Partition: 0}
		// The cleaner may run while the records are written: with a
		// ratio of 0 whatever is left dirty is cleaned at the next turn.
		l, limit := managedDups(t, m, tp)
		want := latest(readRecords(t, l), limit)

		time.Sleep(2 * time.Second)
		synctest.Wait()
		if l.CleanerCheckpoint() != limit {
			t.Fatalf("cleaner checkpoint %d, want %d", l.CleanerCheckpoint(), limit)
		}
		checkCompacted(t, l, limit, want)
		ck, err := ReadOffsetCheckpoint(nil, filepath.Join(dir, CleanerOffsetCheckpointFile))
		if err != nil || ck[tp] != limit {
			t.Fatalf("cleaner-offset-checkpoint %v %v", ck, err)
		}
		closed = true
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m, err = OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, Cleaner: CleanerOptions{Disable: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if got := m.Get(tp).CleanerCheckpoint(); got != limit {
			t.Fatalf("cleaner checkpoint after reopening: %d, want %d", got, limit)
		}
	})
}

// managedDups creates tp in m, compacted with a minimum dirty ratio of 0
// and bounds at its log end, in segments of 500 bytes, and writes 200
// records over 10 keys; it returns the log and the base of its active
// segment, where a cleaning stops.
func managedDups(t *testing.T, m *Manager, tp TopicPartition) (*Log, int64) {
	t.Helper()
	cfg := compactCleanup()
	cfg.MinCleanableDirtyRatio = 0
	l, err := m.Create(tp, Config{SegmentBytes: 500, Cleanup: cfg})
	if err != nil {
		t.Fatal(err)
	}
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	clock := &fakeClock{t: time.Now()}
	writeDups(t, l, clock, rand.New(rand.NewPCG(9, 9)), 200, 10, record.CodecNone)
	return l, activeBase(l)
}

// TestCleanDropsEmptiedBatchesOfNonProducers: batches without producer ids
// whose records all go are dropped, as Kafka does, rather than kept as a
// header at the end of each cleaned group (kafka-go's reader stalls on runs
// of empty batches). A group of which nothing survives becomes an empty
// segment (TestCleanEmptiesWholeGroups).
func TestCleanDropsEmptiedBatchesOfNonProducers(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 700)
	for i := range 150 {
		key := "k" // overwritten again and again
		if i%5 == 0 {
			key = fmt.Sprintf("u%d", i) // survives: every segment keeps some records
		}
		if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, put(key, fmt.Sprint(i))), 3); err != nil {
			t.Fatal(err)
		}
	}
	limit := activeBase(l)
	want := latest(readRecords(t, l), limit)
	clean(t, l, CleanOptions{Force: true})
	for _, h := range readBatchHeaders(t, l) {
		if h.NumRecords == 0 && h.BaseOffset < limit {
			t.Fatalf("empty batch at %d after cleaning", h.BaseOffset)
		}
	}
	checkCompacted(t, l, limit, want)
}

// readBatchHeaders lists every batch header of the log.
func readBatchHeaders(t testing.TB, l *Log) []record.Header {
	t.Helper()
	var out []record.Header
	_, err := record.Batches(readAllLog(t, l), func(_ []byte, h record.Header) error {
		out = append(out, h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
