package samsa_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa"
)

// Client quotas (issue 15), stored with AlterClientQuotas and enforced by
// throttling, through franz-go.

func alterQuota(t *testing.T, adm *kadm.Client, entity kadm.ClientQuotaEntity, key string, value float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: value}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatalf("AlterClientQuotas %v: %v %s", entity, res[0].Err, res[0].ErrMessage)
	}
}

func TestClientQuotasAdmin(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := kadm.NewClient(newClient(t, n))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice, app := "alice", "app"
	alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, "producer_byte_rate", 1024)
	alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id", Name: &app}}, "consumer_byte_rate", 2048)
	alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user"}}, "request_percentage", 50)
	alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "ip", Name: kadmStr("127.0.0.2")}}, "connection_creation_rate", 10)

	count := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) int {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		return len(d)
	}
	if got := count(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &alice}); got != 2 {
		t.Errorf("user=alice, not strict: %d entities, want 2", got)
	}
	if got := count(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &alice}); got != 1 {
		t.Errorf("user=alice, strict: %d entities, want 1", got)
	}
	if got := count(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}); got != 1 {
		t.Errorf("user default: %d entities, want 1", got)
	}
	if got := count(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 2}); got != 3 {
		t.Errorf("any user: %d entities, want 3", got)
	}
	if got := count(false); got != 4 {
		t.Errorf("everything: %d entities, want 4", got)
	}

	// Refused: Kafka's INVALID_REQUEST, and nothing stored.
	for _, bad := range []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 5}}},
	} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{bad})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, kerr.InvalidRequest) {
			t.Errorf("%v %v: %v, want INVALID_REQUEST", bad.Entity, bad.Ops, res[0].Err)
		}
	}
	if got := count(false); got != 4 {
		t.Errorf("after refused alterations: %d entities, want 4", got)
	}
	// Removing the last quota of an entity removes it.
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Remove: true}}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if got := count(false); got != 3 {
		t.Errorf("after the removal: %d entities, want 3", got)
	}
}

func kadmStr(s string) *string { return &s }

// throttleHook counts the throttles franz-go reports.
type throttleHook struct{ n, maxMs atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	if ms := d.Milliseconds(); ms > h.maxMs.Load() {
		h.maxMs.Store(ms)
	}
}

// TestProducerByteRate: a producer sending as fast as it can against
// producer_byte_rate for its user is held to the rate. Kafka's Rate lets
// a fresh client burst (quota.window.num-1) windows' worth before it is
// throttled, then again each time that burst's window expires, so the
// rate holds over full quota windows (11 windows of 1 s): the bytes
// acknowledged in the 22 s from the first produce are within 10% of 22 s
// × the quota; throttle_time_ms reaches the client.
func TestProducerByteRate(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 23 s")
	}
	const rate = 512 << 10 // bytes per second
	n := startNode(t, t.TempDir(), nil)
	admCl := newClient(t, n)
	createTopic(t, admCl, "q", 1, nil)
	anonymous := "ANONYMOUS"
	alterQuota(t, kadm.NewClient(admCl), kadm.ClientQuotaEntity{{Type: "user", Name: &anonymous}}, "producer_byte_rate", rate)

	hook := new(throttleHook)
	cl := newClient(t, n, kgo.DefaultProduceTopic("q"), kgo.WithHooks(hook), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(64<<10),
		// Uncompressed: the quota counts request bytes, and batches of one
		// repeated value would compress.
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxProduceRequestsInflightPerBroker(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	value := make([]byte, 16<<10)
	rand.Read(value)
	var (
		mu    sync.Mutex
		start time.Time
		acked int64 // value bytes acknowledged within the window
	)
	// Two quota windows: Kafka's Rate lets the first second through up to
	// (quota.window.num-1)+1 windows' worth (the padded window includes the
	// elapsed part of the first), 1.09 × the quota over the first 11 s
	// alone; over two windows that burst is amortized.
	const window = 22 * time.Second
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if start.IsZero() {
					start = r.Timestamp
				}
				if time.Since(start) < window {
					acked += int64(len(r.Value))

				} else {
					select {
					case <-done:
					default:
						close(done)
					}
				}
			})
		}
	}()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("the window never ended")
	}
	cancel()
	wg.Wait()
	got := float64(acked) / window.Seconds()
	t.Logf("acknowledged %.0f B/s against producer_byte_rate %d (ratio %.3f); %d throttles, longest %d ms", got, rate, got/rate, hook.n.Load(), hook.maxMs.Load())
	if got < 0.9*rate || got > 1.1*rate {
		t.Errorf("throughput %.0f B/s, want %d ± 10%%", got, rate)
	}
	if hook.n.Load() == 0 || hook.maxMs.Load() <= 0 {
		t.Error("no throttle_time_ms reached the client")
	}
}

// TestControllerMutationRate: controller_mutation_rate (KIP-599) lets a
// user create up to 11 s × the rate partitions at once (11 at 1/s); past it, strict
// CreateTopics (v6+) is refused THROTTLING_QUOTA_EXCEEDED and creates
// nothing, older versions are throttled only.
func TestControllerMutationRate(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	anonymous := "ANONYMOUS"
	alterQuota(t, kadm.NewClient(newClient(t, n)), kadm.ClientQuotaEntity{{Type: "user", Name: &anonymous}}, "controller_mutation_rate", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func(cl *kgo.Client, version int16, topic string, partitions int32) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// The burst: 11 tokens; 40 partitions leave -29, a 29 s throttle.
	resp := create(newClient(t, n, kgo.RequestRetries(0)), 7, "big", 40)
	wantCode(t, "CreateTopics big", resp.Topics[0].ErrorCode, nil)
	if resp.ThrottleMillis < 28000 || resp.ThrottleMillis > 29100 {
		t.Errorf("throttle_time_ms %d, want about 29000", resp.ThrottleMillis)
	}
	// Another connection, not held back by the throttle on the first.
	cl := newClient(t, n, kgo.RequestRetries(0))
	resp = create(cl, 7, "refused", 1)
	wantCode(t, "CreateTopics v7 over the quota", resp.Topics[0].ErrorCode, kerr.ThrottlingQuotaExceeded)
	if resp.ThrottleMillis <= 0 {
		t.Error("no throttle_time_ms with THROTTLING_QUOTA_EXCEEDED")
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("refused") {
		t.Error("the refused topic was created")
	}
	// Kafka 2.6's CreateTopics is v5.
	resp = create(newClient(t, n, kgo.RequestRetries(0), kgo.MaxVersions(kversion.V2_6_0())), 5, "permissive", 1)
	wantCode(t, "CreateTopics v5 over the quota", resp.Topics[0].ErrorCode, nil)
	if resp.ThrottleMillis <= 0 {
		t.Error("v5 over the quota: no throttle_time_ms")
	}
}

// TestConnectionCreationRate: connection_creation_rate for an IP address
// (KIP-612) admits the burst of the quota window (10 windows × 1/s), then
// holds each further connection unanswered until it is closed.
func TestConnectionCreationRate(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	ip := "127.0.0.1"
	alterQuota(t, kadm.NewClient(newClient(t, n)), kadm.ClientQuotaEntity{{Type: "ip", Name: &ip}}, "connection_creation_rate", 1)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	answered := func() bool {
		t.Helper()
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(frame); err != nil {
			return false
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		return err == nil
	}
	ok := 0
	for range 10 {
		if answered() {
			ok++
		}
	}
	// The admin client above made a connection or two of the burst.
	if ok < 8 {
		t.Fatalf("%d of the first 10 connections answered, want at least 8", ok)
	}
	for range 2 {
		if answered() {
			t.Fatal("a connection past the connection_creation_rate burst was answered")
		}
	}
}

// TestConsumerByteRateFetch: consumer_byte_rate as Kafka's
// KafkaApis.handleFetchRequest applies it, with quota.window.num=2 (one
// padded window): a consumer's max_bytes is capped at what the quota
// allows in (quota.window.num-1) windows, 8 KiB here where 1 MiB was
// asked; the next Fetch, over the quota, is answered empty (no topics, no
// records counted) with throttle_time_ms set; once the throttle has
// passed (the first sample leaves the window) the records come again
// from the same offset.
func TestConsumerByteRateFetch(t *testing.T) {
	const rate = 8 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, cl := consumerQuotaNode(ctx, t, "2", "cq", 100, rate)

	fetch := func(offset int64) (*kmsg.FetchResponse, int) {
		t.Helper()
		resp, err := fetchOnePartition("cq", offset).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("fetch: error %v", kerr.ErrorForCode(rp.ErrorCode))
				}
				size += len(rp.RecordBatches)
			}
		}
		return resp, size
	}
	resp, size := fetch(0)
	if size == 0 || size > rate+1100 {
		t.Fatalf("first fetch returned %d record bytes, want 1 to %d (max_bytes capped at the quota's window)", size, rate+1100)
	}
	if resp.ThrottleMillis != 0 {
		t.Fatalf("first fetch throttled %d ms", resp.ThrottleMillis)
	}
	resp, size = fetch(0)
	if resp.ThrottleMillis <= 0 || size != 0 || len(resp.Topics) != 0 {
		t.Fatalf("second fetch over the quota: throttle %d ms, %d record bytes in %d topics; want a throttle and an empty response", resp.ThrottleMillis, size, len(resp.Topics))
	}
	// The connection is muted for each throttle (KIP-219); the records
	// skipped come once the quota window has room again, and until then
	// every answer is empty and throttled.
	for i := 0; ; i++ {
		resp, size = fetch(0)
		if size > 0 {
			t.Logf("records again after %d more throttled fetches", i)
			break
		}
		if resp.ThrottleMillis <= 0 || i == 20 {
			t.Fatalf("fetch %d: %d record bytes, throttle %d ms", i+3, size, resp.ThrottleMillis)
		}
	}
}

// TestConsumerByteRateTiny: a consumer_byte_rate whose quota window
// allows less than a byte (any rate with quota.window.num=1: rate × 0
// windows, as Kafka's ClientQuotaManager.getMaxValueInQuotaWindow) caps a
// Fetch at its first batch (KIP-74), as Kafka's fetch whose max bytes the
// quota brings to 0: the cap of 0 used to read as no cap
// (fetch.max.bytes), and the Fetch read all 20 batches (21,400 bytes) for
// an answer that the quota then emptied.
func TestConsumerByteRateTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, cl := consumerQuotaNode(ctx, t, "1", "tiny", 20, 1)
	before := samsa.ConsumerBytesOut(n)
	resp, err := fetchOnePartition("tiny", 0).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// Over the quota at once, the answer is empty and throttled, as
	// Kafka's; what was read for it is the first batch.
	if read := samsa.ConsumerBytesOut(n) - before; read == 0 || read > 1100 {
		t.Fatalf("fetch under a quota window of 0 bytes read %d record bytes, want the first batch only (about 1 KiB)", read)
	}
	if resp.ThrottleMillis <= 0 || len(resp.Topics) != 0 {
		t.Fatalf("fetch over the quota: throttle %d ms, %d topics; want a throttle and an empty response", resp.ThrottleMillis, len(resp.Topics))
	}
}

// consumerQuotaNode starts a node with quota.window.num windows of 1 s,
// writes batches batches of about 1 KiB to partition 0 of a new topic,
// and sets the anonymous user's consumer_byte_rate to rate.
func consumerQuotaNode(ctx context.Context, t *testing.T, windows, topic string, batches int, rate float64) (*samsa.Node, *kgo.Client) {
	t.Helper()
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": windows, "quota.window.size.seconds": "1"})
	cl := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxProduceRequestsInflightPerBroker(1))
	createTopic(t, cl, topic, 1, nil)
	value := make([]byte, 1000)
	for range batches {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	anonymous := "ANONYMOUS"
	alterQuota(t, kadm.NewClient(cl), kadm.ClientQuotaEntity{{Type: "user", Name: &anonymous}}, "consumer_byte_rate", rate)
	return n, cl
}

// fetchOnePartition is a consumer's Fetch of partition 0 of topic from
// offset, 1 MiB at most, without waiting.
func fetchOnePartition(topic string, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
