package conformance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildSamsa builds root/cmd/samsa into dir and returns the binary's path.
func BuildSamsa(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "samsa")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/samsa")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/samsa: %v\n%s", err, out)
	}
	return bin, nil
}

// Server is a samsa server process.
type Server struct {
	Addr string // bootstrap host:port, from the server's `bootstrap=` log line
	Dir  string // log.dirs

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	logs strings.Builder
}

var bootstrapRE = regexp.MustCompile(`bootstrap=(\S+)`)

// StartServer runs `bin server` with its data in dir, listening on free
// loopback ports, plus the extra --override key=value pairs. It waits up to
// 60 seconds for the server to log its bootstrap address.
func StartServer(bin, dir string, overrides ...string) (*Server, error) {
	args := []string{"server",
		"--override", "log.dirs=" + dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	s := &Server{Dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "SAMSA_BROKERS=")
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout = s.cmd.Stderr
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
			if s.logs.Len() < 8<<20 {
				s.logs.WriteString(line + "\n")
			}
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
	select {
	case s.Addr = <-addr:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("samsa server exited at startup:\n%s", s.Logs())
	case <-time.After(60 * time.Second):
		s.Kill()
		return nil, fmt.Errorf("samsa server did not report its address within 60s:\n%s", s.Logs())
	}
}

// Logs returns what the server wrote so far (the first 8 MiB).
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
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

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

// Stop sends SIGTERM and waits up to timeout for the exit, then SIGKILL.
func (s *Server) Stop(timeout time.Duration) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(timeout):
		s.Kill()
	}
}
