// Package replica holds the partitions this broker hosts: their logs, leader
// epochs, high-watermarks (HW) and last stable offsets, and the waiting of
// fetches for new data (the fetch purgatory).
//
// On a single node every partition is led here and its in-sync replica set
// is this broker alone, so the high-watermark follows the log end offset
// on every append. The seam for replication is Partition: followers,
// the ISR and acks=all waiting attach there.
//
// Transactions (txn.go, KIP-98): the last stable offset is the
// high-watermark, or the first offset of the oldest transaction still open
// in the log's producer state when lower; read_committed reads stop there
// and list the aborted transactions in range. Markers are written for the
// transaction coordinator, once per partition and transaction. A
// producer's first transactional batch in a partition needs a
// verification guard (KIP-890 part 1), voided by any marker of that
// producer, so that a late write cannot open a transaction nobody ends.
//
// Fetch from the closest replica (selector.go, KIP-392): a follower serves
// consumers up to the high-watermark it learned from the leader; a leader
// picks, for a consumer in a rack, the in-sync follower of that rack that
// holds the offset and is most caught up (Kafka's RackAwareReplicaSelector),
// from the log end and log start offsets followers report in their fetches.
//
// The purgatory (purgatory.go) parks the requests that wait on partitions:
// produces with acks=all and coordinator writes until the high-watermark
// passes their offset, fetches until appends made min_bytes readable.
//
// Follower fetches use fetch sessions (KIP-227, fetcher.go): after a full
// fetch, each request names only the partitions whose fetch offset, log
// start offset or epochs changed.
//
// Fetch sessions cost what changed (sessionwatch.go, issue 13): a
// follower's or a consumer's session on the broker and each fetcher
// register a
// SessionWatch with their partitions, which mark it on every change, so
// that a fetch or a request looks only at the marked partitions; the
// watch's stamp of the session's fetches keeps the ISR rules for the
// partitions a fetch did not read.
//
// Locks: Manager.mu guards the partition map; Partition.mu serializes
// appends and HW changes; Partition.purg.mu, taken inside Partition.mu,
// guards the partition's waiters and watches, and takes only
// SessionWatch.mu, a leaf. A fetcher's mu is taken inside Manager.mu and
// takes Partition.purg.mu and Partition.mu (Watch, Unwatch). Never take
// Manager.mu while holding a Partition lock.
package replica
