package samsa_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configOf returns config name of resource in rcs, failing the test when
// the resource has an error or lacks it.
func configOf(t *testing.T, rcs kadm.ResourceConfigs, resource, name string) kadm.Config {
	t.Helper()
	rc, err := rcs.On(resource, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("%s: %v %v", resource, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("%s: no config %s", resource, name)
	return kadm.Config{}
}

// alterErr is the error of the one resource of an alter-configs response.
func alterErr(t *testing.T, resps kadm.AlterConfigsResponses, err error) error {
	t.Helper()
	if err != nil {
		t.Fatalf("alter configs: %v", err)
	}
	if len(resps) != 1 {
		t.Fatalf("%d resources in the response", len(resps))
	}
	return resps[0].Err
}

// produceSize produces one record of size bytes to topic and returns the
// produce error.
func produceSize(cl *kgo.Client, topic string, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := make([]byte, size)
	rand.Read(v) // incompressible: the batch stays over size
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr()
}

// TestDynamicBrokerConfigs alters broker configs with kadm on a single
// node, as kafka-configs --entity-type brokers does: a cluster-wide
// default and a per-broker value of message.max.bytes take effect at once
// on a topic without its own max.message.bytes, in Kafka's precedence and
// with its DescribeConfigs sources and synonyms; read-only configs and bad
// values are INVALID_REQUEST; validate_only changes nothing; AlterConfigs
// replaces a resource's set; and the configs survive a restart.
func TestDynamicBrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{"log.retention.hours": "1"})
	cl := newClient(t, n, kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordRetries(0))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, "plain", 1, nil)
	createTopic(t, cl, "own", 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("100000")})
	if err := produceSize(cl, "plain", 5000); err != nil {
		t.Fatalf("5000 bytes before any dynamic config: %v", err)
	}

	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: kmsg.StringPtr(v)} }
	del := func(k string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k} }

	// The cluster-wide default (no broker named).
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "2000"), set("log.retention.ms", "3600001")})
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("cluster default: %v %s", err, resps[0].ErrMessage)
	}
	if err := produceSize(cl, "plain", 5000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("5000 bytes over a cluster default of 2000: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := produceSize(cl, "own", 5000); err != nil {
		t.Errorf("5000 bytes to a topic with its own max.message.bytes: %v", err)
	}
	topics, err := adm.DescribeTopicConfigs(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, topics, "plain", "max.message.bytes"); orNull(c.Value) != "2000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("plain max.message.bytes = %s (%v), want 2000 DYNAMIC_DEFAULT_BROKER_CONFIG", orNull(c.Value), c.Source)
	}
	// log.retention.ms (dynamic) wins over log.retention.hours (static),
	// as in Kafka, where the merged properties resolve the synonyms.
	if c := configOf(t, topics, "plain", "retention.ms"); orNull(c.Value) != "3600001" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("plain retention.ms = %s (%v), want 3600001 DYNAMIC_DEFAULT_BROKER_CONFIG", orNull(c.Value), c.Source)
	}

	// This broker's own value wins over the default.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "6000")}, 1)
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("per broker: %v", err)
	}
	if err := produceSize(cl, "plain", 5000); err != nil {
		t.Errorf("5000 bytes under a per-broker 6000: %v", err)
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := configOf(t, brokers, "1", "message.max.bytes")
	var syns []string
	for _, s := range c.Synonyms {
		syns = append(syns, s.Key+"="+orNull(s.Value)+"/"+s.Source.String())
	}
	want := "message.max.bytes=6000/DYNAMIC_BROKER_CONFIG message.max.bytes=2000/DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588/DEFAULT_CONFIG"
	if orNull(c.Value) != "6000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || strings.Join(syns, " ") != want {
		t.Errorf("broker 1 message.max.bytes = %s (%v) %v; want 6000 DYNAMIC_BROKER_CONFIG %s", orNull(c.Value), c.Source, syns, want)
	}
	defaults, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster-wide resource lists only the default's own synonyms, as
	// Kafka's createBrokerConfigEntry(perBrokerConfig = false).
	if c := configOf(t, defaults, "", "message.max.bytes"); orNull(c.Value) != "2000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(c.Synonyms) != 1 {
		t.Errorf("cluster default message.max.bytes = %s (%v), %d synonyms; want 2000 DYNAMIC_DEFAULT_BROKER_CONFIG, 1", orNull(c.Value), c.Source, len(c.Synonyms))
	}
	// Read-only means "cannot be updated dynamically" on both resources,
	// as in createBrokerConfigEntry (kadm does not show the flag).
	for _, tc := range []struct {
		resource, name string
		readOnly       bool
	}{
		{"1", "message.max.bytes", false}, {"1", "log.dirs", true}, {"1", "log.retention.hours", true},
		{"", "message.max.bytes", false},
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, tc.resource, []string{tc.name}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			t.Fatalf("describe %s of broker %q: %v %+v", tc.name, tc.resource, err, resp)
		}
		if got := resp.Resources[0].Configs[0].ReadOnly; got != tc.readOnly {
			t.Errorf("broker %q %s read-only = %t, want %t", tc.resource, tc.name, got, tc.readOnly)
		}
	}

	// Read-only configs, unknown ones and bad values: INVALID_REQUEST,
	// nothing changes.
	for _, tc := range []struct {
		cfg    kadm.AlterConfig
		broker []int32
		msg    string
	}{
		{set("log.dirs", "/elsewhere"), []int32{1}, "Cannot update these configs dynamically: [log.dirs]"},
		{set("log.retention.hours", "2"), nil, "Cannot update these configs dynamically: [log.retention.hours]"},
		{set("no.such.config", "1"), nil, "no.such.config"},
		{set("message.max.bytes", "lots"), []int32{1}, "message.max.bytes"},
		{set("log.cleanup.policy", "shred"), nil, "log.cleanup.policy"},
	} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{tc.cfg}, tc.broker...)
		err = alterErr(t, resps, err)
		if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(resps[0].ErrMessage, tc.msg) {
			t.Errorf("%s=%s: %v %q, want INVALID_REQUEST naming %s", tc.cfg.Name, *tc.cfg.Value, err, resps[0].ErrMessage, tc.msg)
		}
	}
	// validate_only checks and changes nothing.
	resps, err = adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "100")}, 1)
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if err := produceSize(cl, "plain", 5000); err != nil {
		t.Errorf("after a validate-only change: %v", err)
	}
	// Another broker's id, sent to this one: INVALID_REQUEST.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "100")}, 7)
	if err == nil && len(resps) == 1 && resps[0].Err == nil {
		t.Errorf("altering broker 7 on broker 1 succeeded")
	}

	// Restart: the configs are in the metadata log.
	n.Close()
	n = startNode(t, dir, map[string]string{"log.retention.hours": "1"})
	cl = newClient(t, n, kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordRetries(0))
	adm = kadm.NewClient(cl)
	if err := produceSize(cl, "plain", 7000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("7000 bytes after a restart with a per-broker 6000: %v, want MESSAGE_TOO_LARGE", err)
	}
	brokers, err = adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, brokers, "1", "message.max.bytes"); orNull(c.Value) != "6000" {
		t.Errorf("broker 1 message.max.bytes after a restart = %s, want 6000", orNull(c.Value))
	}

	// APPEND to a list config starts from the value in effect; on a
	// config that is not a list it is INVALID_CONFIG.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kmsg.StringPtr("compact")}})
	if err := alterErr(t, resps, err); err != nil {
		t.Fatal(err)
	}
	topics, err = adm.DescribeTopicConfigs(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, topics, "plain", "cleanup.policy"); orNull(c.Value) != "delete,compact" {
		t.Errorf("cleanup.policy after appending compact to the default: %s", orNull(c.Value))
	}
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "message.max.bytes", Value: kmsg.StringPtr("1")}})
	if err := alterErr(t, resps, err); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("APPEND to message.max.bytes: %v, want INVALID_CONFIG", err)
	}

	// Deleting the per-broker value falls back to the default; AlterConfigs
	// (the whole set) on the default removes what it does not list.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{del("message.max.bytes")}, 1)
	if err := alterErr(t, resps, err); err != nil {
		t.Fatal(err)
	}
	if err := produceSize(cl, "plain", 5000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("5000 bytes after deleting the per-broker value: %v, want MESSAGE_TOO_LARGE", err)
	}
	resps, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{set("log.cleaner.backoff.ms", "1000")})
	if err := alterErr(t, resps, err); err != nil {
		t.Fatal(err)
	}
	if err := produceSize(cl, "plain", 5000); err != nil {
		t.Errorf("5000 bytes after AlterConfigs dropped message.max.bytes: %v", err)
	}
	defaults, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := defaults.On("", nil); len(rc.Configs) != 1 || rc.Configs[0].Key != "log.cleaner.backoff.ms" {
		t.Errorf("cluster defaults after AlterConfigs: %v", rc.Configs)
	}
}

// TestBrokerLoggers describes and changes log levels (BROKER_LOGGER,
// KIP-412) as kafka-configs --entity-type broker-loggers does.
func TestBrokerLoggers(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	ctx := context.Background()
	describe := func() map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe loggers: %v %v", err, kerr.ErrorForCode(resp.Resources[0].ErrorCode))
		}
		out := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
				t.Errorf("logger %s source %v", c.Name, c.Source)
			}
			out[c.Name] = orNull(c.Value)
		}
		return out
	}
	alter := func(validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBrokerLogger, "1", ops
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode, orNull(resp.Resources[0].ErrorMessage)
	}
	op := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o, name, value
		return c
	}
	before := describe()
	if before["root"] == "" || before["replica"] != before["root"] {
		t.Fatalf("loggers: %v", before)
	}
	if code, msg := alter(false, op(kmsg.IncrementalAlterConfigOpSet, "replica", kmsg.StringPtr("TRACE"))); code != 0 {
		t.Fatalf("set replica TRACE: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := describe(); got["replica"] != "TRACE" || got["storage"] != before["storage"] {
		t.Errorf("after set: replica %s, storage %s", got["replica"], got["storage"])
	}
	if code, _ := alter(true, op(kmsg.IncrementalAlterConfigOpSet, "root", kmsg.StringPtr("ERROR"))); code != 0 || describe()["root"] != before["root"] {
		t.Errorf("validate-only set of root: %v, root now %s", kerr.ErrorForCode(code), describe()["root"])
	}
	if code, _ := alter(false, op(kmsg.IncrementalAlterConfigOpSet, "root", kmsg.StringPtr("WARN"))); code != 0 {
		t.Fatalf("set root WARN: %v", kerr.ErrorForCode(code))
	}
	if code, _ := alter(false, op(kmsg.IncrementalAlterConfigOpDelete, "replica", nil)); code != 0 {
		t.Fatalf("delete replica: %v", kerr.ErrorForCode(code))
	}
	if got := describe(); got["replica"] != "WARN" || got["root"] != "WARN" {
		t.Errorf("after delete: replica %s, root %s; want WARN (root's)", got["replica"], got["root"])
	}
	for _, tc := range []struct {
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
	}{
		{op(kmsg.IncrementalAlterConfigOpSet, "replica", kmsg.StringPtr("LOUD")), kerr.InvalidConfig.Code},
		{op(kmsg.IncrementalAlterConfigOpSet, "no.such.logger", kmsg.StringPtr("INFO")), kerr.InvalidConfig.Code},
		{op(kmsg.IncrementalAlterConfigOpDelete, "root", nil), kerr.InvalidRequest.Code},
		{op(kmsg.IncrementalAlterConfigOpAppend, "replica", kmsg.StringPtr("INFO")), kerr.InvalidRequest.Code},
	} {
		if code, msg := alter(false, tc.op); code != tc.code {
			t.Errorf("%v %s: %v %s, want %v", tc.op.Op, tc.op.Name, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(tc.code))
		}
	}
}

// TestDynamicBrokerConfigsCluster alters broker configs on a 3-node
// cluster: each broker's own value goes to that broker (kadm sends a
// broker resource to the broker it names; another broker answers
// INVALID_REQUEST), whichever node receives it, the active controller or
// not; the cluster-wide default reaches every node (a 3-partition topic
// led by all three rejects a batch over it) and the per-broker values
// survive a node's restart.
func TestDynamicBrokerConfigsCluster(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"default.replication.factor": "3"})
	cl, adm := clusterClients(t, c, kgo.RecordRetries(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, "spread"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	leaders := map[int32]bool{}
	waitFor(t, 20*time.Second, "leaders on all three nodes", func() bool {
		clear(leaders)
		for _, p := range describe(t, adm, "spread").Partitions {
			leaders[p.Leader] = p.Leader >= 0
		}
		return len(leaders) == 3 && leaders[1] && leaders[2] && leaders[3]
	})
	// Per broker: log.cleaner.backoff.ms=1000+id on each.
	for id := int32(1); id <= 3; id++ {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr(strconv.Itoa(1000 + int(id)))}}, id)
		if err := alterErr(t, resps, err); err != nil {
			t.Fatalf("broker %d: %v %s", id, err, resps[0].ErrMessage)
		}
	}
	// The default, from whichever broker kadm picks.
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: kmsg.StringPtr("2000")}})
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("cluster default: %v %s", err, resps[0].ErrMessage)
	}
	checkBroker := func(id int32, want string) {
		t.Helper()
		waitFor(t, 10*time.Second, "broker "+strconv.Itoa(int(id))+"'s configs", func() bool {
			rcs, err := adm.DescribeBrokerConfigs(ctx, id)
			if err != nil {
				return false
			}
			name := strconv.Itoa(int(id))
			return orNull(configOf(t, rcs, name, "log.cleaner.backoff.ms").Value) == want &&
				orNull(configOf(t, rcs, name, "message.max.bytes").Value) == "2000"
		})
	}
	for id := int32(1); id <= 3; id++ {
		checkBroker(id, strconv.Itoa(1000+int(id)))
	}
	for p := int32(0); p < 3; p++ {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v := make([]byte, 5000)
		rand.Read(v)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "spread", Partition: p, Value: v}).FirstErr()
		cancel()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("partition %d: 5000 bytes over the cluster default of 2000: %v", p, err)
		}
	}
	// Broker 2's config sent to broker 1.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "log.cleaner.backoff.ms", kmsg.StringPtr("5")
	r.Configs = append(r.Configs, rc)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker 2's config on broker 1: %v %v", err, kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}
	// A restarted node reads its dynamic configs from the metadata log.
	if err := c.StopNode(2); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.StartNode(sctx, 2); err != nil {
		t.Fatal(err)
	}
	checkBroker(2, "1002")
}

// TestDynamicBrokerConfigsLibrdkafka alters and describes broker configs
// with librdkafka's admin client (confluent-kafka's AdminClient), on a
// single node and on a 3-node cluster: a per-broker value, a cluster-wide
// default (set with kadm: librdkafka refuses an empty resource name), their
// DescribeConfigs sources, and a read-only config refused.
func TestDynamicBrokerConfigsLibrdkafka(t *testing.T) {
	if !havePythonKafka(t) {
		t.Skip("no confluent-kafka")
	}
	script := `
import sys, time
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka import KafkaException
a = AdminClient({'bootstrap.servers': sys.argv[1]})
broker = sys.argv[2]
for r, f in a.alter_configs([ConfigResource('broker', broker, set_config={'log.cleaner.backoff.ms': '4321'})]).items():
    f.result(timeout=20)
try:
    for r, f in a.alter_configs([ConfigResource('broker', broker, set_config={'log.dirs': '/x'})]).items():
        f.result(timeout=20)
    print('readonly accepted')
except KafkaException as e:
    print('readonly', e.args[0].name())
# The broker applies the change when its metadata catches up with the
# controller's commit, as in Kafka: describe until it shows.
deadline = time.time() + 20
while True:
    for r, f in a.describe_configs([ConfigResource('broker', broker)]).items():
        cs = f.result(timeout=20)
    if (cs['log.cleaner.backoff.ms'].value == '4321' and cs['log.retention.ms'].value == '3600001') or time.time() > deadline:
        break
    time.sleep(0.1)
for k in ('log.cleaner.backoff.ms', 'log.retention.ms'):
    print(k, cs[k].value, cs[k].source)
`
	run := func(t *testing.T, bootstrap string, broker int32) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resps, err := kadm.NewClient(cl).AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("3600001")}})
		if err := alterErr(t, resps, err); err != nil {
			t.Fatal(err)
		}
		// Only stdout is compared: librdkafka logs to stderr at times
		// (a BGQUEUE line when the admin client closes).
		out, stderr, err := stdoutOnly(exec.Command(python3, "-c", script, bootstrap, strconv.Itoa(int(broker))))
		if err != nil {
			t.Fatalf("confluent-kafka admin: %v\n%s%s", err, out, stderr)
		}
		got := strings.TrimSpace(string(out))
		want := "readonly INVALID_REQUEST\nlog.cleaner.backoff.ms 4321 " + strconv.Itoa(int(kmsg.ConfigSourceDynamicBrokerConfig)) +
			"\nlog.retention.ms 3600001 " + strconv.Itoa(int(kmsg.ConfigSourceDynamicDefaultBrokerConfig))
		if got != want {
			t.Errorf("confluent-kafka admin:\n%s\nwant\n%s\nstderr:\n%s", got, want, stderr)
		}
	}
	t.Run("single", func(t *testing.T) {
		n := startNode(t, t.TempDir(), nil)
		run(t, n.Addr(), 1)
	})
	t.Run("cluster", func(t *testing.T) {
		c := startCluster(t, 3, nil)
		run(t, c.Addrs()[0], 3)
	})
}

// TestDynamicConnectionLimits changes max.connections.per.ip as a
// cluster-wide dynamic broker config: a connection past the new limit is
// closed at once, and raising it again lets one in, without a restart.
func TestDynamicConnectionLimits(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	admin := dial(t, n.Addr()) // the one connection besides the probes
	corr := int32(0)
	alter := func(value string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeBroker
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "max.connections.per.ip", kmsg.StringPtr(value)
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		corr++
		resp := roundTrip(t, admin, req, corr).(*kmsg.IncrementalAlterConfigsResponse)
		if code := resp.Resources[0].ErrorCode; code != 0 {
			t.Fatalf("max.connections.per.ip=%s: %v", value, kerr.ErrorForCode(code))
		}
	}
	// probe opens a connection and reports whether it is served, then
	// closes it.
	probe := func() bool {
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return apiVersions(c, 5*time.Second) == nil
	}
	held := dial(t, n.Addr()) // with admin: two from 127.0.0.1
	if err := apiVersions(held, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !probe() {
		t.Fatal("a third connection refused before any limit")
	}
	alter("2")
	// The node applies the change when its metadata image has it.
	waitFor(t, 10*time.Second, "max.connections.per.ip=2 refusing a third connection", func() bool { return !probe() })
	alter("3")
	waitFor(t, 10*time.Second, "max.connections.per.ip=3 serving a third connection", probe)
}
