package cli

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDumpLogCommand checks the command's wiring; internal/cli/dumplog
// tests the decoding.
func TestDumpLogCommand(t *testing.T) {
	rec := kmsg.Record{Value: []byte("v")}
	body := rec.AppendTo(nil)[1:]
	rec.Length = int32(len(body))
	recs := rec.AppendTo(nil)
	batch := (&kmsg.RecordBatch{
		FirstOffset: 42, Length: int32(49 + len(recs)), Magic: 2, FirstTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	dir := t.TempDir()
	good := filepath.Join(dir, "00000000000000000042.log")
	if err := os.WriteFile(good, batch, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, nil, "dump-log", good)
	if !strings.Contains(r.stdout, "baseOffset: 42 lastOffset: 42 count: 1 ") || !strings.Contains(r.stdout, "isvalid: true") {
		t.Errorf("dump-log:\n%s", r.stdout)
	}
	batch[len(batch)-1] ^= 1
	bad := filepath.Join(dir, "00000000000000000043.log")
	if err := os.WriteFile(bad, batch, 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, nil, "dump-log", good, bad, filepath.Join(dir, "missing.log"))
	if strings.Count(r.stdout, "Dumping ") != 3 || !strings.Contains(r.stdout, "isvalid: false") {
		t.Errorf("dump-log of three files:\n%s", r.stdout)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "00000000000000000043.log: problems found") ||
		!strings.Contains(r.err.Error(), "missing.log: open") {
		t.Errorf("error %v", r.err)
	}
	if r = run(t, nil, "dump-log"); r.err == nil {
		t.Error("dump-log without files: no error")
	}
}
