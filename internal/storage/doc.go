// Package storage keeps one partition's log in Kafka's on-disk format, so
// that Kafka's tools (kafka-dump-log) read our segments and we read theirs,
// and the Manager that holds every partition log of a broker's log dirs.
//
// # Directory layout
//
//	<log.dir>/meta.properties                      node.id, cluster.id, directory.id (KRaft, version=1)
//	<log.dir>/recovery-point-offset-checkpoint     per partition: offset below which the log is flushed
//	<log.dir>/log-start-offset-checkpoint          per partition: log start offset
//	<log.dir>/replication-offset-checkpoint        per partition: high-watermark (written by replica)
//	<log.dir>/cleaner-offset-checkpoint            per compacted partition: first dirty offset (log cleaner)
//	<log.dir>/.kafka_cleanshutdown                 present after a clean shutdown: {"version":"0","broker_epoch":"N","samsa_manifest_id":"<32 hex>"} (KIP-966, Kafka's form)
//	<log.dir>/.samsa_log_manifest                  present after a clean shutdown: every log of the dir as closed (Samsa's, see below)
//	<log.dir>/.lock                                locked (fcntl OFD write lock) while a Manager holds the dir; the holder's pid in decimal
//	<log.dir>/<topic>-<partition>/                 one partition's log
//	<log.dir>/<topic>-<partition>/partition.metadata  the topic id the log belongs to (see below)
//	<log.dir>/<topic>-<partition>.<uuid>-delete/   a deleted partition, removed in the background
//
// Each checkpoint file is replaced as Kafka replaces it: written to
// <name>.tmp, fsynced, renamed over <name>, and the log dir fsynced. The
// Manager replaces its three (recovery points, log start offsets, cleaner
// offsets) together: the three temporary files fsynced at once, then the
// renames and one fsync of the dir. A crash leaves each file old or new,
// not necessarily the three from the same checkpoint (as before, when
// they were written one after the other).
//
// A partition directory holds segments, each named by its base offset (the
// offset of its first batch) written as 20 decimal digits, zero-padded:
//
//	00000000000000000000.log        record batches
//	00000000000000000000.index      offset index
//	00000000000000000000.timeindex  time index
//	00000000000000000000.txnindex   aborted transactions (when there are)
//	00000000000000001234.snapshot   producer state below offset 1234
//	00000000000000001234.log        next segment: first offset 1234
//	…
//
// Files ending in .deleted (scheduled for deletion), .cleaned (an
// unfinished log cleaner output) and index files ending in .swap are
// removed on open. A complete NNN.log.swap (finished cleaner output)
// replaces segment NNN and the segments whose base offsets lie below its
// next offset, and becomes NNN.log (see Log.completeSwap).
//
// # .log
//
// Record batches (magic 2, see package record) exactly as appended, back to
// back, with the base offset and partition leader epoch stamped by Append.
// Offsets increase strictly from batch to batch (gaps are allowed: a
// compacted log has them); every offset of a segment lies in
// [base, base+MaxInt32] and below the next segment's base. A closed
// segment may be empty (a zero-length .log with empty index files): the
// log cleaner leaves one where nothing of the segments it merged
// survives, as Kafka does. It owns the offsets from its base up to the
// next segment's base: reads there go on to the next segment, and its
// age under retention.ms is its file's modification time. A segment is rolled (a new one started at the log
// end offset) when appending would take it past segment.bytes, when its
// first batch is older than segment.ms, when an index is full, or when an
// offset would not fit 32 bits relative to the base.
//
// # .index (offset index)
//
// 8-byte entries, big-endian, no header:
//
//	offset  size  field
//	     0     4  relativeOffset  last offset of the batch minus the segment's base offset
//	     4     4  position        byte position of that batch in the .log
//
// Entries are sparse: one for the first batch appended after more than
// index.interval.bytes of batches since the previous entry (Kafka's
// LogSegment rule). Both fields increase strictly. Any prefix of the
// entries is a valid (sparser) index. At most segment.index.bytes/8
// entries; a full index rolls the segment. Kafka preallocates the file to
// segment.index.bytes and trims it on roll and close; we append entries,
// so the file is always exactly its entries, as Kafka leaves it after a
// clean shutdown. Both index files are created with their first entry: a
// segment without entries (a new or small one) has none, which Open reads
// as empty indexes (Kafka rebuilds a missing index from the .log).
//
// # .timeindex (time index)
//
// 12-byte entries, big-endian, no header:
//
//	offset  size  field
//	     0     8  timestamp       milliseconds since the epoch
//	     8     4  relativeOffset  last offset of the first batch with that max timestamp, minus the base offset
//
// An entry is added with each offset index entry when the segment's max
// timestamp grew since the last time entry, and once more when the segment
// is rolled, so the last entry of a closed segment holds its max
// timestamp. Unlike Kafka, closing the log adds none to the active
// segment: Open recomputes its max timestamp from the batches after its
// last offset index entry. Timestamps increase strictly, offsets never decrease.
//
// # .txnindex (transaction index)
//
// The aborted transactions whose ABORT marker lies in the segment, in
// marker order (Kafka's TransactionIndex). 34-byte entries, big-endian, no
// header; the file exists only once the segment has an entry:
//
//	offset  size  field
//	     0     2  version           0
//	     2     8  producerId
//	    10     8  firstOffset       the transaction's first offset in the partition
//	    18     8  lastOffset        the offset of its ABORT marker
//	    26     8  lastStableOffset  the LSO once the marker was written
//
// Fetch with read_committed lists the entries overlapping the fetched range
// (Log.AbortedTransactions). Truncation drops the entries whose marker it
// removes; recovery rewrites the entries of the markers it replays.
//
// # Producer state and <offset>.snapshot
//
// Each log keeps, per producer id, its epoch, its last five batches
// (sequences and offsets, to answer a retried batch with its first
// offsets), the coordinator epoch of its last transaction marker and the
// first offset of its open transaction (producerstate.go, Kafka's
// ProducerStateManager). The open transactions bound the last stable
// offset (Log.FirstUnstableOffset). The state is written to
// NNN.snapshot, NNN being the offset it covers the log up to, when a
// segment rolls and when the log closes, in Kafka's format (version 1),
// big-endian:
//
//	offset  size  field
//	     0     2  version                 1
//	     2     4  crc                     CRC-32C of everything after this field
//	     6     4  count                   number of entries
//	    10    46  entries, each:
//	                 8  producerId
//	                 2  epoch
//	                 4  lastSequence           -1 when no batch is known
//	                 8  lastOffset             last offset of its last batch, -1 none
//	                 4  offsetDelta            lastOffset minus the batch's first offset
//	                 8  timestamp              max timestamp of its last batch or marker
//	                 4  coordinatorEpoch       of its last marker, -1 none
//	                 8  currentTxnFirstOffset  -1 when no transaction is open
//
// A snapshot keeps only each producer's last batch, as Kafka's does. Open
// loads the latest snapshot at or below the first segment recovery
// re-checks and replays the batch headers after it; snapshots past the log
// end are removed, and those below the log start offset at each roll and
// whenever the log start moves (retention, DeleteRecords), except the
// newest at or below it, which a reload starts from. Producers stay known after retention or
// DeleteRecords removed their records; a producer with no transaction open
// is forgotten after producer.id.expiration.ms without appends (counted in
// wall time from its last append, or from the last Open: Kafka counts from
// the batch's max timestamp, which clients set).
//
// # partition.metadata
//
// Kafka's file (PartitionMetadataFile, KIP-516) naming the topic id a
// partition's log belongs to, so that the log of a deleted topic is never
// taken for the log of a topic created again under the same name. Text,
// two lines, no newline after the second:
//
//	version: 0
//	topic_id: Ogfbplq0u_GAi9aivEFOsw   the 16-byte topic id, URL-safe base64 without padding
//
// Manager.CreateTopic writes it into a new log's directory with the log's
// first segment, straight to its name and without an fsync (the log dir's
// syncfs at a clean shutdown makes it durable); Log.SetTopicID replaces
// it (temporary file, rename, no fsync) for a log that had none, as an
// older Samsa's logs have. A log loaded from the log manifest after a
// clean shutdown knows its id from there (no read); one loaded from its
// files reads it on first use (Log.TopicID), not when loaded: a missing,
// empty or torn file (a power loss after its
// creation) reads as no topic id, and the log takes the id of the topic
// that hosts it. CreateTopic deletes an existing log of another topic id
// and makes a new one; the broker deletes, once caught up with the
// metadata after a start, every log its image does not assign it or whose
// topic id is not its topic's (broker.removeStrayReplicas).
//
// # Checkpoint files
//
// Text, one item a line, lines ending in "\n":
//
//	0                     version
//	2                     number of entries
//	my-topic 0 1234       topic, partition, offset separated by one space
//	other 3 0
//
// They are replaced atomically: written to <name>.tmp, fsynced, renamed
// over <name>, and the directory fsynced. Besides every
// log.flush.offset.checkpoint.interval.ms (when an offset moved or a log
// came or went) and at a clean shutdown, the Manager writes the
// recovery-point, log-start-offset and cleaner-offset checkpoints when a
// log is created in a dir whose files may still name a deleted log of the
// same partition (deleted since they were last written, by this process
// or by one that crashed before writing them: a partition the files name
// but no directory of the dir holds at open), before it makes
// the new log, so that a partition created again under the same name
// never loads with the deleted one's offsets after a crash. Kafka writes
// them after each deletion (asyncDelete); DeleteBatch does not (at
// 20,000 partitions that was 0.6 MB and four fsyncs for each DeleteTopics
// applied): a deleted log's entries left in the files name a directory
// that no longer loads (renamed -delete).
//
// # Recovery
//
// Open re-checks, batch by batch, every segment from the one holding the
// recovery point to the end: whole batch present, batch length sane, magic
// 2, CRC-32C, base offset not below the previous batch's next offset. The
// first failure cuts the segment there (logged with the reason and the
// bytes cut) and removes every later segment; index files of re-checked
// segments are rebuilt. Segments before the recovery point keep their
// index files if they pass a sanity check (whole entries, increasing, the
// last offset entry naming a batch that is there); otherwise those are
// rebuilt too. Batches written before a crash of the process are in the
// page cache and survive; only fsync (Flush, flush.messages, flush.ms, the
// flush after a roll; see flush.go) makes them survive a crash of the
// machine.
//
// # Log manifest (.samsa_log_manifest)
//
// Samsa's, not Kafka's. A clean shutdown (Manager.Close), once every log
// is closed and synced and the checkpoints written, writes into each log
// dir one binary file describing each of its logs as closed: segment base
// offsets and sizes, their writer state (max timestamp and its offset,
// bytes since the last index entry, the first batch's timestamp), how
// many index entries each holds, whether a .txnindex may exist, the log
// start and end offsets, the leader epoch history, and the whole producer
// state (each producer's last five batches, open and unreplicated
// transactions, the offset of the latest snapshot), and the topic id of
// its partition.metadata when the log knows it (version 2; a version 1
// file, an older Samsa's, is read without: those logs read
// partition.metadata on first use). Its layout, big-endian
// with a CRC-32C over everything after the CRC and a random 16-byte id,
// is in manifest.go. Each log's entry is encoded by the close worker that
// closed it (num.recovery.threads.per.data.dir of them), straight from
// the log's state; the file is streamed from those entries like the
// checkpoint files are written (temporary file, fsync, rename, fsync
// of the dir), then the clean-shutdown marker, which
// holds the id in hex ("samsa_manifest_id"). The next OpenManager trusts the
// manifest only when the marker is there and names it: a manifest
// without the marker (a shutdown that died between them), or with a
// marker that names another or none (written by an older Samsa or by
// Kafka, which do not know the manifest), is ignored. Trusted, it sets
// each listed log up without opening or listing its files (one stat of
// each segment's .log; index files are read only for segments with
// entries); a log the manifest omits (files left to delete, a failed
// flush), whose index files do not hold the entries it counts or whose
// segment files are not regular files of the sizes it says is opened
// from its files. The
// manifest is removed, with the marker, and the dir fsynced before
// OpenManager returns, so before the first write: it is never read again.
// A corrupt, truncated or unreadable manifest is logged and every log
// opened from its files.
//
// # Retention and compaction
//
// Config.Cleanup holds cleanup.policy and its settings; its zero value
// keeps everything. Retention (retention.go, Log.DeleteOldSegments)
// deletes whole segments, oldest first: those wholly below the log start
// offset, and with cleanup.policy=delete those older than retention.ms
// (by their largest timestamp) or beyond retention.bytes, never above the
// high-watermark. The log cleaner (clean.go, Log.Clean) rewrites closed
// segments below the last stable offset keeping the latest record of each
// key, replacing a group of segments of which nothing survives with an
// empty segment; compaction never moves the log start offset. Both
// rename the files they retire to .deleted and remove them
// file.delete.delay.ms later; the cleaner swaps its output in through
// .cleaned and .swap files as described under Recovery, and holds its
// reads and writes to log.cleaner.io.max.bytes.per.second (throttle.go). Neither acts on a
// log before its owner gives it bounds (Log.SetBounds). The Manager runs
// both in the background (tasks.go).
//
// # Concurrency
//
// Log serializes appends, rolls and truncation with one mutex. Reads load
// an immutable snapshot of the segment list and the offsets, and hold only
// the shared side of the segment's own lock while they read its files with
// pread (never a shared file position); truncation and close take that lock
// exclusively. A zero-copy read (ReadSlice) holds a reference to the .log's
// descriptor instead, for as long as its bytes take to reach the socket:
// truncation and deletion do not wait for it.
//
// # File descriptors
//
// A segment's files are opened on use through the node's FileCache, which
// closes the least recently used idle ones past log.open.files.max (a
// Samsa setting: Kafka keeps every segment open and its indexes mapped).
// Each use holds a reference, so a descriptor is never closed under a
// read, a write, an fsync or a fetch writing it to a socket; the file of
// a closed or deleted segment is closed by its last user's release.
// Renaming a segment's files for deletion records the new names, so that
// a reader still on the segment reopens them there. Retention and the cleaner publish a new segment list under
// Log.mu and close the segments they retire afterwards, so reads in flight
// finish on the old files. Flushes of a log run one at a time through its
// flush gate (flush.go), which appends waiting for an fsync share. Lock
// order: the flush gate, Log.mu, segment.rw, index.mu, FileCache.mu.
// Log.idMu (the topic id) is a leaf taken alone.
package storage
