package group

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *harness) txnCommit(group string, pid int64, epoch int16, generation int32, member string, offsets map[tp]int64) *kmsg.TxnOffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", group, pid, epoch
	req.Generation, req.MemberID = generation, member
	for k, off := range offsets {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = k.topic
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = k.partition, off
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	return h.c.TxnOffsetCommit(context.Background(), req)
}

func txnCodes(r *kmsg.TxnOffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// fetchStable is OffsetFetch v8 with require_stable: per partition code
// and offset.
func (h *harness) fetchStable(group string, k tp) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: k.topic, Partitions: []int32{k.partition}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	p := h.c.OffsetFetch(context.Background(), req).Groups[0].Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// Transactional offsets stay pending, invisible and unstable, until the
// COMMIT marker applies them; an ABORT drops them; both survive a reload
// from the log, markers included.
func TestTxnOffsetCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		h := newHarness(t, Config{}, store)
		defer func() { h.close() }()
		k := tp{"t", 0}
		h.checkCommitted("plain commit", h.commit("g", nil, map[tp]int64{k: 5}), 0)
		for _, c := range txnCodes(h.txnCommit("g", 7, 0, -1, "", map[tp]int64{k: 10})) {
			checkCode(t, "txn commit", c, 0)
		}
		checkOffsets(t, h.fetch("g", k), map[tp]int64{k: 5})
		if _, code := h.fetchStable("g", k); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("require_stable with a pending commit: %d", code)
		}
		h.c.CompleteTxn(context.Background(), 0, 7, true)
		checkOffsets(t, h.fetch("g", k), map[tp]int64{k: 10})
		if off, code := h.fetchStable("g", k); code != 0 || off != 10 {
			t.Fatalf("stable fetch after commit: %d %d", off, code)
		}
		// An aborted transaction leaves the offset as it was.
		h.txnCommit("g", 7, 0, -1, "", map[tp]int64{k: 20})
		h.c.CompleteTxn(context.Background(), 0, 7, false)
		checkOffsets(t, h.fetch("g", k), map[tp]int64{k: 10})

		// Reload: the log holds the transactional records; the markers
		// are written by the broker (here, by the test).
		h.txnCommit("g", 8, 0, -1, "", map[tp]int64{k: 30})        // committed below
		h.txnCommit("g", 9, 0, -1, "", map[tp]int64{{"t", 1}: 40}) // left open
		store.mu.Lock()
		store.logs[0] = append(store.logs[0],
			Record{Txn: &TxnInfo{ProducerID: 7, Marker: true, Commit: true}},  // the first transaction's marker
			Record{Txn: &TxnInfo{ProducerID: 7, Marker: true, Commit: false}}, // the second's
			Record{Txn: &TxnInfo{ProducerID: 8, Marker: true, Commit: true}})
		store.mu.Unlock()
		h.restart()
		checkOffsets(t, h.fetch("g", k, tp{"t", 1}), map[tp]int64{k: 30, {"t", 1}: -1})
		if _, code := h.fetchStable("g", tp{"t", 1}); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("open transaction lost on reload: %d", code)
		}
		h.c.CompleteTxn(context.Background(), 0, 9, true)
		checkOffsets(t, h.fetch("g", tp{"t", 1}), map[tp]int64{{"t", 1}: 40})
	})
}

// From v3 the member and generation are checked (KIP-447); a rebalance in
// progress does not fail a transactional commit.
func TestTxnOffsetCommitMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, nil)
		defer h.close()
		ms := h.stableGroup("g", 1, false)
		k := tp{"t", 0}
		checkCode(t, "stale generation", txnCodes(h.txnCommit("g", 1, 0, ms[0].generation+1, ms[0].id, map[tp]int64{k: 1}))[0], kerr.IllegalGeneration.Code)
		checkCode(t, "unknown member", txnCodes(h.txnCommit("g", 1, 0, ms[0].generation, "nobody", map[tp]int64{k: 1}))[0], kerr.UnknownMemberID.Code)
		checkCode(t, "member", txnCodes(h.txnCommit("g", 1, 0, ms[0].generation, ms[0].id, map[tp]int64{k: 1}))[0], 0)
	})
}
