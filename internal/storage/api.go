package storage

// THIS FILE IS THE CONTRACT between storage and its callers (replica, broker).
// Signatures here are fixed; bodies are filled in by the storage work.

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
)

// Errors callers branch on.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the log
	// end offset (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("storage: log closed")
)

// Config is one partition log's configuration. The zero value of each field
// means Kafka's default.
type Config struct {
	// SegmentBytes rolls the active segment past this size (log.segment.bytes,
	// topic segment.bytes; default 1 GiB).
	SegmentBytes int64
	// SegmentAge rolls the active segment once its first batch is this old
	// (log.roll.ms / log.roll.hours, topic segment.ms; default 7 days).
	SegmentAge time.Duration
	// IndexIntervalBytes is the bytes of batches between two entries of the
	// sparse offset and time indexes (log.index.interval.bytes, topic
	// index.interval.bytes; default 4096).
	IndexIntervalBytes int32
	// SegmentIndexBytes is the maximum size of an offset or time index file;
	// a full index rolls the segment (log.index.size.max.bytes, topic
	// segment.index.bytes; default 10 MiB).
	SegmentIndexBytes int32
	// FlushIntervalMessages is flush.messages (log.flush.interval.messages):
	// an append that leaves this many messages or more above the recovery
	// point returns after an fsync that covers it, shared with concurrent
	// appends (flush.go). Zero means never (Kafka's default,
	// Long.MAX_VALUE): leave it to the OS and to replication.
	FlushIntervalMessages int64
	// FlushInterval is flush.ms (log.flush.interval.ms): the Manager's
	// flush task fsyncs a log with unflushed messages once its last flush
	// is this old (flush.go). Zero means never (Kafka's default,
	// Long.MAX_VALUE); Kafka's flush.ms=0, flush at every check, is any
	// value below the task's resolution, such as time.Nanosecond.
	FlushInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: the producer state
	// of a producer id that wrote nothing to the partition for this long,
	// and has no transaction open in it, is forgotten (default 1 day;
	// broker config, not a topic config).
	ProducerIDExpiration time.Duration
	// Cleanup says how old records go: retention (cleanup.policy=delete)
	// and the log cleaner (cleanup.policy=compact). Its zero value keeps
	// every record; unlike the fields above, its fields take Kafka's
	// values as they are (zero is a real value), see DefaultCleanup.
	Cleanup Cleanup
}

// OpenOptions are the arguments of Open.
type OpenOptions struct {
	// Dir is the partition directory, <log.dir>/<topic>-<partition>. It is
	// created when missing.
	Dir    string
	Config Config
	// RecoveryPoint is the offset up to which the log is known flushed
	// (from recovery-point-offset-checkpoint); batches from it on are
	// re-checked on open and a torn or corrupt tail is truncated. Zero
	// re-checks everything. Negative means the log was closed cleanly
	// (treated like the log end offset).
	RecoveryPoint int64
	// LogStartOffset from log-start-offset-checkpoint; zero means the base
	// offset of the first segment.
	LogStartOffset int64
	Logger         *slog.Logger // nil discards
	Now            func() time.Time
	// Files opens and closes the segments' file descriptors, shared by
	// every log of a node to cap them (log.open.files.max); nil gives
	// the log a cache of its own without a cap.
	Files *FileCache
	// FS is the filesystem of the log's files when Files is nil (nil:
	// vfs.Default); with Files, the one Files was made with.
	FS vfs.FS
	// Stats, when set, counts the log's segment rolls and times its
	// fsyncs (shared by the logs of a Manager).
	Stats *Stats
}

// Stats counts what a node's logs do, for its metrics. Safe for
// concurrent use; a nil *Stats counts nothing.
type Stats struct {
	// Rolls counts new active segments (segment.bytes, segment.ms,
	// index full, offset overflow).
	Rolls atomic.Int64
	// FlushSeconds, when set, receives the duration in seconds of each
	// flush of a log (the fsyncs of its segments up to an offset).
	FlushSeconds interface{ Observe(float64) }
	// Cleaner counts the log cleaner's work: cleanings that rewrote
	// something, failed cleanings (the log is left uncleaned until
	// restart), bytes and records of the rewritten segments, and the
	// time spent.
	CleanerRuns, CleanerFailures           atomic.Int64
	CleanerBytesRead, CleanerBytesWritten  atomic.Int64
	CleanerRecordsRead, CleanerRecordsKept atomic.Int64
	CleanerNanos                           atomic.Int64
}

func (s *Stats) cleaned(res CleanResult, failed bool) {
	if s == nil {
		return
	}
	if failed {
		s.CleanerFailures.Add(1)
		return
	}
	if res.Groups == 0 && res.EndOffset <= res.FirstDirtyOffset {
		return
	}
	s.CleanerRuns.Add(1)
	s.CleanerBytesRead.Add(res.BytesRead)
	s.CleanerBytesWritten.Add(res.BytesWritten)
	s.CleanerRecordsRead.Add(res.RecordsRead)
	s.CleanerRecordsKept.Add(res.RecordsKept)
	s.CleanerNanos.Add(int64(res.Duration))
}

func (s *Stats) rolled() {
	if s != nil {
		s.Rolls.Add(1)
	}
}

func (s *Stats) flushed(d time.Duration) {
	if s != nil && s.FlushSeconds != nil {
		s.FlushSeconds.Observe(d.Seconds())
	}
}

// AppendResult describes a successful Append.
type AppendResult struct {
	BaseOffset   int64 // offset of the first record appended
	LastOffset   int64 // offset of the last record appended
	MaxTimestamp int64 // largest batch max timestamp appended, milliseconds
	// OffsetOfMaxTimestamp is the last offset of the first batch holding
	// MaxTimestamp (Kafka's shallowOffsetOfMaxTimestamp); -1 when nothing
	// was appended.
	OffsetOfMaxTimestamp int64
	// Duplicate is set when a client's batch (OriginClient) repeats one of
	// the producer's last five batches (a retry after a lost response):
	// nothing was written and BaseOffset and LastOffset are those of the
	// earlier batch.
	Duplicate bool
}

// ReadResult is the outcome of Read.
type ReadResult struct {
	// Records holds whole batches, in offset order, copied out of the
	// segment files. Empty when nothing is readable at the offset.
	Records []byte
	// LogStartOffset and LogEndOffset at the time of the read.
	LogStartOffset int64
	LogEndOffset   int64
}
