package storage

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsahq/samsa/internal/record"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz")

func indexSeeds() [][]byte {
	return [][]byte{
		EncodeOffsetIndex(nil, []OffsetEntry{{3, 4100}, {9, 8300}, {20, 12500}}),
		EncodeOffsetIndex(nil, []OffsetEntry{{0, 0}}),
		make([]byte, 24), // preallocated, never written
		{0, 0, 0, 1, 0, 0},
	}
}

func timeIndexSeeds() [][]byte {
	return [][]byte{
		EncodeTimeIndex(nil, []TimeEntry{{1000, 3}, {1200, 9}, {1500, 9}}),
		make([]byte, 36),
		{1, 2, 3},
	}
}

func checkpointSeeds() [][]byte {
	return [][]byte{
		EncodeOffsetCheckpoint(map[TopicPartition]int64{{"a", 0}: 10, {"b-c", 3}: 0}),
		[]byte("0\n0\n"),
		[]byte("0\n2\nx 1 2\n"),
		[]byte("0\n99999999999\n"),
	}
}

func metaSeeds() [][]byte {
	return [][]byte{
		MetaProperties{Version: 1, NodeID: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qk", DirectoryID: "Y4sqQxW7SOuVkhu1QpRWcw"}.Encode(testEpoch),
		[]byte("version=0\nbroker.id=3\ncluster.id=abc\n"),
		[]byte("#only a comment\n"),
	}
}

func segmentSeeds(t testing.TB) [][]byte {
	var out [][]byte
	var all []byte
	for i := 0; i < 4; i++ {
		b := testBatch(t, 1+i, int64(1000*i), fmt.Sprint(i))
		record.SetBaseOffset(b, int64(10*i))
		all = append(all, b...)
	}
	out = append(out, all, all[:len(all)-9], append(append([]byte(nil), all...), 0, 0, 0))
	return out
}

// TestWriteCorpus writes the seed corpus files with -update-corpus.
func TestWriteCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	for target, seeds := range map[string][][]byte{
		"FuzzDecodeOffsetIndex":       indexSeeds(),
		"FuzzDecodeTimeIndex":         timeIndexSeeds(),
		"FuzzDecodeOffsetCheckpoint":  checkpointSeeds(),
		"FuzzDecodeMetaProperties":    metaSeeds(),
		"FuzzRecoverSegment":          segmentSeeds(t),
		"FuzzDecodePartitionMetadata": partitionMetadataSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, in := range seeds {
			data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func FuzzDecodeOffsetIndex(f *testing.F) {
	for _, s := range indexSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeOffsetIndex(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeOffsetIndex(nil, entries), b) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeTimeIndex(f *testing.F) {
	for _, s := range timeIndexSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeTimeIndex(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeTimeIndex(nil, entries), b) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeOffsetCheckpoint(f *testing.F) {
	for _, s := range checkpointSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeOffsetCheckpoint(b)
		if err != nil {
			return
		}
		again, err := DecodeOffsetCheckpoint(EncodeOffsetCheckpoint(m))
		if err != nil || len(again) != len(m) {
			t.Fatalf("round trip: %v", err)
		}
		for tp, off := range m {
			if again[tp] != off {
				t.Fatalf("%s: %d != %d", tp, again[tp], off)
			}
		}
	})
}

func FuzzDecodeMetaProperties(f *testing.F) {
	for _, s := range metaSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMetaProperties(b)
		if err != nil {
			return
		}
		if bytes.ContainsAny([]byte(m.ClusterID+m.DirectoryID), "\n") {
			return // not representable without escapes
		}
		again, err := DecodeMetaProperties(m.Encode(testEpoch))
		if err != nil || again != m {
			t.Fatalf("round trip: %+v %v", again, err)
		}
	})
}

// FuzzRecoverSegment (run it with -fuzzminimizetime=2s: every exec does
// file I/O, so minimizing at the default 60s stalls the run) opens a log whose only segment holds arbitrary bytes:
// recovery must not panic, must keep a prefix of whole valid batches and
// leave a log that reads back and reopens the same.
func FuzzRecoverSegment(f *testing.F) {
	for _, s := range segmentSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, err := os.MkdirTemp("", "fuzz-recover")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, segmentName(0)+logSuffix)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(OpenOptions{Dir: dir, Config: Config{IndexIntervalBytes: 64}})
		if err != nil {
			t.Fatal(err)
		}
		kept := fileSize(t, path)
		if !bytes.HasPrefix(data, mustRead(t, path)) {
			t.Fatal("recovery changed the kept bytes")
		}
		var got []byte
		if l.LogEndOffset() > 0 {
			got = readAllLog(t, l)
		}
		if int64(len(got)) != kept {
			t.Fatalf("read %d bytes of %d kept", len(got), kept)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(OpenOptions{Dir: dir, Config: Config{IndexIntervalBytes: 64}, RecoveryPoint: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if fileSize(t, path) != kept {
			t.Fatal("second open changed the segment")
		}
	})
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
