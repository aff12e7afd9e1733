package replica

import (
	"errors"
	"testing"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// lead hosts testTP on broker 1 as its only replica and leader.
func lead(t *testing.T) *Partition {
	t.Helper()
	m := newTestManager(t)
	p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, txn bool) []byte {
	t.Helper()
	b, err := record.Build(record.Spec{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: txn, BaseTimestamp: 1},
		[]record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// KIP-890 part 1: a transactional batch that starts the producer's
// transaction in the partition needs the verification guard, which a
// marker voids.
func TestTxnVerification(t *testing.T) {
	p := lead(t)
	if _, err := checkAppend(t, p, txnBatch(t, 5, 0, 0, true), nil); !errors.Is(err, storage.ErrInvalidTxnState) {
		t.Fatalf("unverified: %v", err)
	}
	g := p.StartTxnVerification(5, 0)
	if g == nil || p.StartTxnVerification(5, 0) != g {
		t.Fatal("no guard, or a second one for the same producer and epoch")
	}
	if _, err := checkAppend(t, p, txnBatch(t, 5, 0, 0, true), g); err != nil {
		t.Fatalf("verified: %v", err)
	}
	if p.StartTxnVerification(5, 0) != nil {
		t.Fatal("guard asked while the transaction is open")
	}
	if _, err := checkAppend(t, p, txnBatch(t, 5, 0, 1, true), nil); err != nil {
		t.Fatalf("open transaction: %v", err)
	}
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != 0 || hw != 2 {
		t.Fatalf("LSO %d HW %d", lso, hw)
	}
	if _, written, err := p.AppendTxnMarker(5, 0, 0, true, 1); err != nil || !written {
		t.Fatalf("marker: %v %v", written, err)
	}
	if _, written, err := p.AppendTxnMarker(5, 0, 0, true, 1); err != nil || written {
		t.Fatalf("retried marker written again: %v %v", written, err)
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO after commit: %d", lso)
	}
	// A guard taken before an abort marker cannot start a transaction
	// after it.
	g = p.StartTxnVerification(5, 0)
	if _, _, err := p.AppendTxnMarker(5, 1, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := checkAppend(t, p, txnBatch(t, 5, 0, 2, true), g); !errors.Is(err, storage.ErrInvalidTxnState) && !errors.Is(err, storage.ErrInvalidProducerEpoch) {
		t.Fatalf("late batch: %v", err)
	}
	if _, err := p.AppendInternalTxn(txnBatch(t, 9, 0, -1, true), nil); !errors.Is(err, storage.ErrInvalidTxnState) {
		t.Fatalf("internal transactional batch without guard: %v", err)
	}
}

func TestReadCommitted(t *testing.T) {
	p := lead(t)
	g := p.StartTxnVerification(7, 0)
	mustAppend := func(b []byte, g *TxnVerification) {
		t.Helper()
		if _, err := checkAppend(t, p, b, g); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(txnBatch(t, 7, 0, 0, true), g) // 0: aborted below
	mustAppend(txnBatch(t, -1, -1, -1, false), nil)
	if _, _, err := p.AppendTxnMarker(7, 0, 0, false, 1); err != nil { // 2
		t.Fatal(err)
	}
	g = p.StartTxnVerification(8, 0)
	mustAppend(txnBatch(t, 8, 0, 0, true), g) // 3: open
	fs, res, err := p.ReadSliceCommitted(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Release()
	if res.LastStableOffset != 3 || res.HighWatermark != 4 {
		t.Fatalf("LSO %d HW %d", res.LastStableOffset, res.HighWatermark)
	}
	if len(res.AbortedTransactions) != 1 || res.AbortedTransactions[0].ProducerID != 7 || res.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted %+v", res.AbortedTransactions)
	}
	buf := make([]byte, fs.Length)
	if _, err := fs.File.ReadAt(buf, fs.Position); err != nil {
		t.Fatal(err)
	}
	var last int64
	record.Batches(buf, func(_ []byte, h record.Header) error { last = h.LastOffset(); return nil })
	if last != 2 {
		t.Fatalf("read_committed read up to %d, want the marker at 2 (below the LSO)", last)
	}
	// A batch comes alone.
	two := append(txnBatch(t, 11, 0, 0, false), txnBatch(t, 11, 0, 1, false)...)
	if _, err := p.Check(two, 0); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("two batches: %v", err)
	}
	// Append takes only what Check accepted.
	if _, err := p.Append(record.Batch{Bytes: txnBatch(t, -1, -1, -1, false)}, 1, 0, nil); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("unchecked batch: %v", err)
	}
}

// checkAppend is the produce path: Check, then Append.
func checkAppend(t *testing.T, p *Partition, b []byte, g *TxnVerification) (storage.AppendResult, error) {
	t.Helper()
	vb, err := p.Check(b, 1)
	if err != nil {
		return storage.AppendResult{}, err
	}
	return p.Append(vb, 1, 1, g)
}
