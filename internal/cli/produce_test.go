package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/samsahq/samsa/internal/testutil"
)

// loadDebian returns the uncompressed lines of the Debian data set
// (testutil.Debian).
func loadDebian(t *testing.T) []byte {
	t.Helper()
	return testutil.Debian(t)
}

// javaMurmur2 is Kafka's Utils.murmur2, written from its description here
// independently of kgo's, so that the test checks kgo's partitioner.
func javaMurmur2(data []byte) int32 {
	const m, r = 0x5bd1e995, 24
	h := uint32(0x9747b28c) ^ uint32(len(data))
	n := len(data) / 4
	for i := range n {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h = h*m ^ k
	}
	tail := data[4*n:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is the partition the Java client's default partitioner
// picks for key among n (Utils.toPositive(murmur2(key)) % n).
func javaPartition(key []byte, n int) int32 {
	return int32(int(javaMurmur2(key)&0x7fffffff) % n)
}

func TestJavaMurmur2Vectors(t *testing.T) {
	// Kafka's UtilsTest.testMurmur2.
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := javaMurmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// consumed is one record printed by consume with the format %p\t%o\t%k\t%v\n.
type consumed struct {
	partition int32
	offset    int64
	key       string
	value     string
}

const testFormat = `%p\t%o\t%k\t%v\n`

func parseConsumed(t *testing.T, out string) []consumed {
	t.Helper()
	var rs []consumed
	for line := range strings.Lines(out) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 4)
		if len(f) != 4 {
			t.Fatalf("consume printed %q, want 4 tab-separated fields", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("consume printed %q", line)
		}
		rs = append(rs, consumed{int32(p), o, f[2], f[3]})
	}
	return rs
}

// TestDebianRoundTrip produces the Debian data set keyed by package into
// six partitions of a Samsa node and reads it back: every line byte for
// byte, in order within each partition, each in the partition the Java
// client would pick. Then dump-log reads the node's segment files: every
// batch and index entry checks out, and the records are the data set.
func TestDebianRoundTrip(t *testing.T) {
	data := loadDebian(t)
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != 66541 {
		t.Fatalf("data set has %d lines, want 66541", len(lines))
	}
	const parts = 6
	want := make([][]consumed, parts)
	for _, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\n"))
		var rec struct{ Package string }
		if err := json.Unmarshal(l, &rec); err != nil || rec.Package == "" {
			t.Fatalf("line %q: no package (%v)", l, err)
		}
		p := javaPartition([]byte(rec.Package), parts)
		want[p] = append(want[p], consumed{p, int64(len(want[p])), rec.Package, string(l)})
	}

	dataDir := t.TempDir()
	addr := startSamsa(t, dataDir)
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "debian", b, "--partitions", strconv.Itoa(parts))
	r := mustRun(t, bytes.NewReader(data), "produce", "debian", b, "--key-field", "package")
	if !strings.Contains(r.stderr, "samsa produce: done: 66541 records acked") {
		t.Errorf("produce summary: %q", r.stderr)
	}
	r = mustRun(t, nil, "consume", "debian", b, "--from-beginning", "--until-end", "--format", testFormat)
	if !strings.Contains(r.stderr, "samsa consume: done: 66541 records consumed") {
		t.Errorf("consume summary: %q", r.stderr)
	}
	got := make([][]consumed, parts)
	for _, c := range parseConsumed(t, r.stdout) {
		if c.partition < 0 || c.partition >= parts {
			t.Fatalf("record from partition %d", c.partition)
		}
		got[c.partition] = append(got[c.partition], c)
	}
	for p := range parts {
		if len(got[p]) != len(want[p]) {
			t.Errorf("partition %d: %d records, want %d", p, len(got[p]), len(want[p]))
			continue
		}
		for i := range want[p] {
			if got[p][i] != want[p][i] {
				t.Fatalf("partition %d record %d:\n got %+v\nwant %+v", p, i, got[p][i], want[p][i])
			}
		}
	}

	// The default format prints the values alone, one a line: the data
	// set again, in per-partition order.
	r = mustRun(t, nil, "consume", "debian", b, "--from-beginning", "--until-end", "--partition", "3", "-q")
	var wantValues strings.Builder
	for _, c := range want[3] {
		wantValues.WriteString(c.value + "\n")
	}
	if r.stdout != wantValues.String() {
		t.Errorf("consume --partition 3: %d bytes, want %d", len(r.stdout), wantValues.Len())
	}
	if r.stderr != "" {
		t.Errorf("consume -q wrote to stderr: %q", r.stderr)
	}

	for p := range parts {
		files, err := filepath.Glob(filepath.Join(dataDir, "debian-"+strconv.Itoa(p), "*"))
		if err != nil {
			t.Fatal(err)
		}
		var dumpArgs []string
		for _, f := range files {
			if ext := filepath.Ext(f); ext == ".log" || ext == ".index" || ext == ".timeindex" {
				dumpArgs = append(dumpArgs, f)
			}
		}
		if len(dumpArgs) < 3 {
			t.Fatalf("partition %d: segment files %q", p, files)
		}
		r := mustRun(t, nil, append([]string{"dump-log", "--print-records"}, dumpArgs...)...)
		var got []consumed
		for line := range strings.Lines(r.stdout) {
			if !strings.HasPrefix(line, "| offset: ") {
				continue
			}
			off, err := strconv.ParseInt(strings.Fields(line)[2], 10, 64)
			_, kv, ok1 := strings.Cut(strings.TrimSuffix(line, "\n"), " key: ")
			key, value, ok2 := strings.Cut(kv, " payload: ")
			if err != nil || !ok1 || !ok2 {
				t.Fatalf("dump-log record line %q", line)
			}
			got = append(got, consumed{int32(p), off, key, value})
		}
		if !slices.Equal(got, want[p]) {
			t.Errorf("partition %d: dump-log shows %d records, want %d (equal: %v)", p, len(got), len(want[p]), slices.Equal(got, want[p]))
		}
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  []string
		err   error
	}{
		{"empty", "", 100, nil, nil},
		{"one unterminated", "abc", 100, []string{"abc"}, nil},
		{"terminated", "a\nbc\n", 100, []string{"a", "bc"}, nil},
		{"empty lines kept", "\n\na\n", 100, []string{"", "", "a"}, nil},
		{"cr kept", "a\r\n", 100, []string{"a\r"}, nil},
		{"longer than the buffer", long + "\n" + long, 5000, []string{long, long}, nil},
		{"at the limit", "12345\n", 5, []string{"12345"}, nil},
		{"over the limit", "123456\n", 5, nil, errLineTooLong},
		{"long over the limit", long + "\n", 4999, nil, errLineTooLong},
		{"long unterminated over the limit", long, 4999, nil, errLineTooLong},
	} {
		for _, wrap := range []struct {
			name string
			fn   func(io.Reader) io.Reader
		}{
			{"plain", func(r io.Reader) io.Reader { return r }},
			{"one byte", iotest.OneByteReader},
			{"half", iotest.HalfReader},
		} {
			t.Run(tc.name+"/"+wrap.name, func(t *testing.T) {
				// 16 bytes is bufio's smallest buffer: long lines span
				// many ReadSlice calls.
				br := bufio.NewReaderSize(wrap.fn(strings.NewReader(tc.in)), 16)
				var got []string
				var buf []byte
				for {
					var line []byte
					var err error
					line, buf, err = readLine(br, tc.limit, buf)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						if !errors.Is(err, tc.err) {
							t.Fatalf("err %v, want %v", err, tc.err)
						}
						return
					}
					got = append(got, string(line))
				}
				if tc.err != nil {
					t.Fatalf("no error, want %v", tc.err)
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
					t.Errorf("lines %q, want %q", got, tc.want)
				}
			})
		}
	}
}
