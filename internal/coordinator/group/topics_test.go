package group

import (
	"testing"
	"testing/synctest"
)

// Offsets of a deleted topic leave every group at once and durably
// (tombstones), including what an open transaction committed for it; the
// other topics' offsets stay. A partition loading when the deletion is
// reported applies it once loaded.
func TestDeleteTopicOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		h := newHarness(t, Config{OffsetsTopicNumPartitions: 2}, store)
		defer func() { h.close() }()
		gone, kept := tp{"gone", 0}, tp{"kept", 0}
		groups := []string{"a", "b", "c"}
		for _, g := range groups {
			h.checkCommitted("commit", h.commit(g, nil, map[tp]int64{gone: 5, {"gone", 1}: 6, kept: 7}), 0)
		}
		h.txnCommit("a", 7, 0, -1, "", map[tp]int64{{"gone", 2}: 9})
		h.c.DeleteTopicOffsets([]string{"gone"})
		synctest.Wait()
		for _, g := range groups {
			checkOffsets(t, h.fetch(g), map[tp]int64{kept: 7})
		}
		// The transaction's commit must not bring the offset back.
		h.c.CompleteTxn(t.Context(), h.c.Partition("a"), 7, true)
		checkOffsets(t, h.fetch("a"), map[tp]int64{kept: 7})

		h.restart()
		for _, g := range groups {
			checkOffsets(t, h.fetch(g), map[tp]int64{kept: 7})
		}

		// A deletion reported while a partition loads.
		p := h.c.Partition("a")
		h.c.UnloadPartition(p)
		gate := make(chan struct{})
		store.setLoadGate(gate)
		done := async(func() error { return h.c.LoadPartition(t.Context(), p) })
		synctest.Wait()
		h.c.DeleteTopicOffsets([]string{"kept"})
		close(gate)
		if err := mustReady(t, done, "load"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		checkOffsets(t, h.fetch("a"), map[tp]int64{})
	})
}
