package samsa_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/record"
)

// TestPartitionLimitRefusedUpFront: creation past log.partitions.max is
// refused with INVALID_PARTITIONS naming the limit, through CreateTopics,
// CreatePartitions and auto-creation by Metadata, and what fits is
// created; the node keeps serving and restarts.
func TestPartitionLimitRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.partitions.max": "10", "num.partitions": "3"}
	n := startNode(t, dir, props)
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	createTopic(t, cl, "fits", 6, nil)
	resp, _ := adm.CreateTopic(ctx, 5, 1, nil, "too-many")
	if !kerrIs(resp.Err, kerr.InvalidPartitions) || !strings.Contains(resp.ErrMessage, "log.partitions.max") {
		t.Fatalf("CreateTopics past the limit: %v %q, want INVALID_PARTITIONS naming log.partitions.max", resp.Err, resp.ErrMessage)
	}
	// A count no node could host is refused before the controller builds
	// a record for it (it built 2^31 records, GBs over minutes, and the
	// node stopped answering), and the controller answers the next request.
	huge, cancelHuge := context.WithTimeout(ctx, 10*time.Second)
	resp, _ = adm.CreateTopic(huge, math.MaxInt32, 1, nil, "huge")
	if !kerrIs(resp.Err, kerr.InvalidPartitions) || !strings.Contains(resp.ErrMessage, "log.partitions.max") {
		t.Fatalf("CreateTopics of 2^31-1 partitions: %v %q, want INVALID_PARTITIONS naming log.partitions.max", resp.Err, resp.ErrMessage)
	}
	hcp, err := adm.CreatePartitions(huge, math.MaxInt32-6, "fits")
	if err != nil || !kerrIs(hcp["fits"].Err, kerr.InvalidPartitions) {
		t.Fatalf("CreatePartitions to 2^31-1: %v %+v", err, hcp["fits"])
	}
	cancelHuge()
	// Two topics in one request: the first fits, the second does not.
	rs, err := adm.CreateTopics(ctx, 3, 1, nil, "second", "third")
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused int
	for _, r := range rs {
		switch {
		case r.Err == nil:
			ok++
		case kerrIs(r.Err, kerr.InvalidPartitions):
			refused++
		default:
			t.Fatalf("%s: %v", r.Topic, r.Err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("9 of 10 used, two topics of 3: %d created, %d refused; want 1 and 1", ok, refused)
	}
	cp, err := adm.CreatePartitions(ctx, 2, "fits")
	if err != nil || !kerrIs(cp["fits"].Err, kerr.InvalidPartitions) {
		t.Fatalf("CreatePartitions past the limit: %v %+v", err, cp["fits"])
	}
	// Auto-creation (num.partitions 3) of a topic that does not fit.
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	mresp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := mresp.Topics[0].ErrorCode; got != kerr.InvalidPartitions.Code {
		t.Fatalf("auto-creation past the limit: error %d, want INVALID_PARTITIONS", got)
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, d := range td {
		parts += len(d.Partitions)
	}
	if td.Has("too-many") || td.Has("auto") || parts != 9 {
		t.Fatalf("topics after refusals: %v, %d partitions", td.Names(), parts)
	}
	cl.Close()
	n.Close()
	n = startNode(t, dir, props)
	produceN(t, newClient(t, n), "fits", 10)
}

// TestAutoCreateRefusalsLogOnce: a Metadata request auto-creating
// thousands of topics past log.partitions.max is answered
// INVALID_PARTITIONS for each topic that does not fit, and the node logs
// the refusals of the request as one line. Before, a line each: three
// requests of 5,000 unknown topics, which any client may send without
// authentication, wrote 15,000 WARN lines (5 MB) to the node's log.
func TestAutoCreateRefusalsLogOnce(t *testing.T) {
	const topics, limit = 2000, 10
	logs := new(lockedBuffer)
	n := startConfig(t, samsa.Config{
		Dir:        t.TempDir(),
		Properties: map[string]string{"log.partitions.max": fmt.Sprint(limit)},
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	})
	cl := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for i := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("auto-%d", i))
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, rt := range resp.Topics {
		if rt.ErrorCode == kerr.InvalidPartitions.Code {
			refused++
		}
	}
	if refused != topics-limit {
		t.Fatalf("%d of %d topics refused INVALID_PARTITIONS, want %d", refused, topics, topics-limit)
	}
	if lines := strings.Count(logs.String(), "auto-creating topic"); lines != 1 {
		t.Fatalf("%d log lines about the refused auto-creation of %d topics, want 1", lines, refused)
	}
}

// TestOfflinePartitionDoesNotStopNode: a partition whose log cannot be
// opened at start (here its .log is a directory) leaves the node starting
// and serving the others; produce and fetch to it fail at once with
// KAFKA_STORAGE_ERROR instead of waiting for a timeout.
func TestOfflinePartitionDoesNotStopNode(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	cl := newClient(t, n)
	createTopic(t, cl, "t", 2, nil)
	produceN(t, cl, "t", 20)
	cl.Close()
	n.Close()

	seg := filepath.Join(dir, "t-1", "00000000000000000000.log")
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, dir, nil)
	cl = newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("produce to the healthy partition: %v", err)
	}

	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 1
	pp.Records = plainBatch(t, record.CodecNone, "v")
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	start := time.Now()
	presp, err := preq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline partition: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MaxBytes = 5000, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 1, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from the offline partition: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("answers for the offline partition took %v: they waited", d)
	}
}
