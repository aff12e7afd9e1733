package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsahq/samsa/internal/record"
)

// damagedLog writes 120 batches in small segments, closes the log and
// returns its dir, what was appended and the index files as written.
func damagedLog(t *testing.T) (string, *appended, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	l := openTest(t, dir, smallSegments, 0)
	var a appended
	fill(t, l, &a, 120, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idx := map[string][]byte{}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		for _, f := range segmentFiles(t, dir, suf) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			idx[filepath.Base(f)] = b
		}
	}
	return dir, &a, idx
}

func lastLogFile(t *testing.T, dir string) string {
	t.Helper()
	m := segmentFiles(t, dir, logSuffix)
	return m[len(m)-1]
}

func modifyFile(t *testing.T, path string, fn func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRecovery(t *testing.T) {
	cases := []struct {
		name string
		// damage changes the files of a closed log.
		damage func(t *testing.T, dir string, a *appended)
		// rp is the recovery point to reopen with: "zero", "clean" (-1) or
		// "last" (the last segment's base).
		rp string
		// lost is how many batches at the end are gone.
		lost int
		// sameIndexes: index files end up byte for byte as first written.
		sameIndexes bool
	}{
		{"clean reopen", func(*testing.T, string, *appended) {}, "clean", 0, true},
		{"full recheck", func(*testing.T, string, *appended) {}, "zero", 0, true},
		{"truncated tail mid-batch", func(t *testing.T, dir string, a *appended) {
			modifyFile(t, lastLogFile(t, dir), func(b []byte) []byte { return b[:len(b)-10] })
		}, "last", 1, false},
		{"truncated inside the last header", func(t *testing.T, dir string, a *appended) {
			last := len(a.batches[len(a.batches)-1])
			modifyFile(t, lastLogFile(t, dir), func(b []byte) []byte { return b[:len(b)-last+20] })
		}, "zero", 1, false},
		{"corrupt CRC in the last batch", func(t *testing.T, dir string, a *appended) {
			modifyFile(t, lastLogFile(t, dir), func(b []byte) []byte { b[len(b)-3] ^= 0xff; return b })
		}, "last", 1, false},
		{"garbage appended", func(t *testing.T, dir string, a *appended) {
			modifyFile(t, lastLogFile(t, dir), func(b []byte) []byte { return append(b, bytes.Repeat([]byte{0xab}, 100)...) })
		}, "last", 0, true},
		{"zeros appended (preallocated tail)", func(t *testing.T, dir string, a *appended) {
			modifyFile(t, lastLogFile(t, dir), func(b []byte) []byte { return append(b, make([]byte, 4096)...) })
		}, "zero", 0, true},
		{"deleted index files", func(t *testing.T, dir string, a *appended) {
			for _, suf := range []string{indexSuffix, timeIndexSuffix} {
				for _, f := range segmentFiles(t, dir, suf) {
					os.Remove(f)
				}
			}
		}, "clean", 0, true},
		{"truncated index files", func(t *testing.T, dir string, a *appended) {
			for _, suf := range []string{indexSuffix, timeIndexSuffix} {
				for _, f := range segmentFiles(t, dir, suf) {
					modifyFile(t, f, func(b []byte) []byte { return b[:max(len(b)-3, 0)] })
				}
			}
		}, "clean", 0, true},
		{"preallocated index files", func(t *testing.T, dir string, a *appended) {
			for _, f := range segmentFiles(t, dir, indexSuffix) {
				modifyFile(t, f, func(b []byte) []byte { return append(b, make([]byte, 80)...) })
			}
		}, "clean", 0, true},
		{"index pointing past the log", func(t *testing.T, dir string, a *appended) {
			f := segmentFiles(t, dir, indexSuffix)[0]
			modifyFile(t, f, func(b []byte) []byte {
				return EncodeOffsetIndex(b, []OffsetEntry{{RelativeOffset: 1 << 30, Position: 1 << 30}})
			})
		}, "clean", 0, true},
		{"stray files", func(t *testing.T, dir string, a *appended) {
			for _, name := range []string{
				"00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
				"00000000000000000000.log.cleaned", "00000000000000000000.index.swap",
				"00000000000000099999.index", "00000000000000099999.timeindex",
			} {
				os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644)
			}
		}, "clean", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, a, idx := damagedLog(t)
			tc.damage(t, dir, a)
			rp := int64(0)
			switch tc.rp {
			case "clean":
				rp = -1
			case "last":
				base, _ := parseBase(filepath.Base(lastLogFile(t, dir)), logSuffix)
				rp = base + 1
			}
			l := openTest(t, dir, smallSegments, rp)
			want := appended{batches: a.batches[:len(a.batches)-tc.lost]}
			if got := readAllLog(t, l); !bytes.Equal(got, want.all()) {
				t.Fatalf("recovered %d bytes, want %d", len(got), len(want.all()))
			}
			checkEveryOffset(t, l, &want)
			if leo := baseOf(&want, len(want.batches)); l.LogEndOffset() != leo {
				t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), leo)
			}
			// Appending after recovery works and survives a full recheck.
			fill(t, l, &want, 5, 1e6)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.sameIndexes {
				lastBase, _ := parseBase(filepath.Base(lastLogFile(t, dir)), logSuffix)
				for name, b := range idx {
					if base, _ := parseBase(name[:20]+logSuffix, logSuffix); base < lastBase {
						got, _ := os.ReadFile(filepath.Join(dir, name))
						if !bytes.Equal(got, b) {
							t.Errorf("%s: %d bytes, want the %d written first", name, len(got), len(b))
						}
						continue
					}
					got, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					// The last segment got more appends; compare its prefix.
					if !bytes.HasPrefix(got, b) {
						t.Errorf("%s: %d bytes, not the %d written first", name, len(got), len(b))
					}
				}
			}
			for _, name := range []string{"00000000000000000000.log.deleted", "00000000000000000000.log.cleaned", "00000000000000099999.index"} {
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					t.Errorf("%s left behind", name)
				}
			}
			checkIndexFiles(t, dir)
			l = openTest(t, dir, smallSegments, 0)
			defer l.Close()
			if got := readAllLog(t, l); !bytes.Equal(got, want.all()) {
				t.Fatal("log differs after second recovery")
			}
		})
	}
}

// TestRecoveryMiddleSegmentCorrupt: corruption in a segment before the last
// cuts it there and removes every later segment, as Kafka does.
func TestRecoveryMiddleSegmentCorrupt(t *testing.T) {
	dir, a, _ := damagedLog(t)
	logs := segmentFiles(t, dir, logSuffix)
	if len(logs) < 4 {
		t.Fatalf("only %d segments", len(logs))
	}
	victim := logs[1]
	base, _ := parseBase(filepath.Base(victim), logSuffix)
	// Corrupt the third batch of the second segment.
	var pos int64
	var cutAt int64 = -1
	n := 0
	ScanSegment(victim, func(b SegmentBatch) error {
		if n == 2 {
			pos = b.Position
			cutAt = b.Header.BaseOffset
		}
		n++
		return nil
	})
	modifyFile(t, victim, func(b []byte) []byte { b[pos+record.HeaderSize+1] ^= 1; return b })
	l := openTest(t, dir, smallSegments, 0)
	defer l.Close()
	if l.LogEndOffset() != cutAt {
		t.Fatalf("log end offset %d, want %d (segment %d)", l.LogEndOffset(), cutAt, base)
	}
	if got := len(segmentFiles(t, dir, logSuffix)); got != 2 {
		t.Fatalf("%d segments left", got)
	}
	var want appended
	for _, b := range a.batches {
		if h, _ := record.ParseHeader(b); h.LastOffset() < cutAt {
			want.batches = append(want.batches, b)
		}
	}
	if !bytes.Equal(readAllLog(t, l), want.all()) {
		t.Fatal("recovered log differs")
	}
}

// TestRecoveryEveryCut cuts the active segment at every byte position and
// checks that recovery keeps exactly the batches wholly before the cut: a
// crash at any instant loses no batch fully written before it.
func TestRecoveryEveryCut(t *testing.T) {
	src := t.TempDir()
	l := openTest(t, src, Config{IndexIntervalBytes: 150}, 0)
	var a appended
	fill(t, l, &a, 8, 0)
	l.Close()
	full, err := os.ReadFile(filepath.Join(src, segmentName(0)+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(full); cut++ {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(0)+logSuffix), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		l := openTest(t, dir, Config{IndexIntervalBytes: 150}, 0)
		var want appended
		end := 0
		for _, b := range a.batches {
			if end+len(b) > cut {
				break
			}
			end += len(b)
			want.batches = append(want.batches, b)
		}
		got := readAllLog(t, l)
		l.Close()
		if !bytes.Equal(got, want.all()) {
			t.Fatalf("cut at %d: recovered %d bytes, want %d", cut, len(got), end)
		}
		if sz := fileSize(t, filepath.Join(dir, segmentName(0)+logSuffix)); sz != int64(end) {
			t.Fatalf("cut at %d: file is %d bytes, want %d", cut, sz, end)
		}
	}
}

func TestRecoverySwap(t *testing.T) {
	dir, a, _ := damagedLog(t)
	logs := segmentFiles(t, dir, logSuffix)
	// A cleaner merged segments 1 and 2 into a swap file named after 1.
	b1, _ := os.ReadFile(logs[1])
	b2, _ := os.ReadFile(logs[2])
	if err := os.WriteFile(logs[1]+swapSuffix, append(b1, b2...), 0o644); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, dir, smallSegments, -1)
	defer l.Close()
	if got := len(segmentFiles(t, dir, logSuffix)); got != len(logs)-1 {
		t.Fatalf("%d segments, want %d", got, len(logs)-1)
	}
	if _, err := os.Stat(logs[2]); !os.IsNotExist(err) {
		t.Fatal("replaced segment still there")
	}
	if !bytes.Equal(readAllLog(t, l), a.all()) {
		t.Fatal("log differs after swap")
	}
}
