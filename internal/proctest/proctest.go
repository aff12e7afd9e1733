// Package proctest builds the samsa binary and runs it as a real process
// for tests that need one: SIGKILL and restart, clients from other
// languages. Servers listen on 127.0.0.1 with free ports.
package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu   sync.Mutex
	builds    = map[string]*build{} // by package path
	buildDirs []string              // the temporary directories of builds, guarded by buildMu
)

// Main wraps a test package's m so that the binaries BinaryOf built (one
// temporary directory of about 35 MB each, under os.TempDir) are removed
// once its tests have run: func TestMain(m *testing.M) {
// goleak.VerifyTestMain(proctest.Main(m)) }. Without it every test process
// leaves them behind.
func Main(m *testing.M) interface{ Run() int } { return mainRunner{m} }

type mainRunner struct{ m *testing.M }

func (r mainRunner) Run() int {
	code := r.m.Run()
	removeBuilds()
	return code
}

// removeBuilds removes the directories of the binaries built so far.
func removeBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, dir := range buildDirs {
		os.RemoveAll(dir)
	}
	buildDirs = nil
}

// build is one binary built by this test process.
type build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds ./cmd/samsa once per test process and returns its path;
// when PROCTEST_BIN names a file, that prebuilt binary is used instead.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("PROCTEST_BIN"); bin != "" {
		return binaryOf(t, "", func() (string, error) {
			path, err := filepath.Abs(bin)
			if err == nil {
				_, err = os.Stat(path)
			}
			return path, err
		})
	}
	return BinaryOf(t, "./cmd/samsa")
}

// BinaryOf builds the main package pkg (a path relative to the module's
// root, such as "./cmd/samsa" or the fault harness's
// "./e2e/chaos/faultfs") once per test process and returns the binary's
// path.
func BinaryOf(t testing.TB, pkg string) string {
	t.Helper()
	return binaryOf(t, pkg, func() (string, error) {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "samsa-bin-")
		if err != nil {
			return "", err
		}
		buildMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildMu.Unlock()
		path := filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", path, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return path, nil
	})
}

func binaryOf(t testing.TB, key string, do func() (string, error)) string {
	t.Helper()
	buildMu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	buildMu.Unlock()
	b.once.Do(func() { b.path, b.err = do() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Server is a running samsa server process.
type Server struct {
	Addr    string // bootstrap host:port
	Dir     string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex // guards logs and changed
	logs    strings.Builder
	changed chan struct{} // closed and replaced when a line is logged
}

var bootstrapRE = regexp.MustCompile(`bootstrap=(\S+)`)

// Start runs `samsa server` on dir with free loopback ports and the given
// extra overrides, waits until it reports its address, and stops it with
// SIGKILL at test cleanup if it is still running.
func Start(t testing.TB, dir string, overrides ...string) *Server {
	t.Helper()
	return StartWithin(t, dir, 30*time.Second, overrides...)
}

// StartWithin is Start waiting up to timeout for the server to report its
// address (a node opening 100,000 logs takes longer than Start's 30 s).
func StartWithin(t testing.TB, dir string, timeout time.Duration, overrides ...string) *Server {
	t.Helper()
	if strings.Contains(dir, ",") {
		// log.dirs is a comma-separated list: a t.TempDir of a subtest
		// named "a, b" would put a relative log dir in the test's
		// working directory, inside the checkout.
		t.Fatalf("proctest: log dir %q holds a comma (log.dirs separator); use os.MkdirTemp", dir)
	}
	args := []string{"server",
		"--override", "log.dirs=" + dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "http.listener=", // none: tests run in parallel
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	s, err := StartProcess(Binary(t), dir, timeout, args...)
	if s != nil {
		t.Cleanup(func() { s.Kill() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartArgs runs the samsa binary with args, as Start does.
func StartArgs(t testing.TB, dir string, args ...string) *Server {
	t.Helper()
	s, err := StartProcess(Binary(t), dir, 30*time.Second, args...)
	if s != nil {
		t.Cleanup(func() { s.Kill() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartProcess runs bin with args and waits up to timeout for its
// bootstrap= log line. It does not touch a testing.TB, so that several
// servers can start from several goroutines (a cluster's nodes wait for
// each other to elect a controller), and so that the conformance suite
// (its own module) starts its servers with it. On error the process is
// killed or has exited; the returned Server, when not nil, is still to be
// cleaned up by the caller (Kill).
func StartProcess(bin, dir string, timeout time.Duration, args ...string) (*Server, error) {
	s := &Server{Dir: dir, done: make(chan struct{}), changed: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	// The server reads SAMSA_* variables as properties: tests give theirs
	// as arguments, and the test's own SAMSA_* settings stay out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMSA_") {
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if s.logs.Len() < maxLogs {
				s.logs.WriteString(line + "\n")
			}
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
			if m := bootstrapRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		s.cmd.Wait()
		close(s.done)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case s.Addr = <-addr:
		return s, nil
	case <-s.done:
		return s, fmt.Errorf("samsa server exited at startup:\n%s", s.Logs())
	case <-timer.C:
		s.Kill()
		return s, fmt.Errorf("samsa server did not start within %v:\n%s", timeout, s.Logs())
	}
}

// maxLogs bounds what a Server keeps of its process's logs: a
// conformance run keeps a server for many minutes.
const maxLogs = 8 << 20

// Logs returns what the server wrote to stderr so far (its first 8 MiB).
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// WaitLog waits up to timeout for a line matching re in what the server
// logged from byte offset from of Logs on, and returns the logs up to that
// line's end; an error when the timeout passes or the process exits first.
func (s *Server) WaitLog(re *regexp.Regexp, from int, timeout time.Duration) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		logs, changed := s.logs.String(), s.changed
		s.mu.Unlock()
		if from > len(logs) {
			from = len(logs)
		}
		if loc := re.FindStringIndex(logs[from:]); loc != nil {
			end := from + loc[1]
			if nl := strings.IndexByte(logs[end:], '\n'); nl >= 0 {
				end += nl + 1
			}
			return logs[:end], nil
		}
		select {
		case <-changed:
		case <-s.done:
			return logs, fmt.Errorf("server exited before logging %s", re)
		case <-timer.C:
			return logs, fmt.Errorf("server did not log %s within %v", re, timeout)
		}
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// CPUTime returns the user and system CPU time the server's process has
// used: read from /proc/PID/stat while it runs (in clock ticks of 10 ms),
// from its exit status once it exited (Wait, Stop or Kill returned), so
// that a caller can take the CPU of a shutdown as the total minus a
// reading before the signal.
func (s *Server) CPUTime() (time.Duration, error) {
	if s.Exited() {
		st := s.cmd.ProcessState
		return st.UserTime() + st.SystemTime(), nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
	if err != nil {
		return 0, err
	}
	// The fields after the command name in parentheses (which may hold
	// spaces): state is field 3, utime 14 and stime 15 (proc(5)).
	i := strings.LastIndexByte(string(b), ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("proctest: /proc/%d/stat: %q", s.Pid(), b)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proctest: /proc/%d/stat: %w", s.Pid(), err)
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

// Pause sends SIGSTOP: the process stops running but keeps its sockets
// open, as a hung machine would.
func (s *Server) Pause() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a paused process.
func (s *Server) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Wait waits up to timeout for the process to exit and returns its exit
// status: -1 when a signal ended it, an error when it is still running.
func (s *Server) Wait(timeout time.Duration) (int, error) {
	if s.Exited() {
		return s.cmd.ProcessState.ExitCode(), nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode(), nil
	case <-timer.C:
		return 0, fmt.Errorf("process %d still running after %v", s.Pid(), timeout)
	}
}

// Exited reports whether the process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; it returns
// the process's exit error.
func (s *Server) Stop(timeout time.Duration) error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if st := s.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("server exited: %s", st)
		}
		return nil
	case <-time.After(timeout):
		s.Kill()
		return fmt.Errorf("server did not stop within %v", timeout)
	}
}

// Run runs a command with a timeout, returning stdout and failing the test
// on error.
func Run(t testing.TB, ctx context.Context, stdin io.Reader, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}
