package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTopicLifecycle(t *testing.T) { eachBackend(t, testTopicLifecycle) }

func testTopicLifecycle(t *testing.T, addr string) {
	b := "--brokers=" + addr

	r := mustRun(t, nil, "topic", "create", "orders", b, "--partitions", "3",
		"--config", "cleanup.policy=compact", "--config", "retention.ms=86400000")
	if want := "Created topic orders.\n"; r.stdout != want {
		t.Errorf("create: stdout %q, want %q", r.stdout, want)
	}
	mustRun(t, nil, "topic", "create", "audit", b, "-p", "1")

	r = run(t, nil, "topic", "create", "orders", b, "--partitions", "3")
	if r.err == nil || !strings.Contains(r.err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Errorf("create twice: err %v, want TOPIC_ALREADY_EXISTS", r.err)
	}
	r = mustRun(t, nil, "topic", "create", "orders", b, "--partitions", "3", "--if-not-exists")
	if !strings.Contains(r.stdout, "already exists") {
		t.Errorf("create --if-not-exists: stdout %q", r.stdout)
	}

	r = mustRun(t, nil, "topic", "list", b)
	if want := "audit\norders\n"; r.stdout != want {
		t.Errorf("list: stdout %q, want %q", r.stdout, want)
	}

	r = mustRun(t, nil, "topic", "describe", "orders", b)
	for _, re := range []string{
		`(?m)^Topic: orders\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1$`,
		`(?m)^\s+Partition: 0\s+Leader: \d+\s+LeaderEpoch: \d+\s+Replicas: \d+\s+Isr: \d+$`,
		`(?m)^\s+Partition: 2\s`,
		`(?m)^Configs:$`,
		`(?m)^\s+cleanup.policy=compact$`,
		`(?m)^\s+retention.ms=86400000$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe: output does not match %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "segment.bytes") {
		t.Errorf("describe without --all-configs shows a default config:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "topic", "describe", "orders", b, "--all-configs")
	for _, re := range []string{
		`(?m)^\s+cleanup.policy=compact\s+DYNAMIC_TOPIC_CONFIG$`,
		`(?m)^\s+segment.bytes=\d+\s+(DEFAULT_CONFIG|STATIC_BROKER_CONFIG)$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe --all-configs: output does not match %s:\n%s", re, r.stdout)
		}
	}
	r = mustRun(t, nil, "topic", "describe", "audit", b)
	if !strings.Contains(r.stdout, "Configs: (none set on the topic)") {
		t.Errorf("describe audit: %s", r.stdout)
	}

	r = run(t, nil, "topic", "describe", "nope", b)
	if r.err == nil || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe missing topic: err %v, want UNKNOWN_TOPIC_OR_PARTITION", r.err)
	}

	r = mustRun(t, nil, "topic", "delete", "orders", b)
	if want := "Deleted topic orders.\n"; r.stdout != want {
		t.Errorf("delete: stdout %q, want %q", r.stdout, want)
	}
	r = run(t, nil, "topic", "delete", "orders", b)
	if r.err == nil || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("delete twice: err %v, want UNKNOWN_TOPIC_OR_PARTITION", r.err)
	}
	mustRun(t, nil, "topic", "delete", "orders", b, "--if-exists")
	r = mustRun(t, nil, "topic", "list", b)
	if want := "audit\n"; r.stdout != want {
		t.Errorf("list after delete: stdout %q, want %q", r.stdout, want)
	}
}

func TestTopicCreateErrors(t *testing.T) { eachBackend(t, testTopicCreateErrors) }

func testTopicCreateErrors(t *testing.T, addr string) {
	mustRun(t, nil, "topic", "create", "taken", "--brokers", addr, "-p", "1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad config syntax", []string{"--partitions", "1", "--config", "novalue"}, "want key=value"},
		{"too many replicas", []string{"--partitions", "1", "--replication-factor", "5"}, "INVALID_REPLICATION_FACTOR"},
		{"zero partitions", []string{"--partitions", "0"}, "INVALID_PARTITIONS"},
		{"exists", []string{"--partitions", "1"}, "TOPIC_ALREADY_EXISTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "t"
			if tc.name == "exists" {
				name = "taken"
			}
			args := append([]string{"topic", "create", name, "--brokers", addr}, tc.args...)
			r := run(t, nil, args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", r.err, tc.want)
			}
		})
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	addr := startFake(t)
	t.Setenv(brokersEnv, addr)
	mustRun(t, nil, "topic", "create", "env-topic", "-p", "1")
	r := mustRun(t, nil, "topic", "list")
	if r.stdout != "env-topic\n" {
		t.Errorf("list via %s: stdout %q", brokersEnv, r.stdout)
	}
	// The flag wins over the environment.
	t.Setenv(brokersEnv, "127.0.0.1:1")
	r = mustRun(t, nil, "topic", "list", "--brokers", addr)
	if r.stdout != "env-topic\n" {
		t.Errorf("list with --brokers: stdout %q", r.stdout)
	}
}

// TestTopicCreateServerMessage: a refused CreateTopics prints the error
// code's name and the broker's own message, not kerr's generic description
// of the code ("Number of partitions is below 1." for a count above
// log.partitions.max).
func TestTopicCreateServerMessage(t *testing.T) {
	addr := startSamsa(t, "")
	r := run(t, nil, "topic", "create", "big", "--brokers", addr, "--partitions", "2147483647")
	if r.err == nil {
		t.Fatal("topic create --partitions 2147483647 succeeded")
	}
	got := r.err.Error()
	if !strings.HasPrefix(got, "create topic big: INVALID_PARTITIONS: ") || !strings.Contains(got, "log.partitions.max") ||
		strings.Contains(got, kerr.InvalidPartitions.Description) {
		t.Fatalf("err %q, want INVALID_PARTITIONS with the broker's message naming log.partitions.max and not %q", got, kerr.InvalidPartitions.Description)
	}
}

func TestKafkaError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		msg  string
		want string
	}{
		{kerr.InvalidPartitions, "over log.partitions.max", "INVALID_PARTITIONS: over log.partitions.max"},
		{kerr.InvalidPartitions, "", kerr.InvalidPartitions.Error()},
		{errors.New("dial tcp: refused"), "", "dial tcp: refused"},
		{errors.New("dial tcp: refused"), "m", "dial tcp: refused (m)"},
		{fmt.Errorf("topic t: %w", kerr.InvalidPartitions), "over the limit", "topic t: " + kerr.InvalidPartitions.Error() + " (over the limit)"},
	} {
		if got := kafkaError(tc.err, tc.msg); got != tc.want {
			t.Errorf("kafkaError(%v, %q) = %q, want %q", tc.err, tc.msg, got, tc.want)
		}
	}
	err := fmt.Errorf("creating topic t: %w", &responseError{kerr.InvalidPartitions, "m"})
	if !errors.Is(err, kerr.InvalidPartitions) || err.Error() != "creating topic t: INVALID_PARTITIONS: m" {
		t.Errorf("responseError: %v (errors.Is %v)", err, errors.Is(err, kerr.InvalidPartitions))
	}
}
