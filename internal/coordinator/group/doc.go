// Package group is Samsa's group coordinator: the classic consumer group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
// ListGroups, DeleteGroups) and committed offsets (OffsetCommit,
// OffsetFetch, OffsetDelete), persisted in the internal topic
// __consumer_offsets in Kafka's own record schemas, after Kafka's
// GroupMetadataManager and OffsetMetadataManager for classic groups.
//
// # Who coordinates a group
//
// Group G belongs to partition PartitionFor(G, offsets.topic.num.partitions)
// of __consumer_offsets (Java's String.hashCode, Utils.abs, modulo); the
// broker leading that partition is G's coordinator. The broker answers
// FindCoordinator from its metadata, creates __consumer_offsets on first
// use, and tells the Coordinator which partitions it leads:
//
//	c := group.New(cfg, store, logger)
//	go c.LoadPartition(ctx, p) // became leader of __consumer_offsets-p
//	c.UnloadPartition(p)       // lost leadership
//	resp := c.JoinGroup(ctx, group.Client{ID: clientID, Host: "/" + ip}, req)
//	c.Close()
//
// Requests for groups of partitions not loaded get NOT_COORDINATOR; while a
// partition loads, COORDINATOR_LOAD_IN_PROGRESS. Each request method takes
// the decoded kmsg request (its Version set) and returns the response for
// that version; it never returns a Go error. The versions implemented are
// in APIVersions. The broker handles authorization and, for OffsetCommit,
// unknown topics (UNKNOWN_TOPIC_OR_PARTITION) before calling. The broker's
// side (the Store over its partitions of __consumer_offsets, the topic's
// creation with Kafka's configs, loading and unloading on leadership
// changes, FindCoordinator) is internal/broker/groups.go.
//
// # Persistence
//
// The Coordinator writes and reads through a Store (the broker's partitions
// of __consumer_offsets). Records, big-endian as all of Kafka's protocol,
// the version first in both key and value (kmsg types):
//
//	offset commit      key   OffsetCommitKey v1: version int16 = 1, group string, topic string, partition int32
//	                   value OffsetCommitValue v3: version, offset int64, leader epoch int32,
//	                         metadata string, commit timestamp int64 (ms);
//	                         v1 (…, expire timestamp int64) when OffsetCommit v2-v4 gave a retention time
//	group metadata     key   GroupMetadataKey v2: version int16 = 2, group string
//	                   value GroupMetadataValue v3: protocol type string, generation int32,
//	                         protocol nullable string, leader nullable string, current state
//	                         timestamp int64 (ms), members [member id, group instance id
//	                         (nullable), client id, client host, rebalance timeout int32 (ms),
//	                         session timeout int32 (ms), subscription bytes, assignment bytes]
//	tombstone          a key with a nil value: an offset deleted (OffsetDelete, expiry,
//	                   DeleteGroups) or a group deleted
//
// (strings: int16 length then bytes; bytes: int32 length then bytes;
// nullable: length -1 for null). Tools that read __consumer_offsets
// (Burrow, kafka-console-consumer's offsets formatter) read these.
//
// A group's metadata is written when the leader's assignment is received
// (SyncGroup), when a rebalance leaves the group empty, and when a static
// member rejoins in place. Offsets are written by OffsetCommit; an
// OffsetCommit, DeleteGroups or OffsetDelete is answered only once its
// records are written (Store.Append returned), and offsets become visible
// then, in log order. LoadPartition replays the partition keeping the
// latest value per key: a group with members comes back Stable, each
// member's session timer restarted; offsets without group metadata make an
// empty group with no protocol type. KIP-848 consumer group records (key
// types 3 to 8, consumerrecords.go) rebuild consumer groups; KIP-932 share
// group records (10 to 15, sharerecords.go) go to Config.ShareLoaded for
// the share coordinator, which writes them with AppendShare. Records of
// unknown types (4, 9, streams groups' 16+, newer value versions) and
// records that do not decode are skipped and counted.
//
// Transactional offset commits (TxnOffsetCommit, KIP-98) are written as a
// transactional batch of the producer; they stay pending, invisible to
// OffsetFetch (and UNSTABLE_OFFSET_COMMIT with require_stable, KIP-447),
// until the broker reports the transaction's COMMIT marker on the
// partition (CompleteTxn), or are dropped by its ABORT. Loading replays
// them with their markers (txn.go).
//
// # Protocol
//
// The states are Kafka's: Empty, PreparingRebalance, CompletingRebalance,
// Stable, Dead. A rebalance begins when a member joins, leaves, changes its
// protocols, fails (no heartbeat within session.timeout.ms), or when the
// leader rejoins. JoinGroup requests are parked until every member rejoined
// or the rebalance timeout (the largest of the members' rebalance timeouts,
// the consumers' max.poll.interval.ms) passes; the first rebalance of an
// empty group waits group.initial.rebalance.delay.ms, extended while members
// keep arriving. Members that did not rejoin are removed; the protocol is the
// one every member supports that most prefer; the leader gets the members'
// metadata and returns the assignment in its SyncGroup, relayed as is to
// every member (empty bytes to members it left out). Members that do not
// send SyncGroup within the rebalance timeout are removed. From JoinGroup
// v4 a member without id first gets MEMBER_ID_REQUIRED with its id
// (KIP-394); an id never used expires after the session timeout. Static
// members (group.instance.id, KIP-345) keep their place across restarts: a
// rejoin with the same instance id takes over the old member id and, in a
// Stable group, gets the current assignment without a rebalance; requests
// with the old member id then get FENCED_INSTANCE_ID. The coordinator does
// not interpret assignments, so eager and cooperative (incremental)
// assignors both work; it parses consumer subscriptions only to know which
// topics' offsets may expire or be deleted.
//
// Offsets of an empty group expire offsets.retention.minutes after it
// became empty (groups without protocol: after each offset's last commit;
// Stable consumer groups: offsets of topics no member subscribes to); an
// empty group left without offsets is deleted. The check runs every
// offsets.retention.check.interval.ms. When a topic is deleted the broker
// calls DeleteTopicOffsets, and every group forgets the topic's offsets
// with tombstones (Kafka's onPartitionsDeleted), so that a topic created
// again under the name starts without them.
//
// # Concurrency
//
// One goroutine, started by New, owns all the state: groups, members,
// offsets and a heap of timers (session and rebalance timeouts, the
// retention check), armed on one time.Timer so that testing/synctest drives
// them. Request methods hand it a closure over a channel and wait for their
// answer; it parks what must wait (a JoinGroup until the rebalance, a commit
// until written) and never blocks: writes go to one writer goroutine per
// loaded partition (package appendq), which calls Store.Append outside the state, one call at
// a time (combining the writes queued meanwhile, up to MaxAppendBytes), and
// posts each result back in order. LoadPartition reads the Store on its
// caller's goroutine and hands the result over. Close cancels loads and
// writes, answers waiting callers with COORDINATOR_NOT_AVAILABLE and waits
// for every goroutine it started. No locks guard the state; the writer's
// queue has its own mutex, never held while calling out.
package group
