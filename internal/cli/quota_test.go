package cli

import (
	"strings"
	"testing"
)

func TestQuotaAlterDescribe(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	mustRun(t, nil, "quota", "alter", b, "--user", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
	mustRun(t, nil, "quota", "alter", b, "--user", "alice", "--client-id", "app", "--add-config", "request_percentage=50")
	mustRun(t, nil, "quota", "alter", b, "--client-default", "--add-config", "controller_mutation_rate=10")
	mustRun(t, nil, "quota", "alter", b, "--ip", "10.0.0.1", "--add-config", "connection_creation_rate=5")

	r := mustRun(t, nil, "quota", "describe", b)
	want := "client-id 'app', user 'alice': request_percentage=50\n" +
		"client-id <default>: controller_mutation_rate=10\n" +
		"ip '10.0.0.1': connection_creation_rate=5\n" +
		"user 'alice': consumer_byte_rate=2097152,producer_byte_rate=1048576\n"
	if r.stdout != want {
		t.Errorf("describe:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustRun(t, nil, "quota", "describe", b, "--user", "alice", "--strict")
	if strings.Count(r.stdout, "\n") != 1 || strings.Contains(r.stdout, "app") {
		t.Errorf("describe --user alice --strict:\n%s", r.stdout)
	}
	mustRun(t, nil, "quota", "alter", b, "--user", "alice", "--delete-config", "consumer_byte_rate")
	r = mustRun(t, nil, "quota", "describe", b, "--user", "alice", "--strict")
	if r.stdout != "user 'alice': producer_byte_rate=1048576\n" {
		t.Errorf("after --delete-config:\n%s", r.stdout)
	}
	if r := run(t, nil, "quota", "alter", b, "--ip", "10.0.0.1", "--add-config", "producer_byte_rate=5"); r.err == nil || !strings.Contains(r.err.Error(), "INVALID_REQUEST") {
		t.Errorf("producer_byte_rate for an ip: %v", r.err)
	}
}
