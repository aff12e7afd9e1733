// Package share is KIP-932's share groups (Kafka's queues): their
// membership, the share sessions of ShareFetch, the share-partition state
// machine that each partition's leader runs, and the share coordinator's
// store of __share_group_state.
//
// # Membership (groups.go, journal.go)
//
// Coordinator keeps the share groups whose partition of __consumer_offsets
// this broker leads: ShareGroupHeartbeat (API 76, v1) and
// ShareGroupDescribe (API 77), the group epoch, the assignment epoch, each
// member's epoch, previous epoch and assignment (every member is assigned
// every partition of the topics it subscribes to, Kafka's SimpleAssignor
// for a homogeneous group), and the partitions the group initialized. With
// a Journal (SetJournal) each change is written to __consumer_offsets in
// Kafka 4.1+'s records (key types 10 to 15, group.ShareRecord) before the
// request is answered, and LoadPartition rebuilds the groups of a
// partition from them when this broker becomes its leader, as Kafka 4.2's
// GroupMetadataManager replays them: members keep their epochs across a
// restart or a coordinator move. A write that fails leaves the change in
// memory and marks the group dirty: its next write rewrites all its
// records first; one that can never succeed (too large) removes the
// member whose heartbeat made it.
//
// Member ids are the client's (ShareGroupHeartbeat v1): any non-empty
// string. Claim and Holds keep one id to one group: the group coordinator
// asks Holds before it creates a classic or consumer group (and creates
// none while a request that may create the share group is in flight).
//
// # Share-partitions (partition.go, session.go)
//
// Partition is the state of one share-partition on its leader: from the
// start offset to the end offset, each record Available, Acquired (under a
// lock of group.share.record.lock.duration.ms), Acknowledged or Archived,
// with its delivery count. Sessions are the share sessions of ShareFetch
// (API 78) and ShareAcknowledge (API 79).
//
// # Durable state (records.go, state.go, store.go, storegroups.go)
//
// The share-partition state is written to __share_group_state in Kafka's
// ShareSnapshot and ShareUpdate records (records.go gives the layout) by
// the share coordinator, the leader of the record's partition of that
// topic, whose Store merges them as Kafka's share coordinator does.
//
// # Locks
//
// Coordinator.mu guards the groups, the sessions and the map of
// share-partitions; each Partition (mu, and persist held across a
// snapshot and its write) and the Store have locks of their own. The
// group coordinator's
// goroutine takes Coordinator.mu (Holds, IsShareGroup, LoadPartition);
// Coordinator never calls into the group coordinator while holding mu: its
// writes are handed to the Journal after mu is released (flush).
package share
