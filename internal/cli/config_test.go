package cli

import (
	"strings"
	"testing"
)

// TestConfig alters and describes broker, broker-logger and topic configs
// with samsa config, as kafka-configs --bootstrap-server would.
func TestConfig(t *testing.T) {
	addr := startSamsa(t, "")
	b := "--brokers=" + addr
	r := mustRun(t, nil, "config", "alter", b, "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=3600000,log.cleanup.policy=[compact,delete]")
	if want := "Completed updating default config for brokers in the cluster.\n"; r.stdout != want {
		t.Errorf("alter default: %q, want %q", r.stdout, want)
	}
	mustRun(t, nil, "config", "alter", b, "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.retention.ms=7200000")
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "brokers", "--entity-name", "1")
	for _, want := range []string{
		"Dynamic configs for broker 1 are:\n",
		"  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe broker 1: no %q in\n%s", want, r.stdout)
		}
	}
	// As kafka-configs: a broker's describe lists what is set on it, not
	// the static configs nor the cluster-wide defaults it inherits.
	if strings.Contains(r.stdout, "num.partitions") || strings.Contains(r.stdout, "log.cleanup.policy") {
		t.Errorf("describe without --all lists configs not set on broker 1:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "brokers", "--entity-name", "1", "--all")
	for _, want := range []string{
		"  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}\n",
		"  log.cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe --all: no %q in\n%s", want, r.stdout)
		}
	}
	mustRun(t, nil, "config", "alter", b, "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms,log.cleanup.policy")
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "brokers", "--entity-default")
	if r.stdout != "Default configs for brokers in the cluster are:\n" {
		t.Errorf("describe defaults after deleting them:\n%s", r.stdout)
	}
	r = run(t, nil, "config", "alter", b, "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.dirs=/x")
	if r.err == nil || !strings.Contains(r.err.Error(), "INVALID_REQUEST") || !strings.Contains(r.err.Error(), "Cannot update these configs dynamically: [log.dirs]") {
		t.Errorf("read-only config: %v", r.err)
	}

	mustRun(t, nil, "config", "alter", b, "--entity-type", "broker-loggers", "--entity-name", "1", "--add-config", "replica=DEBUG")
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "broker-loggers", "--entity-name", "1")
	if !strings.Contains(r.stdout, "  replica=DEBUG sensitive=false synonyms={}\n") || !strings.Contains(r.stdout, "  root=") {
		t.Errorf("describe broker-loggers:\n%s", r.stdout)
	}

	mustRun(t, nil, "topic", "create", "events", b, "-p", "1")
	mustRun(t, nil, "config", "alter", b, "--entity-type", "topics", "--entity-name", "events", "--add-config", "retention.ms=1000")
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "topics", "--entity-name", "events")
	if !strings.Contains(r.stdout, "Dynamic configs for topic events are:\n  retention.ms=1000 ") {
		t.Errorf("describe topic:\n%s", r.stdout)
	}
	mustRun(t, nil, "config", "alter", b, "--entity-type", "brokers", "--entity-default", "--add-config", "log.segment.bytes=2000000")
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "topics", "--entity-name", "events")
	if strings.Contains(r.stdout, "segment.bytes") {
		t.Errorf("describe topic lists a cluster-wide default it inherits:\n%s", r.stdout)
	}

	// Group configs: --group as kafka-configs.
	r = mustRun(t, nil, "config", "alter", b, "--group", "orders", "--add-config", "consumer.session.timeout.ms=50000,share.delivery.count.limit=3")
	if !strings.Contains(r.stdout, "Completed updating config for group orders.") {
		t.Errorf("alter group:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "config", "describe", b, "--entity-type", "groups", "--entity-name", "orders")
	if !strings.Contains(r.stdout, "Dynamic configs for group orders are:\n  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}\n  share.delivery.count.limit=3 ") ||
		strings.Contains(r.stdout, "share.isolation.level") {
		t.Errorf("describe group:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "config", "describe", b, "--group", "orders", "--all")
	if !strings.Contains(r.stdout, "  share.isolation.level=read_uncommitted ") {
		t.Errorf("describe group --all:\n%s", r.stdout)
	}
	if r := run(t, nil, "config", "alter", b, "--group", "orders", "--add-config", "consumer.session.timeout.ms=1"); r.err == nil ||
		!strings.Contains(r.err.Error(), "must be greater than or equal to group.consumer.min.session.timeout.ms") {
		t.Errorf("out of bounds: %v", r.err)
	}
}

func TestConfigArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"describe"}, "--entity-type is required"},
		{[]string{"describe", "--entity-type", "users", "--entity-name", "x"}, "want brokers, topics, broker-loggers or groups"},
		{[]string{"describe", "--group", "g", "--entity-type", "topics"}, "give --group or --entity-type and --entity-name, not both"},
		{[]string{"describe", "--entity-type", "brokers"}, "give --entity-name ID or --entity-default"},
		{[]string{"describe", "--entity-type", "brokers", "--entity-name", "x"}, "a broker id is an integer"},
		{[]string{"describe", "--entity-type", "topics", "--entity-default"}, "for --entity-type brokers only"},
		{[]string{"alter", "--entity-type", "brokers", "--entity-default"}, "nothing to change"},
		{[]string{"alter", "--entity-type", "brokers", "--entity-default", "--add-config", "a=[1,2"}, "unbalanced ["},
		{[]string{"alter", "--entity-type", "brokers", "--entity-default", "--add-config", "a"}, "want key=value"},
	} {
		r := run(t, nil, append(append([]string{"config"}, tc.args...), "--brokers=127.0.0.1:1")...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, r.err, tc.want)
		}
	}
}
