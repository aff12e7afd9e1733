package samsa_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/record/recordtest"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// heldFS holds the creation of the log directories of topic "held" until
// release.
type heldFS struct {
	vfs.FS
	gate chan struct{}
	once sync.Once
}

func (h *heldFS) MkdirAll(path string, perm fs.FileMode) error {
	if strings.HasPrefix(filepath.Base(path), "held-") {
		<-h.gate
	}
	return h.FS.MkdirAll(path, perm)
}

func (h *heldFS) release() { h.once.Do(func() { close(h.gate) }) }

// samsa_replica_pending_log_creations counts the partitions assigned to
// the broker whose logs its creators have not made yet: it shows a new
// topic's partitions while their creation is held, and falls to 0 once
// the logs are made.
func TestPendingLogCreationsMetric(t *testing.T) {
	const parts = 5
	held := &heldFS{FS: vfs.Default, gate: make(chan struct{})}
	t.Cleanup(held.release) // before the node's Close (cleanups run last first)
	n := startConfig(t, samsa.Config{Dir: t.TempDir(), FS: held, HTTPListener: "127.0.0.1:0"})
	metric := "samsa_replica_pending_log_creations"
	if v := scrapeGauge(t, n.HTTPAddr(), metric); v != "0" {
		t.Fatalf("%s = %q at start, want 0", metric, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, n))
	if r, err := adm.CreateTopic(ctx, parts, 1, nil, "held"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	waitFor(t, time.Minute, metric+" = 5 while the logs are held", func() bool {
		return scrapeGauge(t, n.HTTPAddr(), metric) == "5"
	})
	held.release()
	waitFor(t, time.Minute, metric+" = 0 once the logs are made", func() bool {
		return scrapeGauge(t, n.HTTPAddr(), metric) == "0"
	})
}

// enteredFS holds the creation of the log directories whose names begin
// with prefix until release, and tells entered each one whose creation
// began.
type enteredFS struct {
	vfs.FS
	prefix  string
	entered chan string
	gate    chan struct{}
	once    sync.Once
}

func (e *enteredFS) MkdirAll(path string, perm fs.FileMode) error {
	if base := filepath.Base(path); strings.HasPrefix(base, e.prefix) {
		e.entered <- base
		<-e.gate
	}
	return e.FS.MkdirAll(path, perm)
}

func (e *enteredFS) release() { e.once.Do(func() { close(e.gate) }) }

// TestRequestWaitsForPendingLog: a Produce, a Fetch or a ListOffsets
// naming partitions of a new topic whose logs the broker has not made yet
// waits for them (the request makes those no creator has taken) and is
// served, as from Kafka, which makes a partition's log while it applies
// the metadata that gives it the partition. It was answered
// NOT_LEADER_OR_FOLLOWER, on which franz-go backs off and refreshes its
// metadata: the first records to a new topic of 1,000 partitions waited
// seconds after the logs existed, and a consumer's first ListOffsets was
// refused three times over 1.6-2.0 s.
//
// The node has one creator, held on partition 0: the request itself must
// make partition 1's log, and is answered only once both exist.
func TestRequestWaitsForPendingLog(t *testing.T) {
	for _, kind := range []string{"produce", "fetch", "listoffsets"} {
		t.Run(kind, func(t *testing.T) {
			topic := "wait" + kind
			held := &enteredFS{FS: vfs.Default, prefix: topic + "-", entered: make(chan string, 4), gate: make(chan struct{})}
			n := startConfig(t, samsa.Config{Dir: t.TempDir(), FS: held,
				Properties: map[string]string{"num.recovery.threads.per.data.dir": "1"}})
			t.Cleanup(held.release) // before the node's Close, which waits for the creations (cleanups run last first)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl := newClient(t, n)
			adm := kadm.NewClient(cl)
			if r, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil || r.Err != nil {
				t.Fatalf("create: %v %v", err, r.Err)
			}
			select {
			case dir := <-held.entered:
				if dir != topic+"-0" {
					t.Fatalf("the creator began with %s, want %s-0", dir, topic)
				}
			case <-ctx.Done():
				t.Fatal("no log creation began")
			}
			meta, err := adm.BrokerMetadata(ctx)
			if err != nil || len(meta.Brokers) != 1 {
				t.Fatalf("brokers: %v %v", err, meta.Brokers)
			}
			broker := cl.Broker(int(meta.Brokers[0].NodeID))
			codes := make(chan []int16, 1)
			go func() {
				var got []int16
				defer func() { codes <- got }()
				if kind == "produce" {
					req := kmsg.NewPtrProduceRequest()
					req.Acks, req.TimeoutMillis = -1, 60000
					rt := kmsg.NewProduceRequestTopic()
					rt.Topic = topic
					for p := range int32(2) {
						rp := kmsg.NewProduceRequestTopicPartition()
						rp.Partition = p
						rp.Records = recordtest.Raw(recordtest.Plain(1, time.Now().UnixMilli()), recordtest.Good(0))
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, broker)
					if err != nil {
						t.Errorf("produce: %v", err)
						return
					}
					for _, rp := range resp.Topics[0].Partitions {
						got = append(got, rp.ErrorCode)
					}
					return
				}
				if kind == "listoffsets" {
					req := kmsg.NewPtrListOffsetsRequest()
					req.ReplicaID = -1
					rt := kmsg.NewListOffsetsRequestTopic()
					rt.Topic = topic
					for p := range int32(2) {
						rp := kmsg.NewListOffsetsRequestTopicPartition()
						rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, broker)
					if err != nil {
						t.Errorf("list offsets: %v", err)
						return
					}
					for _, rp := range resp.Topics[0].Partitions {
						got = append(got, rp.ErrorCode)
					}
					return
				}
				req := kmsg.NewPtrFetchRequest()
				req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 60000, 0, 1<<20
				req.SessionEpoch = -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = topic
				for p := range int32(2) {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, broker)
				if err != nil {
					t.Errorf("fetch: %v", err)
					return
				}
				for _, rp := range resp.Topics[0].Partitions {
					got = append(got, rp.ErrorCode)
				}
			}()
			select {
			case dir := <-held.entered:
				if dir != topic+"-1" {
					t.Fatalf("the request made %s, want %s-1", dir, topic)
				}
			case got := <-codes:
				t.Fatalf("answered before the logs were made: error codes %v", got)
			case <-ctx.Done():
				t.Fatal("the request did not make the log the creator had not taken")
			}
			held.release()
			got := <-codes
			if len(got) != 2 || got[0] != 0 || got[1] != 0 {
				t.Fatalf("error codes %v, want none for either partition", got)
			}
		})
	}
}
