package samsa_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// fetchCounter counts the Fetch responses a franz-go client read.
type fetchCounter struct{ n atomic.Int64 }

func (f *fetchCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Fetch.Int16() && err == nil {
		f.n.Add(1)
	}
}

// TestConsumerFetchSessionIdleCost: a franz-go consumer of 400 partitions
// of which one receives a record at a time reads each record once, and
// its incremental fetches read the partitions that changed, not all 400
// (the broker's count of partitions consumers' fetches read). When a
// consumer's session read every partition on every fetch, each fetch
// counted 400.
func TestConsumerFetchSessionIdleCost(t *testing.T) {
	const topic, parts = "idlec", 400
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	pcl := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, pcl, topic, parts, nil)
	var fetches fetchCounter
	ccl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.WithHooks(&fetches))
	produce := func(p int32, v string) {
		t.Helper()
		if err := pcl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(want string) {
		t.Helper()
		for {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s: %v", want, ctx.Err())
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %d: %v", p, err) })
			got := ""
			fs.EachRecord(func(r *kgo.Record) {
				if got != "" || string(r.Value) != want {
					t.Fatalf("read %q (after %q), want %q once", r.Value, got, want)
				}
				got = string(r.Value)
			})
			if got == want {
				return
			}
		}
	}
	produce(0, "warm")
	consume("warm")
	// A few idle polls: the session is open and every partition read.
	for start := fetches.n.Load(); fetches.n.Load() < start+3; {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ccl.PollFetches(pctx)
		pcancel()
	}
	read0, fetch0 := samsa.ConsumerPartitionsRead(n), fetches.n.Load()
	const rounds = 30
	for i := range rounds {
		v := fmt.Sprint("r", i)
		produce(int32(i*37%parts), v)
		consume(v)
	}
	read, fetched := samsa.ConsumerPartitionsRead(n)-read0, fetches.n.Load()-fetch0
	t.Logf("%d fetches read %d partitions (%d in the session)", fetched, read, parts)
	if fetched < rounds {
		t.Fatalf("%d fetches for %d records", fetched, rounds)
	}
	// A sweep (every 30 s) may read them all once or twice.
	if read > fetched*parts/10+2*parts {
		t.Fatalf("%d fetches read %d partitions: the session reads every partition of %d each time", fetched, read, parts)
	}
}

// TestConsumerFetchSessionReadCommitted: a read_committed franz-go
// consumer of 40 partitions, with its session open and idle, sees the
// records of committed transactions once their marker moves the last
// stable offset, never those of aborted ones, and the plain records
// written after an aborted transaction on the same partitions.
func TestConsumerFetchSessionReadCommitted(t *testing.T) {
	const topic, parts = "rcs", 40
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	plain := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, plain, topic, parts, nil)
	txn := newClient(t, n, kgo.TransactionalID("rcs"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ccl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	seen := map[string]int{}
	poll := func(want func() bool, what string) {
		t.Helper()
		for !want() {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := ccl.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s: read %v", what, seen)
			}
			fs.EachError(func(_ string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("fetch %d: %v", p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		}
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poll(func() bool { return seen["warm"] == 1 }, "warm")
	committed := 0
	for i, commit := range []bool{false, true, false, true, true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			v := fmt.Sprintf("t%d-%d-%v", i, j, commit)
			if err := txn.ProduceSync(ctx, &kgo.Record{Partition: int32((i*7 + j) % parts), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		// The open transaction holds the last stable offset: the
		// consumer, polling meanwhile, reads none of it.
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ccl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		pcancel()
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		// Plain records after it, on the same partitions.
		for j := range 5 {
			v := fmt.Sprintf("p%d-%d", i, j)
			if err := plain.ProduceSync(ctx, &kgo.Record{Partition: int32((i*7 + j) % parts), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			committed += 5
		}
		want := 1 + committed + 5*(i+1)
		poll(func() bool { return len(seen) >= want }, fmt.Sprintf("%d records after transaction %d", want, i))
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("%s read %d times", v, c)
		}
		var i, j int
		var commit bool
		if _, err := fmt.Sscanf(v, "t%d-%d-%t", &i, &j, &commit); err == nil && !commit {
			t.Errorf("read %s, a record of an aborted transaction", v)
		}
	}
	if want := 1 + committed + 5*6; len(seen) != want {
		t.Fatalf("read %d records, want %d", len(seen), want)
	}
}

// sessionFetcher sends raw Fetch v12 requests of a consumer's session
// (KIP-227) over topic's partitions.
type sessionFetcher struct {
	t      *testing.T
	br     *kgo.Broker
	topic  string
	id     int32
	epoch  int32
	isolat int8
}

// fetch sends the session's next fetch naming offsets (epoch 0: a full
// fetch that opens the session).
func (f *sessionFetcher) fetch(ctx context.Context, offsets map[int32]int64) *kmsg.FetchResponse {
	f.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch, req.IsolationLevel = -1, 1<<20, f.id, f.epoch, f.isolat
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = f.topic
		for p, o := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, o, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, f.br)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		f.t.Fatalf("fetch epoch %d: %v", f.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	if f.epoch == 0 {
		f.id = resp.SessionID
	}
	f.epoch++
	return resp
}

// answered is the partitions resp answers, by partition.
func answered(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp
		}
	}
	return out
}

// TestConsumerFetchSessionLogStart: in a consumer's fetch session whose
// partitions are read to their end (and so no longer read until they
// change), DeleteRecords up to the end answers the partition's new log
// start offset at the next incremental fetch, and DeleteRecords past the
// offset of a partition still being read answers it OFFSET_OUT_OF_RANGE
// at once, as Kafka's sessions (which read every partition) do.
func TestConsumerFetchSessionLogStart(t *testing.T) {
	const topic = "lsd"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, topic, 4, nil)
	for p := range int32(4) {
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := &sessionFetcher{t: t, br: direct(t, cl), topic: topic}
	// Partitions 0, 1 and 3 at their end; 2 at 0, not moved on by the
	// session (it is read each time).
	f.fetch(ctx, map[int32]int64{0: 5, 1: 5, 2: 0, 3: 5})
	for range 3 {
		if got := answered(f.fetch(ctx, nil)); len(got) != 1 || len(got[2].RecordBatches) == 0 {
			t.Fatalf("idle incremental fetch answered %v, want partition 2's records", got)
		}
	}
	adm := kadm.NewClient(cl)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5})
	del.Add(kadm.Offset{Topic: topic, Partition: 2, At: 3})
	if res, err := adm.DeleteRecords(ctx, del); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	got := answered(f.fetch(ctx, nil))
	if p1, ok := got[1]; !ok || p1.ErrorCode != 0 || p1.LogStartOffset != 5 {
		t.Fatalf("after DeleteRecords to 5, partition 1 answered %+v (present %v), want log start 5", p1, ok)
	}
	if got[2].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("after DeleteRecords past offset 0, partition 2 answered %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(got[2].ErrorCode))
	}
	if _, ok := got[0]; ok || len(got) != 2 {
		t.Fatalf("after DeleteRecords the fetch answered %v, want partitions 1 and 2", got)
	}
}

// TestConsumerFetchSessionRetention: a log start offset raised by
// retention (retention.ms passing the records' age, nothing else
// happening to the partition) is answered at the next incremental fetch
// of a consumer's session whose partition was read to its end, not at
// the session's next sweep of every partition (30 s).
func TestConsumerFetchSessionRetention(t *testing.T) {
	const topic, margin = "lsr", 15 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNode(t, t.TempDir(), map[string]string{"log.retention.check.interval.ms": "100"})
	cl := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(t, cl, topic, 2, map[string]*string{"retention.ms": ptr("3600000"), "file.delete.delay.ms": ptr("0")})
	// Records that pass retention.ms margin from now.
	ts := time.Now().Add(-time.Hour + margin)
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i)), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	f := &sessionFetcher{t: t, br: direct(t, cl), topic: topic}
	full := answered(f.fetch(ctx, map[int32]int64{0: 20, 1: 0}))
	if full[0].HighWatermark != 20 || full[0].LogStartOffset != 0 {
		t.Fatalf("full fetch: partition 0 %+v, want high-watermark 20, log start 0", full[0])
	}
	for range 3 {
		if got := answered(f.fetch(ctx, nil)); len(got) != 0 {
			t.Fatalf("idle incremental fetch answered %v", got)
		}
	}
	if s := startOffset(t, cl, topic); s != 0 || time.Now().After(ts.Add(time.Hour)) {
		t.Fatalf("setup slower than %v: log start %d before the session settled", margin, s)
	}
	var start int64
	pollUntil(t, 2*margin, func() error {
		if start = startOffset(t, cl, topic); start == 0 {
			return errors.New("log start offset still 0")
		}
		return nil
	})
	// The session is marked just after the move: the fetch right after
	// it may come first, the next one may not. Well before the sweep.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := answered(f.fetch(ctx, nil))
		if p0, ok := got[0]; ok && p0.LogStartOffset >= start {
			return
		}
		if len(got) != 0 {
			t.Fatalf("after retention moved the log start to %d, the fetch answered %v", start, got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after retention moved the log start to %d, the fetches answered nothing, want partition 0 with it", start)
		}
	}
}
