package samsa_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterGroupConfig sends IncrementalAlterConfigs for GROUP resource group
// with ops (name, value; a nil value deletes) through r and returns the
// resource's error code and message.
func alterGroupConfig(t *testing.T, r kmsg.Requestor, group string, ops ...[2]*string) (int16, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rs := kmsg.NewIncrementalAlterConfigsRequestResource()
	rs.ResourceType, rs.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, op := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = *op[0], op[1]
		if op[1] == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		rs.Configs = append(rs.Configs, c)
	}
	req.Resources = append(req.Resources, rs)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode, orNull(resp.Resources[0].ErrorMessage)
}

func set(name, value string) [2]*string { return [2]*string{&name, &value} }
func del(name string) [2]*string        { return [2]*string{&name, nil} }

// describeGroupConfig describes GROUP resource group through r: the
// configs by name.
func describeGroupConfig(t *testing.T, r kmsg.Requestor, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	out, err := tryDescribeGroupConfig(r, group)
	if err != nil {
		t.Fatalf("describe group %s: %v", group, err)
	}
	return out
}

func tryDescribeGroupConfig(r kmsg.Requestor, group string) (map[string]kmsg.DescribeConfigsResponseResourceConfig, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rs := kmsg.NewDescribeConfigsRequestResource()
	rs.ResourceType, rs.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rs)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out, nil
}

// Group configs (IncrementalAlterConfigs and DescribeConfigs on GROUP
// resources): set through one node, seen by every node of a 3-node cluster
// as GROUP_CONFIG, used by the coordinator (the heartbeat interval a
// KIP-848 member is told), refused outside the broker's bounds with
// INVALID_CONFIG and Kafka's message, deleted back to the broker's value,
// and kept across a restart of a node.
func TestGroupConfigs(t *testing.T) {
	props := kip848Props()
	props["offsets.topic.num.partitions"] = "3"
	c := startCluster(t, 3, props)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// cl.Broker(id) answers "unknown broker" until the client has loaded
	// metadata naming the node: load it first.
	mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, cl); err != nil {
		t.Fatal(err)
	}
	mcancel()
	if code, msg := alterGroupConfig(t, cl.Broker(2), "g1",
		set("consumer.heartbeat.interval.ms", "700"), set("consumer.session.timeout.ms", "4000"),
		set("share.auto.offset.reset", "by_duration:PT1H30M"), set("share.isolation.level", "read_committed"),
		set("share.delivery.count.limit", "3"), set("share.record.lock.duration.ms", "20000")); code != 0 {
		t.Fatalf("alter: %v %s", kerr.ErrorForCode(code), msg)
	}
	for id := 1; id <= 3; id++ {
		waitFor(t, 10*time.Second, "group config on node "+strconv.Itoa(id), func() bool {
			return orNull(describeGroupConfig(t, cl.Broker(id), "g1")["consumer.session.timeout.ms"].Value) == "4000"
		})
		got := describeGroupConfig(t, cl.Broker(id), "g1")
		for name, want := range map[string]string{"consumer.heartbeat.interval.ms": "700", "share.isolation.level": "read_committed",
			"share.delivery.count.limit": "3", "share.auto.offset.reset": "by_duration:PT1H30M"} {
			if c := got[name]; orNull(c.Value) != want || c.Source != kmsg.ConfigSourceGroupConfig {
				t.Errorf("node %d %s = %s (%v), want %s GROUP_CONFIG", id, name, orNull(c.Value), c.Source, want)
			}
		}
		if c := got["share.heartbeat.interval.ms"]; orNull(c.Value) != "5000" || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("node %d share.heartbeat.interval.ms = %s (%v), want the broker's 5000 DEFAULT_CONFIG", id, orNull(c.Value), c.Source)
		}
		if len(got) != 9 { // 8 of Kafka 4.2 and KIP-1191's errors.deadletterqueue.topic.name
			t.Errorf("node %d: %d group configs, want 9", id, len(got))
		}
	}

	// The coordinator tells a member of g1 the group's heartbeat interval,
	// and the broker's to a member of another group.
	admin := cl
	createTopic(t, admin, "gc", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp := rawConsumerJoin(ctx, t, cl, "g1", "gc"); resp.HeartbeatIntervalMillis != 700 {
		t.Errorf("heartbeat interval in g1: %d ms, want the group's 700", resp.HeartbeatIntervalMillis)
	}
	if resp := rawConsumerJoin(ctx, t, cl, "g2", "gc"); resp.HeartbeatIntervalMillis != 200 {
		t.Errorf("heartbeat interval in g2: %d ms, want the broker's 200", resp.HeartbeatIntervalMillis)
	}

	// Refused: INVALID_CONFIG with Kafka's message, nothing changed.
	for _, tc := range []struct {
		op   [2]*string
		want string
	}{
		{set("consumer.session.timeout.ms", "500"), "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{set("consumer.session.timeout.ms", "70000"), "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"},
		{set("consumer.heartbeat.interval.ms", "5000"), "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"},
		{set("share.delivery.count.limit", "11"), "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"},
		{set("share.record.lock.duration.ms", "1000"), "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{set("share.isolation.level", "serializable"), "share.isolation.level"},
		{set("share.auto.offset.reset", "by_duration:-PT1H"), "share.auto.offset.reset"},
		{set("share.session.timeout.ms", "forty"), "Not a number"},
		{set("session.timeout.ms", "10000"), "Unknown group config name: session.timeout.ms"},
	} {
		code, msg := alterGroupConfig(t, cl, "g1", tc.op)
		if code != kerr.InvalidConfig.Code || !strings.Contains(msg, tc.want) {
			t.Errorf("%s=%s: %v %q, want INVALID_CONFIG with %q", *tc.op[0], *tc.op[1], kerr.ErrorForCode(code), msg, tc.want)
		}
	}
	if code, _ := alterGroupConfig(t, cl, "", set("consumer.session.timeout.ms", "4000")); code != kerr.InvalidRequest.Code {
		t.Errorf("empty group name: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if got := describeGroupConfig(t, cl.Broker(1), "g1")["consumer.session.timeout.ms"]; orNull(got.Value) != "4000" {
		t.Errorf("after refused changes: %s, want 4000", orNull(got.Value))
	}

	// Deleting an override brings back the broker's value; a restarted
	// node reads the others from the metadata log.
	if code, msg := alterGroupConfig(t, cl, "g1", del("consumer.heartbeat.interval.ms")); code != 0 {
		t.Fatalf("delete: %v %s", kerr.ErrorForCode(code), msg)
	}
	if err := c.StopNode(3); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := c.StartNode(sctx, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "group configs on the restarted node", func() bool {
		got, err := tryDescribeGroupConfig(cl.Broker(3), "g1")
		if err != nil {
			return false
		}
		hb := got["consumer.heartbeat.interval.ms"]
		return orNull(got["consumer.session.timeout.ms"].Value) == "4000" && orNull(hb.Value) == "200" && hb.Source == kmsg.ConfigSourceDefaultConfig
	})
}
