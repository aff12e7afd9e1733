package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

// testBatch builds an uncompressed batch of n records at base offset 0
// whose record i has timestamp ts+i and value "v<tag>-<i>".
func testBatch(t testing.TB, n int, ts int64, tag string) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{
			OffsetDelta:    int32(i),
			TimestampDelta: int64(i),
			Key:            []byte(fmt.Sprintf("k%d", i)),
			Value:          []byte(fmt.Sprintf("v%s-%d", tag, i)),
		}
	}
	b, err := record.Build(record.Spec{
		BaseTimestamp: ts,
		ProducerID:    record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch,
		BaseSequence:  record.NoSequence,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openTest opens a log in dir, failing the test on error.
func openTest(t testing.TB, dir string, cfg Config, rp int64) *Log {
	t.Helper()
	l, err := Open(OpenOptions{Dir: dir, Config: cfg, RecoveryPoint: rp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appended is what a test wrote: each batch as stamped, in order.
type appended struct {
	batches [][]byte
}

func (a *appended) all() []byte { return bytes.Join(a.batches, nil) }

// fill appends n batches of 1..5 records with increasing timestamps.
func fill(t testing.TB, l *Log, a *appended, n int, ts0 int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		b := testBatch(t, 1+i%5, ts0+int64(len(a.batches))*10, fmt.Sprint(len(a.batches)))
		res, err := l.Append(b, 7)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := record.ParseHeader(b)
		if res.BaseOffset != h.BaseOffset || res.LastOffset != h.LastOffset() {
			t.Fatalf("append result %+v, batch %d..%d", res, h.BaseOffset, h.LastOffset())
		}
		if _, err := record.Validate(b); err != nil {
			t.Fatalf("stamped batch invalid: %v", err)
		}
		a.batches = append(a.batches, b)
	}
}

// readAllLog reads the whole log batch by batch from the log start offset.
func readAllLog(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("read at %d (end %d): nothing", off, l.LogEndOffset())
		}
		var last int64
		if _, err := record.Batches(res.Records, func(b []byte, h record.Header) error {
			if _, err := record.Validate(b); err != nil {
				return err
			}
			last = h.LastOffset()
			return nil
		}); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		out = append(out, res.Records...)
		off = last + 1
	}
	return out
}

// checkEveryOffset reads at every offset and checks the first batch
// returned holds it.
func checkEveryOffset(t testing.TB, l *Log, a *appended) {
	t.Helper()
	for _, b := range a.batches {
		h, _ := record.ParseHeader(b)
		for off := h.BaseOffset; off <= h.LastOffset(); off++ {
			res, err := l.Read(off, 1, 1<<62, true)
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			if !bytes.Equal(res.Records, b) {
				t.Fatalf("read at %d: got %d bytes, want the batch at %d", off, len(res.Records), h.BaseOffset)
			}
		}
	}
}

func segmentFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

var testEpoch = time.Unix(1_700_000_000, 0)

// fakeClock is a settable Now for OpenOptions.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestMain fails the run when a goroutine of this package outlives the
// tests: every Log and Manager must stop what it starts in Close.
func TestMain(m *testing.M) {
	code := m.Run()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "samsa/internal/storage.") && !strings.Contains(g, "TestMain") {
			fmt.Fprintf(os.Stderr, "leaked goroutine:\n%s\n", g)
			code = 1
		}
	}
	os.Exit(code)
}

// mustCreate creates partition 0 of topic in m with cfg, failing the
// test on error.
func mustCreate(t testing.TB, m *Manager, topic string, cfg Config) *Log {
	t.Helper()
	l, err := m.Create(TopicPartition{topic, 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
