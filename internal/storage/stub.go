package storage

// Placeholder bodies; replaced by the real implementation.

// Log is one partition's log: its segments, indexes and offsets. Safe for
// concurrent use: one lock serializes appends, reads of closed segments
// take no lock.
type Log struct{}

// Open opens or creates the log in opts.Dir and recovers it (see OpenOptions).
func Open(opts OpenOptions) (*Log, error) { panic("unimplemented") }

// Append writes batches, a concatenation of whole v2 batches already checked
// by record.Validate, at the log end: it stamps each batch's base offset and
// the given partition leader epoch in place (the caller's slice is
// modified), rolls segments as Config asks, and adds index entries.
// Returns the offsets assigned.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	panic("unimplemented")
}

// Read returns whole batches starting with the batch holding offset, up to
// maxBytes in all, never including a batch whose last offset is at or past
// maxOffset (the high-watermark for consumers). When minOneBatch is set the
// first batch is returned whole even if larger than maxBytes (KIP-74).
// An offset below the log start offset or above the log end offset gives
// ErrOffsetOutOfRange; offset == log end offset gives no records.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	panic("unimplemented")
}

// LogStartOffset is the first offset the log holds (or will hold).
func (l *Log) LogStartOffset() int64 { panic("unimplemented") }

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { panic("unimplemented") }

// OffsetForTimestamp finds the first batch whose max timestamp is >= ts
// (ListOffsets by timestamp) and returns the offset of the first record in
// it with timestamp >= ts and that record's timestamp. ok is false when no
// record has such a timestamp.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	panic("unimplemented")
}

// MaxTimestamp returns the largest timestamp in the log and the offset of
// the record holding it (ListOffsets MAX_TIMESTAMP, KIP-734); ok is false for
// an empty log.
func (l *Log) MaxTimestamp() (timestamp, offset int64, ok bool) { panic("unimplemented") }

// Flush fsyncs every segment up to the log end and advances the recovery
// point.
func (l *Log) Flush() error { panic("unimplemented") }

// RecoveryPoint is the offset below which the log is known to be on disk.
func (l *Log) RecoveryPoint() int64 { panic("unimplemented") }

// MaybeRoll rolls the active segment if it is older than Config.SegmentMs.
func (l *Log) MaybeRoll() error { panic("unimplemented") }

// Truncate removes every record at or above offset (a follower truncating
// to its leader's history). Used by replication.
func (l *Log) Truncate(offset int64) error { panic("unimplemented") }

// Close flushes and closes the files; later calls give ErrClosed.
func (l *Log) Close() error { panic("unimplemented") }

// Delete closes the log and removes its directory.
func (l *Log) Delete() error { panic("unimplemented") }
