package broker

import (
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
)

// TestFlushConfig: flush.messages and flush.ms reach storage per topic,
// from the topic, the broker properties or Kafka's defaults, with
// log.flush.scheduler.interval.ms as flush.ms's last synonym.
func TestFlushConfig(t *testing.T) {
	for _, tc := range []struct {
		name         string
		props, topic map[string]string
		messages     int64
		interval     time.Duration
	}{
		{"defaults: never", nil, nil, 0, 0},
		{"topic", nil, map[string]string{"flush.messages": "1", "flush.ms": "250"}, 1, 250 * time.Millisecond},
		{"topic flush.ms=0", nil, map[string]string{"flush.ms": "0"}, 0, time.Nanosecond},
		{"topic Long.MAX_VALUE", nil, map[string]string{"flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807"}, 0, 0},
		{"broker", map[string]string{"log.flush.interval.messages": "10", "log.flush.interval.ms": "1000"}, nil, 10, time.Second},
		{"topic over broker", map[string]string{"log.flush.interval.ms": "1000"}, map[string]string{"flush.ms": "5"}, 0, 5 * time.Millisecond},
		{"scheduler interval", map[string]string{"log.flush.scheduler.interval.ms": "3000"}, nil, 0, 3 * time.Second},
		{"log.flush.interval.ms over scheduler", map[string]string{"log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "1000"}, nil, 0, time.Second},
		{"topic over scheduler", map[string]string{"log.flush.scheduler.interval.ms": "3000"}, map[string]string{"flush.ms": "7"}, 0, 7 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := config.Parse(tc.props)
			if err != nil {
				t.Fatal(err)
			}
			b := &Broker{node: node}
			cfg := b.logConfig(&metadata.Topic{Configs: tc.topic}).Storage
			if cfg.FlushIntervalMessages != tc.messages || cfg.FlushInterval != tc.interval {
				t.Fatalf("flush.messages %d, flush.ms %v; want %d, %v", cfg.FlushIntervalMessages, cfg.FlushInterval, tc.messages, tc.interval)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
