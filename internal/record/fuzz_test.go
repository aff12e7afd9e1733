package record

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz")

// seedBatches are real batches of every codec, control and not.
func seedBatches(t testing.TB) [][]byte {
	var out [][]byte
	for _, codec := range allCodecs {
		b, err := Build(Spec{Codec: codec, BaseOffset: 5, BaseTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, sampleRecords(6))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	m, err := BuildEndTxnMarker(1, 1, 1, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, m)
}

// TestWriteCorpus writes the seed corpus files with -update-corpus.
func TestWriteCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	seeds := seedBatches(t)
	all := bytes.Join(seeds, nil)
	for _, target := range []string{"FuzzRecords", "FuzzValidate", "FuzzBatches", "FuzzNextBatch"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		inputs := seeds
		switch target {
		case "FuzzBatches":
			inputs = [][]byte{all, all[:len(all)-7]}
		case "FuzzNextBatch":
			inputs = [][]byte{all, all[:len(all)-7], legacyMessage(1)}
		}
		for i, in := range inputs {
			data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func FuzzRecords(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		err := RecordsMax(b, 1<<20, func(r Record) error {
			n++
			if len(r.Key) > len(b)<<10 && len(r.Key) > 1<<20 {
				t.Fatalf("key of %d bytes", len(r.Key))
			}
			return nil
		})
		if err != nil {
			return
		}
		h, _ := ParseHeader(b)
		if int32(n) != h.NumRecords {
			t.Fatalf("%d records, header says %d", n, h.NumRecords)
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err != nil {
			return
		}
		if h.Size() != len(b) || !CRCValid(b) || h.NumRecords < 0 {
			t.Fatalf("valid batch %+v of %d bytes", h, len(b))
		}
		// Stamping keeps it valid.
		SetBaseOffset(b, 1<<40)
		SetPartitionLeaderEpoch(b, 9)
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzBatches(f *testing.F) {
	all := bytes.Join(seedBatches(f), nil)
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Fuzz(func(t *testing.T, b []byte) {
		sum := 0
		consumed, err := Batches(b, func(batch []byte, h Header) error {
			if len(batch) != h.Size() {
				t.Fatalf("batch of %d bytes, header says %d", len(batch), h.Size())
			}
			sum += len(batch)
			return nil
		})
		if consumed != sum || consumed > len(b) || (err == nil && consumed != len(b)) {
			t.Fatalf("consumed %d, batches %d, input %d, err %v", consumed, sum, len(b), err)
		}
	})
}

func FuzzNextBatch(f *testing.F) {
	all := bytes.Join(seedBatches(f), nil)
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Add(legacyMessage(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		size, magic, err := NextBatch(b)
		if err != nil {
			if size != 0 {
				t.Fatalf("size %d with %v", size, err)
			}
			return
		}
		if size > len(b) || (size > 0 && size < LogOverhead+legacyRecordOverheadV0) || magic < 0 || magic > 2 {
			t.Fatalf("size %d magic %d for %d bytes", size, magic, len(b))
		}
		// A whole v2 batch frames as Batches sees it.
		if size > 0 && magic == 2 && size >= HeaderSize {
			if _, err := Batches(b[:size], func([]byte, Header) error { return nil }); err != nil {
				t.Fatalf("framed v2 batch of %d bytes: %v", size, err)
			}
		}
	})
}
