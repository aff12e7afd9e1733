package group

import "context"

// Record is one record of __consumer_offsets: a key and a value in Kafka's
// schemas (see the package documentation). A nil Value is a tombstone.
type Record struct {
	Key, Value []byte
	// Txn is set for the offset commits of a transaction (TxnOffsetCommit,
	// KIP-98): Append writes records with Txn as one transactional batch
	// of that producer, and Load passes them with Txn set, as well as the
	// COMMIT and ABORT markers that end them (Key and Value nil).
	Txn *TxnInfo
	// Alone, on the first record of a write, has the write appended by
	// a Store.Append of its own, never combined with the writes queued
	// beside it: each Append of a share group's rewrite cut to fit the
	// partition's max.message.bytes (share.Journal.MaxBatchBytes).
	Alone bool
}

// TxnInfo is the transaction of a Record.
type TxnInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// Marker reports a transaction marker, a COMMIT when Commit is set.
	Marker, Commit bool
}

// Store is the coordinator's view of the partitions of __consumer_offsets
// that this broker leads. The coordinator calls it from its own goroutines,
// never while holding its state, so an implementation may block on disk and
// on replication. It must be safe for concurrent use on different
// partitions; on one partition the coordinator never overlaps calls.
type Store interface {
	// Append writes recs, in order, to partition of __consumer_offsets and
	// returns once they are committed (durable up to the high-watermark),
	// or an error. When recs[0].Txn is set, every record belongs to that
	// producer's transaction and they are written as one transactional
	// batch (the coordinator never mixes them with other records). Errors carrying a Kafka error code (a *kerr.Error from
	// franz-go's kerr, possibly wrapped) are mapped as Kafka maps them for
	// clients: NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR become
	// NOT_COORDINATOR; UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS and
	// REQUEST_TIMED_OUT become COORDINATOR_NOT_AVAILABLE; MESSAGE_TOO_LARGE,
	// RECORD_LIST_TOO_LARGE and INVALID_FETCH_SIZE become
	// UNKNOWN_SERVER_ERROR (INVALID_COMMIT_OFFSET_SIZE for commits). Any
	// other error, including ctx's, becomes COORDINATOR_NOT_AVAILABLE.
	Append(ctx context.Context, partition int32, recs []Record) error

	// Load reads partition from its log start offset to its end, as of the
	// call (up to the high-watermark), calling fn for each record in offset
	// order, and returns fn's first error or its own. Records of
	// transactional batches come with Txn set, and the transaction markers
	// as records with Txn.Marker set; other control records are skipped.

	Load(ctx context.Context, partition int32, fn func(Record) error) error
}
