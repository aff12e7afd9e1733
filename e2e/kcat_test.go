package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/testutil"
)

// debianLines returns the lines of the Debian data set and their package
// names (testutil.DebianLines).
func debianLines(t *testing.T) (lines [][]byte, keys []string) {
	t.Helper()
	for _, l := range testutil.DebianLines(t, 0) {
		lines = append(lines, l.Line)
		keys = append(keys, l.Package)
	}
	return lines, keys
}

// murmur2Partition is the Java client's default partitioner for keyed
// records: toPositive(murmur2(key)) % partitions.
func murmur2Partition(key []byte, partitions int) int32 {
	const m, r = 0x5bd1e995, 24
	h := uint32(0x9747b28c) ^ uint32(len(key))
	for len(key) >= 4 {
		k := uint32(key[0]) | uint32(key[1])<<8 | uint32(key[2])<<16 | uint32(key[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		key = key[4:]
	}
	switch len(key) {
	case 3:
		h ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(key[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32((h & 0x7fffffff) % uint32(partitions))
}

func needKcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is required in CI (.ci/run installs it)")
		}
		t.Skip("kcat not installed (apt-get install kcat)")
	}
	return p
}

// TestKcatDebian produces the whole Debian data set with kcat (murmur2
// partitioner, as the Java client) and consumes it back with kcat and with
// franz-go: every record returns byte for byte, in order within its
// partition, in the partition the Java client would choose.
func TestKcatDebian(t *testing.T) {
	kcat := needKcat(t)
	lines, keys := debianLines(t)
	srv := proctest.Start(t, t.TempDir(), "log.segment.bytes=4194304")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 1, nil, "packages"); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for i, l := range lines {
		in.WriteString(keys[i])
		in.WriteByte('\t')
		in.Write(l)
		in.WriteByte('\n')
	}
	start := time.Now()
	proctest.Run(t, ctx, &in, kcat, "-P", "-b", srv.Addr, "-t", "packages", "-K", "\t",
		"-X", "partitioner=murmur2_random", "-X", "linger.ms=5", "-X", "batch.size=1000000")
	t.Logf("kcat produced %d records in %v", len(lines), time.Since(start))

	start = time.Now()
	out := proctest.Run(t, ctx, nil, kcat, "-C", "-b", srv.Addr, "-t", "packages", "-o", "beginning", "-e",
		"-f", "%p\t%o\t%k\t%s\n")
	t.Logf("kcat consumed in %v", time.Since(start))
	got := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(got) != len(lines) {
		t.Fatalf("kcat consumed %d records, produced %d", len(got), len(lines))
	}
	// Records of one key keep their input order; group the input by partition.
	perPartition := map[int32][]int{}
	for i, k := range keys {
		p := murmur2Partition([]byte(k), 6)
		perPartition[p] = append(perPartition[p], i)
	}
	next := map[int32]int{}
	for _, row := range got {
		f := strings.SplitN(string(row), "\t", 4)
		if len(f) != 4 {
			t.Fatalf("bad kcat line %q", row)
		}
		p64, _ := strconv.ParseInt(f[0], 10, 32)
		p := int32(p64)
		off, _ := strconv.ParseInt(f[1], 10, 64)
		if int64(next[p]) != off {
			t.Fatalf("partition %d: offset %d, want %d", p, off, next[p])
		}
		idx := perPartition[p][next[p]]
		next[p]++
		if f[2] != keys[idx] || f[3] != string(lines[idx]) {
			t.Fatalf("partition %d offset %d: got key %q, want %q (line %d)", p, off, f[2], keys[idx], idx)
		}
	}

	// franz-go reads the same, and its murmur2 agrees.
	c2, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr), kgo.ConsumeTopics("packages"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	n := 0
	for n < len(lines) {
		fs := c2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read %d of %d", n, len(lines))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := murmur2Partition(r.Key, 6); want != r.Partition {
				t.Fatalf("key %q in partition %d, murmur2 says %d", r.Key, r.Partition, want)
			}
			n++
		})
	}
	if n != len(lines) {
		t.Fatalf("franz-go read %d", n)
	}
}
