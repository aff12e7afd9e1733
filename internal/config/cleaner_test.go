package config

import (
	"math"
	"strings"
	"testing"
)

func TestLogCleanerIOMaxBytesPerSecond(t *testing.T) {
	const key = "log.cleaner.io.max.bytes.per.second"
	for _, tc := range []struct {
		value string
		want  float64 // 0: an error
	}{
		{"", math.MaxFloat64}, // Kafka's default, Double.MAX_VALUE
		{"1.7976931348623157E308", math.MaxFloat64},
		{"1048576", 1 << 20},
		{"2.5e6", 2.5e6},
		{"0", 0},
		{"-1", 0},
		{"NaN", 0},
		{"fast", 0},
	} {
		props := map[string]string{}
		if tc.value != "" {
			props[key] = tc.value
		}
		n, err := Parse(props)
		switch {
		case tc.want == 0 && (err == nil || !strings.Contains(err.Error(), key)):
			t.Errorf("%s=%s: %v, want an error", key, tc.value, err)
		case tc.want != 0 && (err != nil || n.LogCleanerIOMaxBytesPerSecond != tc.want):
			t.Errorf("%s=%s: %v %v, want %v", key, tc.value, n.LogCleanerIOMaxBytesPerSecond, err, tc.want)
		}
	}
}
