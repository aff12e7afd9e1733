// Package quorum is the replicated metadata log. Its entries are record
// batches in the __cluster_metadata-0 partition directory, in Kafka's
// segment format, each record one metadata.Record.
//
// A single node (the default, process.roles=broker,controller with no
// controller.quorum.voters) uses Local: a one-voter log where an entry is
// committed once it is fsynced. The multi-voter quorum decided by
// go.etcd.io/raft/v3 (DESIGN.md) will implement the same Log interface.
package quorum
