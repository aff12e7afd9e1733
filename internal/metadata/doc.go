// Package metadata holds the cluster's metadata as records (the entries of
// the __cluster_metadata log) and the immutable Image built by applying them
// in order, as KRaft does.
//
// Records are encoded as a record of a v2 batch whose key is the record
// type (e.g. "topic") and whose value is the record as JSON. Kafka encodes
// its metadata records with its generated binary schemas (TopicRecord,
// PartitionRecord, ...); Samsa's differ in encoding but carry the same
// fields, and no client ever reads them.
//
// An Image is never modified after it is published: Apply returns a new
// one that shares unchanged topics with the old. Images are safe for
// concurrent reads.
package metadata
