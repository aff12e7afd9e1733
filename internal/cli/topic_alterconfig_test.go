package cli

import (
	"regexp"
	"strings"
	"testing"
)

func TestTopicAlterConfig(t *testing.T) { eachBackend(t, testTopicAlterConfig) }

func testTopicAlterConfig(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "events", b, "-p", "1", "--config", "retention.bytes=1048576")

	r := mustRun(t, nil, "topic", "alter-config", "events", b,
		"--set", "retention.ms=3600000", "--set", "cleanup.policy=compact,delete", "--delete", "retention.bytes")
	if want := "Altered configs of topic events.\n"; r.stdout != want {
		t.Errorf("alter-config: stdout %q, want %q", r.stdout, want)
	}
	r = mustRun(t, nil, "topic", "describe", "events", b)
	for _, re := range []string{`(?m)^\s+retention.ms=3600000$`, `(?m)^\s+cleanup.policy=compact,delete$`} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe after alter-config: no match for %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "retention.bytes") {
		t.Errorf("describe shows the deleted retention.bytes:\n%s", r.stdout)
	}

	r = mustRun(t, nil, "topic", "alter-config", "events", b, "-d", "retention.ms", "-d", "cleanup.policy")
	r = mustRun(t, nil, "topic", "describe", "events", b)
	if !strings.Contains(r.stdout, "Configs: (none set on the topic)") {
		t.Errorf("describe after deleting every config:\n%s", r.stdout)
	}

	r = run(t, nil, "topic", "alter-config", "nope", b, "--set", "retention.ms=1")
	if r.err == nil || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter-config of a missing topic: %v", r.err)
	}
}

func TestTopicAlterConfigArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to change"},
		{[]string{"--set", "retention.ms"}, "want key=value"},
		{[]string{"--set", "a=1", "--delete", "a"}, "given twice"},
		{[]string{"--delete", "a=1"}, "want a config name"},
	} {
		r := run(t, nil, append([]string{"topic", "alter-config", "t", "--brokers=127.0.0.1:1"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, r.err, tc.want)
		}
	}
}

// TestTopicAlterConfigInvalid checks that Samsa refuses a bad value with
// INVALID_CONFIG and leaves the topic as it was.
func TestTopicAlterConfigInvalid(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	mustRun(t, nil, "topic", "create", "bad", b, "-p", "1", "--config", "retention.ms=5000")
	r := run(t, nil, "topic", "alter-config", "bad", b, "--set", "retention.ms=5", "--set", "min.cleanable.dirty.ratio=2")
	if r.err == nil || !strings.Contains(r.err.Error(), "INVALID_CONFIG") {
		t.Fatalf("invalid value: err %v, want INVALID_CONFIG", r.err)
	}
	r = mustRun(t, nil, "topic", "describe", "bad", b)
	if !regexp.MustCompile(`(?m)^\s+retention.ms=5000$`).MatchString(r.stdout) {
		t.Errorf("a refused change applied in part:\n%s", r.stdout)
	}
}
