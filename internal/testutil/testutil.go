// Package testutil is what the tests of several packages share: the
// shared data sets (../shared/data beside the repository) and waiting for
// a condition that a real node reaches in its own time.
//
// A test whose data set is absent skips, except under CI (the CI
// environment variable set, as .ci/run does): there a missing data set is
// a broken path, and the test fails instead of turning into a skip.
package testutil

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DataDir is the shared data directory, ../shared/data from the
// repository root (see its README.md), found from this source file so
// that it does not depend on the test's working directory.
func DataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data")
}

// Missing skips the test for a missing input, or fails it when the CI
// environment variable is set (to anything but "" or "false").
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if ci := os.Getenv("CI"); ci != "" && ci != "false" {
		tb.Fatalf("CI: "+format, args...)
		return
	}
	tb.Skipf(format, args...)
}

// DebianPath is the path of the Debian package index,
// debian-packages.jsonl.gz in DataDir. When it is absent the test skips,
// or fails under CI (Missing).
func DebianPath(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(DataDir(), "debian-packages.jsonl.gz")
	if _, err := os.Stat(path); err != nil {
		Missing(tb, "Debian data set not available (see ../shared/data/README.md): %v", err)
	}
	return path
}

// Debian returns the uncompressed Debian package index: one JSON object
// per line, each ending in a newline.
func Debian(tb testing.TB) []byte {
	tb.Helper()
	zr := openDebian(tb)
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// openDebian opens the Debian package index, uncompressed; the file is
// closed at the test's cleanup.
func openDebian(tb testing.TB) io.Reader {
	tb.Helper()
	f, err := os.Open(DebianPath(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	return zr
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a node's or a
// log's logger writes to it from their goroutines while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (w *SyncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns what was written so far.
func (w *SyncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// DebianLine is one line of the Debian package index.
type DebianLine struct {
	// Package is the line's "package" field, the key the tests give it.
	Package string
	// Line is the JSON object, without its newline.
	Line []byte
}

// DebianLines returns the first n lines of the Debian package index in
// file order (all of them when n <= 0), each with its package name.
func DebianLines(tb testing.TB, n int) []DebianLine {
	tb.Helper()
	sc := bufio.NewScanner(openDebian(tb))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out []DebianLine
	for sc.Scan() && (n <= 0 || len(out) < n) {
		var p struct {
			Package string `json:"package"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			tb.Fatalf("Debian data set line %d: %v", len(out)+1, err)
		}
		out = append(out, DebianLine{Package: p.Package, Line: bytes.Clone(sc.Bytes())})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// WaitFor checks cond every 50 ms until it holds, and fails the test
// naming what it waited for when d passes first. It is for real nodes
// and processes, which have no event to wait on from outside; logic
// driven by timers is tested with testing/synctest instead.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		case <-tick.C:
		}
	}
}

// Dial connects to addr over TCP and closes the connection at test
// cleanup; it fails the test when the connection cannot be made.
func Dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// ProcessCPU is the CPU time (user and system) the test process used so
// far: benchmarks on a machine shared with other work report it per op
// beside the wall time, which measures the others as much as the code.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
