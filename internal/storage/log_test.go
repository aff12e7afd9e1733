package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

var smallSegments = Config{SegmentBytes: 2048, IndexIntervalBytes: 200}

func TestAppendReadAcrossSegments(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		n    int
	}{
		{"defaults", Config{}, 50},
		{"small segments", smallSegments, 300},
		{"index every batch", Config{SegmentBytes: 4096, IndexIntervalBytes: 1}, 200},
		{"full index rolls", Config{SegmentIndexBytes: 24, IndexIntervalBytes: 1}, 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, tc.cfg, 0)
			var a appended
			fill(t, l, &a, tc.n, 1000)
			if got := readAllLog(t, l); !bytes.Equal(got, a.all()) {
				t.Fatalf("read back %d bytes, want %d", len(got), len(a.all()))
			}
			checkEveryOffset(t, l, &a)
			leo := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkIndexFiles(t, dir)

			l = openTest(t, dir, tc.cfg, -1)
			defer l.Close()
			if l.LogEndOffset() != leo {
				t.Fatalf("reopened log end offset %d, want %d", l.LogEndOffset(), leo)
			}
			if got := readAllLog(t, l); !bytes.Equal(got, a.all()) {
				t.Fatal("reopened log differs")
			}
			checkEveryOffset(t, l, &a)
			fill(t, l, &a, 10, 1e6)
			if got := readAllLog(t, l); !bytes.Equal(got, a.all()) {
				t.Fatal("log differs after appending to the reopened log")
			}
		})
	}
}

// checkIndexFiles checks every index file on disk is what a rebuild from
// the log gives (the entries Kafka would have written).
func checkIndexFiles(t *testing.T, dir string) {
	t.Helper()
	for _, lf := range segmentFiles(t, dir, logSuffix) {
		base, _ := parseBase(filepath.Base(lf), logSuffix)
		stem := filepath.Join(dir, segmentName(base))
		// Index files are created with their first entry.
		idx, err := os.ReadFile(stem + indexSuffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		tidx, err := os.ReadFile(stem + timeIndexSuffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if _, err := DecodeOffsetIndex(idx); err != nil {
			t.Fatalf("%s: %v", stem, err)
		}
		if _, err := DecodeTimeIndex(tidx); err != nil {
			t.Fatalf("%s: %v", stem, err)
		}
		if all := segmentFiles(t, dir, logSuffix); fileSize(t, lf) > 0 && len(tidx) == 0 && lf != all[len(all)-1] {
			t.Fatalf("%s: empty time index for a non-empty segment", stem)
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	var a appended
	fill(t, l, &a, 10, 0)
	sizes := make([]int, len(a.batches))
	for i, b := range a.batches {
		sizes[i] = len(b)
	}
	first, _ := record.ParseHeader(a.batches[0])
	second, _ := record.ParseHeader(a.batches[1])
	cases := []struct {
		name      string
		offset    int64
		maxBytes  int32
		maxOffset int64
		minOne    bool
		want      []byte
		err       error
	}{
		{"all", 0, 1 << 20, 1 << 62, false, a.all(), nil},
		{"two batches fit", 0, int32(sizes[0] + sizes[1] + 10), 1 << 62, false, a.all()[:sizes[0]+sizes[1]], nil},
		{"first batch too big", 0, int32(sizes[0] - 1), 1 << 62, false, nil, nil},
		{"first batch too big, min one", 0, 1, 1 << 62, true, a.batches[0], nil},
		{"max offset inside second batch", 0, 1 << 20, second.LastOffset(), false, a.batches[0], nil},
		{"max offset at second batch", 0, 1 << 20, second.BaseOffset, false, a.batches[0], nil},
		{"max offset inside first batch", 0, 1 << 20, first.LastOffset(), true, nil, nil},
		{"at log end", l.LogEndOffset(), 1 << 20, 1 << 62, true, nil, nil},
		{"past log end", l.LogEndOffset() + 1, 1 << 20, 1 << 62, true, nil, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, 1 << 62, true, nil, ErrOffsetOutOfRange},
		{"zero max bytes, min one", 0, 0, 1 << 62, true, a.batches[0], nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset, tc.minOne)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if !bytes.Equal(res.Records, tc.want) {
				t.Fatalf("got %d bytes, want %d", len(res.Records), len(tc.want))
			}
			if err == nil && (res.LogEndOffset != l.LogEndOffset() || res.LogStartOffset != 0) {
				t.Fatalf("offsets %+v", res)
			}
			// The zero-copy seam agrees with Read.
			if err == nil && tc.offset < l.LogEndOffset() {
				s := l.segments()[0]
				f, err := s.log.acquire()
				if err != nil {
					t.Fatal(err)
				}
				s.rw.RLock()
				pos, n, _, lerr := s.locateLocked(f, tc.offset, tc.maxBytes, min(tc.maxOffset, l.LogEndOffset()), tc.minOne)
				s.rw.RUnlock()
				s.log.release()
				if lerr != nil || n != int64(len(tc.want)) || (n > 0 && pos != int64(bytes.Index(a.all(), tc.want))) {
					t.Fatalf("locate: pos %d n %d err %v", pos, n, lerr)
				}
			}
		})
	}
}

func TestAppendStampsOffsetsAndEpoch(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	two := append(testBatch(t, 3, 100, "a"), testBatch(t, 2, 200, "b")...)
	res, err := l.Append(two, 42)
	if err != nil {
		t.Fatal(err)
	}
	want := AppendResult{BaseOffset: 0, LastOffset: 4, MaxTimestamp: 201, OffsetOfMaxTimestamp: 4}
	if res != want {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	var bases []int64
	record.Batches(two, func(b []byte, h record.Header) error {
		bases = append(bases, h.BaseOffset)
		if h.PartitionLeaderEpoch != 42 {
			t.Errorf("epoch %d", h.PartitionLeaderEpoch)
		}
		return nil
	})
	if fmt.Sprint(bases) != "[0 3]" {
		t.Fatalf("base offsets %v", bases)
	}
	if _, err := l.Append([]byte{1, 2, 3}, 0); !errors.Is(err, record.ErrTruncated) {
		t.Fatalf("garbage append: %v", err)
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("log end offset %d", l.LogEndOffset())
	}
}

func TestAppendAsFollower(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	b := testBatch(t, 3, 100, "a")
	record.SetBaseOffset(b, 10)
	record.SetPartitionLeaderEpoch(b, 3)
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 13 {
		t.Fatalf("log end offset %d", l.LogEndOffset())
	}
	res, err := l.Read(11, 1<<20, 1<<62, true)
	if err != nil || !bytes.Equal(res.Records, b) {
		t.Fatalf("read in gap-started log: %v", err)
	}
	old := testBatch(t, 1, 100, "b")
	record.SetBaseOffset(old, 12)
	if _, err := l.AppendAsFollower(old); !errors.Is(err, ErrOutOfOrderOffsets) {
		t.Fatalf("overlapping follower append: %v", err)
	}
}

func TestOffsetOverflowRolls(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	b := testBatch(t, 1, 0, "a")
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	far := testBatch(t, 1, 0, "b")
	record.SetBaseOffset(far, 1<<32)
	if _, err := l.AppendAsFollower(far); err != nil {
		t.Fatal(err)
	}
	if n := len(l.segments()); n != 2 || l.segments()[1].baseOffset != 1<<32 {
		t.Fatalf("%d segments", n)
	}
	res, err := l.Read(1, 1<<20, 1<<62, true)
	if err != nil || !bytes.Equal(res.Records, far) {
		t.Fatalf("read across gap: %v %d", err, len(res.Records))
	}
}

func TestSegmentMsRoll(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	l, err := Open(OpenOptions{Dir: t.TempDir(), Config: Config{SegmentAge: time.Hour}, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ts := clock.t.UnixMilli()
	l.Append(testBatch(t, 1, ts, "a"), 0)
	if err := l.MaybeRoll(); err != nil || len(l.segments()) != 1 {
		t.Fatalf("rolled too early: %v", err)
	}
	// A batch 30 minutes later stays, one past the hour rolls.
	l.Append(testBatch(t, 1, ts+int64(30*time.Minute/time.Millisecond), "b"), 0)
	if len(l.segments()) != 1 {
		t.Fatal("rolled at 30 minutes")
	}
	l.Append(testBatch(t, 1, ts+int64(61*time.Minute/time.Millisecond), "c"), 0)
	if len(l.segments()) != 2 {
		t.Fatal("did not roll after an hour of batch time")
	}
	clock.t = clock.t.Add(3 * time.Hour)
	if err := l.MaybeRoll(); err != nil {
		t.Fatal(err)
	}
	if len(l.segments()) != 3 {
		t.Fatal("MaybeRoll did not roll an old segment")
	}
	if err := l.MaybeRoll(); err != nil || len(l.segments()) != 3 {
		t.Fatal("MaybeRoll rolled an empty segment")
	}
}

// TestMaybeRollCached: MaybeRoll answers from what it found the last time
// (rollCheck) only while nothing that moves the roll time changed: a
// lower segment.ms, an append to an empty segment and a truncation are
// seen at the next call.
func TestMaybeRollCached(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	l, err := Open(OpenOptions{Dir: t.TempDir(), Config: Config{SegmentAge: time.Hour}, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	roll := func(want int) {
		t.Helper()
		if err := l.MaybeRoll(); err != nil {
			t.Fatal(err)
		}
		if n := len(l.segments()); n != want {
			t.Fatalf("%d segments, want %d", n, want)
		}
	}
	roll(1) // empty: never due until an append
	ts := clock.t.UnixMilli()
	if _, err := l.Append(testBatch(t, 1, ts, "a"), 0); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(10 * time.Minute)
	roll(1) // due in 50 minutes
	if err := l.SetConfig(Config{SegmentAge: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	roll(2) // due 5 minutes ago under the new segment.ms
	roll(2) // the new active segment is empty
	if _, err := l.Append(testBatch(t, 1, clock.t.UnixMilli(), "b"), 0); err != nil {
		t.Fatal(err)
	}
	roll(2)
	clock.t = clock.t.Add(6 * time.Minute)
	roll(3)
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		name    string
		to      func(a *appended) int64
		wantLEO func(a *appended) int64
	}{
		{"to batch boundary", func(a *appended) int64 { return baseOf(a, 40) }, func(a *appended) int64 { return baseOf(a, 40) }},
		{"inside a batch", func(a *appended) int64 { return baseOf(a, 41) + 1 }, func(a *appended) int64 { return baseOf(a, 41) }},
		{"to zero", func(a *appended) int64 { return 0 }, func(a *appended) int64 { return 0 }},
		{"past end", func(a *appended) int64 { return 1 << 40 }, func(a *appended) int64 { return baseOf(a, len(a.batches)) }},
		{"to a segment base", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, smallSegments, 0)
			var a appended
			fill(t, l, &a, 100, 0)
			to, want := int64(0), int64(0)
			if tc.to == nil {
				to = l.segments()[2].baseOffset
				want = to
			} else {
				to, want = tc.to(&a), tc.wantLEO(&a)
			}
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != want {
				t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), want)
			}
			if l.RecoveryPoint() > want {
				t.Fatalf("recovery point %d past log end %d", l.RecoveryPoint(), want)
			}
			var kept appended
			for _, b := range a.batches {
				if h, _ := record.ParseHeader(b); h.LastOffset() < want {
					kept.batches = append(kept.batches, b)
				}
			}
			check := func(l *Log) {
				t.Helper()
				if got := readAllLog(t, l); !bytes.Equal(got, kept.all()) {
					t.Fatalf("after truncate read %d bytes, want %d", len(got), len(kept.all()))
				}
				checkEveryOffset(t, l, &kept)
			}
			check(l)
			// Appends continue at the new end, then everything survives a reopen.
			fill(t, l, &kept, 20, 1e6)
			if first, _ := record.ParseHeader(kept.batches[len(kept.batches)-20]); first.BaseOffset != want {
				t.Fatalf("append after truncate at %d, want %d", first.BaseOffset, want)
			}
			check(l)
			l.Close()
			checkIndexFiles(t, dir)
			l = openTest(t, dir, smallSegments, -1)
			defer l.Close()
			check(l)
			l.Close()
			l = openTest(t, dir, smallSegments, 0)
			check(l)
		})
	}
}

func baseOf(a *appended, i int) int64 {
	if i == len(a.batches) {
		h, _ := record.ParseHeader(a.batches[i-1])
		return h.NextOffset()
	}
	h, _ := record.ParseHeader(a.batches[i])
	return h.BaseOffset
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, smallSegments, 0)
	var a appended
	fill(t, l, &a, 50, 0)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || len(segmentFiles(t, dir, logSuffix)) != 1 {
		t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if _, err := l.Read(10, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	var b appended
	fill(t, l, &b, 5, 0)
	l.Close()
	l = openTest(t, dir, smallSegments, 0)
	defer l.Close()
	if l.LogStartOffset() != 1000 || !bytes.Equal(readAllLog(t, l), b.all()) {
		t.Fatal("reopen after full truncation")
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, smallSegments, 0)
			// Batch i holds 4 records with timestamps 1000*i + 0, 2, 4, 6,
			// except batch 5 whose timestamps go backwards (100..106).
			for i := 0; i < 60; i++ {
				base := int64(1000 * i)
				if i == 5 {
					base = 100
				}
				recs := make([]record.Record, 4)
				for j := range recs {
					recs[j] = record.Record{OffsetDelta: int32(j), TimestampDelta: int64(2 * j), Value: []byte("x")}
				}
				b, err := record.Build(record.Spec{Codec: codec, BaseTimestamp: base, ProducerID: -1, BaseSequence: -1}, recs)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Append(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			check := func(l *Log) {
				t.Helper()
				cases := []struct {
					ts, off, gotTs int64
					ok             bool
				}{
					{0, 0, 0, true},
					{1, 1, 2, true},
					{6, 3, 6, true},
					{7, 4, 1000, true},
					{101, 8 + 4*1, 1002, true}, // batch 5 has max 106 < ... no: batch 2 (2000..) holds 2000
					{4003, 4*4 + 2, 4004, true},
					{59006, 59*4 + 3, 59006, true},
					{59007, 0, 0, false},
				}
				// Fix the case whose answer depends on batch order: the first
				// batch with max >= 101 is batch 1 (max 1006): record 1000.
				cases[4] = struct {
					ts, off, gotTs int64
					ok             bool
				}{101, 4, 1000, true}
				for _, c := range cases {
					off, ts, ok, err := l.OffsetForTimestamp(c.ts)
					if err != nil || ok != c.ok || (ok && (off != c.off || ts != c.gotTs)) {
						t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", c.ts, off, ts, ok, err, c.off, c.gotTs, c.ok)
					}
				}
				ts, off, ok := l.MaxTimestamp()
				if !ok || ts != 59006 || off != 59*4+3 {
					t.Errorf("MaxTimestamp = %d, %d, %v", ts, off, ok)
				}
			}
			check(l)
			l.Close()
			l = openTest(t, dir, smallSegments, -1)
			check(l)
			l.Close()
			for _, f := range segmentFiles(t, dir, timeIndexSuffix) {
				os.Remove(f)
			}
			l = openTest(t, dir, smallSegments, -1)
			defer l.Close()
			check(l)
		})
	}
}

func TestMaxTimestampEmpty(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	if _, _, ok := l.MaxTimestamp(); ok {
		t.Fatal("empty log has a max timestamp")
	}
	if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
		t.Fatal("empty log has an offset for a timestamp")
	}
}

func TestClosedLog(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Config{}, 0)
	l.Append(testBatch(t, 1, 0, "a"), 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := l.Append(testBatch(t, 1, 0, "a"), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append: %v", err)
	}
	if _, err := l.Read(0, 100, 10, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("read: %v", err)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir still there: %v", err)
	}
}

func TestFlushIntervalMessages(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{FlushIntervalMessages: 10}, 0)
	defer l.Close()
	var a appended
	fill(t, l, &a, 3, 0) // 1+2+3 = 6 records
	if l.RecoveryPoint() != 0 {
		t.Fatalf("flushed early: %d", l.RecoveryPoint())
	}
	fill(t, l, &a, 3, 0) // 6 more
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("recovery point %d, log end %d", l.RecoveryPoint(), l.LogEndOffset())
	}
}

func TestSetLogStartOffset(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{}, 0)
	defer l.Close()
	var a appended
	fill(t, l, &a, 10, 0)
	if err := l.SetLogStartOffset(5); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(4, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if err := l.SetLogStartOffset(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("start past end: %v", err)
	}
	if err := l.SetConfig(Config{SegmentBytes: 1}); err == nil {
		t.Fatal("invalid config accepted")
	}
	if err := l.SetConfig(smallSegments); err != nil || l.Config().SegmentBytes != 2048 {
		t.Fatal("SetConfig")
	}
}

// TestConcurrentReadAppendTruncate runs readers against an appender that
// rolls and truncates; run with -race.
func TestConcurrentReadAppendTruncate(t *testing.T) {
	l := openTest(t, t.TempDir(), Config{SegmentBytes: 1024, IndexIntervalBytes: 100}, 0)
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(0); ; off++ {
				select {
				case <-stop:
					return
				default:
				}
				leo := l.LogEndOffset()
				if leo == 0 {
					continue
				}
				res, err := l.Read(off%leo, 4096, 1<<62, true)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // truncated meanwhile
				}
				if err != nil {
					errc <- err
					return
				}
				if _, err := record.Batches(res.Records, func(b []byte, h record.Header) error {
					_, err := record.Validate(b)
					return err
				}); err != nil {
					errc <- fmt.Errorf("read at %d: %w", off%leo, err)
					return
				}
				l.OffsetForTimestamp(off)
				l.MaxTimestamp()
			}
		}()
	}
	var a appended
	for i := 0; i < 300; i++ {
		fill(t, l, &a, 1, int64(i))
		if i%50 == 49 {
			if err := l.Truncate(l.LogEndOffset() / 2); err != nil {
				t.Fatal(err)
			}
		}
		if i%20 == 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestReadSliceMatchesRead checks the zero-copy seam gives the bytes Read
// copies, at every offset and for several limits.
func TestReadSliceMatchesRead(t *testing.T) {
	l := openTest(t, t.TempDir(), smallSegments, 0)
	var a appended
	fill(t, l, &a, 80, 0)
	for off := int64(0); off <= l.LogEndOffset(); off++ {
		for _, lim := range []struct {
			maxBytes  int32
			maxOffset int64
			minOne    bool
		}{{1, 1 << 62, true}, {1, 1 << 62, false}, {500, 1 << 62, false}, {1 << 20, off + 3, true}, {1 << 20, 1 << 62, true}} {
			res, err := l.Read(off, lim.maxBytes, lim.maxOffset, lim.minOne)
			if err != nil {
				t.Fatal(err)
			}
			fs, res2, err := l.ReadSlice(off, lim.maxBytes, lim.maxOffset, lim.minOne)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, fs.Length)
			if fs.Length > 0 {
				if _, err := fs.File.ReadAt(got, fs.Position); err != nil {
					t.Fatal(err)
				}
			}
			fs.Release()
			if !bytes.Equal(got, res.Records) || res2.LogEndOffset != res.LogEndOffset {
				t.Fatalf("offset %d %+v: slice of %d bytes, Read %d", off, lim, len(got), len(res.Records))
			}
		}
	}
}

// TestSegmentPath: segment.path, built without fmt or filepath.Join, names
// the files as filepath.Join of the log's clean directory and Kafka's
// 20-digit base offset does.
func TestSegmentPath(t *testing.T) {
	for _, dir := range []string{"/tmp/data/t-0", "/", "rel/t-1", "."} {
		for _, base := range []int64{0, 7, 12345678901234, math.MaxInt64} {
			s := &segment{dir: dir, baseOffset: base}
			want := filepath.Join(dir, fmt.Sprintf("%020d", base)+logSuffix)
			if dir == "." {
				want = "./" + fmt.Sprintf("%020d", base) + logSuffix // same file
			}
			if got := s.path(logSuffix); got != want {
				t.Errorf("dir %q base %d: %q, want %q", dir, base, got, want)
			}
		}
	}
}
