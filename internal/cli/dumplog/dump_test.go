package dumplog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa/internal/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBatch describes a v2 batch for buildBatch.
type testBatch struct {
	baseOffset  int64
	leaderEpoch int32
	attrs       int16
	firstTS     int64
	producerID  int64
	epoch       int16
	baseSeq     int32
	records     []kmsg.Record // Length and OffsetDelta are filled in
}

// buildBatch encodes b with kmsg, compressing the records with gzip when
// the codec bits say so, and stamps the CRC-32C.
func buildBatch(t testing.TB, b testBatch) []byte {
	t.Helper()
	var recs []byte
	var maxTS int64 = b.firstTS
	for i := range b.records {
		r := b.records[i]
		r.OffsetDelta = int32(i)
		r.Length = 0
		body := r.AppendTo(nil)[1:] // without the one-byte zero length
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
		maxTS = max(maxTS, b.firstTS+r.TimestampDelta64)
	}
	switch record.Codec(b.attrs & record.CodecMask) {
	case record.CodecNone:
	case record.CodecGzip:
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(recs)
		zw.Close()
		recs = zb.Bytes()
	default:
		t.Fatalf("buildBatch: codec %d not supported by the test", b.attrs&record.CodecMask)
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          b.baseOffset,
		Length:               int32(record.HeaderSize - record.LogOverhead + len(recs)),
		PartitionLeaderEpoch: b.leaderEpoch,
		Magic:                2,
		Attributes:           b.attrs,
		LastOffsetDelta:      int32(len(b.records) - 1),
		FirstTimestamp:       b.firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           b.producerID,
		ProducerEpoch:        b.epoch,
		FirstSequence:        b.baseSeq,
		NumRecords:           int32(len(b.records)),
		Records:              recs,
	}
	out := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := record.Validate(out); err != nil {
		t.Fatalf("buildBatch: %v", err)
	}
	return out
}

// testSegment returns a segment of four batches starting at offset 100:
// two records, three gzip records of a transactional producer, a commit
// marker, and one record with LogAppendTime. It returns the batches'
// positions too.
func testSegment(t testing.TB) ([]byte, []int) {
	t.Helper()
	rec := func(k, v string, tsDelta int64, hs ...kmsg.Header) kmsg.Record {
		r := kmsg.Record{TimestampDelta64: tsDelta, Value: []byte(v), Headers: hs}
		if k != "" {
			r.Key = []byte(k)
		}
		return r
	}
	// A commit marker: key version 0, type 1; value version 0, coordinator epoch 5.
	marker := kmsg.Record{
		Key:   binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), 1),
		Value: binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 5),
	}
	batches := []testBatch{
		{baseOffset: 100, leaderEpoch: 3, firstTS: 1700000000000, producerID: -1, epoch: -1, baseSeq: -1,
			records: []kmsg.Record{rec("a", "one", 0), rec("b", "two", 7, kmsg.Header{Key: "h", Value: []byte("v")})}},
		{baseOffset: 102, leaderEpoch: 3, attrs: int16(record.CodecGzip) | record.TransactionalBit,
			firstTS: 1700000000100, producerID: 7, epoch: 1, baseSeq: 10,
			records: []kmsg.Record{rec("c", "three", 0), rec("", "four", 5), rec("e", strings.Repeat("five", 100), 2)}},
		{baseOffset: 105, leaderEpoch: 4, attrs: record.TransactionalBit | record.ControlBit,
			firstTS: 1700000000200, producerID: 7, epoch: 1, baseSeq: -1, records: []kmsg.Record{marker}},
		{baseOffset: 106, leaderEpoch: 4, attrs: record.TimestampTypeBit,
			firstTS: 1700000000050, producerID: -1, epoch: -1, baseSeq: -1, records: []kmsg.Record{rec("f", "six", 0)}},
	}
	var seg []byte
	var positions []int
	for _, b := range batches {
		positions = append(positions, len(seg))
		seg = append(seg, buildBatch(t, b)...)
	}
	return seg, positions
}

// dumped is what dumping some files wrote and the error, as samsa
// dump-log reports them.
type dumped struct {
	stdout string
	err    error
}

// dump runs File on each name, as samsa dump-log does.
func dump(names ...string) dumped { return dumpWith(Options{}, names...) }

// dumpWith is dump with options.
func dumpWith(opts Options, names ...string) dumped {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	var errs []error
	for _, name := range names {
		if err := File(w, name, opts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	w.Flush()
	return dumped{out.String(), errors.Join(errs...)}
}

// mustDump is dump that fails the test on an error.
func mustDump(t *testing.T, names ...string) dumped {
	t.Helper()
	d := dump(names...)
	if d.err != nil {
		t.Fatalf("dump %v: %v\n%s", names, d.err, d.stdout)
	}
	return d
}

// fields parses a "key: value key: value" line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range regexp.MustCompile(`(\w+): (\S+)`).FindAllStringSubmatch(line, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDumpLogSegment(t *testing.T) {
	seg, pos := testSegment(t)
	dir := t.TempDir()
	name := writeFile(t, dir, "00000000000000000100.log", seg)
	r := mustDump(t, name)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 6 || lines[0] != "Dumping "+name || lines[1] != "Log starting offset: 100" {
		t.Fatalf("output:\n%s", r.stdout)
	}
	want := []map[string]string{
		{"baseOffset": "100", "lastOffset": "101", "count": "2", "baseSequence": "-1", "lastSequence": "-1",
			"producerId": "-1", "producerEpoch": "-1", "partitionLeaderEpoch": "3", "isTransactional": "false",
			"isControl": "false", "position": "0", "timestampType": "CreateTime", "firstTimestamp": "1700000000000",
			"maxTimestamp": "1700000000007", "compresscodec": "none", "isvalid": "true", "magic": "2"},
		{"baseOffset": "102", "lastOffset": "104", "count": "3", "baseSequence": "10", "lastSequence": "12",
			"producerId": "7", "producerEpoch": "1", "isTransactional": "true", "isControl": "false",
			"position": strconv.Itoa(pos[1]), "firstTimestamp": "1700000000100", "maxTimestamp": "1700000000105",
			"compresscodec": "gzip", "isvalid": "true"},
		{"baseOffset": "105", "lastOffset": "105", "count": "1", "isTransactional": "true", "isControl": "true",
			"partitionLeaderEpoch": "4", "position": strconv.Itoa(pos[2])},
		{"baseOffset": "106", "timestampType": "LogAppendTime", "position": strconv.Itoa(pos[3]),
			"size": strconv.Itoa(len(seg) - pos[3])},
	}
	for i, w := range want {
		got := fields(lines[2+i])
		for k, v := range w {
			if got[k] != v {
				t.Errorf("batch %d: %s = %q, want %q\n%s", i, k, got[k], v, lines[2+i])
			}
		}
		h, err := record.ParseHeader(seg[pos[i]:])
		if err != nil {
			t.Fatal(err)
		}
		if got["crc"] != strconv.FormatUint(uint64(h.CRC), 10) || got["size"] != strconv.Itoa(h.Size()) {
			t.Errorf("batch %d: crc %s size %s, want %d %d", i, got["crc"], got["size"], h.CRC, h.Size())
		}
	}
}

func TestDumpLogRecords(t *testing.T) {
	seg, _ := testSegment(t)
	name := writeFile(t, t.TempDir(), "00000000000000000100.log", seg)
	r := dumpWith(Options{PrintRecords: true}, name)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got []string
	for l := range strings.Lines(r.stdout) {
		if strings.HasPrefix(l, "| ") {
			got = append(got, l)
		}
	}
	want := []string{
		"| offset: 100 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: -1 headers: [] key: a payload: one\n",
		"| offset: 101 CreateTime: 1700000000007 keySize: 1 valueSize: 3 sequence: -1 headers: [h=v] key: b payload: two\n",
		"| offset: 102 CreateTime: 1700000000100 keySize: 1 valueSize: 5 sequence: 10 headers: [] key: c payload: three\n",
		"| offset: 103 CreateTime: 1700000000105 keySize: -1 valueSize: 4 sequence: 11 headers: [] key: null payload: four\n",
		"| offset: 104 CreateTime: 1700000000102 keySize: 1 valueSize: 400 sequence: 12 headers: [] key: e payload: " + strings.Repeat("five", 100) + "\n",
		"| offset: 105 CreateTime: 1700000000200 keySize: 4 valueSize: 6 sequence: -1 headers: [] endTxnMarker: COMMIT coordinatorEpoch: 5\n",
		"| offset: 106 LogAppendTime: 1700000000050 keySize: 1 valueSize: 3 sequence: -1 headers: [] key: f payload: six\n",
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
	// Each batch line comes before its records.
	if i, j := strings.Index(r.stdout, "baseOffset: 105"), strings.Index(r.stdout, "| offset: 105"); i < 0 || j < i {
		t.Errorf("batch 105 at %d, its record at %d", i, j)
	}

	// A batch whose records do not match its header, with a valid CRC.
	b := buildBatch(t, testBatch{baseOffset: 0, firstTS: 1, producerID: -1, epoch: -1, baseSeq: -1,
		records: []kmsg.Record{{Value: []byte("x")}}})
	binary.BigEndian.PutUint32(b[57:], 2) // record count
	binary.BigEndian.PutUint32(b[23:], 1) // last offset delta
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	name = writeFile(t, t.TempDir(), "00000000000000000000.log", b)
	r = dumpWith(Options{PrintRecords: true}, name)
	if !strings.Contains(r.stdout, "isvalid: true") || !strings.Contains(r.stdout, "| cannot decode the records: ") {
		t.Errorf("output:\n%s", r.stdout)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "1 batches whose records cannot be decoded") {
		t.Errorf("error %v", r.err)
	}
	// Without --print-records the records are not decoded.
	if r = dump(name); r.err != nil {
		t.Errorf("batches only: %v", r.err)
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, "null"},
		{[]byte{}, `""`},
		{[]byte("plain"), "plain"},
		{[]byte(`{"a": "b c"}`), `{"a": "b c"}`},
		{[]byte("tab\there"), `"tab\there"`},
		{[]byte("line\n"), `"line\n"`},
		{[]byte{0xff, 'a'}, `"\xffa"`},
		{[]byte("übung"), "übung"},
	} {
		if got := text(tc.in); got != tc.want {
			t.Errorf("text(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDumpLogProblems(t *testing.T) {
	seg, pos := testSegment(t)
	dir := t.TempDir()

	badCRC := bytes.Clone(seg)
	badCRC[pos[1]+record.HeaderSize+3] ^= 0xff // a byte of the gzip records
	badMagic := bytes.Clone(seg)
	badMagic[pos[2]+16] = 1
	shortLen := bytes.Clone(seg)
	binary.BigEndian.PutUint32(shortLen[pos[3]+8:], 10)

	for _, tc := range []struct {
		name    string
		data    []byte
		batches int
		out     string // in the output
		err     string // in the error
	}{
		{"bad crc", badCRC, 4, "isvalid: false", "1 batches with a bad CRC"},
		{"torn tail", seg[:len(seg)-5], 3, "Found " + strconv.Itoa(len(seg)-5-pos[3]) + " invalid bytes", "invalid bytes at position " + strconv.Itoa(pos[3])},
		{"torn header", seg[:pos[3]+20], 3, "Found 20 invalid bytes", "invalid bytes"},
		{"a few bytes", seg[:pos[1]+3], 1, "Found 3 invalid bytes", "invalid bytes"},
		{"bad magic", badMagic, 2, "Stopped at position " + strconv.Itoa(pos[2]), "unsupported magic"},
		{"short batch length", shortLen, 3, "Stopped at position " + strconv.Itoa(pos[3]), "corrupt batch"},
		{"empty", nil, 0, "Log starting offset: 0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := writeFile(t, dir, "00000000000000000000.log", tc.data)
			r := dump(name)
			if n := strings.Count(r.stdout, "baseOffset:"); n != tc.batches {
				t.Errorf("%d batches shown, want %d:\n%s", n, tc.batches, r.stdout)
			}
			if !strings.Contains(r.stdout, tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, r.stdout)
			}
			switch {
			case tc.err == "" && r.err != nil:
				t.Errorf("error %v", r.err)
			case tc.err != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", r.err, tc.err)
			}
		})
	}
}

// appendEntry encodes index entries: each value is written big-endian with
// its own width (int32, or int64 for timestamps).
func appendEntry(b []byte, vals ...any) []byte {
	for _, v := range vals {
		switch v := v.(type) {
		case int32:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case int64:
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

func TestDumpLogIndexes(t *testing.T) {
	seg, pos := testSegment(t)
	dir := t.TempDir()
	writeFile(t, dir, "00000000000000000100.log", seg)

	// Entries for the batches ending at 104 and 106, then preallocated zeros.
	index := appendEntry(nil, int32(4), int32(pos[1]), int32(6), int32(pos[3]))
	index = append(index, make([]byte, 8*5)...)
	timeIndex := appendEntry(nil, int64(1700000000007), int32(1), int64(1700000000105), int32(4))
	// The marker at 105 has the largest timestamp; the batch at 106 has an
	// older one, so an entry for it must carry that of the marker.
	timeIndex = appendEntry(timeIndex, int64(1700000000200), int32(5), int64(1700000000201), int32(6))
	timeIndex = append(timeIndex, make([]byte, 12*2)...)

	idx := writeFile(t, dir, "00000000000000000100.index", index)
	tidx := writeFile(t, dir, "00000000000000000100.timeindex", timeIndex)
	r := dump(idx, tidx)
	want := "Dumping " + idx + "\n" +
		"offset: 104 position: " + strconv.Itoa(pos[1]) + "\n" +
		"offset: 106 position: " + strconv.Itoa(pos[3]) + "\n" +
		"(5 unused zero entries at the end: preallocated)\n" +
		"Dumping " + tidx + "\n" +
		"timestamp: 1700000000007 offset: 101\n" +
		"timestamp: 1700000000105 offset: 104\n" +
		"timestamp: 1700000000200 offset: 105\n" +
		"timestamp: 1700000000201 offset: 106\n" +
		"  mismatch: index timestamp 1700000000201, log max timestamp 1700000000200 up to the batch holding offset 106\n" +
		"(2 unused zero entries at the end: preallocated)\n"
	if r.stdout != want {
		t.Errorf("output:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "1 in the index") {
		t.Errorf("error %v, want the time index mismatch", r.err)
	}

	for _, tc := range []struct {
		name, file string
		data       []byte
		out        string
	}{
		{"wrong offset", "x.index", appendEntry(nil, int32(5), int32(pos[1])), "mismatch: index offset 105, log offset 104"},
		{"no batch there", "x.index", appendEntry(nil, int32(4), int32(pos[1]+1)), "mismatch: no batch starts at position"},
		{"out of order", "x.index", appendEntry(nil, int32(6), int32(pos[3]), int32(4), int32(pos[1])), "out of order"},
		{"partial entry", "x.index", appendEntry(nil, int32(4), int32(pos[1]), int32(7)), "4 trailing bytes are not a whole entry"},
		{"time out of order", "x.timeindex", appendEntry(nil, int64(1700000000105), int32(4), int64(1700000000007), int32(1)), "out of order"},
		{"time offset past the log", "x.timeindex", appendEntry(nil, int64(1700000000105), int32(40)), "no batch of the log holds offset 140"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := strings.TrimSuffix(tc.file, filepath.Ext(tc.file))
			sub := t.TempDir()
			writeFile(t, sub, "00000000000000000100.log", seg)
			name := writeFile(t, sub, strings.Replace(tc.file, base, "00000000000000000100", 1), tc.data)
			r := dump(name)
			if !strings.Contains(r.stdout, tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, r.stdout)
			}
			if r.err == nil {
				t.Errorf("no error")
			}
		})
	}

	// Without a .log beside it, an index is listed but not checked; a
	// fully zero index is empty.
	alone := t.TempDir()
	name := writeFile(t, alone, "00000000000000000000.index", make([]byte, 16))
	r = mustDump(t, name)
	if want := "Dumping " + name + "\n(no 00000000000000000000.log beside it: entries not checked)\n(2 unused zero entries at the end: preallocated)\n"; r.stdout != want {
		t.Errorf("zero index:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestDumpLogBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		want string
	}{
		{filepath.Join(dir, "missing.log"), "no such file"},
		{filepath.Join(dir, "missing.index"), "no such file"},
		{writeFile(t, dir, "leader-epoch-checkpoint", []byte("0\n")), "unknown file type"},
	} {
		r := dump(tc.name)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("dump %s: error %v, want %q", tc.name, r.err, tc.want)
		}
	}
}

// FuzzDumpFiles feeds arbitrary bytes to the segment and index dumpers,
// as a file and as the log beside the indexes: they must not panic, and
// must read no more than the file holds.
func FuzzDumpFiles(f *testing.F) {
	seg, pos := testSegment(f)
	f.Add(seg)
	f.Add(seg[:pos[2]+30])
	f.Add(appendEntry(nil, int32(4), int32(pos[1]), int32(6), int32(pos[3])))
	f.Add(appendEntry(nil, int64(1700000000007), int32(1), int64(1700000000105), int32(4)))
	f.Add(kbin.AppendVarint(nil, 300))
	f.Fuzz(func(t *testing.T, data []byte) {
		w := bufio.NewWriter(io.Discard)
		s := &segmentReader{r: bytes.NewReader(data), size: int64(len(data))}
		_ = dumpBatches(w, s, "fuzz.log", Options{PrintRecords: true})
		batches, err := scanBatches(&segmentReader{r: bytes.NewReader(data), size: int64(len(data))})
		if err != nil {
			t.Fatalf("scanning in memory: %v", err)
		}
		for _, check := range []bool{false, true} {
			_ = dumpOffsetEntries(w, data, 100, batches, check)
			_ = dumpTimeEntries(w, data, 100, batches, check)
			// The sample segment as the log beside fuzzed indexes.
			segBatches, _ := scanBatches(&segmentReader{r: bytes.NewReader(seg), size: int64(len(seg))})
			_ = dumpOffsetEntries(w, data, 100, segBatches, check)
			_ = dumpTimeEntries(w, data, 100, segBatches, check)
		}
	})
}
