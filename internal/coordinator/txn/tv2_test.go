package txn

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// wantEnd checks an EndTxn v5 response: its code and, on success, the
// producer id and epoch of the producer's next transaction.
func wantEnd(t *testing.T, what string, h *harness, id string, pid int64, epoch int16, commit bool, want *kerr.Error, wantPID int64, wantEpoch int16) {
	t.Helper()
	r := h.endV5(id, pid, epoch, commit)
	wantCode(t, what, r.ErrorCode, want)
	if want != nil {
		wantPID, wantEpoch = noProducerID, noProducerEpoch
	}
	if r.ProducerID != wantPID || r.ProducerEpoch != wantEpoch {
		t.Fatalf("%s: producer %d epoch %d, want %d epoch %d", what, r.ProducerID, r.ProducerEpoch, wantPID, wantEpoch)
	}
}

// Transaction version 2 (KIP-890 part 2), after Kafka's
// TransactionCoordinator.endTransaction: every EndTxn v5 bumps the epoch,
// the markers carry the bumped epoch, a retry with the epoch before the
// bump succeeds once complete, and a late copy that arrives during the
// next transaction is fenced and leaves it alone.
func TestEndTxnV2BumpsEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer func() { h.c.Close() }()
		pid, e0 := h.initOK("a")
		wantCode(t, "implicit add", h.addImplicit("a", pid, e0, tp("t", 0)), nil)
		wantEnd(t, "commit", h, "a", pid, e0, true, nil, pid, e0+1)
		synctest.Wait()
		if ms := h.markers.markers(tp("t", 0)); len(ms) != 1 || !ms[0].Commit || ms[0].ProducerEpoch != e0+1 {
			t.Fatalf("markers: %+v, want one COMMIT at epoch %d", ms, e0+1)
		}
		if d := h.describe("a"); d.State != "CompleteCommit" || d.ProducerEpoch != e0+1 {
			t.Fatalf("describe: %+v", d)
		}
		// The response was lost: the retry carries the old epoch.
		wantEnd(t, "commit retried", h, "a", pid, e0, true, nil, pid, e0+1)
		wantEnd(t, "abort retried", h, "a", pid, e0, false, kerr.InvalidTxnState, 0, 0)

		// The producer goes on at e0+1; a late copy of the first EndTxn
		// is fenced and the second transaction stays open.
		wantCode(t, "old epoch cannot add", h.addImplicit("a", pid, e0, tp("t", 1)), kerr.ProducerFenced)
		wantCode(t, "add at the new epoch", h.addImplicit("a", pid, e0+1, tp("t", 1)), nil)
		wantEnd(t, "late commit of the first transaction", h, "a", pid, e0, true, kerr.ProducerFenced, 0, 0)
		wantEnd(t, "late abort", h, "a", pid, e0, false, kerr.ProducerFenced, 0, 0)
		if d := h.describe("a"); d.State != "Ongoing" || len(d.Topics) != 1 {
			t.Fatalf("second transaction after the replay: %+v", d)
		}
		wantEnd(t, "abort the second", h, "a", pid, e0+1, false, nil, pid, e0+2)
		synctest.Wait()
		if ms := h.markers.markers(tp("t", 1)); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != e0+2 {
			t.Fatalf("markers: %+v", ms)
		}
		// Aborting with nothing added is allowed (the producer cannot know
		// whether its produces added partitions) and bumps the epoch; a
		// commit of nothing is not.
		wantEnd(t, "commit of nothing", h, "a", pid, e0+2, true, kerr.InvalidTxnState, 0, 0)
		wantEnd(t, "abort of nothing", h, "a", pid, e0+2, false, nil, pid, e0+3)
		synctest.Wait()
		wantEnd(t, "retry of the empty abort", h, "a", pid, e0+2, false, nil, pid, e0+3)
		wantEnd(t, "epoch from the future", h, "a", pid, e0+5, false, kerr.ProducerFenced, 0, 0)
		wantEnd(t, "other producer id", h, "a", pid+1, e0+3, false, kerr.InvalidProducerIDMapping, 0, 0)
		want := []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort", "PrepareAbort", "CompleteAbort"}
		if got := h.store.states(t, "a"); !reflect.DeepEqual(got, want) {
			t.Fatalf("states written %v, want %v", got, want)
		}

		// A new coordinator reads the epochs back (value version 1).
		h.restart(1)
		wantEnd(t, "retry after a coordinator move", h, "a", pid, e0+2, false, nil, pid, e0+3)
		wantCode(t, "add after the move", h.addImplicit("a", pid, e0+3, tp("t", 0)), nil)
		wantEnd(t, "commit after the move", h, "a", pid, e0+3, true, nil, pid, e0+4)
	})
}

// Under transaction version 1 (EndTxn v0-v4) the epoch stays: a late copy
// of an EndTxn that arrives once the producer began its next transaction
// ends that transaction. This is the hazard transaction version 2 closes.
func TestEndTxnV1LateRetryEndsNextTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer func() { h.c.Close() }()
		pid, e := h.initOK("a")
		wantCode(t, "add", h.add("a", pid, e, tp("t", 0)), nil)
		wantCode(t, "commit", h.end("a", pid, e, true), nil)
		synctest.Wait()
		wantCode(t, "add to the next", h.add("a", pid, e, tp("t", 1)), nil)
		wantCode(t, "late copy of the first commit", h.end("a", pid, e, true), nil)
		synctest.Wait()
		if d := h.describe("a"); d.State != "CompleteCommit" {
			t.Fatalf("the late copy should have committed the second transaction under v1: %+v", d)
		}
	})
}

// At an exhausted epoch the bump of transaction version 2 rotates the
// producer id: the markers take the last epoch of the old id, the
// response the new id at epoch 0, and a retry with the old id and its last
// epoch still succeeds (Kafka's retryOnOverflow).
func TestEndTxnV2RotatesExhaustedEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{})
		defer func() { h.c.Close() }()
		pid, _ := h.initOK("a")
		// Move the id to the last usable epoch.
		h.c.post(func() {
			m := h.c.partitions[0].txns["a"]
			m.epoch = maxProducerEpoch
		})
		synctest.Wait()
		wantCode(t, "add", h.addImplicit("a", pid, maxProducerEpoch, tp("t", 0)), nil)
		r := h.endV5("a", pid, maxProducerEpoch, true)
		wantCode(t, "commit", r.ErrorCode, nil)
		if r.ProducerID == pid || r.ProducerEpoch != 0 {
			t.Fatalf("commit at an exhausted epoch: producer %d epoch %d, want a new id at epoch 0", r.ProducerID, r.ProducerEpoch)
		}
		synctest.Wait()
		if ms := h.markers.markers(tp("t", 0)); len(ms) != 1 || ms[0].ProducerID != pid || ms[0].ProducerEpoch != maxProducerEpoch+1 {
			t.Fatalf("markers: %+v, want producer %d at epoch %d", ms, pid, maxProducerEpoch+1)
		}
		if d := h.describe("a"); d.ProducerID != r.ProducerID || d.ProducerEpoch != 0 || d.State != "CompleteCommit" {
			t.Fatalf("describe: %+v", d)
		}
		wantEnd(t, "retry with the old id", h, "a", pid, maxProducerEpoch, true, nil, r.ProducerID, 0)
		wantCode(t, "the new id goes on", h.addImplicit("a", r.ProducerID, 0, tp("t", 0)), nil)
		wantEnd(t, "old id fenced now", h, "a", pid, maxProducerEpoch, true, kerr.ProducerFenced, 0, 0)
	})
}

// A transaction version 2 transaction that times out is fenced with one
// bump and aborted with another, so that a late EndTxn of the fenced
// producer (its epoch + 1 is not the current epoch) is not taken for a
// retry.
func TestTimeoutV2FencesLateEndTxn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{AbortTimedOutInterval: time.Second})
		defer func() { h.c.Close() }()
		r := h.init("a", 1000)
		pid, e := r.ProducerID, r.ProducerEpoch
		wantCode(t, "add", h.addImplicit("a", pid, e, tp("t", 0)), nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if d := h.describe("a"); d.State != "CompleteAbort" || d.ProducerEpoch != e+2 {
			t.Fatalf("after the timeout: %+v, want CompleteAbort at epoch %d", d, e+2)
		}
		wantEnd(t, "late abort of the timed-out producer", h, "a", pid, e, false, kerr.ProducerFenced, 0, 0)
		wantEnd(t, "late commit", h, "a", pid, e, true, kerr.ProducerFenced, 0, 0)
	})
}
