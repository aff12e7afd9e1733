package config

import (
	"testing"
	"time"
)

// TestConnectionsMaxIdle: milliseconds; zero and any negative value keep
// idle connections open. A large negative value was multiplied past
// int64 and came out as a positive timeout: Long.MIN_VALUE+1 closed every
// connection after 1 ms.
func TestConnectionsMaxIdle(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", 10 * time.Minute, false},
		{"3000", 3 * time.Second, false},
		{"0", 0, false},
		{"-1", -time.Millisecond, false},
		{"-10000000000000", -time.Millisecond, false},
		{"-9223372036854775807", -time.Millisecond, false},
		{"-9223372036854775808", -time.Millisecond, false},
		{"9223372036854775807", 9223372036854 * time.Millisecond, false},
		{"soon", 0, true},
	} {
		props := map[string]string{}
		if tc.value != "" {
			props["connections.max.idle.ms"] = tc.value
		}
		n, err := Parse(props)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%q: error %v, want error %t", tc.value, err, tc.wantErr)
		}
		if err == nil && n.ConnectionsMaxIdle != tc.want {
			t.Errorf("%q: %v, want %v", tc.value, n.ConnectionsMaxIdle, tc.want)
		}
	}
}
