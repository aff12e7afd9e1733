package samsa_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// TestFetchSessions follows KIP-227 step by step with raw Fetch v12
// requests: a full fetch with epoch 0 opens a session; incremental fetches
// answer only the partitions with something new; a replayed epoch, an
// unknown session and forgotten partitions behave as Kafka's; epoch -1
// closes the session. With max.incremental.fetch.session.cache.slots 1 a
// second consumer gets no session.
func TestFetchSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), map[string]string{"max.incremental.fetch.session.cache.slots": "1"})
	cl := newClient(t, n, kgo.DefaultProduceTopic("fs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "fs", 4, nil)
	produce := func(p int32) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := int32(0); p < 4; p++ {
		produce(p)
	}
	br := direct(t, cl)

	fetch := func(id, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = -1, 1<<20, id, epoch
		if len(offsets) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "fs"
			for p, o := range offsets {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, o, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		if len(forget) > 0 {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.Partitions = "fs", forget
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// parts lists the partitions answered, each with whether it has records.
	parts := func(resp *kmsg.FetchResponse) string {
		var out []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
				out = append(out, fmt.Sprintf("%d:%t", rp.Partition, len(rp.RecordBatches) > 0))
			}
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}

	full := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d, session %d", full.ErrorCode, full.SessionID)
	}
	id := full.SessionID
	if got := len(full.Topics[0].Partitions); got != 4 {
		t.Fatalf("full fetch answered %d partitions, want 4", got)
	}
	if samsa.FetchSessions(n) != 1 {
		t.Fatalf("%d sessions cached, want 1", samsa.FetchSessions(n))
	}
	// Every partition read to its end: nothing new to answer.
	if got := parts(fetch(id, 1, map[int32]int64{0: 1, 1: 1, 2: 1, 3: 1})); got != "[]" {
		t.Fatalf("incremental fetch with nothing new answered %s", got)
	}
	produce(2)
	resp := fetch(id, 2, nil)
	if resp.SessionID != id {
		t.Fatalf("incremental response session %d, want %d", resp.SessionID, id)
	}
	if got := parts(resp); got != "[2:true]" {
		t.Fatalf("after one record on partition 2 the incremental fetch answered %s", got)
	}
	if got := fetch(id, 2, nil).ErrorCode; got != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("replayed epoch: error %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(got))
	}
	if got := fetch(id+1, 1, nil).ErrorCode; got != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(got))
	}
	// Partition 2 still has its record past the session's offset; once
	// forgotten it is no longer read. Partition 1 moves its offset back
	// and gets its record again.
	if got := parts(fetch(id, 3, map[int32]int64{1: 0}, 2)); got != "[1:true]" {
		t.Fatalf("after forgetting partition 2 and rewinding 1 the fetch answered %s", got)
	}
	// The cache's only slot is taken by an active consumer session: a
	// second consumer is served without one.
	if other := fetch(0, 0, map[int32]int64{0: 0}); other.ErrorCode != 0 || other.SessionID != 0 {
		t.Fatalf("second session: error %d, session %d, want none (one slot)", other.ErrorCode, other.SessionID)
	}
	final := fetch(id, -1, map[int32]int64{3: 0})
	if final.SessionID != 0 || parts(final) != "[3:true]" {
		t.Fatalf("final fetch: session %d, partitions %s", final.SessionID, parts(final))
	}
	if samsa.FetchSessions(n) != 0 {
		t.Fatalf("%d sessions cached after the final fetch, want 0", samsa.FetchSessions(n))
	}
}

// TestFetchSessionsFranz: franz-go consumes with incremental fetches
// (its default) while records keep arriving on some partitions, and reads
// every record once.
func TestFetchSessionsFranz(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	pcl := newClient(t, n, kgo.DefaultProduceTopic("ff"))
	createTopic(t, pcl, "ff", 8, nil)
	ccl := newClient(t, n, kgo.ConsumeTopics("ff"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	const rounds, per = 20, 10
	seen := map[string]bool{}
	for r := 0; r < rounds; r++ {
		var recs []*kgo.Record
		for i := 0; i < per; i++ {
			// A few partitions per round: the others have nothing new.
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(r % 3)), Value: []byte(fmt.Sprintf("%d-%d", r, i))})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for len(seen) < (r+1)*per {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round %d: read %d of %d", r, len(seen), (r+1)*per)
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %d: %v", p, err) })
			fs.EachRecord(func(rec *kgo.Record) {
				if seen[string(rec.Value)] {
					t.Fatalf("record %s read twice", rec.Value)
				}
				seen[string(rec.Value)] = true
			})
		}
	}
	if samsa.FetchSessions(n) == 0 {
		t.Fatal("franz-go's fetches opened no session")
	}
}

// TestFollowerFetchSessions: a follower of 40 partitions names in its
// fetches only the partitions that moved once its session is open, so 50
// acks=all produces to one partition (each needing a follower fetch)
// cost a few partitions each, not 40 (a full fetch names every one).
func TestFollowerFetchSessions(t *testing.T) {
	c := startCluster(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("fsr"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if resp, err := adm.CreateTopic(ctx, 40, 2, nil, "fsr"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var leader int32 = -1
	waitFor(t, 30*time.Second, "full ISRs", func() bool {
		td := describe(t, adm, "fsr")
		for _, p := range td.Partitions {
			if len(p.ISR) != 2 {
				return false
			}
		}
		leader = td.Partitions[0].Leader
		return len(td.Partitions) == 40
	})
	follower := c.Brokers()[0]
	if follower == leader {
		follower = c.Brokers()[1]
	}
	fn := c.Node(follower)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := samsa.FetchPartitionsSent(fn)
	const produces = 50
	for i := 0; i < produces; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sent := samsa.FetchPartitionsSent(fn) - before
	t.Logf("follower named %d partitions over %d acks=all produces", sent, produces)
	if sent > produces*40/4 {
		t.Fatalf("follower named %d partitions over %d produces: full fetches (a session names only what moved)", sent, produces)
	}
}

// TestFetchDuplicatePartitions: a full Fetch naming a partition many
// times, in one topic entry and in repeated ones, is answered with the
// partition once, read from the offset of its last occurrence, as Kafka's
// FetchRequest.fetchData (a map by topic-partition) serves it: without a
// session (epoch -1), when opening one (epoch 0, and the session then
// holds it once) and in an incremental fetch that names it again. Before,
// each occurrence was read: a partition named 1,000 times came back with
// its batch 1,000 times.
func TestFetchDuplicatePartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic("dup"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "dup", 2, nil)
	for p := int32(0); p < 2; p++ {
		for range 2 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	br := direct(t, cl)
	const copies = 1000
	fetch := func(id, epoch int32, names int) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = -1, 1<<20, id, epoch
		// Partition 0 from offset 0 names-1 times then from offset 1,
		// split over two topic entries around partition 1.
		for i := range names {
			if len(req.Topics) == 0 || i == names/2 {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "dup"
				req.Topics = append(req.Topics, rt)
				if i == names/2 {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
					req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, rp)
				}
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			if i == names-1 {
				rp.FetchOffset = 1
			}
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	// check compares the partitions answered, in order, each with the
	// base offset of its first batch.
	check := func(what string, resp *kmsg.FetchResponse, want []int32) {
		t.Helper()
		var got []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				first := int64(-1) // the first batch's base offset
				if len(rp.RecordBatches) >= 8 {
					first = int64(binary.BigEndian.Uint64(rp.RecordBatches))
				}
				got = append(got, fmt.Sprintf("%d@%d", rp.Partition, first))
			}
		}
		var w []string
		for _, p := range want {
			first := int64(0)
			if p == 0 {
				first = 1
			}
			w = append(w, fmt.Sprintf("%d@%d", p, first))
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s: partitions answered (partition@first offset) %v, want %v", what, got, w)
		}
	}
	check("sessionless fetch", fetch(0, -1, copies), []int32{0, 1})
	resp := fetch(0, 0, copies)
	check("session-opening fetch", resp, []int32{0, 1})
	if resp.SessionID == 0 {
		t.Fatal("no session opened")
	}
	// The session holds partition 0 once, at the offset last named.
	check("incremental fetch", fetch(resp.SessionID, 1, copies), []int32{0, 1})
}
