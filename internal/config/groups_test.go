package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The properties of KIP-848 consumer groups: Kafka's names and defaults,
// the assignors by name or Kafka's class name, and the bounds checked.
func TestConsumerGroupProperties(t *testing.T) {
	n, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.GroupConsumerSessionTimeout != 45*time.Second || n.GroupConsumerHeartbeatInterval != 5*time.Second ||
		n.GroupConsumerMaxSessionTimeout != time.Minute || n.GroupConsumerMaxHeartbeatInterval != 15*time.Second ||
		n.GroupConsumerMaxSize != 1<<31-1 || !slices.Equal(n.GroupConsumerAssignors, []string{"uniform", "range"}) {
		t.Fatalf("defaults: %+v", n)
	}
	n, err = Parse(map[string]string{"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform"})
	if err != nil || !slices.Equal(n.GroupConsumerAssignors, []string{"range", "uniform"}) {
		t.Fatalf("assignors by class name: %v %v", n.GroupConsumerAssignors, err)
	}
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"group.consumer.assignors": "sticky"}, "group.consumer.assignors"},
		{map[string]string{"group.consumer.session.timeout.ms": "1000"}, "group.consumer.session.timeout.ms"},
		{map[string]string{"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms"},
		{map[string]string{"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "2000",
			"group.consumer.min.heartbeat.interval.ms": "1000", "group.consumer.heartbeat.interval.ms": "3000"}, "below group.consumer.session.timeout.ms"},
	} {
		if _, err := Parse(tc.props); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want error with %q", tc.props, err, tc.want)
		}
	}
}
