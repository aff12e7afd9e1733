package txn

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction states, Kafka's TransactionState (the int8 of
// TxnMetadataValue.State).
const (
	stateEmpty             kmsg.TransactionState = 0
	stateOngoing           kmsg.TransactionState = 1
	statePrepareCommit     kmsg.TransactionState = 2
	statePrepareAbort      kmsg.TransactionState = 3
	stateCompleteCommit    kmsg.TransactionState = 4
	stateCompleteAbort     kmsg.TransactionState = 5
	stateDead              kmsg.TransactionState = 6
	statePrepareEpochFence kmsg.TransactionState = 7
)

// Producer id and epoch sentinels (RecordBatch.NO_PRODUCER_ID/EPOCH).
const (
	noProducerID    = -1
	noProducerEpoch = -1
	// maxProducerEpoch: Kafka rotates the producer id once the epoch
	// reaches Short.MAX_VALUE - 1 (TransactionMetadata.isEpochExhausted).
	maxProducerEpoch = 1<<15 - 2
)

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// snapshot is a transactional id's metadata as written to
// __transaction_state (Kafka's TxnTransitMetadata).
type snapshot struct {
	producerID     int64
	lastProducerID int64
	epoch          int16
	lastEpoch      int16
	timeoutMs      int32
	state          kmsg.TransactionState
	partitions     []TopicPartition // sorted
	startMs        int64            // -1 when no transaction was started
	updateMs       int64
	// nextProducerID is the producer id a transaction version 2 commit or
	// abort rotates to once complete, its epoch having reached
	// maxProducerEpoch+1 with the markers; -1 when none (Kafka's
	// TxnMetadataValue.NextProducerId).
	nextProducerID int64
	// tv2 is set when the transaction runs under transaction version 2
	// (KIP-890 part 2): EndTxn v5+, or partitions added by a partition
	// leader for Produce v12+; its commit or abort bumps the epoch
	// (Kafka's ClientTransactionVersion).
	tv2 bool
}

// txnMeta is one transactional id on its partition of __transaction_state,
// owned by the run goroutine.
type txnMeta struct {
	id string
	snapshot
	// pending is set while a write of this transactional id is in flight:
	// other requests get CONCURRENT_TRANSACTIONS meanwhile.
	pending bool
	// markers is set while the markers of a prepared commit or abort are
	// being written.
	markers bool
}

// partitionSet returns the transaction's partitions as a set.
func (s *snapshot) partitionSet() map[TopicPartition]struct{} {
	m := make(map[TopicPartition]struct{}, len(s.partitions))
	for _, tp := range s.partitions {
		m[tp] = struct{}{}
	}
	return m
}

// hasAll reports whether every partition of tps is in the transaction.
func (s *snapshot) hasAll(tps []TopicPartition) bool {
	set := s.partitionSet()
	for _, tp := range tps {
		if _, ok := set[tp]; !ok {
			return false
		}
	}
	return true
}

// withPartitions returns the sorted union of the transaction's partitions
// and tps.
func (s *snapshot) withPartitions(tps []TopicPartition) []TopicPartition {
	set := s.partitionSet()
	for _, tp := range tps {
		set[tp] = struct{}{}
	}
	return slices.SortedFunc(maps.Keys(set), compareTP)
}

func (s *snapshot) epochExhausted() bool { return s.epoch >= maxProducerEpoch }

// isPrepare reports PrepareCommit or PrepareAbort.
func isPrepare(st kmsg.TransactionState) bool {
	return st == statePrepareCommit || st == statePrepareAbort
}

// snapshotFrom converts a loaded value.
func snapshotFrom(v *kmsg.TxnMetadataValue) snapshot {
	s := snapshot{
		producerID:     v.ProducerID,
		lastProducerID: noProducerID,
		epoch:          v.ProducerEpoch,
		lastEpoch:      noProducerEpoch,
		timeoutMs:      v.TimeoutMillis,
		state:          v.State,
		startMs:        v.StartTimestamp,
		updateMs:       v.LastUpdateTimestamp,
		nextProducerID: noProducerID,
	}
	if v.Version >= 1 {
		if v.PreviousProducerID >= 0 {
			s.lastProducerID = v.PreviousProducerID
		}
		if v.NextProducerID >= 0 {
			s.nextProducerID = v.NextProducerID
		}
		s.tv2 = v.ClientTransactionVersion >= 2
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			s.partitions = append(s.partitions, TopicPartition{t.Topic, p})
		}
	}
	slices.SortFunc(s.partitions, compareTP)
	s.partitions = slices.Compact(s.partitions)
	return s
}
