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

// Group configs (Kafka's GroupConfig): names, types, bounds from the
// broker's properties, and the values in effect capped to the current
// bounds.
func TestGroupConfigs(t *testing.T) {
	n, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.GroupShareRecordLockDuration != 30*time.Second || n.GroupShareDeliveryCountLimit != 5 || n.GroupShareSessionTimeout != 45*time.Second {
		t.Fatalf("share defaults: %+v", n)
	}
	for _, tc := range []struct {
		set  map[string]string
		want string // "" for valid
	}{
		{map[string]string{"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}, ""},
		{map[string]string{"share.auto.offset.reset": "by_duration:P1DT2H3M4.5S", "share.isolation.level": "read_committed"}, ""},
		{map[string]string{"share.auto.offset.reset": "EARLIEST"}, ""},
		{map[string]string{"share.delivery.count.limit": "10", "share.record.lock.duration.ms": "15000"}, ""},
		{map[string]string{"consumer.session.timeout.ms": "44999"}, "must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{map[string]string{"consumer.heartbeat.interval.ms": "15001"}, "must be less than or equal to group.consumer.max.heartbeat.interval.ms"},
		{map[string]string{"share.session.timeout.ms": "60001"}, "group.share.max.session.timeout.ms"},
		{map[string]string{"share.heartbeat.interval.ms": "4999"}, "group.share.min.heartbeat.interval.ms"},
		{map[string]string{"share.record.lock.duration.ms": "999"}, "Value must be at least 1000"},
		{map[string]string{"share.delivery.count.limit": "1"}, "Value must be at least 2"},
		{map[string]string{"share.auto.offset.reset": "by_duration:PT"}, "share.auto.offset.reset"},
		{map[string]string{"share.auto.offset.reset": "none"}, "share.auto.offset.reset"},
		{map[string]string{"share.isolation.level": "READ_COMMITTED"}, "share.isolation.level"},
		{map[string]string{"consumer.session.timeout.ms": "1.5"}, "Not a number"},
		{map[string]string{"group.share.delivery.count.limit": "3"}, "Unknown group config name: group.share.delivery.count.limit"},
	} {
		err := n.CheckGroupConfigs(tc.set)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckGroupConfigs(%v) = %v, want %q", tc.set, err, tc.want)
		}
	}
	// Within tighter bounds set later, values are capped; bad values are
	// ignored.
	n2, err := Parse(map[string]string{"group.consumer.max.session.timeout.ms": "50000", "group.share.max.delivery.count.limit": "6"})
	if err != nil {
		t.Fatal(err)
	}
	g := n2.GroupConfig(map[string]string{"consumer.session.timeout.ms": "60000", "share.delivery.count.limit": "9",
		"consumer.heartbeat.interval.ms": "x", "share.auto.offset.reset": "by_duration:PT90M", "share.isolation.level": "read_committed"})
	if g.ConsumerSessionTimeout != 50*time.Second || g.ShareDeliveryCountLimit != 6 || g.ConsumerHeartbeatInterval != 5*time.Second ||
		g.ShareAutoOffsetReset != "by_duration" || g.ShareAutoOffsetResetBy != 90*time.Minute || !g.ShareReadCommitted {
		t.Errorf("GroupConfig = %+v", g)
	}
	if d := n.GroupConfig(nil); d.ShareAutoOffsetReset != "latest" || d.ShareReadCommitted || d.ShareRecordLockDuration != 30*time.Second {
		t.Errorf("defaults: %+v", d)
	}
	if _, err := Parse(map[string]string{"group.share.delivery.count.limit": "7", "group.share.max.delivery.count.limit": "6"}); err == nil {
		t.Error("group.share.delivery.count.limit above its max accepted")
	}
	// Kafka's ShareGroupConfig and ShareCoordinatorConfig bounds.
	if n.GroupSharePartitionMaxRecordLocks != 2000 || n.ShareCoordinatorSnapshotUpdateRecordsPerSnapshot != 500 {
		t.Errorf("defaults: max record locks %d, updates per snapshot %d", n.GroupSharePartitionMaxRecordLocks, n.ShareCoordinatorSnapshotUpdateRecordsPerSnapshot)
	}
	for v, ok := range map[string]bool{"99": false, "100": true, "10000": true, "10001": false} {
		if _, err := Parse(map[string]string{"group.share.partition.max.record.locks": v}); (err == nil) != ok {
			t.Errorf("group.share.partition.max.record.locks=%s: %v", v, err)
		}
	}
	for v, ok := range map[string]bool{"-1": false, "0": true, "100000": true} {
		if _, err := Parse(map[string]string{"share.coordinator.snapshot.update.records.per.snapshot": v}); (err == nil) != ok {
			t.Errorf("share.coordinator.snapshot.update.records.per.snapshot=%s: %v", v, err)
		}
	}
}
