package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// Tests of cleanings that empty whole groups: each such group is swapped
// for an empty segment (as Kafka does), and reads, ListOffsets, retention,
// truncation, recovery and later cleanings meet empty closed segments at
// the start and in the middle of the log.

// emptyingBatches is how many one-record batches writeEmptying appends.
const emptyingBatches = 60

// emptying is a compacted log written by writeEmptying.
type emptying struct {
	l     *Log
	dir   string
	clock *fakeClock
	cfg   Config
	// limit is the active segment's base: every offset below it is
	// cleanable.
	limit int64
	// want is the latest record of each key below limit; wantAll the
	// latest of each key in the whole log (the active segment's too).
	want, wantAll map[string]logRecord
	// headers are the offsets where a batch must stay as a header only:
	// the last batches of producers 7 and 8.
	headers []int64
}

// writeEmptying appends 60 one-record batches, one per segment
// (segment.bytes 100), nearly all overwriting key "hot": only the records
// at 7, 22, 37 and 52 (keys of their own) and the last "hot" at 59
// survive a cleaning, with the headers of the last batches of producer 7
// (at 30) and producer 8 (at 41; its batch at 40 goes). Batches below 30
// have leader epoch 1, the rest epoch 2; batch i has timestamp
// testEpoch+i s. A last record, "tail", is in the active segment.
// mergeBytes, when not zero, is the segment.bytes set before cleaning, so
// that cleanings merge segments into groups (400: five a group, of which
// groups 0, 2, 3, 5 and 9 empty entirely).
func writeEmptying(t *testing.T, mergeBytes int64) *emptying {
	t.Helper()
	e := &emptying{dir: t.TempDir(), clock: &fakeClock{t: testEpoch}, headers: []int64{30, 41}}
	e.l = compactedLog(t, e.dir, e.clock, 100)
	for i := range emptyingBatches {
		p := noProducer
		kvs := []kv{put("hot", fmt.Sprint(i))}
		switch {
		case i%15 == 7:
			kvs = []kv{put(fmt.Sprintf("keep%d", i), fmt.Sprint(i))}
		case i == 30:
			p = producer{id: 7, epoch: 1, seq: 0}
		case i == 40, i == 41:
			p = producer{id: 8, epoch: 0, seq: int32(i - 40)}
		}
		res, err := e.l.Append(kvBatch(t, record.CodecNone, testEpoch.UnixMilli()+int64(i)*1000, p, kvs...), int32(1+i/30))
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(i) {
			t.Fatalf("batch %d at offset %d", i, res.BaseOffset)
		}
	}
	if err := e.l.roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Append(kvBatch(t, record.CodecNone, testEpoch.UnixMilli()+emptyingBatches*1000, noProducer, put("tail", "t")), 2); err != nil {
		t.Fatal(err)
	}
	if n := len(e.l.Segments()); n != emptyingBatches+1 {
		t.Fatalf("%d segments, want one a batch", n)
	}
	before := readRecords(t, e.l)
	e.limit = activeBase(e.l)
	e.want = latest(before, e.limit)
	e.wantAll = latest(before, e.l.LogEndOffset())
	e.cfg = e.l.Config()
	if mergeBytes > 0 {
		e.cfg.SegmentBytes = mergeBytes
		if err := e.l.SetConfig(e.cfg); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// reopen closes e's log and opens it again from the recovery point rp
// (-1: a clean shutdown), with bounds at the log end.
func (e *emptying) reopen(t *testing.T, rp int64) {
	t.Helper()
	if err := e.l.Close(); err != nil {
		t.Fatal(err)
	}
	e.l = openEmptying(t, e.dir, e.clock, e.cfg, rp)
}

func openEmptying(t *testing.T, dir string, clock *fakeClock, cfg Config, rp int64) *Log {
	t.Helper()
	l, err := Open(OpenOptions{Dir: dir, Now: clock.now, Config: cfg, RecoveryPoint: rp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.SetBounds(func() (int64, int64) { return l.LogEndOffset(), l.LogEndOffset() })
	return l
}

// emptySegments returns the base offsets of the closed segments whose
// .log is empty.
func emptySegments(l *Log) []int64 {
	var out []int64
	segs := l.segments()
	for _, s := range segs[:len(segs)-1] {
		if s.size.Load() == 0 {
			out = append(out, s.baseOffset)
		}
	}
	return out
}

// check checks a log cleaned by e's cleanings: log start 0, the latest
// record per key and no other below the limit, reads that find the next
// batch from every offset (Read and ReadSlice), empty batches only where a
// producer's state needs them, ListOffsets by timestamp, and producer
// state.
func (e *emptying) check(t *testing.T) {
	t.Helper()
	l := e.l
	if l.LogStartOffset() != 0 || l.Segments()[0] != 0 {
		t.Fatalf("log start %d, segments %v: compaction must not move the log start", l.LogStartOffset(), l.Segments())
	}
	checkCompacted(t, l, e.limit, e.want)
	checkEveryOffsetReads(t, l)
	var headers []int64
	for _, h := range readBatchHeaders(t, l) {
		if h.NumRecords == 0 {
			headers = append(headers, h.BaseOffset)
		}
	}
	if !slices.Equal(headers, e.headers) {
		t.Fatalf("empty batches at %v, want %v (the producers' last batches)", headers, e.headers)
	}
	checkOffsetsForTimestamps(t, l)
	for id, seq := range map[int64]int32{7: 0, 8: 1} {
		if p, ok := l.Producer(id); !ok || p.LastSequence != seq {
			t.Fatalf("producer %d: %+v %v, want last sequence %d", id, p, ok, seq)
		}
	}
	if _, end := l.EndOffsetForEpoch(1); end != 30 {
		t.Fatalf("epoch 1 ends at %d, want 30", end)
	}
}

// checkEveryOffsetReads reads at every offset from the log start to the log
// end, with Read and ReadSlice: each returns a batch holding or following
// the offset, never nothing and never an error.
func checkEveryOffsetReads(t *testing.T, l *Log) {
	t.Helper()
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		res, err := l.Read(off, 1, 1<<62, true)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("read at %d (log end %d): %d bytes, %v", off, l.LogEndOffset(), len(res.Records), err)
		}
		h, err := record.ParseHeader(res.Records)
		if err != nil || h.LastOffset() < off {
			t.Fatalf("read at %d returned the batch %d..%d (%v)", off, h.BaseOffset, h.LastOffset(), err)
		}
		fs, _, err := l.ReadSlice(off, 1, 1<<62, true)
		if err != nil || fs.Length == 0 {
			fs.Release()
			t.Fatalf("read slice at %d: %d bytes, %v", off, fs.Length, err)
		}
		buf := make([]byte, fs.Length)
		_, err = fs.File.ReadAt(buf, fs.Position)
		fs.Release()
		if err != nil || !bytes.Equal(buf, res.Records) {
			t.Fatalf("read slice at %d differs from read (%v)", off, err)
		}
	}
}

// checkOffsetsForTimestamps checks ListOffsets by timestamp for every
// timestamp the test batches had: the first record at or after it.
func checkOffsetsForTimestamps(t *testing.T, l *Log) {
	t.Helper()
	type rec struct{ offset, ts int64 }
	var recs []rec
	_, err := record.Batches(readAllLog(t, l), func(b []byte, _ record.Header) error {
		return record.Records(b, func(r record.Record) error {
			recs = append(recs, rec{r.Offset, r.Timestamp})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range emptyingBatches + 2 {
		ts := testEpoch.UnixMilli() + int64(i)*1000 - 1
		j := slices.IndexFunc(recs, func(r rec) bool { return r.ts >= ts })
		off, got, ok, err := l.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		if j < 0 {
			if ok {
				t.Fatalf("offset for timestamp %d: %d, want none", ts, off)
			}
			continue
		}
		if !ok || off != recs[j].offset || got != recs[j].ts {
			t.Fatalf("offset for timestamp %d: %d (%d) %v, want %d", ts, off, got, ok, recs[j].offset)
		}
	}
}

func TestCleanEmptiesWholeGroups(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mergeBytes int64
		groups     int // of the first cleaning
		empties    []int64
	}{
		{name: "segment per group", groups: emptyingBatches,
			empties: []int64{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29,
				31, 32, 33, 34, 35, 36, 38, 39, 40, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54, 55, 56, 57, 58}},
		{name: "merged groups", mergeBytes: 400, groups: 12, empties: []int64{0, 10, 15, 25, 45}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := writeEmptying(t, tc.mergeBytes)
			res := clean(t, e.l, CleanOptions{Force: true})
			if res.Groups != tc.groups || res.EmptySegments != len(tc.empties) || res.EmptyBatches != 2 {
				t.Fatalf("clean result %+v, want %d groups, %d empty", res, tc.groups, len(tc.empties))
			}
			if got := emptySegments(e.l); !slices.Equal(got, tc.empties) {
				t.Fatalf("empty segments %v, want %v", got, tc.empties)
			}
			for _, b := range tc.empties {
				for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
					if n := fileSize(t, filepath.Join(e.dir, segmentName(b)+suf)); n != 0 {
						t.Fatalf("empty segment %d: %s has %d bytes", b, suf, n)
					}
				}
			}
			e.check(t)

			// Open after a clean shutdown, after a crash (everything
			// re-checked), and with the producer snapshots and the leader
			// epoch checkpoint lost: both are rebuilt across the empty
			// segments.
			e.reopen(t, -1)
			e.check(t)
			e.reopen(t, 0)
			e.check(t)
			if err := e.l.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range append(segmentFiles(t, e.dir, snapshotSuffix), filepath.Join(e.dir, LeaderEpochCheckpointFile)) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			e.l = openEmptying(t, e.dir, e.clock, e.cfg, 0)
			e.check(t)
			if h := e.l.EpochHistory(); len(h) != 2 || h[1] != (EpochEntry{2, 30}) {
				t.Fatalf("rebuilt epoch history %v", h)
			}

			// A second cleaning groups the empty segments with their
			// neighbours (their offsets count up to the next segment's
			// base); the result is the same, in fewer segments.
			n := len(e.l.Segments())
			clean(t, e.l, CleanOptions{Force: true})
			e.check(t)
			if got := len(e.l.Segments()); got >= n {
				t.Fatalf("%d segments after cleaning again, %d before: empty segments should merge", got, n)
			}
			// Cleaning once more changes nothing.
			segs := e.l.Segments()
			clean(t, e.l, CleanOptions{Force: true})
			e.check(t)
			if got := e.l.Segments(); !slices.Equal(got, segs) {
				t.Fatalf("segments %v after a third cleaning, %v before", got, segs)
			}
		})
	}
}

// TestCleanEmptyGroupCrashAtEachStage copies the directory at each stage of
// the swap of an empty group (the first, and one in the middle) and of a
// group that keeps records, as a crash would leave it: the copy opens as a
// valid log with the latest record of every key and the log start at 0,
// and a cleaning of it reaches the same result as the uninterrupted one.
func TestCleanEmptyGroupCrashAtEachStage(t *testing.T) {
	for _, group := range []int{0, 1, 2} { // empty, keeps records, empty
		for _, stage := range []string{"cleaned", "swap", "deleted", "final"} {
			t.Run(fmt.Sprintf("group %d %s", group, stage), func(t *testing.T) {
				e := writeEmptying(t, 400)
				crash := t.TempDir()
				g, copied := -1, false
				testHookSwap = func(s string) {
					if s == "cleaned" {
						g++
					}
					if s == stage && g == group && !copied {
						copied = true
						copyDir(t, e.dir, crash)
					}
				}
				defer func() { testHookSwap = func(string) {} }()
				clean(t, e.l, CleanOptions{Force: true})
				if !copied {
					t.Fatal("stage not reached")
				}
				r := openEmptying(t, crash, e.clock, e.cfg, 0)
				for _, suf := range []string{cleanedSuffix, swapSuffix, deletedSuffix} {
					if left := segmentFiles(t, crash, suf); len(left) > 0 {
						t.Fatalf("left after open: %v", left)
					}
				}
				if r.LogStartOffset() != 0 {
					t.Fatalf("log start %d after the crash", r.LogStartOffset())
				}
				got := latest(readRecords(t, r), r.LogEndOffset())
				if len(got) != len(e.wantAll) {
					t.Fatalf("%d keys after the crash, want %d", len(got), len(e.wantAll))
				}
				for k, w := range e.wantAll {
					if g := got[k]; g.offset != w.offset || g.value != w.value {
						t.Fatalf("key %s: %+v, want %+v", k, g, w)
					}
				}
				checkEveryOffsetReads(t, r)
				// A swap finished by Open replaces the group's first
				// segment; the group's other old segments that a crash
				// left are kept, uncleaned, when the swap is empty.
				base := r.Segments()[0]
				if group == 2 {
					base = 10
				}
				if stage == "swap" && group != 1 {
					if n := fileSize(t, filepath.Join(crash, segmentName(base)+logSuffix)); n != 0 {
						t.Fatalf("segment %d has %d bytes, want the empty swap", base, n)
					}
					for b := base + 1; b < base+5; b++ {
						if _, err := os.Stat(filepath.Join(crash, segmentName(b)+logSuffix)); err != nil {
							t.Fatalf("old segment %d of the group: %v", b, err)
						}
					}
				}
				e.l = r
				e.dir = crash
				clean(t, r, CleanOptions{Force: true})
				e.check(t)
			})
		}
	}
}

// TestCompleteEmptySwap opens directories holding an empty .log.swap as
// each stage of a crash leaves it: the swap replaces its segment's files,
// the .txnindex included, and keeps the other segments.
func TestCompleteEmptySwap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		oldBase bool // the swap's segment is still there (crash before the renames to .deleted)
		deleted bool // the group's first segment was renamed .deleted
	}{
		{name: "old segments there", oldBase: true},
		{name: "first old segment deleted", deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &fakeClock{t: testEpoch}
			l := openEmptying(t, dir, clock, Config{SegmentBytes: 100}, 0)
			for i := range 4 {
				if _, err := l.Append(kvBatch(t, record.CodecNone, testEpoch.UnixMilli(), noProducer, put("k", fmt.Sprint(i))), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			name := func(b int64, suf string) string { return filepath.Join(dir, segmentName(b)+suf) }
			// A .txnindex of the old segment 0, which the empty swap must
			// not inherit.
			if err := os.WriteFile(name(0, txnIndexSuffix), EncodeTxnIndex([]AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 0, LastStableOffset: 1}}), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name(0, logSuffix+swapSuffix), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.deleted {
				for _, suf := range []string{logSuffix, indexSuffix} {
					if err := os.Rename(name(0, suf), name(0, suf)+deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
			}
			// Recovery from the log end (the recovery point of a crash
			// right after a flush): the producer state comes from the
			// snapshot, nothing is replayed.
			l = openEmptying(t, dir, clock, Config{SegmentBytes: 100}, 4)
			if got := l.Segments(); !slices.Equal(got, []int64{0, 1, 2, 3}) {
				t.Fatalf("segments %v", got)
			}
			if n := fileSize(t, name(0, logSuffix)); n != 0 {
				t.Fatalf("segment 0 has %d bytes, want the empty swap", n)
			}
			if _, err := os.Stat(name(0, txnIndexSuffix)); !os.IsNotExist(err) {
				t.Fatalf("the old segment's .txnindex is still there: %v", err)
			}
			if l.LogStartOffset() != 0 || l.LogEndOffset() != 4 {
				t.Fatalf("log start %d, end %d", l.LogStartOffset(), l.LogEndOffset())
			}
			recs := readRecords(t, l)
			if len(recs) != 3 || recs[0].offset != 1 {
				t.Fatalf("records %+v, want those at 1, 2, 3", recs)
			}
			if txns, err := l.AbortedTransactions(0, 4); err != nil || len(txns) != 0 {
				t.Fatalf("aborted transactions %v %v", txns, err)
			}
		})
	}
}

// TestTruncateEmptySegments truncates a log with empty closed segments to
// offsets inside them and across them, as a follower does, appends after
// the truncation and reopens.
func TestTruncateEmptySegments(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mergeBytes int64
		to         int64
		wantEnd    int64
	}{
		{name: "to an empty segment's base", to: 12, wantEnd: 12},
		{name: "to a segment with a record", to: 22, wantEnd: 22},
		{name: "to the empty segment after it", to: 23, wantEnd: 23},
		{name: "into an empty merged segment", mergeBytes: 400, to: 12, wantEnd: 12},
		{name: "across empty merged segments", mergeBytes: 400, to: 8, wantEnd: 8},
		{name: "to an empty first segment", mergeBytes: 400, to: 3, wantEnd: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := writeEmptying(t, tc.mergeBytes)
			clean(t, e.l, CleanOptions{Force: true})
			if err := e.l.Truncate(tc.to); err != nil {
				t.Fatal(err)
			}
			if e.l.LogEndOffset() != tc.wantEnd || e.l.LogStartOffset() != 0 {
				t.Fatalf("log end %d, start %d after truncating to %d", e.l.LogEndOffset(), e.l.LogStartOffset(), tc.to)
			}
			// Nothing is readable between the last record kept and the
			// new log end: the batches that were there are gone.
			want := latest(readRecordsUntil(t, e.l, true), tc.to)
			for k, w := range e.want {
				if w.offset < tc.to && want[k] != w {
					t.Fatalf("key %s: %+v after truncating, want %+v", k, want[k], w)
				}
			}
			for _, h := range e.l.EpochHistory() {
				if h.StartOffset >= tc.to {
					t.Fatalf("epoch history %v after truncating to %d", e.l.EpochHistory(), tc.to)
				}
			}
			// The leader's next batch, after a gap of its own compaction.
			b := kvBatch(t, record.CodecNone, testEpoch.UnixMilli(), noProducer, put("after", "1"))
			record.SetBaseOffset(b, tc.to+3)
			record.SetPartitionLeaderEpoch(b, 3)
			if _, err := e.l.AppendAsFollower(b); err != nil {
				t.Fatal(err)
			}
			recs := readRecords(t, e.l)
			if r := recs[len(recs)-1]; r.key != "after" || r.offset != tc.to+3 {
				t.Fatalf("last record %+v", r)
			}
			checkEveryOffsetReads(t, e.l)
			e.reopen(t, 0)
			if e.l.LogEndOffset() != tc.to+4 {
				t.Fatalf("log end %d after reopening, want %d", e.l.LogEndOffset(), tc.to+4)
			}
			if got := readRecords(t, e.l); len(got) != len(recs) {
				t.Fatalf("%d records after reopening, want %d", len(got), len(recs))
			}
			checkEveryOffsetReads(t, e.l)
		})
	}
}

// TestRetentionEmptySegments: on a compact,delete log, retention.ms takes
// an empty segment's modification time, which the cleaner copies from the
// last segment it replaced, and retention.bytes deletes the leading empty
// segments once the log is at its limit, moving the log start to the
// first segment left.
func TestRetentionEmptySegments(t *testing.T) {
	for _, tc := range []struct {
		name      string
		age       bool // retention.ms, else retention.bytes
		wantStart int64
	}{
		// Segments 0-6 go: they are empty and old; 7 holds a record
		// with a recent timestamp.
		{name: "retention.ms", age: true, wantStart: 7},
		// At the size limit, only the empty segments before 7 go.
		{name: "retention.bytes", wantStart: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := writeEmptying(t, 0)
			// The files of segments 0-6 were last written two hours
			// before the test clock, the others a minute before.
			for b := range int64(emptyingBatches) {
				mtime := testEpoch.Add(-time.Minute)
				if b < 7 {
					mtime = testEpoch.Add(-2 * time.Hour)
				}
				if err := os.Chtimes(filepath.Join(e.dir, segmentName(b)+logSuffix), time.Time{}, mtime); err != nil {
					t.Fatal(err)
				}
			}
			clean(t, e.l, CleanOptions{Force: true})
			for b := range int64(7) {
				fi, err := os.Stat(filepath.Join(e.dir, segmentName(b)+logSuffix))
				if err != nil || fi.Size() != 0 || !fi.ModTime().Equal(testEpoch.Add(-2*time.Hour)) {
					t.Fatalf("segment %d: %v, %v", b, fi, err)
				}
			}
			if got := deleteOld(t, e.l); got != 0 {
				t.Fatalf("compact-only retention deleted %d segments", got)
			}
			cfg := e.l.Config()
			cfg.Cleanup.Delete = true
			if tc.age {
				cfg.Cleanup.RetentionAge = time.Hour
				// The records' own timestamps are recent for retention.ms.
				e.clock.t = testEpoch.Add(time.Minute)
			} else {
				cfg.Cleanup.RetentionBytes = e.l.Size()
			}
			if err := e.l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			if got := deleteOld(t, e.l); got != int(tc.wantStart) {
				t.Fatalf("deleted %d segments, want %d", got, tc.wantStart)
			}
			if e.l.LogStartOffset() != tc.wantStart || e.l.Segments()[0] != tc.wantStart {
				t.Fatalf("log start %d, segments %v", e.l.LogStartOffset(), e.l.Segments())
			}
			checkCompacted(t, e.l, e.limit, e.want)
			checkEveryOffsetReads(t, e.l)
			if got := deleteOld(t, e.l); got != 0 {
				t.Fatalf("a second retention pass deleted %d segments", got)
			}
		})
	}
}

// TestCleanDeleteHorizonAfterReopen: tombstones kept by a cleaning carry
// their delete horizon in the log; a reopened log finds it (one walk of
// the batch headers) before its first cleaning, so that they go once
// delete.retention.ms has passed even though the dirty ratio calls for no
// cleaning, as they would have without the restart.
func TestCleanDeleteHorizonAfterReopen(t *testing.T) {
	for _, tc := range []struct {
		name      string
		last      []kv // the batch written last
		supersede bool // later records of the tombstones' keys, cleaned before the restart
		rp        int64
		early     bool // the cleaner looks before the horizon too
		wantDue   bool
	}{
		{name: "tombstones, clean shutdown", last: []kv{del("k1"), del("k2")}, rp: -1, early: true, wantDue: true},
		{name: "tombstones, crash", last: []kv{del("k1"), del("k2")}, rp: 0, wantDue: true},
		{name: "no tombstones", last: []kv{put("k1", "x")}, rp: -1, early: true},
		// The tombstone's batch loses its horizon when rewritten without
		// it: nothing is left for the horizon to remove.
		{name: "tombstones superseded", last: []kv{del("k1"), put("k9", "z")}, supersede: true, rp: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: testEpoch}
			dir := t.TempDir()
			l := compactedLog(t, dir, clock, 400)
			appendB := func(kvs ...kv) {
				t.Helper()
				if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, kvs...), 0); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 30 {
				appendB(put(fmt.Sprintf("k%d", i%10), fmt.Sprint(i)))
			}
			// Each roll is followed by an append: the segment holding
			// the log's last batch is never cleaned.
			appendB(tc.last...)
			if err := l.roll(); err != nil {
				t.Fatal(err)
			}
			appendB(put("active", "1"))
			clean(t, l, CleanOptions{Force: true})
			if tc.supersede {
				appendB(put("k1", "back"))
				if err := l.roll(); err != nil {
					t.Fatal(err)
				}
				appendB(put("active", "2"))
				clean(t, l, CleanOptions{Force: true})
			}
			want := latest(readRecords(t, l), l.LogEndOffset())
			ck := l.CleanerCheckpoint()
			cfg := l.Config()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			l = openEmptying(t, dir, clock, cfg, tc.rp)
			l.SetCleanerCheckpoint(ck) // as the Manager does from cleaner-offset-checkpoint
			if tc.early {
				if p, ok := l.CleanPriority(); ok {
					t.Fatalf("due at %v right after reopening, before any horizon", p)
				}
			}
			clock.t = clock.t.Add(time.Hour + time.Millisecond) // delete.retention.ms
			p, ok := l.CleanPriority()
			if ok != tc.wantDue || ok && p != math.Inf(1) {
				t.Fatalf("after the horizon: due %v at %v, want due %v", ok, p, tc.wantDue)
			}
			if !tc.wantDue {
				return
			}
			if res := clean(t, l, CleanOptions{}); res.Groups == 0 {
				t.Fatalf("no cleaning after the horizon: %+v", res)
			}
			for _, kv := range tc.last {
				delete(want, kv.key)
			}
			checkCompacted(t, l, l.LogEndOffset(), want)
			if _, ok := l.CleanPriority(); ok {
				t.Fatal("still due after removing the tombstones")
			}
		})
	}
}

// TestCleanMaxCompactionLagAfterEmptySegment: max.compaction.lag.ms looks
// at the oldest dirty batch even when the first dirty segment is empty.
func TestCleanMaxCompactionLagAfterEmptySegment(t *testing.T) {
	e := writeEmptying(t, 400)
	clean(t, e.l, CleanOptions{Force: true})
	// As if the cleaner's checkpoint were older: dirty from the empty
	// segment at 45 on, little against the clean part before it.
	e.l.SetCleanerCheckpoint(45)
	if p, ok := e.l.CleanPriority(); ok {
		t.Fatalf("due at %v below min.cleanable.dirty.ratio", p)
	}
	e.cfg.Cleanup.MaxCompactionLag = time.Minute
	if err := e.l.SetConfig(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.clock.t = testEpoch.Add(2 * time.Minute) // the record at 52 is 68 s old
	if p, ok := e.l.CleanPriority(); !ok || p != math.Inf(1) {
		t.Fatalf("due %v at %v, want due now by max.compaction.lag.ms", ok, p)
	}
}
