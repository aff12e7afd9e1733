package dumplog

import (
	"bufio"
	"fmt"
	"os"

	"github.com/samsahq/samsa/internal/storage"
)

// dumpProducerSnapshot writes the producers of a <offset>.snapshot file
// (producer state, storage's format), one a line as kafka-dump-log does.
func dumpProducerSnapshot(w *bufio.Writer, name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	entries, err := storage.DecodeProducerSnapshot(b)
	if err != nil {
		fmt.Fprintf(w, "  %v\n", err)
		return fmt.Errorf("%w: 1", ErrProblems)
	}
	for _, e := range entries {
		txn := "None"
		if e.CurrentTxnFirstOffset >= 0 {
			txn = fmt.Sprint(e.CurrentTxnFirstOffset)
		}
		first := int64(e.LastSequence) - int64(e.OffsetDelta)
		if e.LastSequence < 0 {
			first = -1
		}
		fmt.Fprintf(w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d\n",
			e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch, txn, e.Timestamp, first, e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp)
	}
	return nil
}

// dumpTxnIndex writes the aborted transactions of a .txnindex file.
func dumpTxnIndex(w *bufio.Writer, name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	entries, err := storage.DecodeTxnIndex(b)
	if err != nil {
		fmt.Fprintf(w, "  %v\n", err)
		return fmt.Errorf("%w: 1", ErrProblems)
	}
	for _, e := range entries {
		fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
	}
	return nil
}
