package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
)

// errorCodes maps sentinel errors to Kafka error codes: the one place where
// that happens.
var errorCodes = []struct {
	err  error
	code *kerr.Error
}{
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrClosed, kerr.NotLeaderForPartition},
	{storage.ErrFlushFailed, kerr.KafkaStorageError},
	{storage.ErrOffline, kerr.KafkaStorageError},
	// Out of disk space or file descriptors: the write did not happen,
	// the log and its dir are as before, and a retry may succeed (Kafka
	// would have taken the dir offline). KAFKA_STORAGE_ERROR is the code
	// that tells the truth: the broker could not access the log's files
	// on its disk; every client retries it (Java's KafkaStorageException
	// is retriable and refreshes metadata, harmless here: the leader has
	// not moved). REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS would name a
	// cause that is not this one, and UNKNOWN_SERVER_ERROR is not
	// retried by Java producers.
	{storage.ErrResourceExhausted, kerr.KafkaStorageError},
	// record.Check: the CRC or framing (the bytes may have been damaged
	// on the way: retriable), content that can never be accepted (not
	// retriable), and records that decompress past the bound (a
	// decompression bomb is the client's, never KAFKA_STORAGE_ERROR).
	{record.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrInvalidRecord, kerr.InvalidRecord},
	{record.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{record.ErrTooLarge, kerr.RecordListTooLarge},
	{storage.ErrRecordSetTooLarge, kerr.RecordListTooLarge},
	// A fetch that meets a batch header the log cannot frame (data
	// damaged on disk): the consumer learns the data is corrupt rather
	// than that the server failed.
	{storage.ErrCorruptSegment, kerr.CorruptMessage},
	{record.ErrTruncated, kerr.CorruptMessage},
	{record.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrFencedEpoch, kerr.FencedLeaderEpoch},
	{replica.ErrUnknownEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrMessageTooLarge, kerr.MessageTooLarge},
	{replica.ErrRecordListLarge, kerr.RecordListTooLarge},
	{replica.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{replica.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{storage.ErrInvalidTxnState, kerr.InvalidTxnState},
	{storage.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},

	{controller.ErrStaleEpoch, kerr.FencedLeaderEpoch},
	{controller.ErrNotController, kerr.NotController},
	{controller.ErrInvalidFeatureUpdate, kerr.InvalidUpdateVersion},
	{controller.ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{controller.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{controller.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{controller.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{controller.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch},
	{controller.ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
	{controller.ErrIneligibleReplica, kerr.IneligibleReplica},
	{controller.ErrTopicExists, kerr.TopicAlreadyExists},
	{controller.ErrUnacceptableCredential, kerr.UnacceptableCredential},
	{controller.ErrDuplicateResource, kerr.DuplicateResource},
	{controller.ErrResourceNotFound, kerr.ResourceNotFound},
	{controller.ErrUnsupportedMechanism, kerr.UnsupportedSaslMechanism},
	{controller.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{controller.ErrUnknownTopicID, kerr.UnknownTopicID},
	{controller.ErrNotReplica, kerr.NotLeaderForPartition},
	{controller.ErrInvalidTopic, kerr.InvalidTopicException},
	{controller.ErrInvalidPartitions, kerr.InvalidPartitions},
	{controller.ErrInvalidReplication, kerr.InvalidReplicationFactor},
	{controller.ErrInvalidConfig, kerr.InvalidConfig},
	{controller.ErrDeleteDisabled, kerr.TopicDeletionDisabled},
	{controller.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{controller.ErrInvalidRequest, kerr.InvalidRequest},
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// absentCode is the error for a partition of which this broker hosts no
// replica, as Kafka's ReplicaManager.getPartitionOrError answers it:
// KAFKA_STORAGE_ERROR when it should (it is a replica) but its log could
// not be opened; NOT_LEADER_OR_FOLLOWER when the metadata has the
// partition (the client's metadata is stale, for example while a
// restarted broker catches up, and it should refresh it and go
// elsewhere); else UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) absentCode(topic string, partition int32) int16 {
	if b.replicas.Offline(topic, partition) != nil {
		return kerr.KafkaStorageError.Code
	}
	if t := b.image().Topic(topic); t != nil && partition >= 0 && int(partition) < len(t.Partitions) {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}
