package config

import (
	"errors"
	"strings"
	"testing"
)

func TestMode(t *testing.T) {
	for name, want := range map[string]DynamicMode{
		"log.retention.ms":                    ClusterWide,
		"log.retention.hours":                 ReadOnly, // not the first synonym, as in Kafka
		"log.roll.ms":                         ClusterWide,
		"log.roll.hours":                      ReadOnly,
		"message.max.bytes":                   ClusterWide,
		"min.insync.replicas":                 ClusterWide,
		"unclean.leader.election.enable":      ClusterWide,
		"log.cleaner.io.max.bytes.per.second": ClusterWide,
		"follower.replication.throttled.rate": ClusterWide,
		"max.connections.per.ip.overrides":    ClusterWide,
		"log.flush.scheduler.interval.ms":     ReadOnly,
		"log.dirs":                            ReadOnly,
		"broker.rack":                         ReadOnly,
		"replica.selector.class":              ReadOnly,
		"no.such.config":                      ReadOnly,
	} {
		if got := Mode(name); got != want {
			t.Errorf("Mode(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestCheckDynamic(t *testing.T) {
	for _, tc := range []struct {
		set       map[string]string
		perBroker bool
		err       error
		msg       string
	}{
		{map[string]string{"log.retention.ms": "1000", "log.cleanup.policy": "compact,delete"}, false, nil, ""},
		{map[string]string{"log.dirs": "/x", "node.id": "3"}, true, ErrNotDynamic, "Cannot update these configs dynamically: [log.dirs, node.id]"},
		{map[string]string{"bogus": "1"}, false, ErrNotDynamic, "unknown broker configs: [bogus]"},
		{map[string]string{"message.max.bytes": "x"}, true, ErrInvalidDynamic, "message.max.bytes"},
		{map[string]string{"log.segment.bytes": "3000000000"}, false, ErrInvalidDynamic, "log.segment.bytes"},
		{map[string]string{"log.cleanup.policy": "shred"}, false, ErrInvalidDynamic, "log.cleanup.policy"},
		{map[string]string{"num.io.threads": "0"}, false, ErrInvalidDynamic, "num.io.threads"},
		{map[string]string{"log.cleaner.io.max.bytes.per.second": "-1"}, false, ErrInvalidDynamic, "log.cleaner.io.max.bytes.per.second"},
	} {
		err := CheckDynamic(tc.set, tc.perBroker)
		if !errors.Is(err, tc.err) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("%v: %v, want %v with %q", tc.set, err, tc.err, tc.msg)
		}
	}
}

// WithDynamic applies Kafka's precedence: per broker over the cluster
// default over the properties, and resolves the synonyms on the merged
// properties.
func TestWithDynamic(t *testing.T) {
	n, err := Parse(map[string]string{"log.retention.hours": "1", "message.max.bytes": "5000", "leader.replication.throttled.rate": "100"})
	if err != nil {
		t.Fatal(err)
	}
	if same, _ := n.WithDynamic(nil, map[string]string{}); same != n {
		t.Error("no dynamic configs: a new Node")
	}
	d, err := n.WithDynamic(
		map[string]string{"message.max.bytes": "6000", "log.retention.ms": "1234", "leader.replication.throttled.rate": "200", "log.dirs": "/ignored"},
		map[string]string{"message.max.bytes": "7000"})
	if err != nil {
		t.Fatal(err)
	}
	if d.MessageMaxBytes != 7000 || d.Topic["max.message.bytes"] != "7000" {
		t.Errorf("message.max.bytes %d (topic default %s), want the per-broker 7000", d.MessageMaxBytes, d.Topic["max.message.bytes"])
	}
	if d.Topic["retention.ms"] != "1234" {
		t.Errorf("retention.ms %s, want the dynamic log.retention.ms 1234 over the static log.retention.hours", d.Topic["retention.ms"])
	}
	if d.LeaderReplicationThrottledRate != 200 || d.LogDirs[0] == "/ignored" {
		t.Errorf("throttle %d, log dirs %v", d.LeaderReplicationThrottledRate, d.LogDirs)
	}
	if n.MessageMaxBytes != 5000 || n.Topic["retention.ms"] != "3600000" {
		t.Errorf("the static node changed: %d %s", n.MessageMaxBytes, n.Topic["retention.ms"])
	}
	if _, err := n.WithDynamic(map[string]string{"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"}, nil); err == nil {
		t.Error("min.compaction.lag.ms above max.compaction.lag.ms accepted")
	}
}
