package samsa_test

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestVersionProcess: samsa --version and samsa version print the build's
// version (module version, commit when built in a git checkout, Go
// version), the same first line, and the server's startup line carries it.
func TestVersionProcess(t *testing.T) {
	bin := proctest.Binary(t)
	short, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	long, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary and the samsa binary come from the same toolchain.
	first := strings.TrimSpace(string(short))
	if !strings.HasPrefix(first, "samsa ") || !strings.HasSuffix(first, " "+runtime.Version()) {
		t.Fatalf("--version printed %q", short)
	}
	if !strings.HasPrefix(string(long), first+"\n") || !strings.Contains(string(long), "go: "+runtime.Version()+"\n") {
		t.Fatalf("version printed %q, --version %q", long, short)
	}
	s := proctest.Start(t, t.TempDir())
	version := strings.TrimPrefix(first, "samsa ")
	if _, err := s.WaitLog(regexp.MustCompile(`msg="samsa started" version="`+regexp.QuoteMeta(version)+`"`), 0, 0); err != nil {
		t.Fatalf("%v:\n%s", err, s.Logs())
	}
}
