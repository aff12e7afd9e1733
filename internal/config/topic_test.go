package config

import (
	"strings"
	"testing"
)

// TestBrokerCompactionLagConflict: log.cleaner.min.compaction.lag.ms above
// log.cleaner.max.compaction.lag.ms is refused at startup, as Kafka's
// LogManager does (LogConfig.validateBrokerLogConfigValues).
func TestBrokerCompactionLagConflict(t *testing.T) {
	for _, tc := range []struct {
		min, max string
		ok       bool
	}{
		{"2000", "1000", false},
		{"1000", "1000", true},
		{"1000", "", true}, // max defaults to Long.MAX_VALUE
		{"", "1", true},    // min defaults to 0
	} {
		props := map[string]string{}
		if tc.min != "" {
			props["log.cleaner.min.compaction.lag.ms"] = tc.min
		}
		if tc.max != "" {
			props["log.cleaner.max.compaction.lag.ms"] = tc.max
		}
		_, err := Parse(props)
		if tc.ok != (err == nil) {
			t.Errorf("min %q max %q: %v, want ok %v", tc.min, tc.max, err, tc.ok)
		}
	}
}

// TestTopicParsers: the broker reads topic configs with the parsers that
// validate them, so a value is either what validation accepted or an
// error naming the config (it read 0 silently before).
func TestTopicParsers(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        int64
		err         bool
	}{
		{"segment.bytes", "1048576", 1048576, false},
		{"retention.ms", "-1", -1, false},
		{"flush.ms", "9223372036854775807", 9223372036854775807, false},
		{"segment.bytes", "4294967296", 0, true}, // INT: 32 bits
		{"segment.bytes", "1 MB", 0, true},
		{"segment.bytes", "13", 0, true}, // below its minimum
		{"cleanup.policy", "delete", 0, true},
		{"no.such.config", "1", 0, true},
	} {
		got, err := TopicInt(tc.name, tc.value)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("TopicInt(%s, %q) = %d, %v", tc.name, tc.value, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.name) {
			t.Errorf("TopicInt(%s, %q): error %q does not name the config", tc.name, tc.value, err)
		}
	}
	if f, err := TopicRatio("min.cleanable.dirty.ratio", "0.25"); err != nil || f != 0.25 {
		t.Errorf("TopicRatio 0.25 = %v, %v", f, err)
	}
	if _, err := TopicRatio("min.cleanable.dirty.ratio", "2"); err == nil {
		t.Error("TopicRatio 2: no error")
	}
	for _, tc := range []struct {
		value        string
		del, compact bool
		err          bool
	}{
		{"delete", true, false, false},
		{"compact", false, true, false},
		{"compact, delete", true, true, false},
		{"compacted", false, false, true},
		{"", false, false, true},
	} {
		del, compact, err := CleanupPolicy(tc.value)
		if del != tc.del || compact != tc.compact || (err != nil) != tc.err {
			t.Errorf("CleanupPolicy(%q) = %v %v %v", tc.value, del, compact, err)
		}
	}
}
