// Package replica holds the partitions this broker hosts: their logs, leader
// epochs, high-watermarks (HW) and last stable offsets, and the waiting of
// fetches for new data (the fetch purgatory).
//
// On a single node every partition is led here and its in-sync replica set
// is this broker alone, so the high-watermark follows the log end offset
// on every append. The seam for replication is Partition: followers,
// the ISR and acks=all waiting attach there.
//
// Locks: Manager.mu guards the partition map; Partition.mu serializes
// appends and HW changes; Partition.waitMu guards the waiters. Never take
// Manager.mu while holding a Partition lock.
package replica
