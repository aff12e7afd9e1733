package samsa_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

func startNode(t *testing.T, dir string, props map[string]string) *samsa.Node {
	t.Helper()
	return startConfig(t, samsa.Config{Dir: dir, Properties: props})
}

// startConfig starts a node of cfg, closed at the end of the test.
func startConfig(t *testing.T, cfg samsa.Config) *samsa.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func newClient(t *testing.T, n *samsa.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
	// CreateTopics answers once the topic is committed, as Kafka's does;
	// the broker hosts each partition once its log is made, a moment later
	// (NOT_LEADER_OR_FOLLOWER before, which clients retry and the raw
	// requests of some tests do not): wait until every one answers.
	waitHosted(t, cl, topic, partitions)
}

// waitHosted waits until every partition of topic answers ListOffsets.
func waitHosted(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	waitFor(t, 10*time.Second, "every partition of "+topic+" hosted", func() bool {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || offs.Error() != nil {
			return false
		}
		n := 0
		offs.Each(func(kadm.ListedOffset) { n++ })
		return n == int(partitions)
	})
}

// produceN produces n records keyed key-i with value value-i and returns
// them in produce order.
func produceN(t *testing.T, cl *kgo.Client, topic string, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d-%0100d", i, i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return recs
}

// consumeAll reads want records from the start of topic.
func consumeAll(t *testing.T, n *samsa.Node, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), want, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// checkRoundTrip checks that got holds exactly the produced records with
// per-partition order and offsets as acknowledged.
func checkRoundTrip(t *testing.T, produced, got []*kgo.Record) {
	t.Helper()
	if len(got) != len(produced) {
		t.Fatalf("consumed %d records, produced %d", len(got), len(produced))
	}
	type po struct {
		p int32
		o int64
	}
	byPos := make(map[po]*kgo.Record, len(produced))
	for _, r := range produced {
		byPos[po{r.Partition, r.Offset}] = r
	}
	last := map[int32]int64{}
	for _, r := range got {
		want, ok := byPos[po{r.Partition, r.Offset}]
		if !ok {
			t.Fatalf("unexpected record at %d/%d", r.Partition, r.Offset)
		}
		if string(want.Key) != string(r.Key) || string(want.Value) != string(r.Value) {
			t.Fatalf("record at %d/%d: got %q, want %q", r.Partition, r.Offset, r.Key, want.Key)
		}
		if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
	}
}

func TestRoundTrip100k(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{"log.segment.bytes": "1048576"})
	cl := newClient(t, n, kgo.ProducerLinger(5*time.Millisecond))
	createTopic(t, cl, "rt", 6, nil)
	produced := produceN(t, cl, "rt", 100_000)
	checkRoundTrip(t, produced, consumeAll(t, n, "rt", len(produced)))

	// A clean restart keeps everything, and the high-watermarks were
	// checkpointed.
	n.Close()
	hw, err := os.ReadFile(filepath.Join(dir, "replication-offset-checkpoint"))
	if err != nil || !strings.Contains(string(hw), "\nrt 0 ") {
		t.Fatalf("replication-offset-checkpoint: %v %q", err, hw)
	}
	n2 := startNode(t, dir, nil)
	checkRoundTrip(t, produced, consumeAll(t, n2, "rt", len(produced)))

	// And appends continue at the log end.
	cl2 := newClient(t, n2)
	more := produceN(t, cl2, "rt", 10)
	for _, r := range more {
		if r.Offset < 1 {
			t.Fatalf("offset after restart: %d", r.Offset)
		}
	}
}

func TestListOffsets(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "lo", 1, nil)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "lo", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil || start.Error() != nil {
		t.Fatal(err, start.Error())
	}
	end, _ := adm.ListEndOffsets(ctx, "lo")
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 {
		t.Fatalf("start %d", o.Offset)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 10 {
		t.Fatalf("end %d", o.Offset)
	}
	for _, tc := range []struct {
		ts   time.Time
		want int64
	}{
		{base.Add(-time.Minute), 0},
		{base, 0},
		{base.Add(90 * time.Second), 2},
		{base.Add(9 * time.Minute), 9},
		{base.Add(10 * time.Minute), -1},
	} {
		lo, err := adm.ListOffsetsAfterMilli(ctx, tc.ts.UnixMilli(), "lo")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("lo", 0)
		want := tc.want
		if want == -1 {
			want = 10 // kadm maps "none" to the end offset
		}
		if o.Offset != want && !(tc.want == -1 && o.Offset == -1) {
			t.Errorf("offset after %v: %d, want %d", tc.ts.Sub(base), o.Offset, tc.want)
		}
	}
	// Max timestamp (KIP-734) through a raw request.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.Offset != 9 || p.Timestamp != base.Add(9*time.Minute).UnixMilli() {
		t.Fatalf("max timestamp: offset %d ts %d", p.Offset, p.Timestamp)
	}
}

func TestProduceErrorsPerPartition(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"message.max.bytes": "2000"})
	cl := newClient(t, n, kgo.RecordRetries(1), kgo.ProducerBatchMaxBytes(1<<20))
	createTopic(t, cl, "big", 2, nil)
	ctx := context.Background()
	small := &kgo.Record{Topic: "big", Partition: 0, Value: []byte("ok")}
	// Random bytes, so that no client-side compression shrinks the batch.
	big := make([]byte, 5000)
	rand.Read(big)
	large := &kgo.Record{Topic: "big", Partition: 1, Value: big}
	cl2 := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	res := cl2.ProduceSync(ctx, small, large)
	errs := map[*kgo.Record]error{}
	for _, r := range res {
		errs[r.Record] = r.Err
	}
	if errs[small] != nil {
		t.Fatalf("small record failed: %v", errs[small])
	}
	if !kerrIs(errs[large], kerr.MessageTooLarge) {
		t.Fatalf("large record: %v, want MESSAGE_TOO_LARGE", errs[large])
	}
}

func kerrIs(err error, want *kerr.Error) bool { return errors.Is(err, want) }

func TestAdminTopicsAndConfigs(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.retention.hours": "1"})
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, "cfg", 3, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	// Creating again fails with TOPIC_ALREADY_EXISTS.
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, "cfg")
	if !kerrIs(err, kerr.TopicAlreadyExists) || !kerrIs(resp.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create again: %v %v", err, resp.Err)
	}
	// Invalid config.
	resp, _ = adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("x")}, "bad")
	if !kerrIs(resp.Err, kerr.InvalidConfig) {
		t.Fatalf("invalid config: %v", resp.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("cfg", nil)
	found := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		found[c.Key] = c
	}
	if c := found["cleanup.policy"]; c.MaybeValue() != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy: %+v", c)
	}
	// log.retention.hours sets the value, but the source follows Kafka:
	// log.retention.ms, the head of the synonyms, is not set, so no
	// synonym is listed and the source is DEFAULT_CONFIG
	// (TestDescribeConfigsSynonyms).
	if c := found["retention.ms"]; c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDefaultConfig || len(c.Synonyms) != 0 {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := found["segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes: %+v", c)
	}
	// Incremental alter, then it persists across a restart.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("1000")}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatal(err, ar[0].Err)
	}
	cp, err := adm.CreatePartitions(ctx, 2, "cfg")
	if err != nil || cp["cfg"].Err != nil {
		t.Fatal(err, cp["cfg"].Err)
	}
	td, err := adm.ListTopics(ctx, "cfg")
	if err != nil || len(td["cfg"].Partitions) != 5 {
		t.Fatalf("partitions after CreatePartitions: %v %d", err, len(td["cfg"].Partitions))
	}
	dr, err := adm.DeleteTopics(ctx, "cfg")
	if err != nil || dr["cfg"].Err != nil {
		t.Fatal(err, dr["cfg"].Err)
	}
	td, _ = adm.ListTopics(ctx)
	if td.Has("cfg") {
		t.Fatal("topic still listed after delete")
	}
}

func TestAutoCreateTopic(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"num.partitions": "3"})
	cl := newClient(t, n, kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "auto", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(context.Background(), "auto")
	if err != nil || len(td["auto"].Partitions) != 3 {
		t.Fatalf("auto topic: %v %+v", err, td["auto"])
	}
}

func TestMinInsyncReplicas(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "isr", 1, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")})
	ctx := context.Background()
	all := newClient(t, n, kgo.RecordRetries(1), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := all.ProduceSync(ctx, &kgo.Record{Topic: "isr", Value: []byte("x")}).FirstErr(); !kerrIs(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with one replica: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	one := newClient(t, n, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := one.ProduceSync(ctx, &kgo.Record{Topic: "isr", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("acks=1: %v", err)
	}
}

// TestCompactionLagConflict: min.compaction.lag.ms above
// max.compaction.lag.ms is refused with INVALID_CONFIG on CreateTopics,
// IncrementalAlterConfigs and AlterConfigs (validate-only too), the two
// taken from the topic's configs merged over the broker defaults, as
// Kafka's LogConfig.validateValues does.
func TestCompactionLagConflict(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.cleaner.max.compaction.lag.ms": "1000"})
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := kmsg.StringPtr
	for _, tc := range []struct {
		name    string
		configs map[string]*string
		wantErr bool
	}{
		{"min above max", map[string]*string{"min.compaction.lag.ms": s("100"), "max.compaction.lag.ms": s("50")}, true},
		{"min above the broker's max", map[string]*string{"min.compaction.lag.ms": s("2000")}, true},
		{"max below the broker's min (0)", map[string]*string{"max.compaction.lag.ms": s("1")}, false},
		{"min below the broker's max", map[string]*string{"min.compaction.lag.ms": s("1000")}, false},
		{"min equal to max", map[string]*string{"min.compaction.lag.ms": s("5000"), "max.compaction.lag.ms": s("5000")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := strings.ReplaceAll(tc.name, " ", "-")
			topic = strings.NewReplacer("'", "", "(", "", ")", "").Replace(topic)
			resp, err := adm.CreateTopic(ctx, 1, 1, tc.configs, topic)
			if err == nil {
				err = resp.Err
			}
			if tc.wantErr {
				if !kerrIs(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "conflict topic config setting min.compaction.lag.ms") {
					t.Fatalf("create: %v %q, want INVALID_CONFIG", err, resp.ErrMessage)
				}
			} else if err != nil {
				t.Fatalf("create: %v %q", err, resp.ErrMessage)
			}
		})
	}

	createTopic(t, cl, "lags", 1, map[string]*string{"max.compaction.lag.ms": s("10000")})
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: s(v)} }
	for _, tc := range []struct {
		name    string
		alter   func(context.Context, []kadm.AlterConfig, ...string) (kadm.AlterConfigsResponses, error)
		ops     []kadm.AlterConfig
		wantErr bool
	}{
		{"incremental: min above the topic's max", adm.AlterTopicConfigs, []kadm.AlterConfig{set("min.compaction.lag.ms", "20000")}, true},
		{"incremental validate-only: min above the topic's max", adm.ValidateAlterTopicConfigs, []kadm.AlterConfig{set("min.compaction.lag.ms", "20000")}, true},
		{"incremental: min below the topic's max", adm.AlterTopicConfigs, []kadm.AlterConfig{set("min.compaction.lag.ms", "5000")}, false},
		// Deleting max leaves the broker's 1000 under min 5000.
		{"incremental: delete max", adm.AlterTopicConfigs, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.compaction.lag.ms"}}, true},
		// AlterConfigs replaces every config: max goes back to 1000.
		{"alter: min alone", adm.AlterTopicConfigsState, []kadm.AlterConfig{set("min.compaction.lag.ms", "5000")}, true},
		{"alter validate-only: min alone", adm.ValidateAlterTopicConfigsState, []kadm.AlterConfig{set("min.compaction.lag.ms", "5000")}, true},
		{"alter: both", adm.AlterTopicConfigsState, []kadm.AlterConfig{set("min.compaction.lag.ms", "5000"), set("max.compaction.lag.ms", "6000")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resps, err := tc.alter(ctx, tc.ops, "lags")
			if err != nil {
				t.Fatal(err)
			}
			r := resps[0]
			if tc.wantErr {
				if !kerrIs(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, "conflict topic config setting min.compaction.lag.ms") {
					t.Fatalf("alter: %v %q, want INVALID_CONFIG", r.Err, r.ErrMessage)
				}
			} else if r.Err != nil {
				t.Fatalf("alter: %v %q", r.Err, r.ErrMessage)
			}
		})
	}
	if c := topicConfigValue(t, cl, "lags", "min.compaction.lag.ms"); c.Value == nil || *c.Value != "5000" {
		t.Fatalf("min.compaction.lag.ms %v after the refused changes", c.Value)
	}
	if c := topicConfigValue(t, cl, "lags", "max.compaction.lag.ms"); c.Value == nil || *c.Value != "6000" {
		t.Fatalf("max.compaction.lag.ms %v after the refused changes", c.Value)
	}
}

// TestAlterConfigsChecks: what AlterConfigs and IncrementalAlterConfigs
// refuse, with Kafka's error codes (ConfigAdminManager.preprocess,
// ConfigurationControlManager, LogConfig): a resource named twice, a config
// named twice, or a null value other than a DELETE is INVALID_REQUEST; an
// INT config past 32 bits or a value below its minimum is INVALID_CONFIG;
// retention.bytes takes any long; deleting a config nobody set, even an
// unknown one, changes nothing. Nothing refused changes the topic.
func TestAlterConfigsChecks(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	createTopic(t, cl, "checks", 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type cfg struct {
		name  string
		value *string
		op    kmsg.IncrementalAlterConfigOp
	}
	s := kmsg.StringPtr
	incremental := func(twice bool, cs ...cfg) (*kerr.Error, string) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "checks"
		for _, c := range cs {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value, rc.Op = c.name, c.value, c.op
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		if twice {
			req.Resources = append(req.Resources, r)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range resp.Resources[1:] {
			if rr.ErrorCode != resp.Resources[0].ErrorCode {
				t.Fatalf("resources answered differently: %+v", resp.Resources)
			}
		}
		rr := resp.Resources[0]
		return kerr.TypedErrorForCode(rr.ErrorCode), deref(rr.ErrorMessage)
	}
	legacy := func(cs ...cfg) (*kerr.Error, string) {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "checks"
		for _, c := range cs {
			rc := kmsg.NewAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value = c.name, c.value
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		rr := resp.Resources[0]
		return kerr.TypedErrorForCode(rr.ErrorCode), deref(rr.ErrorMessage)
	}
	set := func(k, v string) cfg { return cfg{name: k, value: s(v)} }
	del := func(k string) cfg { return cfg{name: k, op: kmsg.IncrementalAlterConfigOpDelete} }
	for _, tc := range []struct {
		name string
		send func() (*kerr.Error, string)
		want *kerr.Error
	}{
		{"resource twice", func() (*kerr.Error, string) { return incremental(true, set("retention.ms", "5")) }, kerr.InvalidRequest},
		{"config twice", func() (*kerr.Error, string) {
			return incremental(false, set("retention.ms", "5"), set("retention.ms", "6"))
		}, kerr.InvalidRequest},
		{"null SET", func() (*kerr.Error, string) { return incremental(false, cfg{name: "retention.ms"}) }, kerr.InvalidRequest},
		{"null APPEND", func() (*kerr.Error, string) {
			return incremental(false, cfg{name: "cleanup.policy", op: kmsg.IncrementalAlterConfigOpAppend})
		}, kerr.InvalidRequest},
		{"segment.bytes past 32 bits", func() (*kerr.Error, string) { return incremental(false, set("segment.bytes", "3000000000")) }, kerr.InvalidConfig},
		{"max.message.bytes past 32 bits", func() (*kerr.Error, string) {
			return incremental(false, set("max.message.bytes", "4294967296"))
		}, kerr.InvalidConfig},
		{"retention.ms -2", func() (*kerr.Error, string) { return incremental(false, set("retention.ms", "-2")) }, kerr.InvalidConfig},
		{"unknown config", func() (*kerr.Error, string) { return incremental(false, set("no.such.config", "1")) }, kerr.InvalidConfig},
		{"legacy config twice", func() (*kerr.Error, string) { return legacy(set("retention.ms", "5"), set("retention.ms", "6")) }, kerr.InvalidRequest},
		{"legacy null value", func() (*kerr.Error, string) { return legacy(set("retention.ms", "5"), cfg{name: "segment.ms"}) }, kerr.InvalidRequest},
		{"legacy segment.index.bytes past 32 bits", func() (*kerr.Error, string) {
			return legacy(set("retention.ms", "1000"), set("segment.index.bytes", "2147483648"))
		}, kerr.InvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := tc.send()
			if got != tc.want {
				t.Fatalf("%v %q, want %v", got, msg, tc.want)
			}
		})
	}
	if c := topicConfigValue(t, cl, "checks", "retention.ms"); c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms %v after the refused changes", c.Value)
	}

	// Accepted as in Kafka.
	if err, msg := incremental(false, set("retention.bytes", "-2"), set("segment.bytes", "2147483647")); err != nil {
		t.Fatalf("retention.bytes=-2, segment.bytes=2^31-1: %v %q", err, msg)
	}
	if err, msg := incremental(false, del("no.such.config"), del("segment.ms")); err != nil {
		t.Fatalf("deleting configs nobody set: %v %q", err, msg)
	}
	if c := topicConfigValue(t, cl, "checks", "retention.bytes"); c.Value == nil || *c.Value != "-2" {
		t.Fatalf("retention.bytes %v", c.Value)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
