package samsa_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
)

// txnV1Versions caps the transaction APIs below KIP-890 part 2 (EndTxn
// v4, Produce v11, TxnOffsetCommit v4): a client of transaction version 1.
func txnV1Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	v.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	return v
}

// txnRaw drives one transactional id with raw requests at pinned versions.
type txnRaw struct {
	t   *testing.T
	ctx context.Context
	cl  *kgo.Client
	id  string
	pid int64
}

func (r *txnRaw) init() int16 {
	r.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &r.id, 60000
	for {
		resp, err := req.RequestWith(r.ctx, r.cl)
		if err != nil {
			r.t.Fatal(err)
		}
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code || resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
			continue
		}
		wantErr(r.t, "InitProducerId", resp.ErrorCode, nil)
		r.pid = resp.ProducerID
		return resp.ProducerEpoch
	}
}

// produce writes one transactional record to partition with Produce at
// version (v12: the partition is added to the transaction implicitly).
func (r *txnRaw) produce(partition int32, epoch int16, seq int32, value string, version int16) int16 {
	r.t.Helper()
	batch, err := record.Build(record.Spec{Transactional: true, ProducerID: r.pid, ProducerEpoch: epoch, BaseSequence: seq,
		BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		r.t.Fatal(err)
	}
	for {
		p := produceBatch(r.t, r.cl, "lost", partition, version, r.id, batch)
		if p.ErrorCode == kerr.NotEnoughReplicas.Code { // the coordinator is still ending the last transaction
			continue
		}
		return p.ErrorCode
	}
}

func (r *txnRaw) add(partition int32, epoch int16) {
	r.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = r.id, r.pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = "lost", []int32{partition}
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
	for {
		resp, err := req.RequestWith(r.ctx, r.cl)
		if err != nil {
			r.t.Fatal(err)
		}
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.ConcurrentTransactions.Code {
			wantErr(r.t, "AddPartitionsToTxn", c, nil)
			return
		}
	}
}

// end sends EndTxn at the client's highest version, again while it is
// CONCURRENT_TRANSACTIONS, and returns its response.
func (r *txnRaw) end(epoch int16, commit bool) *kmsg.EndTxnResponse {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = r.id, r.pid, epoch, commit
	for {
		resp, err := req.RequestWith(r.ctx, r.cl)
		if err != nil {
			r.t.Fatal(err)
		}
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code { // retried, as clients do
			return resp
		}
	}
}

func values(recs []*kgo.Record) string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return strings.Join(vs, ",")
}

// TestTxnV2LostEndTxn loses the response to an EndTxn: the producer
// retries it, learns the bumped epoch from the retry and begins its next
// transaction; then the first EndTxn arrives once more, late (a retry
// stuck in a slow network). Under transaction version 2 (EndTxn v5, the
// default of a new cluster, advertised in ApiVersions) the late copy is
// PRODUCER_FENCED and the second transaction stays open until its own
// EndTxn. Under version 1 (EndTxn v3) the late copy carries the same
// epoch as the second transaction and commits it: what KIP-890 part 2
// closes.
func TestTxnV2LostEndTxn(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps(nil))
	admin := newClient(t, n)
	createTopic(t, admin, "lost", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	tv := int16(-1)
	for _, f := range av.FinalizedFeatures {
		if f.Name == "transaction.version" {
			tv = f.MaxVersionLevel
		}
	}
	if tv != 2 || av.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("ApiVersions finalized features %+v (epoch %d), want transaction.version 2", av.FinalizedFeatures, av.FinalizedFeaturesEpoch)
	}

	t.Run("v2", func(t *testing.T) {
		r := &txnRaw{t: t, ctx: ctx, cl: admin, id: "lost-v2"}
		e := r.init()
		wantErr(t, "implicit add by Produce v12", r.produce(0, e, 0, "first", 12), nil)
		lost := r.end(e, true) // its answer never reaches the producer
		if lost.Version != 5 {
			t.Fatalf("EndTxn sent at v%d, want v5", lost.Version)
		}
		retry := r.end(e, true)
		wantErr(t, "EndTxn retry", retry.ErrorCode, nil)
		if retry.ProducerID != r.pid || retry.ProducerEpoch != e+1 {
			t.Fatalf("EndTxn retry: producer %d epoch %d, want %d epoch %d", retry.ProducerID, retry.ProducerEpoch, r.pid, e+1)
		}
		wantErr(t, "produce of the next transaction", r.produce(1, e+1, 0, "second", 12), nil)
		wantErr(t, "late copy of the first EndTxn", r.end(e, true).ErrorCode, kerr.ProducerFenced)
		wantErr(t, "produce at the old epoch", r.produce(0, e, 1, "zombie", 12), kerr.InvalidProducerEpoch)
		if d := describeTxn(t, admin, "lost-v2"); d.State != "Ongoing" || d.ProducerEpoch != e+1 {
			t.Fatalf("second transaction after the late EndTxn: %s at epoch %d", d.State, d.ProducerEpoch)
		}
		if got := values(readTopic(t, n.Addr(), "lost", kgo.ReadCommitted(), 1, 5*time.Second)); got != "first" {
			t.Fatalf("read_committed with the second transaction open: %q, want first", got)
		}
		abort := r.end(e+1, false)
		wantErr(t, "abort of the second", abort.ErrorCode, nil)
		if abort.ProducerEpoch != e+2 {
			t.Fatalf("abort: epoch %d, want %d", abort.ProducerEpoch, e+2)
		}
		waitTxnEnded(t, admin, "lost-v2", "lost", 30*time.Second)
		if got := values(readTopic(t, n.Addr(), "lost", kgo.ReadCommitted(), 1, 5*time.Second)); got != "first" {
			t.Fatalf("read_committed after the abort: %q, want first", got)
		}
	})

	t.Run("v1", func(t *testing.T) {
		v1 := newClient(t, n, kgo.MaxVersions(txnV1Versions()))
		r := &txnRaw{t: t, ctx: ctx, cl: v1, id: "lost-v1"}
		e := r.init()
		r.add(0, e)
		wantErr(t, "produce", r.produce(0, e, 0, "v1-first", 11), nil)
		lost := r.end(e, true)
		if lost.Version != 4 {
			t.Fatalf("EndTxn sent at v%d, want v4", lost.Version)
		}
		wantErr(t, "EndTxn retry", r.end(e, true).ErrorCode, nil)
		waitTxnEnded(t, admin, "lost-v1", "lost", 30*time.Second)
		r.add(1, e)
		wantErr(t, "produce of the next transaction", r.produce(1, e, 0, "v1-second", 11), nil)
		// The documented hazard of version 1: the late copy ends the
		// second transaction, which the producer never committed.
		wantErr(t, "late copy of the first EndTxn", r.end(e, true).ErrorCode, nil)
		if state := waitTxnEnded(t, admin, "lost-v1", "lost", 30*time.Second); state != "CompleteCommit" {
			t.Fatalf("second transaction: %s, want CompleteCommit (the v1 hazard)", state)
		}
	})
}

// TestTxnV2Franz runs franz-go's transactional producer, which opts into
// KIP-890 part 2 when ApiVersions finalizes transaction.version 2: then
// every EndTxn (v5) bumps the producer epoch and partitions are added by
// Produce v12 without AddPartitionsToTxn. A node formatted with
// transaction.version=1 keeps franz-go on version 1: the epoch stays.
func TestTxnV2Franz(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level int16
		bump  int16 // epoch change per transaction
	}{
		{"default", -1, 1},
		{"transaction.version=1", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.level >= 0 {
				if err := metadata.WriteBootstrap(dir, []metadata.Record{metadata.FeatureLevelRecord{Name: metadata.FeatureTransactionVersion, FeatureLevel: tc.level}}); err != nil {
					t.Fatal(err)
				}
			}
			n := startNode(t, dir, txnProps(nil))
			admin := newClient(t, n)
			createTopic(t, admin, "franz2", 3, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := newClient(t, n, kgo.TransactionalID("franz2"), kgo.DefaultProduceTopic("franz2"))
			var epochs []int16
			var want []string
			for i, commit := range []bool{true, false, true, true} {
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for j := range 6 {
					v := fmt.Sprintf("%d-%d", i, j)
					if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatalf("produce %s: %v", v, err)
					}
					if commit {
						want = append(want, v)
					}
				}
				if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					t.Fatalf("end %d: %v", i, err)
				}
				epochs = append(epochs, describeTxn(t, admin, "franz2").ProducerEpoch)
			}
			// franz-go learns the features with its first responses: it
			// opts in after the first transaction (and reloads its
			// producer id, one more bump), so count from the second.
			for i := 2; i < len(epochs); i++ {
				if epochs[i]-epochs[i-1] != tc.bump {
					t.Fatalf("producer epochs after each transaction %v: want a change of %d per transaction", epochs, tc.bump)
				}
			}
			got := readTopic(t, n.Addr(), "franz2", kgo.ReadCommitted(), len(want), 10*time.Second)
			var vs []string
			for _, r := range got {
				vs = append(vs, string(r.Value))
			}
			slices.Sort(vs)
			if strings.Join(vs, ",") != strings.Join(want, ",") {
				t.Fatalf("read_committed %q, want %q", vs, want)
			}
			t.Logf("epochs after each transaction: %v", epochs)
		})
	}
}

// finalizedLevel is the finalized level of feature name that ApiVersions
// through r reports, 0 when none.
func finalizedLevel(t *testing.T, ctx context.Context, r kmsg.Requestor, name string) int16 {
	t.Helper()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range av.FinalizedFeatures {
		if f.Name == name {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// TestUpdateFeatures turns transaction.version down and up again with
// UpdateFeatures (API 57), as kafka-features does: ApiVersions follows,
// a downgrade needs a downgrade type, unknown features and levels out of
// range are INVALID_UPDATE_VERSION.
func TestUpdateFeatures(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	level := func() int16 { return finalizedLevel(t, ctx, cl, "transaction.version") }
	update := func(name string, lvl int16, upgradeType int8, validateOnly bool) int16 {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.TimeoutMillis, req.ValidateOnly = 10000, validateOnly
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = name, lvl, upgradeType
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Results[0].ErrorCode
	}
	// The bootstrap records carry the level, in the image before the node
	// serves (TestFirstApiVersionsBootstrapped).
	if l := level(); l != 2 {
		t.Fatalf("new cluster: transaction.version %d, want 2", l)
	}
	wantErr(t, "downgrade as an upgrade", update("transaction.version", 1, 1, false), kerr.InvalidUpdateVersion)
	wantErr(t, "unknown feature", update("no.such.feature", 1, 1, false), kerr.InvalidUpdateVersion)
	wantErr(t, "level out of range", update("transaction.version", 3, 1, false), kerr.InvalidUpdateVersion)
	wantErr(t, "validate-only downgrade", update("transaction.version", 1, 2, true), nil)
	if l := level(); l != 2 {
		t.Fatalf("after validate-only: %d", l)
	}
	wantErr(t, "safe downgrade", update("transaction.version", 1, 2, false), nil)
	// The write is committed and applied to this node's image before
	// the answer (one node: the controller is this node).
	if l := level(); l != 1 {
		t.Fatalf("after the downgrade: %d", l)
	}
	wantErr(t, "upgrade", update("transaction.version", 2, 1, false), nil)
	if l := level(); l != 2 {
		t.Fatalf("after the upgrade: %d", l)
	}
}
