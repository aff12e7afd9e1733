package config

import "testing"

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
