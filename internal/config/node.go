package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RackAwareReplicaSelector is the replica.selector.class value naming
// Kafka's RackAwareReplicaSelector (KIP-392), the one selector Samsa has.
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// Listener is one entry of `listeners`: NAME://host:port.
type Listener struct {
	Name string // listener name, e.g. PLAINTEXT, CONTROLLER
	Host string // empty means all interfaces
	Port int    // 0 picks a free port
}

// Addr is host:port for net.Listen.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Node is the configuration of one Samsa node (Kafka's server.properties).
// Build it with Parse; the zero value is not meaningful.
type Node struct {
	// NodeID is node.id (default 1).
	NodeID int32
	// ProcessRoles is process.roles (default broker,controller).
	ProcessRoles []string
	// Listeners is listeners (default
	// PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093).
	Listeners []Listener
	// AdvertisedListeners is advertised.listeners; empty means the
	// listeners, with the port each one actually bound.
	AdvertisedListeners []Listener
	// ControllerListenerNames is controller.listener.names (default CONTROLLER).
	ControllerListenerNames []string
	// ListenerSecurityProtocols is listener.security.protocol.map: listener
	// name (upper case) to security protocol (PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL); default Kafka's, each protocol for the
	// listener of its own name. Validate refuses a listener that maps to
	// anything but PLAINTEXT; entries no listener uses are accepted. See
	// SecurityProtocol for the map Kafka actually applies.
	ListenerSecurityProtocols map[string]string
	// QuorumVoters is controller.quorum.voters (id@host:port,...), the
	// controllers that vote on the metadata log, at their controller
	// listeners; empty means a single combined node whose metadata log has
	// one voter, itself. Required with process.roles=broker or =controller.
	QuorumVoters []Voter
	// MetadataSnapshotMaxRecordBytes is
	// metadata.log.max.record.bytes.between.snapshots: a node writes a
	// snapshot of its metadata image once its metadata log grew by this
	// many bytes since the last one (default 20 MiB, at least 1).
	MetadataSnapshotMaxRecordBytes int64
	// MetadataSnapshotMaxIntervalMs is metadata.log.max.snapshot.interval.ms:
	// a node also writes a snapshot when this long passed since the last
	// one and the log grew (default 3600000, one hour; 0 disables it).
	MetadataSnapshotMaxIntervalMs int64
	// LogDirs is log.dirs, falling back to log.dir (Samsa's default
	// ./samsa-data; Kafka's is /tmp/kafka-logs).
	LogDirs []string
	// NumPartitions is num.partitions (default 1).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor (default 1).
	DefaultReplicationFactor int16
	// AutoCreateTopicsEnable is auto.create.topics.enable (default true).
	AutoCreateTopicsEnable bool
	// DeleteTopicEnable is delete.topic.enable (default true).
	DeleteTopicEnable bool
	// AuthorizerClassName is authorizer.class.name: empty (the default)
	// authorizes nothing, every request is allowed;
	// StandardAuthorizerClass enforces the ACLs of the metadata log.
	AuthorizerClassName string
	// SuperUsers is super.users: principals ("User:admin") allowed every
	// operation, semicolon-separated in the property. The inter-broker
	// principal must be one when an authorizer is set, as in Kafka.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found
	// (default false): a resource no ACL names is open to all.
	AllowEveryoneIfNoACLFound bool
	// QuotaWindowNum is quota.window.num (default 11, at least 1): the
	// samples of the client quotas' rates (producer_byte_rate,
	// consumer_byte_rate, request_percentage, connection_creation_rate).
	QuotaWindowNum int32
	// QuotaWindowSizeSeconds is quota.window.size.seconds (default 1, at
	// least 1): the time span of each sample.
	QuotaWindowSizeSeconds int32
	// ControllerQuotaWindowNum and ControllerQuotaWindowSizeSeconds are
	// controller.quota.window.num (default 11) and
	// controller.quota.window.size.seconds (default 1): the burst of the
	// controller_mutation_rate token buckets is rate × num × size.
	ControllerQuotaWindowNum, ControllerQuotaWindowSizeSeconds int32
	// MessageMaxBytes is message.max.bytes, the largest record batch
	// accepted (default 1048588).
	MessageMaxBytes int32
	// SocketRequestMaxBytes is socket.request.max.bytes, the largest request
	// frame (default 104857600); a larger one closes the connection.
	SocketRequestMaxBytes int32
	// MaxConnections is max.connections: connections open at once on the
	// broker's listeners, and on the controller listeners, each counted
	// apart as Kafka's two socket servers do (default Integer.MAX_VALUE,
	// which the broker applies as storage.DefaultMaxConnections: what
	// RLIMIT_NOFILE leaves once the logs have their files; beyond Kafka).
	MaxConnections int32
	// MaxConnectionsPerIP is max.connections.per.ip: connections open at
	// once from one address (default Integer.MAX_VALUE); zero needs
	// MaxConnectionsPerIPOverrides.
	MaxConnectionsPerIP int32
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides,
	// "host:count,...": host name or IP address to its own limit.
	MaxConnectionsPerIPOverrides map[string]int32
	// ConnectionsMaxIdle is connections.max.idle.ms (default 10 minutes):
	// a client connection with nothing read or written for this long is
	// closed; negative keeps idle connections open, as Kafka's Selector,
	// and so does zero (with which Kafka closes them almost at once).
	ConnectionsMaxIdle time.Duration
	// LogFlushIntervalMessages is log.flush.interval.messages (default
	// Long.MAX_VALUE, i.e. leave flushing to the OS).
	LogFlushIntervalMessages int64
	// LogFlushIntervalMs is log.flush.interval.ms (default: none, i.e.
	// log.flush.scheduler.interval.ms which is Long.MAX_VALUE).
	LogFlushIntervalMs int64
	// LogFlushOffsetCheckpointIntervalMs is
	// log.flush.offset.checkpoint.interval.ms (default 60000).
	LogFlushOffsetCheckpointIntervalMs int64
	// LogFlushSchedulerInterval is log.flush.scheduler.interval.ms: how
	// often logs are checked against their flush.ms, and flush.ms itself
	// when neither the topic nor log.flush.interval.ms sets it (as Kafka).
	// Zero for Kafka's default, Long.MAX_VALUE: then logs are checked when
	// the next one is due.
	LogFlushSchedulerInterval time.Duration
	// LogRetentionCheckInterval is log.retention.check.interval.ms: how
	// often segments are checked against retention.ms and
	// retention.bytes (default 5 min; zero means the default).
	LogRetentionCheckInterval time.Duration
	// LogOpenFilesMax is log.open.files.max (Samsa's, beyond Kafka, which
	// keeps every segment's .log open and its indexes memory-mapped): the
	// segment file descriptors the node keeps open while idle, least
	// recently used closed first. Zero (the default) means 4096, or half
	// the process's descriptor limit when lower; -1 means no cap.
	LogOpenFilesMax int32
	// NumRecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir:
	// the logs of each log dir opened (and recovered) at once at start
	// and closed at once at shutdown (default 2, Kafka 4.0's).
	NumRecoveryThreadsPerDataDir int32
	// LogPartitionsMax is log.partitions.max (Samsa's, beyond Kafka, like
	// Redpanda's topic_partitions_per_shard): the partition replicas one
	// node hosts. The active controller refuses CreateTopics,
	// CreatePartitions and auto-creation that would place more on a node
	// (INVALID_PARTITIONS naming it). Zero (the default) means what this
	// node's memory and descriptor limit allow
	// (storage.DefaultPartitionsMax); the controller applies its own value
	// to every broker.
	LogPartitionsMax int32
	// LogCleanerEnable is log.cleaner.enable: compact the topics whose
	// cleanup.policy has compact (default true).
	LogCleanerEnable bool
	// LogCleanerBackoff is log.cleaner.backoff.ms: the log cleaner's sleep
	// when no log needs cleaning (default 15 s).
	LogCleanerBackoff time.Duration
	// LogCleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size: the
	// memory, in bytes, that bounds the keys one cleaning maps (default
	// 134217728).
	LogCleanerDedupeBufferSize int64
	// LogCleanerIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second:
	// the bytes per second the log cleaner reads and writes (default
	// Double.MAX_VALUE, unthrottled).
	LogCleanerIOMaxBytesPerSecond float64
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (default 50).
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor
	// (default 3, capped by the number of brokers).
	OffsetsTopicReplicationFactor int16
	// TransactionStateLogNumPartitions is
	// transaction.state.log.num.partitions (default 50).
	TransactionStateLogNumPartitions int32
	// TransactionStateLogReplicationFactor is
	// transaction.state.log.replication.factor (default 3, capped by the
	// number of brokers).
	TransactionStateLogReplicationFactor int16
	// TransactionStateLogMinISR is transaction.state.log.min.isr, the
	// min.insync.replicas of __transaction_state (default 2, capped by its
	// replication factor).
	TransactionStateLogMinISR int32
	// TransactionStateLogSegmentBytes is
	// transaction.state.log.segment.bytes (default 104857600).
	TransactionStateLogSegmentBytes int64
	// TransactionMaxTimeout is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms a producer may ask for (default 15 min).
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms (default
	// 7 days).
	TransactionalIDExpiration time.Duration
	// TransactionAbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (default
	// 10 s).
	TransactionAbortTimedOutInterval time.Duration
	// TransactionRemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (default
	// 1 h).
	TransactionRemoveExpiredInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: a partition
	// forgets the state of a producer idle this long (default 1 day).
	ProducerIDExpiration time.Duration
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms
	// (default 3 s).
	GroupInitialRebalanceDelay time.Duration
	// GroupMinSessionTimeout is group.min.session.timeout.ms (default 6 s).
	GroupMinSessionTimeout time.Duration
	// GroupMaxSessionTimeout is group.max.session.timeout.ms (default 30 min).
	GroupMaxSessionTimeout time.Duration
	// GroupMaxSize is group.max.size (default Int.MAX).
	GroupMaxSize int32
	// GroupConsumerSessionTimeout is group.consumer.session.timeout.ms,
	// the session of KIP-848 consumer group members (default 45 s), within
	// GroupConsumerMinSessionTimeout and GroupConsumerMaxSessionTimeout
	// (group.consumer.min/max.session.timeout.ms, 45 s and 60 s).
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerMinSessionTimeout time.Duration
	GroupConsumerMaxSessionTimeout time.Duration
	// GroupConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (default 5 s), within GroupConsumerMinHeartbeatInterval and
	// GroupConsumerMaxHeartbeatInterval
	// (group.consumer.min/max.heartbeat.interval.ms, 5 s and 15 s).
	GroupConsumerHeartbeatInterval    time.Duration
	GroupConsumerMinHeartbeatInterval time.Duration
	GroupConsumerMaxHeartbeatInterval time.Duration
	// GroupConsumerMaxSize is group.consumer.max.size (default Int.MAX).
	GroupConsumerMaxSize int32
	// GroupShareSessionTimeout is group.share.session.timeout.ms, the
	// session of share group (KIP-932) members (default 45 s), within
	// GroupShareMinSessionTimeout and GroupShareMaxSessionTimeout
	// (group.share.min/max.session.timeout.ms, 45 s and 60 s), the bounds
	// of the share.session.timeout.ms group config.
	GroupShareSessionTimeout    time.Duration
	GroupShareMinSessionTimeout time.Duration
	GroupShareMaxSessionTimeout time.Duration
	// GroupShareHeartbeatInterval is group.share.heartbeat.interval.ms
	// (default 5 s), within GroupShareMinHeartbeatInterval and
	// GroupShareMaxHeartbeatInterval
	// (group.share.min/max.heartbeat.interval.ms, 5 s and 15 s).
	GroupShareHeartbeatInterval    time.Duration
	GroupShareMinHeartbeatInterval time.Duration
	GroupShareMaxHeartbeatInterval time.Duration
	// GroupShareRecordLockDuration is group.share.record.lock.duration.ms,
	// how long a share consumer holds an acquired record (default 30 s,
	// 1 s to 1 h), within GroupShareMinRecordLockDuration and
	// GroupShareMaxRecordLockDuration
	// (group.share.min/max.record.lock.duration.ms, 15 s and 60 s).
	GroupShareRecordLockDuration    time.Duration
	GroupShareMinRecordLockDuration time.Duration
	GroupShareMaxRecordLockDuration time.Duration
	// GroupShareDeliveryCountLimit is group.share.delivery.count.limit,
	// the deliveries of a record before a share group archives it
	// (default 5, 2 to 10), within GroupShareMinDeliveryCountLimit and
	// GroupShareMaxDeliveryCountLimit
	// (group.share.min/max.delivery.count.limit, 2 and 10).
	GroupShareDeliveryCountLimit    int32
	GroupShareMinDeliveryCountLimit int32
	GroupShareMaxDeliveryCountLimit int32
	// GroupSharePartitionMaxRecordLocks is
	// group.share.partition.max.record.locks: the records in flight in one
	// share-partition, from its start offset to its end offset (default
	// 2000, 100 to 10000).
	GroupSharePartitionMaxRecordLocks int32
	// ShareCoordinatorSnapshotUpdateRecordsPerSnapshot is
	// share.coordinator.snapshot.update.records.per.snapshot: the
	// ShareUpdate records written to __share_group_state for a
	// share-partition between two ShareSnapshot records (default 500, at
	// least 0; 0 writes a snapshot every time).
	ShareCoordinatorSnapshotUpdateRecordsPerSnapshot int32
	// GroupConsumerAssignors is group.consumer.assignors: the server-side
	// assignors of consumer groups by name, the first the default
	// (default uniform, range; Kafka's class names are accepted too).
	GroupConsumerAssignors []string
	// GroupConsumerMigrationPolicy is group.consumer.migration.policy:
	// bidirectional (the default), upgrade, downgrade or disabled, the
	// online migrations between the classic and the consumer protocol.
	GroupConsumerMigrationPolicy string
	// OffsetsRetention is offsets.retention.minutes (default 7 days).
	OffsetsRetention time.Duration
	// FetchMaxBytes is fetch.max.bytes, the cap on a Fetch response
	// (default 57671680).
	FetchMaxBytes int32
	// MaxIncrementalFetchSessionCacheSlots is
	// max.incremental.fetch.session.cache.slots: how many fetch sessions
	// (KIP-227) the broker keeps at once (default 1000; 0: none, every
	// fetch is a full one).
	MaxIncrementalFetchSessionCacheSlots int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms: a follower that has not
	// caught up for this long leaves the ISR (default 30 s).
	ReplicaLagTimeMax time.Duration
	// ReplicaHighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms: how often each log
	// dir's replication-offset-checkpoint is written (default 5 s, at
	// least 1 ms).
	ReplicaHighWatermarkCheckpointInterval time.Duration
	// ReplicaFetchResponseMaxBytes is replica.fetch.response.max.bytes
	// (default 10 MiB).
	ReplicaFetchResponseMaxBytes int32
	// BrokerSessionTimeout is broker.session.timeout.ms: the active
	// controller fences a broker that has not heartbeated for this long
	// (default 9 s).
	BrokerSessionTimeout time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms (default 2 s).
	BrokerHeartbeatInterval time.Duration
	// FetchSendfile writes fetched records from segment files to sockets
	// with sendfile(2) at explicit offsets (samsa.fetch.sendfile; Samsa's
	// own property, no Kafka equivalent). Default false: the
	// pread(2)+writev(2) path measured as fast or faster (0.84x-0.99x for
	// sendfile over loopback, 1 MiB regions, wire.BenchmarkWriteFramed;
	// 0.97x with a franz-go consumer, BenchmarkFetch) and about 12% less
	// CPU per byte on a 2-core machine; see docs/configuration.md.
	FetchSendfile bool
	// HTTPListener is http.listener (Samsa's own property, as Redpanda's
	// admin API): host:port of the operations HTTP listener serving
	// /metrics, /healthz, /readyz and the web console at /
	// (internal/console); default localhost:9644; empty turns it off.
	// Port 0 picks a free port.
	HTTPListener string
	// ConsoleReadOnly is console.read.only (Samsa's own property; default
	// false): the web console on http.listener (internal/console) shows
	// every page but hides its writes and refuses them with 403.
	ConsoleReadOnly bool
	// HTTPListenerSecurityProtocol is http.listener.security.protocol
	// (Samsa's own, beyond Kafka): PLAINTEXT (the default) or SSL, which
	// serves the HTTP listener over TLS with the ssl.* properties resolved
	// as for a listener named HTTP (listener.name.http.ssl.* before the
	// global ssl.*; ssl.client.auth=required asks scrapers for a
	// certificate). See HTTPSecurity.
	HTTPListenerSecurityProtocol string
	// MetricsConsumerLagPartitions is samsa.metrics.consumer.lag.partitions
	// (default true): the group coordinator serves the per-partition
	// kafka_consumergroup_lag and kafka_consumergroup_current_offset
	// series; false keeps the per-topic sums only.
	MetricsConsumerLagPartitions bool
	// MetricsPartitionSeries is samsa.metrics.partition.series (default
	// true): serve the per-partition series (kafka_log_log_*,
	// kafka_cluster_partition_*, kafka_topic_partition_*); false keeps the
	// broker-wide counts only, for brokers with very many partitions.
	MetricsPartitionSeries bool
	// MetricsConsumerLagMaxSeries is samsa.metrics.consumer.lag.max.series
	// (default 10000): at most this many committed offsets (group, topic,
	// partition) are served as lag series, the first in that order; zero
	// or negative serves no consumer lag at all.
	MetricsConsumerLagMaxSeries int32
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// are leader.replication.throttled.rate and
	// follower.replication.throttled.rate: bytes/s of replication traffic
	// of the replicas a topic lists in leader/follower.replication.
	// throttled.replicas (default Long.MAX_VALUE, unlimited). Kafka sets
	// them as dynamic broker configs; Samsa reads them at startup.
	LeaderReplicationThrottledRate, FollowerReplicationThrottledRate int64
	// BrokerRack is broker.rack: replicas of a partition are spread over
	// racks, and consumers in the same rack (client.rack) may fetch from
	// this broker when it follows (KIP-392). Empty: no rack.
	BrokerRack string
	// ReplicaSelectorClass is replica.selector.class (KIP-392): empty (the
	// default) keeps consumers on partition leaders; RackAwareReplicaSelector
	// makes leaders send consumers with a client.rack to an in-sync
	// follower in their rack (Fetch v11+ preferred_read_replica). No other
	// class is accepted.
	ReplicaSelectorClass string
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable (default
	// true): the active controller moves leadership back to preferred
	// replicas.
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (default 300 s).
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage (default 10).
	LeaderImbalancePerBrokerPercentage int32
	// ClusterID is the cluster id used when formatting a fresh log dir
	// (Samsa: cluster.id; Kafka passes it to kafka-storage format).
	// Empty generates one.
	ClusterID string

	// Topic holds the broker-level defaults of topic configs, keyed by the
	// topic config name (segment.bytes, retention.ms, ...), after applying
	// their broker synonyms (log.segment.bytes, log.retention.hours, ...).
	Topic map[string]string
	// InterBrokerListenerName is inter.broker.listener.name, upper case;
	// empty means the first broker listener (see InterBrokerListener).
	InterBrokerListenerName string
	// Set lists the properties given explicitly (file or overrides), for
	// DescribeConfigs sources.
	Set map[string]string
}

type nodeProp struct {
	def string
	set func(n *Node, v string) error
	// doc is a one-line description for documentation.
	doc string
}

var errBadValue = errors.New("invalid value")

func parseInt32(v string) (int32, error) {
	i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return int32(i), err
}

func parseInt64(v string) (int64, error) { return strconv.ParseInt(strings.TrimSpace(v), 10, 64) }

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errBadValue
}

func parseList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32 // node.id of the controller
	Host string
	Port int // 1-65535
}

// Addr is host:port to dial.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

func (v Voter) String() string { return strconv.Itoa(int(v.ID)) + "@" + v.Addr() }

// ParseVoters parses a controller.quorum.voters value: id@host:port[,...]
// with non-negative, distinct ids, a host and a port in 1-65535 (IPv6 hosts
// in brackets).
func ParseVoters(v string) ([]Voter, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, s := range parseList(v) {
		id, hp, ok := strings.Cut(s, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q is not id@host:port", s)
		}
		i, err := parseInt32(id)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("voter %q: bad id", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return nil, fmt.Errorf("voter %q: not id@host:port", s)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("voter %q: bad port", s)
		}
		if seen[i] {
			return nil, fmt.Errorf("voter id %d listed twice", i)
		}
		seen[i] = true
		out = append(out, Voter{ID: i, Host: host, Port: p})
	}
	return out, nil
}

// DefaultListenerSecurityProtocolMap is Kafka's default of
// listener.security.protocol.map.
const DefaultListenerSecurityProtocolMap = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

// securityProtocols are Kafka's security protocols (SecurityProtocol).
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// parseSecurityProtocolMap parses a listener.security.protocol.map value,
// NAME:PROTOCOL[,...], names and protocols in any case (Kafka upper-cases
// both); a later entry for the same name wins, as in Kafka's Csv map.
func parseSecurityProtocolMap(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range parseList(v) {
		name, proto, ok := strings.Cut(kv, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%w %q (NAME:PROTOCOL)", errBadValue, kv)
		}
		if !slices.Contains(securityProtocols, proto) {
			return nil, fmt.Errorf("%w %q: unknown security protocol %s (%s)", errBadValue, kv, proto, strings.Join(securityProtocols, ", "))
		}
		m[name] = proto
	}
	return m, nil
}

// SecurityProtocol is the security protocol of listener name as Kafka's
// KafkaConfig.effectiveListenerSecurityProtocolMap has it: the entry of
// listener.security.protocol.map, or, when that property is not set and no
// listener or controller listener is named SSL or SASL_*, PLAINTEXT for
// the names in controller.listener.names. False when the name has none.
func (n *Node) SecurityProtocol(name string) (string, bool) {
	if p, ok := n.ListenerSecurityProtocols[name]; ok {
		return p, true
	}
	if _, set := n.Set["listener.security.protocol.map"]; set || !n.IsControllerListener(name) {
		return "", false
	}
	secure := func(name string) bool { return name != "PLAINTEXT" && slices.Contains(securityProtocols, name) }
	for _, c := range n.ControllerListenerNames {
		if secure(c) {
			return "", false
		}
	}
	for _, l := range n.Listeners {
		if secure(l.Name) {
			return "", false
		}
	}
	return "PLAINTEXT", true
}

// validateSecurityProtocols checks that every listener, advertised listener
// and controller listener name has a security protocol (as Kafka does) and
// that its ssl.* and sasl.* properties are ones Samsa serves (Security).
func (n *Node) validateSecurityProtocols() error {
	check := func(prop, name string, required bool) error {
		p, ok := n.SecurityProtocol(name)
		switch {
		case !ok && required:
			return fmt.Errorf("config %s: listener %s has no security protocol in listener.security.protocol.map", prop, name)
		case ok && p != "PLAINTEXT":
			if _, err := n.Security(name); err != nil {
				return err
			}
		}
		return nil
	}
	for _, l := range n.Listeners {
		if err := check("listeners", l.Name, true); err != nil {
			return err
		}
	}
	for _, l := range n.AdvertisedListeners {
		if err := check("advertised.listeners", l.Name, true); err != nil {
			return err
		}
	}
	// A broker-only node dials its controllers on the first of these.
	for _, c := range n.ControllerListenerNames {
		if err := check("controller.listener.names", c, n.HasRole("broker") && !n.HasRole("controller")); err != nil {
			return err
		}
	}
	return nil
}

// ParseListeners parses a listeners value: NAME://host:port[,...].
func ParseListeners(v string) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, s := range parseList(v) {
		name, hp, ok := strings.Cut(s, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("listener %q is not NAME://host:port", s)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %v", s, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("listener %q: bad port", s)
		}
		name = strings.ToUpper(name)
		if seen[name] {
			return nil, fmt.Errorf("listener name %s used twice", name)
		}
		seen[name] = true
		out = append(out, Listener{Name: name, Host: host, Port: p})
	}
	return out, nil
}

func i32(dst func(*Node) *int32, min int32) func(*Node, string) error {
	return func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil || i < min {
			return fmt.Errorf("%w %q (an integer >= %d)", errBadValue, v, min)
		}
		*dst(n) = i
		return nil
	}
}

// consumerGroupProps are the properties of KIP-848 consumer groups, merged
// into nodeProps.
var consumerGroupProps = map[string]nodeProp{
	"group.consumer.session.timeout.ms":        {"45000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerSessionTimeout }, time.Millisecond), "session of consumer group (KIP-848) members"},
	"group.consumer.min.session.timeout.ms":    {"45000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerMinSessionTimeout }, time.Millisecond), "smallest consumer group session timeout"},
	"group.consumer.max.session.timeout.ms":    {"60000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerMaxSessionTimeout }, time.Millisecond), "largest consumer group session timeout"},
	"group.consumer.heartbeat.interval.ms":     {"5000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerHeartbeatInterval }, time.Millisecond), "heartbeat interval of consumer group members"},
	"group.consumer.min.heartbeat.interval.ms": {"5000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerMinHeartbeatInterval }, time.Millisecond), "smallest consumer group heartbeat interval"},
	"group.consumer.max.heartbeat.interval.ms": {"15000", millis(func(n *Node) *time.Duration { return &n.GroupConsumerMaxHeartbeatInterval }, time.Millisecond), "largest consumer group heartbeat interval"},
	"group.consumer.max.size":                  {"2147483647", i32(func(n *Node) *int32 { return &n.GroupConsumerMaxSize }, 1), "members per consumer group"},
	"group.consumer.assignors":                 {"uniform,range", consumerAssignors, "server-side assignors of consumer groups"},
	"group.consumer.migration.policy":          {"bidirectional", migrationPolicy, "online migration between the classic and the consumer protocol"},
}

func init() { maps.Copy(nodeProps, consumerGroupProps) }

// migrationPolicy parses group.consumer.migration.policy
// (case-insensitive, as Kafka's ConsumerGroupMigrationPolicy).
func migrationPolicy(n *Node, v string) error {
	switch p := strings.ToLower(strings.TrimSpace(v)); p {
	case "bidirectional", "upgrade", "downgrade", "disabled":
		n.GroupConsumerMigrationPolicy = p
		return nil
	}
	return fmt.Errorf("%w %q (bidirectional, upgrade, downgrade or disabled)", errBadValue, v)
}

// consumerAssignors parses group.consumer.assignors: names or Kafka's
// class names of the uniform and range assignors, comma-separated.
func consumerAssignors(n *Node, v string) error {
	var out []string
	for _, a := range strings.Split(v, ",") {
		switch strings.TrimSpace(a) {
		case "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			out = append(out, "uniform")
		case "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			out = append(out, "range")
		default:
			return fmt.Errorf("%w %q (uniform and range are known)", errBadValue, v)
		}
	}
	n.GroupConsumerAssignors = out
	return nil
}

func i64(dst func(*Node) *int64, min int64) func(*Node, string) error {
	return func(n *Node, v string) error {
		i, err := parseInt64(v)
		if err != nil || i < min {
			return fmt.Errorf("%w %q (an integer >= %d)", errBadValue, v, min)
		}
		*dst(n) = i
		return nil
	}
}

// millis parses a non-negative duration in unit (Kafka's atLeast(0), or no
// validator).
func millis(dst func(*Node) *time.Duration, unit time.Duration) func(*Node, string) error {
	return durationAtLeast(dst, unit, 0)
}

// positiveMillis parses a duration in unit of at least one (Kafka's
// atLeast(1): periods and expirations where zero means nothing sensible).
func positiveMillis(dst func(*Node) *time.Duration, unit time.Duration) func(*Node, string) error {
	return durationAtLeast(dst, unit, 1)
}

func durationAtLeast(dst func(*Node) *time.Duration, unit time.Duration, min int64) func(*Node, string) error {
	return func(n *Node, v string) error {
		i, err := parseInt64(v)
		if err != nil || i < min {
			return fmt.Errorf("%w %q (an integer >= %d)", errBadValue, v, min)
		}
		*dst(n) = time.Duration(i) * unit
		return nil
	}
}

// StandardAuthorizerClass is the authorizer.class.name of Kafka's KRaft
// authorizer (KIP-801), the one samsa implements.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func boolean(dst func(*Node) *bool) func(*Node, string) error {
	return func(n *Node, v string) error {
		b, err := parseBool(v)
		if err != nil {
			return fmt.Errorf("%w %q (true or false)", errBadValue, v)
		}
		*dst(n) = b
		return nil
	}
}

// positive parses a positive floating-point number (a Java double).
func positive(dst func(*Node) *float64) func(*Node, string) error {
	return func(n *Node, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0) {
			return fmt.Errorf("%w %q (a positive number)", errBadValue, v)
		}
		*dst(n) = f
		return nil
	}
}

func ignored(*Node, string) error { return nil }

// nodeProps are the node-level properties Samsa reads. Topic config
// defaults (log.segment.bytes and friends) are in topicConfigs.
var nodeProps = map[string]nodeProp{
	"node.id": {"1", i32(func(n *Node) *int32 { return &n.NodeID }, 0), "this node's id"},
	"broker.id": {"", func(n *Node, v string) error {
		return i32(func(n *Node) *int32 { return &n.NodeID }, 0)(n, v)
	}, "alias of node.id"},
	"process.roles": {"broker,controller", func(n *Node, v string) error {
		n.ProcessRoles = parseList(v)
		for _, r := range n.ProcessRoles {
			if r != "broker" && r != "controller" {
				return fmt.Errorf("%w %q (broker, controller or both)", errBadValue, v)
			}
		}
		if len(n.ProcessRoles) == 0 {
			return fmt.Errorf("%w: empty", errBadValue)
		}
		return nil
	}, "broker, controller or broker,controller"},
	"listeners": {"PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093", func(n *Node, v string) (err error) {
		n.Listeners, err = ParseListeners(v)
		if err == nil && len(n.Listeners) == 0 {
			err = fmt.Errorf("%w: no listener", errBadValue)
		}
		return err
	}, "listeners to bind"},
	"advertised.listeners": {"", func(n *Node, v string) (err error) {
		n.AdvertisedListeners, err = ParseListeners(v)
		return err
	}, "addresses given to clients"},
	"controller.listener.names": {"CONTROLLER", func(n *Node, v string) error {
		n.ControllerListenerNames = parseList(strings.ToUpper(v))
		return nil
	}, "listeners used by controllers"},
	"listener.security.protocol.map": {DefaultListenerSecurityProtocolMap, func(n *Node, v string) error {
		m, err := parseSecurityProtocolMap(v)
		n.ListenerSecurityProtocols = m
		return err
	}, "listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"},
	"inter.broker.listener.name": {"", func(n *Node, v string) error {
		n.InterBrokerListenerName = strings.ToUpper(strings.TrimSpace(v))
		return nil
	}, "listener brokers use to reach each other (default: the first broker listener)"},
	"controller.quorum.voters": {"", func(n *Node, v string) (err error) {
		n.QuorumVoters, err = ParseVoters(v)
		return err
	}, "controllers of the metadata quorum, id@host:port,..."},
	"metadata.log.max.record.bytes.between.snapshots": {"20971520", i64(func(n *Node) *int64 { return &n.MetadataSnapshotMaxRecordBytes }, 1), "metadata log bytes between metadata image snapshots"},
	"metadata.log.max.snapshot.interval.ms":           {"3600000", i64(func(n *Node) *int64 { return &n.MetadataSnapshotMaxIntervalMs }, 0), "time between metadata image snapshots (0: no limit)"},
	"controller.quorum.bootstrap.servers":             {"", ignored, "accepted, unused: controller.quorum.voters names the controllers"},
	"log.dirs": {"", func(n *Node, v string) error {
		n.LogDirs = parseList(v)
		return nil
	}, "data directories"},
	"log.dir": {"./samsa-data", func(n *Node, v string) error {
		if len(n.LogDirs) == 0 {
			n.LogDirs = parseList(v)
		}
		return nil
	}, "data directory when log.dirs is unset"},
	"num.partitions": {"1", i32(func(n *Node) *int32 { return &n.NumPartitions }, 1), "default partitions of a new topic"},
	"default.replication.factor": {"1", func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil || i < 1 || i > 32767 {
			return fmt.Errorf("%w %q", errBadValue, v)
		}
		n.DefaultReplicationFactor = int16(i)
		return nil
	}, "default replication factor"},
	"auto.create.topics.enable": {"true", boolean(func(n *Node) *bool { return &n.AutoCreateTopicsEnable }), "create topics on Metadata and Produce"},
	"delete.topic.enable":       {"true", boolean(func(n *Node) *bool { return &n.DeleteTopicEnable }), "allow DeleteTopics"},
	"authorizer.class.name": {"", func(n *Node, v string) error {
		switch v = strings.TrimSpace(v); v {
		case "", StandardAuthorizerClass:
			n.AuthorizerClassName = v
			return nil
		}
		return fmt.Errorf("%w %q (only %s is supported)", errBadValue, v, StandardAuthorizerClass)
	}, "enforce ACLs (" + StandardAuthorizerClass + ")"},
	"super.users": {"", func(n *Node, v string) error {
		n.SuperUsers = nil
		for _, p := range strings.Split(v, ";") {
			if p = strings.TrimSpace(p); p != "" {
				if i := strings.IndexByte(p, ':'); i <= 0 {
					return fmt.Errorf("%w %q (principals Type:name separated by ';')", errBadValue, p)
				}
				n.SuperUsers = append(n.SuperUsers, p)
			}
		}
		return nil
	}, "principals allowed everything, User:a;User:b"},
	"allow.everyone.if.no.acl.found":       {"false", boolean(func(n *Node) *bool { return &n.AllowEveryoneIfNoACLFound }), "allow what no ACL names"},
	"quota.window.num":                     {"11", i32(func(n *Node) *int32 { return &n.QuotaWindowNum }, 1), "samples of the client quota rates"},
	"quota.window.size.seconds":            {"1", i32(func(n *Node) *int32 { return &n.QuotaWindowSizeSeconds }, 1), "seconds per client quota sample"},
	"controller.quota.window.num":          {"11", i32(func(n *Node) *int32 { return &n.ControllerQuotaWindowNum }, 1), "controller_mutation_rate burst, in samples"},
	"controller.quota.window.size.seconds": {"1", i32(func(n *Node) *int32 { return &n.ControllerQuotaWindowSizeSeconds }, 1), "seconds per controller_mutation_rate sample"},
	"message.max.bytes":                    {"1048588", i32(func(n *Node) *int32 { return &n.MessageMaxBytes }, 0), "largest batch"},
	"socket.request.max.bytes":             {"104857600", i32(func(n *Node) *int32 { return &n.SocketRequestMaxBytes }, 1), "largest request"},
	"max.connections":                      {"2147483647", i32(func(n *Node) *int32 { return &n.MaxConnections }, 0), "connections open at once, per socket server (the default: what the descriptor limit leaves past log.open.files.max and 64)"},
	"max.connections.per.ip":               {"2147483647", i32(func(n *Node) *int32 { return &n.MaxConnectionsPerIP }, 0), "connections open at once from one address"},
	"max.connections.per.ip.overrides": {"", func(n *Node, v string) error {
		m := map[string]int32{}
		for _, kv := range parseList(v) {
			// Kafka splits at the last colon (an IPv6 address has more).
			i := strings.LastIndex(kv, ":")
			if i <= 0 {
				return fmt.Errorf("%w %q (host:count)", errBadValue, kv)
			}
			host := strings.TrimSpace(kv[:i])
			c, err := parseInt32(kv[i+1:])
			if err != nil || c < 0 || host == "" {
				return fmt.Errorf("%w %q (host:count, a count >= 0)", errBadValue, kv)
			}
			m[host] = c
		}
		n.MaxConnectionsPerIPOverrides = m
		return nil
	}, "per-address limits, host:count,..."},
	"connections.max.idle.ms": {"600000", func(n *Node, v string) error {
		i, err := parseInt64(v)
		if err != nil {
			return fmt.Errorf("%w %q (an integer; negative: never)", errBadValue, v)
		}
		// Clamped before the multiplication: a large negative value
		// wrapped around to a positive timeout (Long.MIN_VALUE+1 to 1 ms).
		n.ConnectionsMaxIdle = time.Duration(max(min(i, int64(math.MaxInt64/time.Millisecond)), -1)) * time.Millisecond
		return nil
	}, "close client connections idle this long"},
	"log.flush.interval.messages": {"9223372036854775807", i64(func(n *Node) *int64 { return &n.LogFlushIntervalMessages }, 1), "fsync after this many messages"},
	"log.flush.interval.ms": {"", func(n *Node, v string) error {
		return i64(func(n *Node) *int64 { return &n.LogFlushIntervalMs }, 0)(n, v)
	}, "fsync interval"},
	"log.flush.scheduler.interval.ms": {"9223372036854775807", func(n *Node, v string) error {
		i, err := parseInt64(v)
		if err != nil || i < 1 {
			return fmt.Errorf("%w %q (an integer >= 1)", errBadValue, v)
		}
		n.LogFlushSchedulerInterval = 0
		if i < math.MaxInt64/int64(time.Millisecond) {
			n.LogFlushSchedulerInterval = time.Duration(i) * time.Millisecond
		}
		return nil
	}, "how often logs are checked against flush.ms"},
	"log.flush.offset.checkpoint.interval.ms": {"60000", i64(func(n *Node) *int64 { return &n.LogFlushOffsetCheckpointIntervalMs }, 0), "recovery point checkpoint interval"},
	"offsets.topic.num.partitions":            {"50", i32(func(n *Node) *int32 { return &n.OffsetsTopicNumPartitions }, 1), "partitions of __consumer_offsets"},
	"offsets.topic.replication.factor": {"3", func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil || i < 1 || i > 32767 {
			return fmt.Errorf("%w %q", errBadValue, v)
		}
		n.OffsetsTopicReplicationFactor = int16(i)
		return nil
	}, "replication factor of __consumer_offsets"},
	"transaction.state.log.num.partitions":          {"50", i32(func(n *Node) *int32 { return &n.TransactionStateLogNumPartitions }, 1), "partitions of __transaction_state"},
	"group.initial.rebalance.delay.ms":              {"3000", millis(func(n *Node) *time.Duration { return &n.GroupInitialRebalanceDelay }, time.Millisecond), "delay of a new group's first rebalance"},
	"group.min.session.timeout.ms":                  {"6000", millis(func(n *Node) *time.Duration { return &n.GroupMinSessionTimeout }, time.Millisecond), "smallest session timeout"},
	"group.max.session.timeout.ms":                  {"1800000", millis(func(n *Node) *time.Duration { return &n.GroupMaxSessionTimeout }, time.Millisecond), "largest session timeout"},
	"group.max.size":                                {"2147483647", i32(func(n *Node) *int32 { return &n.GroupMaxSize }, 1), "members per group"},
	"offsets.retention.minutes":                     {"10080", positiveMillis(func(n *Node) *time.Duration { return &n.OffsetsRetention }, time.Minute), "retention of an empty group's offsets"},
	"fetch.max.bytes":                               {"57671680", i32(func(n *Node) *int32 { return &n.FetchMaxBytes }, 1024), "cap of a fetch response"},
	"max.incremental.fetch.session.cache.slots":     {"1000", i32(func(n *Node) *int32 { return &n.MaxIncrementalFetchSessionCacheSlots }, 0), "fetch sessions kept (KIP-227)"},
	"replica.lag.time.max.ms":                       {"30000", millis(func(n *Node) *time.Duration { return &n.ReplicaLagTimeMax }, time.Millisecond), "follower lag before leaving the ISR"},
	"replica.high.watermark.checkpoint.interval.ms": {"5000", positiveMillis(func(n *Node) *time.Duration { return &n.ReplicaHighWatermarkCheckpointInterval }, time.Millisecond), "high-watermark checkpoint period"},
	"replica.fetch.response.max.bytes":              {"10485760", i32(func(n *Node) *int32 { return &n.ReplicaFetchResponseMaxBytes }, 1024), "cap of a follower fetch response"},
	"broker.session.timeout.ms":                     {"9000", millis(func(n *Node) *time.Duration { return &n.BrokerSessionTimeout }, time.Millisecond), "fence brokers silent this long"},
	"broker.heartbeat.interval.ms":                  {"2000", millis(func(n *Node) *time.Duration { return &n.BrokerHeartbeatInterval }, time.Millisecond), "broker heartbeat period"},
	"samsa.fetch.sendfile":                          {"false", boolean(func(n *Node) *bool { return &n.FetchSendfile }), "write fetched records with sendfile(2)"},
	"http.listener": {"localhost:9644", func(n *Node, v string) error {
		v = strings.TrimSpace(v)
		if v != "" {
			if _, port, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("%w %q (host:port, or empty for none)", errBadValue, v)
			} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
				return fmt.Errorf("%w %q (bad port)", errBadValue, v)
			}
		}
		n.HTTPListener = v
		return nil
	}, "operations HTTP listener (/metrics, /healthz, /readyz, the web console at /); empty: none"},
	"console.read.only": {"false", boolean(func(n *Node) *bool { return &n.ConsoleReadOnly }), "web console without writes"},
	"http.listener.security.protocol": {"PLAINTEXT", func(n *Node, v string) error {
		switch v = strings.ToUpper(strings.TrimSpace(v)); v {
		case "PLAINTEXT", "SSL":
			n.HTTPListenerSecurityProtocol = v
			return nil
		}
		return fmt.Errorf("%w %q (PLAINTEXT or SSL)", errBadValue, v)
	}, "PLAINTEXT or SSL (ssl.* as for a listener named HTTP)"},
	"samsa.metrics.partition.series":        {"true", boolean(func(n *Node) *bool { return &n.MetricsPartitionSeries }), "serve per-partition metrics series"},
	"samsa.metrics.consumer.lag.partitions": {"true", boolean(func(n *Node) *bool { return &n.MetricsConsumerLagPartitions }), "serve consumer lag per partition, not only per topic"},
	"samsa.metrics.consumer.lag.max.series": {"10000", func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil {
			return fmt.Errorf("%w %q", errBadValue, v)
		}
		n.MetricsConsumerLagMaxSeries = i
		return nil
	}, "most committed offsets served as lag series"},
	"auto.leader.rebalance.enable":            {"true", boolean(func(n *Node) *bool { return &n.AutoLeaderRebalanceEnable }), "move leadership back to preferred replicas"},
	"leader.imbalance.check.interval.seconds": {"300", positiveMillis(func(n *Node) *time.Duration { return &n.LeaderImbalanceCheckInterval }, time.Second), "preferred leader check period"},
	"leader.imbalance.per.broker.percentage":  {"10", i32(func(n *Node) *int32 { return &n.LeaderImbalancePerBrokerPercentage }, 0), "allowed leader imbalance per broker"},
	"leader.replication.throttled.rate":       {"9223372036854775807", i64(func(n *Node) *int64 { return &n.LeaderReplicationThrottledRate }, 0), "bytes/s served to throttled followers"},
	"follower.replication.throttled.rate":     {"9223372036854775807", i64(func(n *Node) *int64 { return &n.FollowerReplicationThrottledRate }, 0), "bytes/s fetched by throttled followers"},
	"broker.rack":                             {"", func(n *Node, v string) error { n.BrokerRack = strings.TrimSpace(v); return nil }, "rack of this broker"},
	"cluster.id":                              {"", func(n *Node, v string) error { n.ClusterID = v; return nil }, "cluster id for a fresh log dir"},
	"replica.selector.class": {"", func(n *Node, v string) error {
		switch v = strings.TrimSpace(v); v {
		case "", RackAwareReplicaSelector:
			n.ReplicaSelectorClass = v
			return nil
		}
		return fmt.Errorf("%w %q (empty or %s)", errBadValue, v, RackAwareReplicaSelector)
	}, "send consumers to a replica in their rack (KIP-392)"},
	// Accepted for compatibility with existing server.properties files;
	// Samsa has no thread pools to size.
	"num.network.threads":                 {"3", ignored, "accepted, unused"},
	"num.io.threads":                      {"8", ignored, "accepted, unused"},
	"socket.send.buffer.bytes":            {"102400", ignored, "accepted, unused"},
	"socket.receive.buffer.bytes":         {"102400", ignored, "accepted, unused"},
	"log.retention.check.interval.ms":     {"300000", positiveMillis(func(n *Node) *time.Duration { return &n.LogRetentionCheckInterval }, time.Millisecond), "how often retention runs"},
	"log.cleaner.enable":                  {"true", boolean(func(n *Node) *bool { return &n.LogCleanerEnable }), "run the log cleaner"},
	"num.recovery.threads.per.data.dir":   {"2", i32(func(n *Node) *int32 { return &n.NumRecoveryThreadsPerDataDir }, 1), "logs of a log dir opened and closed at once"},
	"log.partitions.max":                  {"0", i32(func(n *Node) *int32 { return &n.LogPartitionsMax }, 0), "partition replicas one node hosts (0: what memory and the fd limit allow)"},
	"log.open.files.max":                  {"0", i32(func(n *Node) *int32 { return &n.LogOpenFilesMax }, -1), "segment file descriptors kept open while idle (0: 4096 or half the fd limit; -1: no cap)"},
	"log.cleaner.backoff.ms":              {"15000", millis(func(n *Node) *time.Duration { return &n.LogCleanerBackoff }, time.Millisecond), "log cleaner sleep when idle"},
	"log.cleaner.dedupe.buffer.size":      {"134217728", i64(func(n *Node) *int64 { return &n.LogCleanerDedupeBufferSize }, 1024), "log cleaner key map memory"},
	"log.cleaner.threads":                 {"1", ignored, "accepted; one cleaner goroutine"},
	"log.cleaner.io.buffer.size":          {"524288", ignored, "accepted, unused"},
	"log.cleaner.io.max.bytes.per.second": {"1.7976931348623157E308", positive(func(n *Node) *float64 { return &n.LogCleanerIOMaxBytesPerSecond }), "log cleaner reads and writes, bytes per second"},
	"log.cleaner.io.buffer.load.factor":   {"0.9", ignored, "accepted, 0.9"},
	"transaction.state.log.replication.factor": {"3", func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil || i < 1 || i > 32767 {
			return fmt.Errorf("%w %q", errBadValue, v)
		}
		n.TransactionStateLogReplicationFactor = int16(i)
		return nil
	}, "replication factor of __transaction_state, capped by cluster size"},
	"transaction.state.log.min.isr":                               {"2", i32(func(n *Node) *int32 { return &n.TransactionStateLogMinISR }, 1), "min.insync.replicas of __transaction_state, capped by its replication factor"},
	"transaction.state.log.segment.bytes":                         {"104857600", i64(func(n *Node) *int64 { return &n.TransactionStateLogSegmentBytes }, 14), "segment.bytes of __transaction_state"},
	"transaction.max.timeout.ms":                                  {"900000", positiveMillis(func(n *Node) *time.Duration { return &n.TransactionMaxTimeout }, time.Millisecond), "largest transaction.timeout.ms"},
	"transactional.id.expiration.ms":                              {"604800000", positiveMillis(func(n *Node) *time.Duration { return &n.TransactionalIDExpiration }, time.Millisecond), "idle transactional ids are removed"},
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": {"10000", positiveMillis(func(n *Node) *time.Duration { return &n.TransactionAbortTimedOutInterval }, time.Millisecond), "period of the transaction timeout check"},
	"transaction.remove.expired.transaction.cleanup.interval.ms":  {"3600000", positiveMillis(func(n *Node) *time.Duration { return &n.TransactionRemoveExpiredInterval }, time.Millisecond), "period of the transactional id expiration check"},
	"producer.id.expiration.ms":                                   {"86400000", positiveMillis(func(n *Node) *time.Duration { return &n.ProducerIDExpiration }, time.Millisecond), "idle producer state is forgotten"},
	"share.coordinator.state.topic.replication.factor":            {"3", ignored, "accepted, unused"},
	"share.coordinator.state.topic.min.isr":                       {"2", ignored, "accepted, unused"},
}

// Parse builds a Node from properties (file contents with overrides
// applied). Every key must be a known node property or a broker-level
// topic default (log.segment.bytes, ...); an unknown key or invalid value is
// an error naming it.
func Parse(props map[string]string) (*Node, error) {
	n := &Node{Topic: map[string]string{}, Set: map[string]string{}}
	for k, v := range props {
		n.Set[k] = v
	}
	// Defaults first, in a fixed order, then the given values.
	names := make([]string, 0, len(nodeProps))
	for k := range nodeProps {
		names = append(names, k)
	}
	sort.Strings(names)
	apply := func(k, v string) error {
		if err := nodeProps[k].set(n, v); err != nil {
			return fmt.Errorf("config %s=%q: %w", k, v, err)
		}
		return nil
	}
	for _, k := range names {
		if _, given := props[k]; given || nodeProps[k].def == "" || k == "log.dir" {
			continue
		}
		if err := apply(k, nodeProps[k].def); err != nil {
			return nil, err
		}
	}
	var unknown []string
	given := make([]string, 0, len(props))
	for k := range props {
		given = append(given, k)
	}
	sort.Strings(given)
	for _, k := range given {
		if _, ok := nodeProps[k]; ok {
			if k == "log.dir" {
				continue
			}
			if err := apply(k, props[k]); err != nil {
				return nil, err
			}
			continue
		}
		if _, ok := brokerSynonyms[k]; ok {
			continue
		}
		if securityKey(k) {
			continue // read per listener by Security
		}
		unknown = append(unknown, k)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown config %s", strings.Join(unknown, ", "))
	}
	if len(n.LogDirs) == 0 {
		dir := props["log.dir"]
		if dir == "" {
			dir = nodeProps["log.dir"].def
		}
		n.LogDirs = parseList(dir)
	}
	topic, err := brokerTopicDefaults(props)
	if err != nil {
		return nil, err
	}
	// The broker-level values checked together, as Kafka's LogManager
	// does at startup (LogConfig.validateBrokerLogConfigValues).
	if err := ValidateTopicConfigs(nil, topic); err != nil {
		return nil, fmt.Errorf("broker-level log configs: %w", err)
	}
	n.Topic = topic
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return n, nil
}

// Validate checks relations between properties, as Kafka's KafkaConfig
// does for the process roles:
//
//   - broker,controller: a broker listener; with controller.quorum.voters,
//     node.id is a voter and a controller listener is bound (raft runs on
//     it);
//   - controller: controller.quorum.voters with node.id among them, and
//     only controller listeners (controller.listener.names), at least one;
//   - broker: controller.quorum.voters without node.id (the broker follows
//     the quorum as an observer), a broker listener and no controller
//     listener.
//
// Then every listener has a security protocol in
// listener.security.protocol.map (see SecurityProtocol) with ssl.* and
// sasl.* properties Samsa serves (Security), and max.connections.per.ip is zero only with overrides.
func (n *Node) Validate() error {
	if len(n.LogDirs) == 0 {
		return errors.New("config log.dirs: no directory")
	}
	if n.GroupMinSessionTimeout > n.GroupMaxSessionTimeout {
		return errors.New("config group.min.session.timeout.ms is above group.max.session.timeout.ms")
	}
	if n.GroupConsumerSessionTimeout < n.GroupConsumerMinSessionTimeout || n.GroupConsumerSessionTimeout > n.GroupConsumerMaxSessionTimeout {
		return errors.New("config group.consumer.session.timeout.ms is outside group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms")
	}
	if n.GroupConsumerHeartbeatInterval < n.GroupConsumerMinHeartbeatInterval || n.GroupConsumerHeartbeatInterval > n.GroupConsumerMaxHeartbeatInterval {
		return errors.New("config group.consumer.heartbeat.interval.ms is outside group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms")
	}
	if n.GroupConsumerHeartbeatInterval >= n.GroupConsumerSessionTimeout {
		return errors.New("config group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
	}
	if err := n.validateShareGroups(); err != nil {
		return err
	}
	if n.MaxConnectionsPerIP == 0 && len(n.MaxConnectionsPerIPOverrides) == 0 {
		return errors.New("config max.connections.per.ip can be zero only if max.connections.per.ip.overrides is set")
	}
	if len(n.ControllerListenerNames) == 0 {
		return errors.New("config controller.listener.names: empty")
	}
	broker, controller := n.HasRole("broker"), n.HasRole("controller")
	_, hasBrokerListener := n.BrokerListener()
	_, hasControllerListener := n.ControllerListener()
	voter := false
	for _, v := range n.QuorumVoters {
		voter = voter || v.ID == n.NodeID
	}
	if broker && !hasBrokerListener {
		return errors.New("config listeners: no broker listener (one not named in controller.listener.names)")
	}
	switch {
	case broker && controller:
		if len(n.QuorumVoters) > 0 && !voter {
			return fmt.Errorf("config controller.quorum.voters: node.id %d of a controller is not a voter", n.NodeID)
		}
		if len(n.QuorumVoters) > 0 && !hasControllerListener {
			return fmt.Errorf("config listeners: no controller listener (named in controller.listener.names %s) for the quorum", strings.Join(n.ControllerListenerNames, ","))
		}
	case controller:
		if len(n.QuorumVoters) == 0 {
			return errors.New("config controller.quorum.voters: a controller-only node (process.roles=controller) needs the quorum's voters")
		}
		if !voter {
			return fmt.Errorf("config controller.quorum.voters: node.id %d of a controller is not a voter", n.NodeID)
		}
		if hasBrokerListener || !hasControllerListener {
			return fmt.Errorf("config listeners: a controller-only node binds only controller listeners (controller.listener.names %s), at least one", strings.Join(n.ControllerListenerNames, ","))
		}
	case broker:
		if len(n.QuorumVoters) == 0 {
			return errors.New("config controller.quorum.voters: a broker-only node (process.roles=broker) needs the controllers of the quorum")
		}
		if voter {
			return fmt.Errorf("config controller.quorum.voters: node.id %d of a broker-only node is a voter (a voter is a controller)", n.NodeID)
		}
		if hasControllerListener {
			return fmt.Errorf("config listeners: a broker-only node binds no controller listener (controller.listener.names %s)", strings.Join(n.ControllerListenerNames, ","))
		}
	}
	if name := n.InterBrokerListenerName; name != "" && broker {
		found := false
		for _, l := range n.Listeners {
			found = found || l.Name == name && !n.IsControllerListener(name)
		}
		if !found {
			return fmt.Errorf("config inter.broker.listener.name: %s is not a broker listener of listeners", name)
		}
	}
	return n.validateSecurityProtocols()
}

// HasRole reports whether process.roles holds role.
func (n *Node) HasRole(role string) bool {
	for _, r := range n.ProcessRoles {
		if r == role {
			return true
		}
	}
	return false
}

// IsControllerListener reports whether name is in controller.listener.names.
func (n *Node) IsControllerListener(name string) bool {
	for _, c := range n.ControllerListenerNames {
		if c == name {
			return true
		}
	}
	return false
}

// BrokerListener is the first listener that is not a controller listener.
func (n *Node) BrokerListener() (Listener, bool) {
	for _, l := range n.Listeners {
		if !n.IsControllerListener(l.Name) {
			return l, true
		}
	}
	return Listener{}, false
}

// InterBrokerListener is the listener brokers reach each other on:
// inter.broker.listener.name, else the first broker listener.
func (n *Node) InterBrokerListener() string {
	if n.InterBrokerListenerName != "" {
		return n.InterBrokerListenerName
	}
	l, _ := n.BrokerListener()
	return l.Name
}

// ControllerListener is the first listener named in
// controller.listener.names.
func (n *Node) ControllerListener() (Listener, bool) {
	for _, l := range n.Listeners {
		if n.IsControllerListener(l.Name) {
			return l, true
		}
	}
	return Listener{}, false
}

// NodeDefault returns the default of a node property as a string, and
// whether the property is known.
func NodeDefault(name string) (string, bool) {
	p, ok := nodeProps[name]
	return p.def, ok
}

// BrokerConfig is one broker property as DescribeConfigs shows it.
type BrokerConfig struct {
	Name  string
	Value string
	Set   bool // given in the file or overrides (STATIC_BROKER_CONFIG)
	// Null: DescribeConfigs shows no value, for a property neither set nor
	// with a default, or a sensitive one (Sensitive).
	Null      bool
	Type      ConfigType // BrokerConfigType
	Sensitive bool       // BrokerConfigSensitive: a PASSWORD
}

// BrokerConfigs lists the node's properties, the security properties
// (ssl.*, sasl.*, and those set behind listener.name.<l>.) and the broker
// synonyms of topic configs, sorted by name, with their values: the given
// one, else Kafka's default ("" and Null when Kafka has none, see
// BrokerDefault). broker.id is the node's id, as node.id. Sensitive
// properties have no value (Null), as in Kafka.
func (n *Node) BrokerConfigs() []BrokerConfig {
	var out []BrokerConfig
	add := func(name, def string) {
		v, set := n.Set[name]
		if !set {
			v = def
		}
		bc := BrokerConfig{Name: name, Value: v, Set: set, Null: !set && def == "",
			Type: BrokerConfigType(name), Sensitive: BrokerConfigSensitive(name)}
		if name == "broker.id" || name == "node.id" {
			bc.Value, bc.Null = strconv.Itoa(int(n.NodeID)), false
		}
		if bc.Sensitive {
			bc.Value, bc.Null = "", true
		}
		out = append(out, bc)
	}
	for name, p := range nodeProps {
		add(name, p.def)
	}
	for name, def := range securityProps {
		add(name, def)
	}
	for name := range n.Set {
		if _, global := securityProps[name]; !global && securityKey(name) {
			add(name, "")
		}
	}
	for syn := range brokerSynonyms {
		if syn == "" {
			continue
		}
		if _, dup := nodeProps[syn]; dup {
			continue
		}
		def, _ := BrokerDefault(syn)
		add(syn, def)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
