package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDefaults(t *testing.T) {
	n, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.NodeID != 1 || n.NumPartitions != 1 || !n.AutoCreateTopicsEnable || n.MessageMaxBytes != 1048588 {
		t.Fatalf("defaults: %+v", n)
	}
	if len(n.Listeners) != 2 || n.Listeners[0].String() != "PLAINTEXT://localhost:9092" || n.Listeners[1].Name != "CONTROLLER" {
		t.Fatalf("listeners: %v", n.Listeners)
	}
	if got := n.LogDirs; len(got) != 1 || got[0] != "./samsa-data" {
		t.Fatalf("log dirs: %v", got)
	}
	if n.Topic["segment.bytes"] != "1073741824" || n.Topic["retention.ms"] != "604800000" {
		t.Fatalf("topic defaults: %v", n.Topic)
	}
}

func TestParseSynonyms(t *testing.T) {
	n, err := Parse(map[string]string{"log.retention.hours": "2", "log.segment.bytes": "1024", "log.roll.ms": "5000", "log.dir": "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Topic["retention.ms"] != "7200000" || n.Topic["segment.bytes"] != "1024" || n.Topic["segment.ms"] != "5000" {
		t.Fatalf("topic: %v", n.Topic)
	}
	if n.LogDirs[0] != "/x" || n.BrokerSource("retention.ms") != "log.retention.hours" {
		t.Fatalf("dirs %v source %q", n.LogDirs, n.BrokerSource("retention.ms"))
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"log.segmnt.bytes": "1"}, "unknown config log.segmnt.bytes"},
		{map[string]string{"node.id": "x"}, "node.id"},
		{map[string]string{"listeners": "PLAINTEXT:/localhost:1"}, "listeners"},
		{map[string]string{"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"},
		{map[string]string{"log.segment.bytes": "-5"}, "log.segment.bytes"},
		{map[string]string{"listeners": "CONTROLLER://localhost:1"}, "no broker listener"},
	} {
		_, err := Parse(tc.props)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want error with %q", tc.props, err, tc.want)
		}
	}
}

func TestReadProperties(t *testing.T) {
	p, err := ReadProperties(strings.NewReader("# c\n! c\nnode.id=3\nlisteners = PLAINTEXT://a:1,\\\n  CONTROLLER://a:2\nlog.dirs: /d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p["node.id"] != "3" || p["listeners"] != "PLAINTEXT://a:1,CONTROLLER://a:2" || p["log.dirs"] != "/d" {
		t.Fatalf("%q", p)
	}
}

func TestBrokerSynonymsAndDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		synonyms []string
		def      string
		hasDef   bool
	}{
		{"log.retention.ms", []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}, "", false},
		{"log.retention.minutes", []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}, "", false},
		{"log.retention.hours", []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}, "168", true},
		{"log.roll.ms", []string{"log.roll.ms", "log.roll.hours"}, "", false},
		{"log.roll.hours", []string{"log.roll.ms", "log.roll.hours"}, "168", true},
		{"log.roll.jitter.hours", []string{"log.roll.jitter.ms", "log.roll.jitter.hours"}, "0", true},
		{"log.flush.interval.ms", []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}, "", false},
		{"log.segment.bytes", []string{"log.segment.bytes"}, "1073741824", true},
		{"message.max.bytes", []string{"message.max.bytes"}, "1048588", true},
		{"num.partitions", []string{"num.partitions"}, "1", true},
		{"no.such.property", []string{"no.such.property"}, "", false},
	} {
		if got := BrokerSynonyms(tc.name); !slices.Equal(got, tc.synonyms) {
			t.Errorf("BrokerSynonyms(%s) = %v, want %v", tc.name, got, tc.synonyms)
		}
		if def, ok := BrokerDefault(tc.name); def != tc.def || ok != tc.hasDef {
			t.Errorf("BrokerDefault(%s) = %q %t, want %q %t", tc.name, def, ok, tc.def, tc.hasDef)
		}
	}
}
