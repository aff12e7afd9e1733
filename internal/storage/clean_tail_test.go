package storage

import (
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// TestCleanKeepsLastBatchAfterAgeRoll checks that the log's last batch is
// never cleaned when MaybeRoll rolled the active segment by age without an
// append: a tombstone at the end of the log whose delete horizon passed
// stays, so that a consumer reading from any offset below the log end gets
// data rather than an empty fetch forever.
func TestCleanKeepsLastBatchAfterAgeRoll(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 1<<20)
	ts := clock.t.UnixMilli()
	for _, b := range [][]byte{
		kvBatch(t, record.CodecNone, ts, noProducer, put("keep", "v")),
		kvBatch(t, record.CodecNone, ts, noProducer, put("gone", "v")),
		kvBatch(t, record.CodecNone, ts, noProducer, del("gone")),
	} {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	clock.t = clock.t.Add(8 * 24 * time.Hour) // past segment.ms
	if err := l.MaybeRoll(); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); len(segs) != 2 || segs[1] != 3 {
		t.Fatalf("segments %v after rolling by age, want [0 3]", segs)
	}
	for range 3 { // first cleaning, then past the delete horizon, twice
		clean(t, l, CleanOptions{Force: true})
		clock.t = clock.t.Add(2 * time.Hour) // past delete.retention.ms
	}
	if p, ok := l.CleanPriority(); ok {
		t.Fatalf("due at priority %v with nothing cleanable", p)
	}
	hs := readBatchHeaders(t, l)
	if n := len(hs); n == 0 || hs[n-1].BaseOffset != 2 || hs[n-1].NumRecords != 1 {
		t.Fatalf("batches %+v: the last batch (offset 2, a tombstone) should stay whole", hs)
	}
	for off := range l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("read at %d (log end %d): %d bytes, %v", off, l.LogEndOffset(), len(res.Records), err)
		}
	}
	recs := readRecords(t, l)
	if len(recs) == 0 || recs[len(recs)-1].offset != 2 || !recs[len(recs)-1].tomb {
		t.Fatalf("records %+v, want the tombstone at 2 last", recs)
	}

	// Once a later append fills the active segment, the old last batch is
	// cleanable again and its tombstone goes after its delete horizon.
	if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), noProducer, put("next", "v")), 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		clean(t, l, CleanOptions{Force: true})
		clock.t = clock.t.Add(2 * time.Hour)
	}
	clean(t, l, CleanOptions{Force: true})
	for _, r := range readRecords(t, l) {
		if r.key == "gone" {
			t.Fatalf("record %+v of a deleted key left after the delete horizon", r)
		}
	}
}

// TestCleanDropsLastBatchOfExpiredProducer checks that a producer's last
// batch, kept emptied while the producer is in the producer state, goes
// once producer.id.expiration.ms has expired the producer, as Kafka keeps
// only the last batches of its active producers.
func TestCleanDropsLastBatchOfExpiredProducer(t *testing.T) {
	clock := &fakeClock{t: testEpoch}
	l := compactedLog(t, t.TempDir(), clock, 1<<20)
	appendB := func(p producer, kvs ...kv) {
		t.Helper()
		if _, err := l.Append(kvBatch(t, record.CodecNone, clock.t.UnixMilli(), p, kvs...), 0); err != nil {
			t.Fatal(err)
		}
	}
	appendB(producer{id: 5, epoch: 1, seq: 0}, put("a", "1"), put("b", "1")) // 0-1
	appendB(producer{id: 6, epoch: 0, seq: 0}, put("c", "1"))                // 2
	appendB(noProducer, put("a", "2"), put("b", "2"))                        // 3-4: supersedes producer 5's only batch
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendB(noProducer, put("z", "1")) // 5

	emptyAt := func() []int64 {
		var out []int64
		for _, h := range readBatchHeaders(t, l) {
			if h.NumRecords == 0 {
				out = append(out, h.BaseOffset)
			}
		}
		return out
	}
	if res := clean(t, l, CleanOptions{Force: true}); res.EmptyBatches != 1 {
		t.Fatalf("clean result %+v: want producer 5's last batch kept empty", res)
	}
	if got := emptyAt(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("empty batches at %v, want [0]", got)
	}

	// Producer 6 writes again just before producer 5 expires: it stays.
	clock.t = clock.t.Add(DefaultProducerIDExpiration - time.Minute)
	appendB(producer{id: 6, epoch: 0, seq: 1}, put("c", "2")) // 6: its last batch, superseded
	appendB(noProducer, put("c", "3"))                        // 7
	clock.t = clock.t.Add(2 * time.Minute)
	if err := l.roll(); err != nil {
		t.Fatal(err)
	}
	appendB(noProducer, put("z", "2"))
	res := clean(t, l, CleanOptions{Force: true})
	if got := emptyAt(); len(got) != 1 || got[0] != 6 {
		t.Fatalf("empty batches at %v after producer 5 expired (clean %+v), want only producer 6's at 6", got, res)
	}
	for off := range l.LogEndOffset() {
		if r, err := l.Read(off, 1<<20, 1<<62, true); err != nil || len(r.Records) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(r.Records), err)
		}
	}
}
