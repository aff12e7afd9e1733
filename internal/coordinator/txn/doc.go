// Package txn is Samsa's transaction coordinator (KIP-98): it hands out
// producer ids and epochs to transactional producers, keeps the partitions
// of each open transaction, and ends transactions by writing COMMIT or
// ABORT markers to those partitions, after Kafka's TransactionCoordinator,
// TransactionStateManager and TransactionMarkerChannelManager (transaction
// versions 1 and 2: KIP-890 part 2's epoch bump on every EndTxn v5).
//
// # Who coordinates a transactional id
//
// Transactional id T belongs to partition PartitionFor(T,
// transaction.state.log.num.partitions) of __transaction_state (Java's
// String.hashCode, Utils.abs, modulo); the broker leading that partition is
// T's coordinator. The broker answers FindCoordinator (key type 1), creates
// __transaction_state on first use, and tells the Coordinator which
// partitions it leads and at which leader epoch (the coordinator epoch
// carried by markers):
//
//	c := txn.New(cfg, txn.Deps{Store: s, Markers: w, NewProducerID: alloc})
//	go c.LoadPartition(ctx, p, leaderEpoch)
//	c.UnloadPartition(p)
//	resp := c.EndTxn(ctx, req)
//	c.Close()
//
// Request methods take the decoded kmsg request and return the response
// for its version; they never return Go errors.
//
// # Persistence
//
// Every change of a transactional id is written to its partition of
// __transaction_state, and committed, before it takes effect and before
// the request is answered. Records are Kafka's (kmsg types), big-endian:
//
//	key    TxnMetadataKey   version int16 = 0, transactional id string
//	value  TxnMetadataValue version int16 = 0, producer id int64, producer epoch int16,
//	                        transaction timeout int32 (ms), state int8,
//	                        partitions nullable [topic string, [partition int32]]
//	                        (null in state Empty), last update timestamp int64 (ms),
//	                        transaction start timestamp int64 (ms, -1 none)
//	tombstone               a key with a nil value: the transactional id expired
//
// States: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
// 4 CompleteCommit, 5 CompleteAbort (6 Dead and 7 PrepareEpochFence are
// never written). LoadPartition replays a partition keeping the latest
// value per id; transactions found PrepareCommit or PrepareAbort get their
// markers written again and are completed, so a coordinator that stopped
// between the two never leaves a transaction hanging. Transactions of
// transaction version 2 are written as value version 1 (flexible), with
// the tagged fields PreviousProducerId (tag 0, the producer id before a
// rotation), NextProducerId (tag 1, the one a prepared transaction rotates
// to) and ClientTransactionVersion (tag 2, = 2), as Kafka writes them;
// both versions are read.
//
// # Protocol
//
//	InitProducerId      Empty|Complete* -> Empty, epoch+1 (a new producer id
//	                    when the epoch is exhausted); Ongoing -> abort with
//	                    epoch+1 first (the old instance is fenced), answer
//	                    CONCURRENT_TRANSACTIONS, the retry bumps again.
//	AddPartitionsToTxn  Empty|Ongoing|Complete* -> Ongoing with the partitions
//	AddOffsetsToTxn     the same with the group's __consumer_offsets partition
//	EndTxn              Ongoing -> PrepareCommit|PrepareAbort, answered; then
//	                    markers to every partition (MarkerWriter), retried
//	                    until each partition took one, then
//	                    CompleteCommit|CompleteAbort. v5 (transaction
//	                    version 2) bumps the epoch at Prepare*, writes the
//	                    markers with it and answers it; an exhausted epoch
//	                    rotates the producer id at Complete*. v5 may also
//	                    abort Empty|Complete* (nothing added): epoch+1.
//	timeout             Ongoing longer than its transaction.timeout.ms ->
//	                    abort with epoch+1 (checked every
//	                    transaction.abort.timed.out.transaction.cleanup.interval.ms)
//	expiration          Empty|Complete* idle transactional.id.expiration.ms
//	                    -> tombstone
//
// Requests with another producer id get INVALID_PRODUCER_ID_MAPPING, with
// another epoch PRODUCER_FENCED; requests for an id whose write or markers
// are in flight get CONCURRENT_TRANSACTIONS, which clients retry.
// AddPartitionsToTxn v4 with verify_only answers, for a partition leader,
// whether a partition is in the open transaction (KIP-890 part 1); without
// verify_only (Produce v12, TxnOffsetCommit v5) it adds the partition and
// marks the transaction as of transaction version 2 (KIP-890 part 2).
//
// # Concurrency
//
// One goroutine, started by New, owns the state and a heap of timers armed
// on one time.Timer (so that testing/synctest drives the timeouts).
// Request methods hand it a closure and wait for their answer. Writes go
// to one writer goroutine per loaded partition (package appendq), which
// calls Store.Append outside the state, one call at a time (combining the
// writes queued meanwhile, up to 1 MiB), and posts results back in order;
// the markers of each ending transaction are written by a goroutine of
// their own through the MarkerWriter. Close cancels loads, writes and
// marker sends and waits for every goroutine it started.
package txn
