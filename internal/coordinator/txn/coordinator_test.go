package txn

import (
	"errors"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %s, want %s", what, codeName(got), codeName(w))
	}
}

// A transaction from InitProducerId to EndTxn, section by section of
// KIP-98's protocol: each state is written before the answer, one marker
// goes to each partition, and the id can run the next transaction.
func TestCommitAndAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, epoch := h.initOK("a")
		if epoch != 0 {
			t.Fatalf("first epoch %d", epoch)
		}
		wantCode(t, "add", h.add("a", pid, epoch, tp("t", 0), tp("t", 1)), nil)
		wantCode(t, "add again", h.add("a", pid, epoch, tp("t", 1)), nil)
		wantCode(t, "add more", h.add("a", pid, epoch, tp("u", 0)), nil)
		d := h.describe("a")
		if d.State != "Ongoing" || len(d.Topics) != 2 || d.StartTimestamp < 0 {
			t.Fatalf("describe: %+v", d)
		}
		wantCode(t, "commit", h.end("a", pid, epoch, true), nil)
		synctest.Wait()
		for _, p := range []TopicPartition{tp("t", 0), tp("t", 1), tp("u", 0)} {
			ms := h.markers.markers(p)
			if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != pid || ms[0].ProducerEpoch != epoch || ms[0].TransactionalID != "a" {
				t.Fatalf("markers of %v: %+v", p, ms)
			}
		}
		want := []string{"Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"}
		if got := h.store.states(t, "a"); !reflect.DeepEqual(got, want) {
			t.Fatalf("states written %v, want %v", got, want)
		}
		wantCode(t, "commit retried", h.end("a", pid, epoch, true), nil)
		wantCode(t, "abort after commit", h.end("a", pid, epoch, false), kerr.InvalidTxnState)

		// The next transaction aborts.
		wantCode(t, "add 2", h.add("a", pid, epoch, tp("t", 0)), nil)
		wantCode(t, "abort", h.end("a", pid, epoch, false), nil)
		synctest.Wait()
		if ms := h.markers.markers(tp("t", 0)); len(ms) != 2 || ms[1].Commit {
			t.Fatalf("markers: %+v", ms)
		}
		if ms := h.markers.markers(tp("u", 0)); len(ms) != 1 {
			t.Fatalf("partition of the first transaction got %d markers", len(ms))
		}
		wantCode(t, "end without a transaction", h.end("a", pid, epoch, true), kerr.InvalidTxnState)
		if d := h.describe("a"); d.State != "CompleteAbort" || len(d.Topics) != 0 {
			t.Fatalf("describe: %+v", d)
		}
	})
}

// A second InitProducerId with the same transactional id fences the first
// instance: its open transaction is aborted with a bumped epoch, the new
// one gets CONCURRENT_TRANSACTIONS until the abort completes, then an
// epoch above; the zombie's requests are fenced.
func TestFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, e0 := h.initOK("a")
		wantCode(t, "add", h.add("a", pid, e0, tp("t", 0)), nil)
		h.markers.mu.Lock()
		h.markers.block = make(chan struct{})
		h.markers.mu.Unlock()
		r := h.init("a", 60000)
		wantCode(t, "init while open", r.ErrorCode, kerr.ConcurrentTransactions)
		wantCode(t, "init while aborting", h.init("a", 60000).ErrorCode, kerr.ConcurrentTransactions)
		wantCode(t, "zombie add", h.add("a", pid, e0, tp("t", 1)), kerr.ProducerFenced)
		wantCode(t, "zombie commit", h.end("a", pid, e0, true), kerr.ProducerFenced)
		close(h.markers.block)
		synctest.Wait()
		ms := h.markers.markers(tp("t", 0))
		if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != e0+1 {
			t.Fatalf("fencing markers: %+v", ms)
		}
		pid2, e2 := h.initOK("a")
		if pid2 != pid || e2 != e0+2 {
			t.Fatalf("after fencing: producer %d epoch %d", pid2, e2)
		}
		wantCode(t, "zombie add after", h.add("a", pid, e0, tp("t", 1)), kerr.ProducerFenced)
		wantCode(t, "new instance add", h.add("a", pid2, e2, tp("t", 1)), nil)
	})
}

// Transactions open longer than their timeout are aborted with an epoch
// bump; the late EndTxn of the producer is fenced.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{AbortTimedOutInterval: time.Second})
		defer h.c.Close()
		r := h.init("slow", 5000)
		wantCode(t, "init", r.ErrorCode, nil)
		wantCode(t, "add", h.add("slow", r.ProducerID, r.ProducerEpoch, tp("t", 0)), nil)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if d := h.describe("slow"); d.State != "Ongoing" {
			t.Fatalf("aborted before its timeout: %s", d.State)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		d := h.describe("slow")
		if d.State != "CompleteAbort" || d.ProducerEpoch != r.ProducerEpoch+1 {
			t.Fatalf("after the timeout: %+v", d)
		}
		wantCode(t, "late commit", h.end("slow", r.ProducerID, r.ProducerEpoch, true), kerr.ProducerFenced)
		if ms := h.markers.markers(tp("t", 0)); len(ms) != 1 || ms[0].Commit {
			t.Fatalf("markers %+v", ms)
		}
		if r := h.init("x", int32((16 * time.Minute).Milliseconds())); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
			t.Fatalf("timeout above transaction.max.timeout.ms: %s", codeName(r.ErrorCode))
		}
	})
}

// Markers are retried on the partitions whose leader could not take them,
// each partition getting exactly one.
func TestMarkerRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, e := h.initOK("a")
		wantCode(t, "add", h.add("a", pid, e, tp("t", 0), tp("t", 1)), nil)
		h.markers.mu.Lock()
		h.markers.failFor[tp("t", 1)] = 5
		h.markers.mu.Unlock()
		wantCode(t, "commit", h.end("a", pid, e, true), nil)
		synctest.Wait()
		wantCode(t, "add while markers retry", h.add("a", pid, e, tp("t", 0)), kerr.ConcurrentTransactions)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, p := range []TopicPartition{tp("t", 0), tp("t", 1)} {
			if n := len(h.markers.markers(p)); n != 1 {
				t.Fatalf("%v got %d markers", p, n)
			}
		}
		if d := h.describe("a"); d.State != "CompleteCommit" {
			t.Fatalf("state %s", d.State)
		}
	})
}

// A coordinator that stopped after PrepareCommit was written completes
// the transaction when its partition is loaded again, with the new
// coordinator epoch; open transactions come back open.
func TestReloadCompletesPrepared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		pid, e := h.initOK("a")
		wantCode(t, "add", h.add("a", pid, e, tp("t", 0)), nil)
		pidB, eB := h.initOK("b")
		wantCode(t, "add b", h.add("b", pidB, eB, tp("t", 0)), nil)
		h.markers.mu.Lock()
		h.markers.block = make(chan struct{}) // never released: the coordinator stops first
		h.markers.mu.Unlock()
		wantCode(t, "commit", h.end("a", pid, e, true), nil)
		synctest.Wait()
		h.markers.mu.Lock()
		h.markers.block = nil
		h.markers.mu.Unlock()
		h.restart(7)
		defer func() { h.c.Close() }()
		synctest.Wait()
		ms := h.markers.markers(tp("t", 0))
		if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 7 {
			t.Fatalf("markers after reload: %+v", ms)
		}
		if d := h.describe("a"); d.State != "CompleteCommit" {
			t.Fatalf("a: %s", d.State)
		}
		d := h.describe("b")
		if d.State != "Ongoing" || d.ProducerID != pidB {
			t.Fatalf("b: %+v", d)
		}
		wantCode(t, "b commits", h.end("b", pidB, eB, true), nil)
		synctest.Wait()
		// The id continues with a bumped epoch after the restart.
		_, e2 := h.initOK("a")
		if e2 != e+1 {
			t.Fatalf("epoch after reload %d", e2)
		}
	})
}

func TestInitProducerIDEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, e := h.initOK("a")
		pid1, e1 := h.initOK("a")
		if pid1 != pid || e1 != e+1 {
			t.Fatalf("bump: %d/%d", pid1, e1)
		}
		// KIP-360: the current pid/epoch bumps; a retry with the previous
		// one gets the same epoch again; anything else is fenced.
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		id := "a"
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		req.ProducerID, req.ProducerEpoch = pid, e1
		r := h.c.InitProducerID(t.Context(), req)
		wantCode(t, "expected bump", r.ErrorCode, nil)
		if r.ProducerEpoch != e1+1 {
			t.Fatalf("epoch %d", r.ProducerEpoch)
		}
		r = h.c.InitProducerID(t.Context(), req)
		wantCode(t, "retried bump", r.ErrorCode, nil)
		if r.ProducerEpoch != e1+1 {
			t.Fatalf("retried epoch %d", r.ProducerEpoch)
		}
		req.ProducerID = pid + 50
		wantCode(t, "other producer", h.c.InitProducerID(t.Context(), req).ErrorCode, kerr.ProducerFenced)
		// An exhausted epoch rotates the producer id.
		done := make(chan struct{})
		h.c.post(func() {
			m := h.c.partitions[0].txns["a"]
			m.epoch = maxProducerEpoch
			close(done)
		})
		<-done
		pid3, e3 := h.initOK("a")
		if pid3 == pid || e3 != 0 {
			t.Fatalf("rotation: %d/%d", pid3, e3)
		}
		// Empty ids are invalid.
		empty := ""
		req.TransactionalID = &empty
		wantCode(t, "empty id", h.c.InitProducerID(t.Context(), req).ErrorCode, kerr.InvalidRequest)
	})
}

func TestWrongProducer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, e := h.initOK("a")
		wantCode(t, "unknown id", h.add("nope", pid, e, tp("t", 0)), kerr.InvalidProducerIDMapping)
		wantCode(t, "other pid", h.add("a", pid+1, e, tp("t", 0)), kerr.InvalidProducerIDMapping)
		wantCode(t, "other epoch", h.add("a", pid, e+1, tp("t", 0)), kerr.ProducerFenced)
		wantCode(t, "end empty", h.end("a", pid, e, false), kerr.InvalidTxnState)
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "a", pid, e, "grp"
		wantCode(t, "add offsets", h.c.AddOffsetsToTxn(t.Context(), req).ErrorCode, nil)
		d := h.describe("a")
		if len(d.Topics) != 1 || d.Topics[0].Topic != "__consumer_offsets" || d.Topics[0].Partitions[0] != PartitionFor("grp", DefaultOffsetsTopicNumPartitions) {
			t.Fatalf("describe %+v", d)
		}
	})
}

// verify_only (KIP-890) reports whether partitions are in the open
// transaction without adding them.
func TestVerifyOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer h.c.Close()
		pid, e := h.initOK("a")
		wantCode(t, "add", h.add("a", pid, e, tp("t", 0)), nil)
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "a", pid, e, true
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", []int32{0, 1}
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{tt}
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
		resp := h.c.AddPartitionsToTxn(t.Context(), req)
		ps := resp.Transactions[0].Topics[0].Partitions
		wantCode(t, "in the transaction", ps[0].ErrorCode, nil)
		wantCode(t, "not in it", ps[1].ErrorCode, kerr.InvalidTxnState)
		if d := h.describe("a"); len(d.Topics[0].Partitions) != 1 {
			t.Fatalf("verify added partitions: %+v", d)
		}
		req.Transactions[0].ProducerEpoch = e + 1
		resp = h.c.AddPartitionsToTxn(t.Context(), req)
		wantCode(t, "fenced verify", resp.Transactions[0].Topics[0].Partitions[0].ErrorCode, kerr.ProducerFenced)
	})
}

func TestListAndExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{TransactionalIDExpiration: 10 * time.Minute, RemoveExpiredIDInterval: time.Minute})
		defer func() { h.c.Close() }()
		r := h.init("a", int32((15 * time.Minute).Milliseconds()))
		pid, e := r.ProducerID, r.ProducerEpoch
		h.initOK("b")
		wantCode(t, "add", h.add("a", pid, e, tp("t", 0)), nil)
		list := func(states ...string) []string {
			req := kmsg.NewPtrListTransactionsRequest()
			req.Version = 1
			req.StateFilters = states
			resp := h.c.ListTransactions(t.Context(), req)
			var ids []string
			for _, s := range resp.TransactionStates {
				ids = append(ids, s.TransactionalID+":"+s.TransactionState)
			}
			return ids
		}
		if got := list(); !reflect.DeepEqual(got, []string{"a:Ongoing", "b:Empty"}) {
			t.Fatalf("list: %v", got)
		}
		if got := list("Ongoing"); !reflect.DeepEqual(got, []string{"a:Ongoing"}) {
			t.Fatalf("list ongoing: %v", got)
		}
		time.Sleep(12 * time.Minute)
		synctest.Wait()
		// b expired; a is open, never expired while open.
		if d := h.describe("b"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
			t.Fatalf("b not expired: %+v", d)
		}
		if got := h.store.states(t, "b"); got[len(got)-1] != "-" {
			t.Fatalf("no tombstone for b: %v", got)
		}
		h.restart(1)
		if d := h.describe("b"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
			t.Fatalf("b back after reload: %+v", d)
		}
		if d := h.describe("a"); d.ErrorCode != 0 || d.State != "Ongoing" {
			t.Fatalf("a lost after reload: %+v", d)
		}
	})
}

func TestNotCoordinator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{NumPartitions: 2})
		defer h.c.Close()
		id := "a"
		h.c.UnloadPartition(h.c.Partition(id))
		wantCode(t, "init unloaded", h.init(id, 1000).ErrorCode, kerr.NotCoordinator)
		if err := h.c.LoadPartition(t.Context(), 5, 0); !errors.Is(err, ErrInvalidPartition) {
			t.Fatalf("load out of range: %v", err)
		}
		h.store.mu.Lock()
		h.store.fail = kerr.NotLeaderForPartition
		h.store.mu.Unlock()
		other := "b"
		for h.c.Partition(other) == h.c.Partition(id) {
			other += "b"
		}
		wantCode(t, "init with failing writes", h.init(other, 1000).ErrorCode, kerr.NotCoordinator)
	})
}

func TestRecordsRoundTrip(t *testing.T) {
	s := snapshot{producerID: 5, epoch: 3, timeoutMs: 100, state: stateOngoing, startMs: 10, updateMs: 20,
		partitions: []TopicPartition{tp("a", 1), tp("a", 2), tp("b", 0)}}
	d, err := Decode(Record{Key: keyOf("x"), Value: valueOf(s)})
	if err != nil || d.Key.TransactionalID != "x" {
		t.Fatal(d, err)
	}
	got := snapshotFrom(d.Value)
	s.lastProducerID, s.lastEpoch, s.nextProducerID = noProducerID, noProducerEpoch, noProducerID
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("%+v, want %+v", got, s)
	}
	if d.Value.Version != 0 {
		t.Fatalf("transaction version 1 value written as version %d", d.Value.Version)
	}
	// Transaction version 2: value version 1 with the producer id rotation
	// in tagged fields, as Kafka's TransactionLog writes it.
	s2 := s
	s2.tv2, s2.lastProducerID, s2.nextProducerID, s2.state = true, 4, 6, statePrepareCommit
	d, err = Decode(Record{Key: keyOf("x"), Value: valueOf(s2)})
	if err != nil || d.Value.Version != 1 || d.Value.ClientTransactionVersion != 2 || d.Value.NextProducerID != 6 || d.Value.PreviousProducerID != 4 {
		t.Fatalf("tv2 value: %+v %v", d.Value, err)
	}
	if got := snapshotFrom(d.Value); !reflect.DeepEqual(got, s2) {
		t.Fatalf("%+v, want %+v", got, s2)
	}
	empty := snapshot{producerID: 5, state: stateEmpty, startMs: -1}
	v := valueOf(empty)
	var kv kmsg.TxnMetadataValue
	if err := kv.ReadFrom(v); err != nil || kv.Topics != nil {
		t.Fatalf("Empty state's partitions must be null: %+v %v", kv, err)
	}
	if _, err := Decode(Record{Key: []byte{0, 1, 0, 1, 'x'}}); !errors.Is(err, ErrUnknownRecord) {
		t.Fatalf("key version 1: %v", err)
	}
	if _, err := Decode(Record{Key: keyOf("x"), Value: []byte{0, 0, 1}}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("short value: %v", err)
	}
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Values of Utils.abs("...".hashCode()) % 50 computed with Java.
	cases := map[string]int32{"": 0, "a": 47, "abc": 96354 % 50}
	for id, want := range cases {
		if got := PartitionFor(id, 50); got != want {
			t.Fatalf("%q: %d, want %d", id, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(keyOf("x"), valueOf(snapshot{producerID: 1, state: stateOngoing, partitions: []TopicPartition{tp("t", 0)}}))
	f.Add(keyOf("x"), valueOf(snapshot{producerID: 1, lastProducerID: 0, nextProducerID: 2, tv2: true, state: statePrepareAbort, partitions: []TopicPartition{tp("t", 0)}}))
	f.Add(keyOf(""), []byte(nil))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		d, err := Decode(Record{Key: k, Value: v})
		if err != nil || d.Value == nil {
			return
		}
		snapshotFrom(d.Value) // must not panic
	})
}
