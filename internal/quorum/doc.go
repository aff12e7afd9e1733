// Package quorum is the replicated metadata log: the __cluster_metadata-0
// partition, in Kafka's segment format (package storage), whose batches
// carry metadata.Records. The controller sees it through Log: Append on the
// leader, Replay at startup, Register for the committed batches and the
// leadership from then on.
//
// Three implementations:
//
//   - Local, for a single node (process.roles=broker,controller without
//     controller.quorum.voters): an entry is committed once it is fsynced,
//     and the node is always the leader, of epoch 0.
//   - Raft, for controller.quorum.voters: go.etcd.io/raft/v3's RawNode
//     decides elections and commits; Raft stores its log, persists its hard
//     state and carries its messages over TCP (Transport).
//   - Observer, for a broker that is not a voter (process.roles=broker):
//     it fetches the committed log from the leader with the Kafka Fetch
//     API, as KRaft observers do (see "Observers").
//
// # Raft entries
//
// Raft entry i is the i-th batch of __cluster_metadata-0, and its term is
// the batch's partition leader epoch (so the epoch of a batch says which
// leader wrote it, as in Kafka). Offsets are Kafka's: a batch spans one
// offset per record, so the base offset of an entry is the end offset of
// the entry before it. (DESIGN.md's "offset = index − 1" would need one
// record per entry; Kafka's layout keeps an Append of several records one
// atomic batch and keeps the offsets the image and the controller count.)
//
//   - An Append is one entry: a v2 batch, uncompressed, no producer, with
//     one record per metadata record (key = the record type, value = its
//     JSON body), exactly what Local writes, so it commits atomically.
//   - raft's empty entry, appended by every new leader, is a control batch
//     of one offset holding one LEADER_CHANGE control record (type 2,
//     KIP-595) whose value is Kafka's LeaderChangeMessage v0: the leader's
//     node id as known to the voter that wrote it (−1 when it stored the
//     entry after the term ended) and the voters. Each voter writes this
//     batch itself, so its bytes may differ between voters; raft sees an
//     entry without data.
//
// Local stamps partition leader epoch 0 on its batches; Raft refuses such a
// log (ErrFormat): turning a single node into a quorum is not supported.
// Readers (Replay, listeners) skip control batches.
//
// When raft overwrites an uncommitted tail (a new leader's log wins), the
// log is truncated at the first overwritten entry's offset before the new
// entries are appended. Entries and the hard state are fsynced before the
// messages that depend on them are sent.
//
// The log is never compacted yet: FirstIndex is always 1, raft never
// takes or sends a snapshot, and Raft refuses a log whose start offset is
// not 0. A long log works (reads go through storage's offset index; the
// base offset of every entry, 8 bytes each, and the terms, one run per
// epoch, are kept in memory) but every voter keeps the whole history and
// scans its batch headers once at open. Snapshots of the image (below)
// spare the replay of that history, not its storage.
//
// # Snapshots
//
// Every node (Local, Raft voter, Observer) writes snapshots of its own
// metadata image, as KRaft's nodes do (KIP-630): the image's owner hands
// each committed image to the function StartSnapshots returns, and a
// snapshot is written, on a goroutine of its own, once
// SnapshotConfig.MaxRecordBytes of batches were applied since the last
// one (metadata.log.max.record.bytes.between.snapshots, 20 MiB) or a
// commit comes MaxInterval after it (metadata.log.max.snapshot.interval.ms,
// 1 h). Images are immutable, so commits go on meanwhile.
//
// A snapshot is the file <end offset>-<epoch>.checkpoint in the
// __cluster_metadata-0 directory, named as Kafka names them
// (%020d-%010d: the offset after the last one the image covers, and the
// partition leader epoch of the batch ending there). It holds v2 record
// batches in the log's own encoding, uncompressed, at offsets 0, 1, … of
// the file, each of partition leader epoch <epoch> and with its CRC-32C:
//
//	control batch  one SNAPSHOT_HEADER record (type 3): int16 version 0,
//	               int64 last contained log timestamp, no tagged fields
//	batches        the records of metadata.Image.Records (key = type,
//	               value = JSON), about 1 MiB each
//	control batch  one SNAPSHOT_FOOTER record (type 4): int16 version 0,
//	               no tagged fields
//
// It is written to <name>.checkpoint.part, fsynced, renamed and the
// directory fsynced (through the log's vfs.FS), so a crash leaves the
// whole snapshot or none; the .part files a crash left are removed at
// start, when the log's snapshotter is made (never when snapshots are
// listed: a writer's .part may be in flight). The newest two are kept.
//
// Only committed images are written: the images offered are those of the
// committed batches Replay and the listeners deliver, and the writer
// refuses an image past the dispatcher's committed end, which only grows
// and is never truncated below (Raft overwrites only uncommitted entries;
// an Observer refuses to truncate below what it delivered). A snapshot
// therefore never holds an entry a new leader could overwrite.
//
// Replay (at start) loads the newest snapshot that decodes whole (every
// CRC, header first, footer last, nothing after it), ends at or below the
// committed end (a voter's commit index is not fsynced on its own) and at
// a batch of the log with its epoch; it hands its records to the caller as
// one batch ending at the snapshot's end offset, then replays the log
// after it. A snapshot that fails any check is logged and skipped for the
// one before it, and with none the whole log is replayed: never an image
// other than the log's. (A raft entry's end offset and epoch name it and,
// by raft's log matching, the whole log before it, so a snapshot that
// ends at a batch of its epoch summarises this log's prefix.)
//
// The log itself is kept whole, so a voter or observer that lags behind,
// or joins with an empty disk, catches up by fetching the log from where
// its own ends, then writes snapshots of its own; no snapshot is sent
// between nodes.
//
// # Observers
//
// An observer keeps its own copy of __cluster_metadata-0 and fetches it
// from the leader's controller listener with Fetch v12 (topic
// __cluster_metadata, partition 0, replica id = its node id, cluster id in
// the tagged field), from its log end offset with the epoch of its last
// batch as last_fetched_epoch. The leader (Raft.HandleFetch,
// Local.HandleFetch) sends batches up to its high-watermark only, so an
// observer never stores an uncommitted entry of this cluster; it waits up
// to max_wait_ms when there is nothing new. Each response carries the
// high-watermark and current_leader; a voter that does not lead answers
// NOT_LEADER_OR_FOLLOWER with the leader it knows, which is how an
// observer with no leader known (at start, or after a fetch fails) finds
// it, asking the voters in turn. When last_fetched_epoch does not reach
// the fetch offset in the leader's log (the observer's log came from
// elsewhere, e.g. a former voter's uncommitted tail), the response names
// the diverging epoch and its end offset and the observer truncates to
// where the histories part (KIP-595). An observer delivers batches below
// min(high-watermark, its log end) to its listeners; the high-watermark is
// not persisted, so after a restart delivery waits for the leader's first
// answer, then replays the stored log without fetching it again. The
// leader lists the observers that fetched within ObserverSessionTimeout
// in Describe (DescribeQuorum).
//
// # quorum-state
//
// The raft hard state lives next to the segments, in
// __cluster_metadata-0/quorum-state (Kafka keeps its election state in a
// file of that name), replaced atomically (written to quorum-state.tmp,
// fsynced, renamed, directory fsynced). One line of JSON:
//
//	{"leaderEpoch":7,"votedId":2,"commitIndex":1234,"data_version":0}
//
//	leaderEpoch   raft term (≥ 0)
//	votedId       node id voted for in leaderEpoch, −1 for none
//	commitIndex   raft commit index: the first commitIndex batches are committed
//	data_version  0
//
// It is written whenever the term or vote changes or entries are appended,
// and on Close; a change of the commit index alone is not fsynced, so after
// a crash a voter may replay fewer committed batches until the quorum's
// leader tells it the rest. It is read and written through the metadata
// log's vfs.FS (storage.Log.FS), so that tests fail it with vfs/errorfs;
// an error writing it stops the voter, and the node halts.
//
// Raft ids are node ids plus one: raft reserves 0 for "none" and Kafka
// allows node.id 0.
//
// # Raft protocol
//
// Voters talk over TCP, by default on the controller listener address of
// controller.quorum.voters. Each voter dials every other voter when it first
// has a message for it and only writes to that connection; it reads the
// connections the others opened. A connection starts with a handshake of 13
// bytes, big-endian:
//
//	offset  size  field
//	     0     4  "SRFT" (Preamble)
//	     4     1  protocol version, 0
//	     5     4  node id of the dialing voter
//	     9     4  node id of the voter dialed
//
// then carries frames:
//
//	offset  size  field
//	     0     4  length n, 1 ≤ n ≤ MaxFrameBytes (32 MiB)
//	     4     n  one raftpb.Message, protobuf-encoded
//
// A receiver closes the connection on a handshake not addressed to it or
// not from a voter, on a bad frame, or on a message whose From and To are
// not the handshake's voters; it drops messages carrying configuration
// changes, snapshots or entries that are not one proper batch. Read as a
// Kafka request, the preamble is a size of 1397900884 bytes, more than any
// socket.request.max.bytes, so a listener can peek at the first four bytes
// to tell raft connections from Kafka ones. A peer that cannot be dialed is
// retried with backoff (50 ms doubling to 1 s); messages for it are dropped
// meanwhile, and raft retries.
//
// # Concurrency
//
// Raft runs one loop goroutine that owns the RawNode and the log store: it
// ticks raft (TickInterval, with time.Ticker, so testing/synctest can drive
// it), steps received messages, proposes, and handles each Ready (append
// and fsync entries, write the hard state, send messages, publish the
// commit). Appends reach it through a channel and wait for their entry's
// commit. The transport runs one goroutine per peer (sending) and one per
// inbound connection (receiving, validating, queueing to the loop without
// blocking). Each registered listener has a goroutine that reads committed
// batches from the log itself. Close stops the loop, then the transport,
// then the listeners, and waits for all of them.
//
// An Observer runs one fetch goroutine, the only writer of its log; the
// leader's fetch handler runs on the caller's goroutine and waits on the
// dispatcher's change channel (dispatcher.watch). Once StartSnapshots is
// called, every implementation runs one snapshot goroutine (owned by the
// dispatcher, stopped after the listeners in Close) that reads the log
// and writes snapshot files.
//
// Locks: Raft.mu guards the error that stopped the loop; dispatcher.mu the
// committed offset, leadership, listeners and change channel;
// TCPTransport.mu its connections; fetchServer.mu the observers seen;
// snapshotter.mu the newest snapshot and the bytes applied since.
// None is held while taking another or while calling out.
package quorum
