package conformance

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/samsahq/samsa/internal/proctest"
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

// Server is a samsa server process: internal/proctest's, which the
// main module's process tests use too.
type Server = proctest.Server

// StartServer runs `bin server` with its data in dir, listening on free
// loopback ports, plus the extra --override key=value pairs. It waits up to
// 60 seconds for the server to log its bootstrap address.
func StartServer(bin, dir string, overrides ...string) (*Server, error) {
	args := []string{"server",
		"--override", "log.dirs=" + dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "http.listener=",
	}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	s, err := proctest.StartProcess(bin, dir, 60*time.Second, args...)
	if err != nil && s != nil {
		s.Kill()
		s = nil
	}
	return s, err
}
