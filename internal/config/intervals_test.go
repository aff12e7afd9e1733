package config

import (
	"errors"
	"strconv"
	"testing"
)

// TestIntervalBounds checks the lower bounds of the node's periods,
// expirations and timeouts against Kafka's validators: atLeast(1) where
// zero means nothing sensible (a check that never waits, state that expires
// at once), atLeast(0) or none where zero is meaningful.
func TestIntervalBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		min  int64 // smallest value Kafka accepts
	}{
		{"log.retention.check.interval.ms", 1},
		{"leader.imbalance.check.interval.seconds", 1},
		{"offsets.retention.minutes", 1},
		{"transaction.max.timeout.ms", 1},
		{"transactional.id.expiration.ms", 1},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", 1},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", 1},
		{"producer.id.expiration.ms", 1},
		{"log.flush.scheduler.interval.ms", 1},
		{"log.cleaner.backoff.ms", 0},
		{"log.flush.offset.checkpoint.interval.ms", 0},
		{"group.initial.rebalance.delay.ms", 0},
		{"broker.heartbeat.interval.ms", 0},
		{"replica.lag.time.max.ms", 0},
		{"replica.high.watermark.checkpoint.interval.ms", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int64{tc.min - 1, tc.min, tc.min + 1} {
				_, err := Parse(map[string]string{tc.name: strconv.FormatInt(v, 10)})
				if v < tc.min {
					if !errors.Is(err, errBadValue) {
						t.Fatalf("%s=%d: %v, want a bad value", tc.name, v, err)
					}
				} else if err != nil {
					t.Fatalf("%s=%d: %v", tc.name, v, err)
				}
			}
		})
	}
}
