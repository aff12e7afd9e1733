package config

import (
	"testing"
	"time"
)

// TestLogFlushSchedulerInterval: Kafka's default, Long.MAX_VALUE, is zero
// (no fixed check period); values are milliseconds of at least 1.
func TestLogFlushSchedulerInterval(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"9223372036854775807", 0, false},
		{"2000", 2 * time.Second, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"soon", 0, true},
	} {
		props := map[string]string{}
		if tc.value != "" {
			props["log.flush.scheduler.interval.ms"] = tc.value
		}
		n, err := Parse(props)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%q: error %v, want error %t", tc.value, err, tc.wantErr)
		}
		if err == nil && n.LogFlushSchedulerInterval != tc.want {
			t.Fatalf("%q: %v, want %v", tc.value, n.LogFlushSchedulerInterval, tc.want)
		}
	}
}
