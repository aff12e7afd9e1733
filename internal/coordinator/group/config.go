package group

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of Config, Kafka's.
const (
	DefaultOffsetsTopicNumPartitions     = 50                   // offsets.topic.num.partitions
	DefaultInitialRebalanceDelay         = 3 * time.Second      // group.initial.rebalance.delay.ms
	DefaultMinSessionTimeout             = 6 * time.Second      // group.min.session.timeout.ms
	DefaultMaxSessionTimeout             = 30 * time.Minute     // group.max.session.timeout.ms
	DefaultMaxSize                       = math.MaxInt32        // group.max.size
	DefaultOffsetsRetention              = 7 * 24 * time.Hour   // offsets.retention.minutes (10080)
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute     // offsets.retention.check.interval.ms
	DefaultOffsetMetadataMaxBytes        = 4096                 // offset.metadata.max.bytes
	DefaultOffsetCommitTimeout           = 5 * time.Second      // offsets.commit.timeout.ms
	DefaultNewMemberJoinTimeout          = 5 * time.Minute      // Kafka's fixed NewMemberJoinTimeoutMs
	DefaultMaxAppendBytes                = 1 << 20              // offsets topic max.message.bytes (message.max.bytes)
	ConsumerProtocolType                 = "consumer"           // the protocol type of Kafka consumers
	DefaultConsumerSessionTimeout        = 45 * time.Second     // group.consumer.session.timeout.ms
	DefaultConsumerMinSessionTimeout     = 45 * time.Second     // group.consumer.min.session.timeout.ms
	DefaultConsumerMaxSessionTimeout     = 60 * time.Second     // group.consumer.max.session.timeout.ms
	DefaultConsumerHeartbeatInterval     = 5 * time.Second      // group.consumer.heartbeat.interval.ms
	DefaultConsumerMinHeartbeatInterval  = 5 * time.Second      // group.consumer.min.heartbeat.interval.ms
	DefaultConsumerMaxHeartbeatInterval  = 15 * time.Second     // group.consumer.max.heartbeat.interval.ms
	DefaultConsumerMaxSize               = math.MaxInt32        // group.consumer.max.size
	offsetsTopicName                     = "__consumer_offsets" // for logs
)

// Config configures a Coordinator. The zero value of every field means
// Kafka's default, given in its comment; Kafka's property name is given too.
type Config struct {
	// OffsetsTopicNumPartitions is the number of partitions of
	// __consumer_offsets (offsets.topic.num.partitions; default 50). It
	// decides which partition, hence which broker, coordinates a group, and
	// must not change once the topic exists.
	OffsetsTopicNumPartitions int32

	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members to join, extended by the same delay
	// while new members keep joining, up to the rebalance timeout
	// (group.initial.rebalance.delay.ms; zero means the default of 3s;
	// negative means no delay, as 0 in Kafka).
	InitialRebalanceDelay time.Duration

	// MinSessionTimeout and MaxSessionTimeout bound the session.timeout.ms
	// a member may ask for; outside, JoinGroup fails with
	// INVALID_SESSION_TIMEOUT (group.min.session.timeout.ms, default 6s;
	// group.max.session.timeout.ms, default 30m).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// MaxSize is the largest number of members of a group; more joins get
	// GROUP_MAX_SIZE_REACHED (group.max.size; default 2147483647).
	MaxSize int32

	// OffsetsRetention is how long the committed offsets of a group are kept
	// after it became empty; for groups without a protocol (offsets only),
	// after each offset's last commit (offsets.retention.minutes; default
	// 10080, 7 days).
	OffsetsRetention time.Duration

	// OffsetsRetentionCheckInterval is the period of the check for expired
	// offsets (offsets.retention.check.interval.ms; default 10m).
	OffsetsRetentionCheckInterval time.Duration

	// OffsetMetadataMaxBytes is the longest metadata string of a committed
	// offset, in UTF-16 code units as Kafka counts; longer ones get
	// OFFSET_METADATA_TOO_LARGE (offset.metadata.max.bytes; default 4096).
	OffsetMetadataMaxBytes int32

	// OffsetCommitTimeout bounds each Store.Append; past it the writes
	// fail as REQUEST_TIMED_OUT, mapped to COORDINATOR_NOT_AVAILABLE for
	// clients (offsets.commit.timeout.ms; default 5s).
	OffsetCommitTimeout time.Duration

	// NewMemberJoinTimeout expires a new member whose first JoinGroup is
	// still parked, since it cannot heartbeat (Kafka's fixed
	// NewMemberJoinTimeoutMs; default 5m).
	NewMemberJoinTimeout time.Duration

	// MaxAppendBytes caps the key and value bytes of the records combined
	// into one Store.Append; a single larger write still goes alone
	// (the offsets topic's max.message.bytes; default 1 MiB).
	MaxAppendBytes int

	// ConsumerSessionTimeout is how long a member of a KIP-848 consumer
	// group may go without a ConsumerGroupHeartbeat before it is removed
	// (group.consumer.session.timeout.ms; default 45s). It must lie within
	// ConsumerMinSessionTimeout and ConsumerMaxSessionTimeout
	// (group.consumer.min.session.timeout.ms, default 45s;
	// group.consumer.max.session.timeout.ms, default 60s), the bounds of
	// group-level overrides in Kafka.
	ConsumerSessionTimeout    time.Duration
	ConsumerMinSessionTimeout time.Duration
	ConsumerMaxSessionTimeout time.Duration

	// ConsumerHeartbeatInterval is the interval members of consumer
	// groups are told to heartbeat at (group.consumer.heartbeat.interval.ms;
	// default 5s), within ConsumerMinHeartbeatInterval and
	// ConsumerMaxHeartbeatInterval (group.consumer.min.heartbeat.interval.ms,
	// default 5s; group.consumer.max.heartbeat.interval.ms, default 15s),
	// and below the session timeout.
	ConsumerHeartbeatInterval    time.Duration
	ConsumerMinHeartbeatInterval time.Duration
	ConsumerMaxHeartbeatInterval time.Duration

	// ConsumerMaxSize is the largest number of members of a consumer
	// group; more get GROUP_MAX_SIZE_REACHED (group.consumer.max.size;
	// default 2147483647).
	ConsumerMaxSize int32

	// ConsumerAssignors are the server-side assignors members may name,
	// the first being the default (group.consumer.assignors; default
	// uniform, range). Known: AssignorUniform, AssignorRange.
	ConsumerAssignors []string

	// ConsumerMigrationPolicy is group.consumer.migration.policy: whether
	// a classic group with members becomes a consumer group when a member
	// joins with ConsumerGroupHeartbeat (upgrade), and a consumer group
	// whose last member of the consumer protocol leaves becomes a classic
	// group (downgrade): MigrationBidirectional (the default, Kafka's),
	// MigrationUpgrade, MigrationDowngrade or MigrationDisabled.
	ConsumerMigrationPolicy string

	// Overrides, when set, returns the group-level configs of a group
	// (Kafka's consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms set by IncrementalAlterConfigs on
	// GROUP resources); zero fields mean ConsumerSessionTimeout and
	// ConsumerHeartbeatInterval. Values outside the Min/Max bounds above
	// are capped to them. Called on the coordinator's goroutine at each
	// heartbeat: it must be cheap and not block.
	Overrides func(groupID string) Overrides

	// ShareGroup, when set, reports whether a share group (KIP-932, kept
	// by the share coordinator) holds groupID, or a request that may
	// create one is in flight, so that no classic or consumer group is
	// created under its id: a JoinGroup gets INCONSISTENT_GROUP_PROTOCOL,
	// a ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND ("Group X is not a
	// consumer group."), an OffsetCommit or TxnOffsetCommit
	// GROUP_ID_NOT_FOUND for every partition (ShareGroup's
	// validateOffsetCommit), as Kafka answers for a group of another type. Called on the coordinator's
	// goroutine only when such a group would be created: it must be cheap
	// and not call into the Coordinator.
	ShareGroup func(groupID string) bool

	// ShareLoaded, when set, receives the records of the share groups
	// (KIP-932, key types 10 to 15: the latest of each key, tombstoned
	// keys left out, sorted by group, type and member) of a partition of
	// __consumer_offsets once it is read, before the partition counts as
	// loaded; the share coordinator rebuilds its groups from them. Called
	// on the coordinator's goroutine: it must not block nor call into the
	// Coordinator.
	ShareLoaded func(partition int32, recs []ShareRecord)
}

// Overrides are the group-level configs of one group the coordinator
// applies (see Config.Overrides).
type Overrides struct {
	ConsumerSessionTimeout    time.Duration // consumer.session.timeout.ms; zero: the broker's
	ConsumerHeartbeatInterval time.Duration // consumer.heartbeat.interval.ms; zero: the broker's
}

// consumerTimeouts are the session timeout and heartbeat interval of the
// members of consumer group id: its overrides within the bounds, else
// the broker's.
func (cfg *Config) consumerTimeouts(id string) (session, heartbeat time.Duration) {
	session, heartbeat = cfg.ConsumerSessionTimeout, cfg.ConsumerHeartbeatInterval
	if cfg.Overrides == nil {
		return session, heartbeat
	}
	o := cfg.Overrides(id)
	if o.ConsumerSessionTimeout > 0 {
		session = min(max(o.ConsumerSessionTimeout, cfg.ConsumerMinSessionTimeout), cfg.ConsumerMaxSessionTimeout)
	}
	if o.ConsumerHeartbeatInterval > 0 {
		heartbeat = min(max(o.ConsumerHeartbeatInterval, cfg.ConsumerMinHeartbeatInterval), cfg.ConsumerMaxHeartbeatInterval)
	}
	return session, heartbeat
}

// withDefaults returns cfg with each zero field set to its default.
func (cfg Config) withDefaults() Config {
	if cfg.OffsetsTopicNumPartitions == 0 {
		cfg.OffsetsTopicNumPartitions = DefaultOffsetsTopicNumPartitions
	}
	switch {
	case cfg.InitialRebalanceDelay == 0:
		cfg.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	case cfg.InitialRebalanceDelay < 0:
		cfg.InitialRebalanceDelay = 0
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.OffsetsRetention == 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.OffsetsRetentionCheckInterval == 0 {
		cfg.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	if cfg.OffsetMetadataMaxBytes == 0 {
		cfg.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	if cfg.OffsetCommitTimeout == 0 {
		cfg.OffsetCommitTimeout = DefaultOffsetCommitTimeout
	}
	if cfg.NewMemberJoinTimeout == 0 {
		cfg.NewMemberJoinTimeout = DefaultNewMemberJoinTimeout
	}
	if cfg.MaxAppendBytes == 0 {
		cfg.MaxAppendBytes = DefaultMaxAppendBytes
	}
	for _, d := range []struct {
		f   *time.Duration
		def time.Duration
	}{
		{&cfg.ConsumerSessionTimeout, DefaultConsumerSessionTimeout},
		{&cfg.ConsumerMinSessionTimeout, DefaultConsumerMinSessionTimeout},
		{&cfg.ConsumerMaxSessionTimeout, DefaultConsumerMaxSessionTimeout},
		{&cfg.ConsumerHeartbeatInterval, DefaultConsumerHeartbeatInterval},
		{&cfg.ConsumerMinHeartbeatInterval, DefaultConsumerMinHeartbeatInterval},
		{&cfg.ConsumerMaxHeartbeatInterval, DefaultConsumerMaxHeartbeatInterval},
	} {
		if *d.f == 0 {
			*d.f = d.def
		}
	}
	if cfg.ConsumerMaxSize == 0 {
		cfg.ConsumerMaxSize = DefaultConsumerMaxSize
	}
	if len(cfg.ConsumerAssignors) == 0 {
		cfg.ConsumerAssignors = DefaultAssignors
	}
	if cfg.ConsumerMigrationPolicy == "" {
		cfg.ConsumerMigrationPolicy = MigrationBidirectional
	}
	return cfg
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("group: invalid config")

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
// Zero fields are valid (they mean the default).
func (cfg Config) Validate() error {
	d := cfg.withDefaults()
	switch {
	case d.OffsetsTopicNumPartitions < 1:
		return fmt.Errorf("%w: offsets.topic.num.partitions %d < 1", ErrInvalidConfig, cfg.OffsetsTopicNumPartitions)
	case d.MinSessionTimeout < 0:
		return fmt.Errorf("%w: group.min.session.timeout.ms %v < 0", ErrInvalidConfig, cfg.MinSessionTimeout)
	case d.MaxSessionTimeout < d.MinSessionTimeout:
		return fmt.Errorf("%w: group.max.session.timeout.ms %v < group.min.session.timeout.ms %v", ErrInvalidConfig, d.MaxSessionTimeout, d.MinSessionTimeout)
	case d.MaxSize < 1:
		return fmt.Errorf("%w: group.max.size %d < 1", ErrInvalidConfig, cfg.MaxSize)
	case d.OffsetsRetention < 0:
		return fmt.Errorf("%w: offsets.retention.minutes %v < 0", ErrInvalidConfig, cfg.OffsetsRetention)
	case d.OffsetsRetentionCheckInterval < 0:
		return fmt.Errorf("%w: offsets.retention.check.interval.ms %v < 0", ErrInvalidConfig, cfg.OffsetsRetentionCheckInterval)
	case d.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("%w: offset.metadata.max.bytes %d < 0", ErrInvalidConfig, cfg.OffsetMetadataMaxBytes)
	case d.OffsetCommitTimeout < 0:
		return fmt.Errorf("%w: offsets.commit.timeout.ms %v < 0", ErrInvalidConfig, cfg.OffsetCommitTimeout)
	case d.NewMemberJoinTimeout < 0:
		return fmt.Errorf("%w: new member join timeout %v < 0", ErrInvalidConfig, cfg.NewMemberJoinTimeout)
	case d.MaxAppendBytes < 0:
		return fmt.Errorf("%w: max append bytes %d < 0", ErrInvalidConfig, cfg.MaxAppendBytes)
	case d.ConsumerSessionTimeout < d.ConsumerMinSessionTimeout || d.ConsumerSessionTimeout > d.ConsumerMaxSessionTimeout:
		return fmt.Errorf("%w: group.consumer.session.timeout.ms %v outside [%v, %v]", ErrInvalidConfig, d.ConsumerSessionTimeout, d.ConsumerMinSessionTimeout, d.ConsumerMaxSessionTimeout)
	case d.ConsumerHeartbeatInterval < d.ConsumerMinHeartbeatInterval || d.ConsumerHeartbeatInterval > d.ConsumerMaxHeartbeatInterval:
		return fmt.Errorf("%w: group.consumer.heartbeat.interval.ms %v outside [%v, %v]", ErrInvalidConfig, d.ConsumerHeartbeatInterval, d.ConsumerMinHeartbeatInterval, d.ConsumerMaxHeartbeatInterval)
	case d.ConsumerHeartbeatInterval >= d.ConsumerSessionTimeout:
		return fmt.Errorf("%w: group.consumer.heartbeat.interval.ms %v must be below group.consumer.session.timeout.ms %v", ErrInvalidConfig, d.ConsumerHeartbeatInterval, d.ConsumerSessionTimeout)
	case d.ConsumerMaxSize < 1:
		return fmt.Errorf("%w: group.consumer.max.size %d < 1", ErrInvalidConfig, cfg.ConsumerMaxSize)
	}
	switch d.ConsumerMigrationPolicy {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
	default:
		return fmt.Errorf("%w: group.consumer.migration.policy %q (bidirectional, upgrade, downgrade or disabled)", ErrInvalidConfig, d.ConsumerMigrationPolicy)
	}
	for _, a := range d.ConsumerAssignors {
		if assignors[a] == nil {
			return fmt.Errorf("%w: group.consumer.assignors: unknown assignor %q (known: uniform, range)", ErrInvalidConfig, a)
		}
	}
	return nil
}
