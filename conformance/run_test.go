package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunRunnerReadsStdoutOnly runs a runner that logs RESULT- and
// DATA-shaped lines to standard error after its real ones on standard
// output (as librdkafka's and the JVM's loggers may): the driver takes the
// stdout lines, and keeps the stderr for the output it logs on failure.
func TestRunRunnerReadsStdoutOnly(t *testing.T) {
	r := runScript(t, `echo 'DATA {"k":"stdout"}'
echo 'RESULT {"status": "pass", "detail": ""}'
echo 'DATA {"k":"stderr"}' >&2
echo 'RESULT {"status": "fail", "detail": "from stderr"}' >&2
echo 'librdkafka: BGQUEUE' >&2
`)
	if r.Status != Pass || r.Data != `{"k":"stdout"}` {
		t.Fatalf("status %s (%s), data %s: want pass and the stdout DATA line\n%s", r.Status, r.Detail, r.Data, r.Output)
	}
	if !strings.Contains(r.Output, "librdkafka: BGQUEUE") {
		t.Fatalf("output lacks the runner's stderr:\n%s", r.Output)
	}
}

// TestRunRunnerNoResultNamesStderr: a runner that dies before its RESULT
// line fails with the last line of its standard error (a Python
// traceback's exception), not of its standard output.
func TestRunRunnerNoResultNamesStderr(t *testing.T) {
	r := runScript(t, `echo 'connecting'
echo 'Traceback (most recent call last):' >&2
echo 'KafkaException: broker down' >&2
exit 1
`)
	if r.Status != Fail || !strings.Contains(r.Detail, "KafkaException: broker down") {
		t.Fatalf("status %s detail %q: want fail naming the stderr's last line", r.Status, r.Detail)
	}
}

// runScript runs the shell script body as a runner, through RunRunner.
func runScript(t *testing.T, body string) Result {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script := filepath.Join(t.TempDir(), "runner.sh")
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return RunRunner(context.Background(), Client{ID: "sh", Argv: []string{sh, script}}, time.Minute)
}
