package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// shareGroupProps are the broker properties of KIP-932 share groups that
// bound the share group configs, merged into nodeProps (Kafka's
// GroupCoordinatorConfig and ShareGroupConfig; same names, defaults and
// ranges).
var shareGroupProps = map[string]nodeProp{
	"group.share.session.timeout.ms":          {"45000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareSessionTimeout }, time.Millisecond), "session of share group (KIP-932) members"},
	"group.share.min.session.timeout.ms":      {"45000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareMinSessionTimeout }, time.Millisecond), "smallest share group session timeout"},
	"group.share.max.session.timeout.ms":      {"60000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareMaxSessionTimeout }, time.Millisecond), "largest share group session timeout"},
	"group.share.heartbeat.interval.ms":       {"5000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareHeartbeatInterval }, time.Millisecond), "heartbeat interval of share group members"},
	"group.share.min.heartbeat.interval.ms":   {"5000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareMinHeartbeatInterval }, time.Millisecond), "smallest share group heartbeat interval"},
	"group.share.max.heartbeat.interval.ms":   {"15000", positiveMillis(func(n *Node) *time.Duration { return &n.GroupShareMaxHeartbeatInterval }, time.Millisecond), "largest share group heartbeat interval"},
	"group.share.record.lock.duration.ms":     {"30000", millisBetween(func(n *Node) *time.Duration { return &n.GroupShareRecordLockDuration }, 1000, 3600000), "how long a share consumer holds an acquired record"},
	"group.share.min.record.lock.duration.ms": {"15000", millisBetween(func(n *Node) *time.Duration { return &n.GroupShareMinRecordLockDuration }, 1000, 30000), "smallest share.record.lock.duration.ms of a group"},
	"group.share.max.record.lock.duration.ms": {"60000", millisBetween(func(n *Node) *time.Duration { return &n.GroupShareMaxRecordLockDuration }, 30000, 3600000), "largest share.record.lock.duration.ms of a group"},
	"group.share.delivery.count.limit":        {"5", i32Between(func(n *Node) *int32 { return &n.GroupShareDeliveryCountLimit }, 2, 10), "deliveries of a record before a share group archives it"},
	"group.share.min.delivery.count.limit":    {"2", i32Between(func(n *Node) *int32 { return &n.GroupShareMinDeliveryCountLimit }, 2, 5), "smallest share.delivery.count.limit of a group"},
	"group.share.max.delivery.count.limit":    {"10", i32Between(func(n *Node) *int32 { return &n.GroupShareMaxDeliveryCountLimit }, 5, 25), "largest share.delivery.count.limit of a group"},
	"group.share.partition.max.record.locks":  {"2000", i32Between(func(n *Node) *int32 { return &n.GroupSharePartitionMaxRecordLocks }, 100, 10000), "in-flight records of a share-partition, from its start offset to its end offset"},
	"share.coordinator.snapshot.update.records.per.snapshot": {"500", i32Between(func(n *Node) *int32 { return &n.ShareCoordinatorSnapshotUpdateRecordsPerSnapshot }, 0, math.MaxInt32),
		"ShareUpdate records the share coordinator writes to __share_group_state between two ShareSnapshot records of a share-partition"},
}

func init() { maps.Copy(nodeProps, shareGroupProps) }

func millisBetween(dst func(*Node) *time.Duration, lo, hi int64) func(*Node, string) error {
	return func(n *Node, v string) error {
		i, err := parseInt64(v)
		if err != nil || i < lo || i > hi {
			return fmt.Errorf("%w %q (an integer in [%d, %d])", errBadValue, v, lo, hi)
		}
		*dst(n) = time.Duration(i) * time.Millisecond
		return nil
	}
}

func i32Between(dst func(*Node) *int32, lo, hi int32) func(*Node, string) error {
	return func(n *Node, v string) error {
		i, err := parseInt32(v)
		if err != nil || i < lo || i > hi {
			return fmt.Errorf("%w %q (an integer in [%d, %d])", errBadValue, v, lo, hi)
		}
		*dst(n) = i
		return nil
	}
}

// validateShareGroups checks the share group properties against each
// other, as Kafka's GroupCoordinatorConfig and ShareGroupConfig do.
func (n *Node) validateShareGroups() error {
	switch {
	case n.GroupShareSessionTimeout < n.GroupShareMinSessionTimeout || n.GroupShareSessionTimeout > n.GroupShareMaxSessionTimeout:
		return errors.New("config group.share.session.timeout.ms is outside group.share.min.session.timeout.ms and group.share.max.session.timeout.ms")
	case n.GroupShareHeartbeatInterval < n.GroupShareMinHeartbeatInterval || n.GroupShareHeartbeatInterval > n.GroupShareMaxHeartbeatInterval:
		return errors.New("config group.share.heartbeat.interval.ms is outside group.share.min.heartbeat.interval.ms and group.share.max.heartbeat.interval.ms")
	case n.GroupShareHeartbeatInterval >= n.GroupShareSessionTimeout:
		return errors.New("config group.share.heartbeat.interval.ms must be below group.share.session.timeout.ms")
	case n.GroupShareRecordLockDuration < n.GroupShareMinRecordLockDuration || n.GroupShareRecordLockDuration > n.GroupShareMaxRecordLockDuration:
		return errors.New("config group.share.record.lock.duration.ms is outside group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms")
	case n.GroupShareDeliveryCountLimit < n.GroupShareMinDeliveryCountLimit || n.GroupShareDeliveryCountLimit > n.GroupShareMaxDeliveryCountLimit:
		return errors.New("config group.share.delivery.count.limit is outside group.share.min.delivery.count.limit and group.share.max.delivery.count.limit")
	}
	return nil
}

// Group config names: the configs one group may override through
// IncrementalAlterConfigs and AlterConfigs on a GROUP resource (resource
// type 32, KIP-848 and KIP-932), as Kafka's GroupConfig names them. The
// streams.* configs of Kafka's streams groups, share.partition.max.record.locks
// and share.renew.acknowledge.enable are not served.
const (
	GroupConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
	GroupShareSessionTimeoutMs       = "share.session.timeout.ms"
	GroupShareHeartbeatIntervalMs    = "share.heartbeat.interval.ms"
	GroupShareRecordLockDurationMs   = "share.record.lock.duration.ms"
	GroupShareAutoOffsetReset        = "share.auto.offset.reset"
	GroupShareIsolationLevel         = "share.isolation.level"
	GroupShareDeliveryCountLimit     = "share.delivery.count.limit"
	// GroupDeadLetterTopicName is KIP-1191's dead-letter topic of a share
	// group ("" or unset: none).
	GroupDeadLetterTopicName = "errors.deadletterqueue.topic.name"
)

// Group is the configuration in effect for one group: the broker's
// group.consumer.* and group.share.* properties with the group's
// overrides applied. Safe to copy.
type Group struct {
	// ConsumerSessionTimeout is consumer.session.timeout.ms
	// (default group.consumer.session.timeout.ms).
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is consumer.heartbeat.interval.ms
	// (default group.consumer.heartbeat.interval.ms).
	ConsumerHeartbeatInterval time.Duration
	// ShareSessionTimeout is share.session.timeout.ms
	// (default group.share.session.timeout.ms).
	ShareSessionTimeout time.Duration
	// ShareHeartbeatInterval is share.heartbeat.interval.ms
	// (default group.share.heartbeat.interval.ms).
	ShareHeartbeatInterval time.Duration
	// ShareRecordLockDuration is share.record.lock.duration.ms
	// (default group.share.record.lock.duration.ms).
	ShareRecordLockDuration time.Duration
	// ShareDeliveryCountLimit is share.delivery.count.limit
	// (default group.share.delivery.count.limit).
	ShareDeliveryCountLimit int32
	// ShareAutoOffsetReset is share.auto.offset.reset: "earliest",
	// "latest" (the default) or "by_duration", then ShareAutoOffsetResetBy
	// is the duration before now to start from.
	ShareAutoOffsetReset   string
	ShareAutoOffsetResetBy time.Duration
	// ShareReadCommitted is share.isolation.level=read_committed (default
	// read_uncommitted: false).
	ShareReadCommitted bool
	// DeadLetterTopic is errors.deadletterqueue.topic.name (KIP-1191):
	// the topic a share group copies rejected and delivery-limited records
	// to; "" for none (the default).
	DeadLetterTopic string
}

// GroupConfigNames lists the group config names, sorted.
func GroupConfigNames() []string {
	return []string{
		GroupConsumerHeartbeatIntervalMs, GroupConsumerSessionTimeoutMs, GroupDeadLetterTopicName,
		GroupShareAutoOffsetReset, GroupShareDeliveryCountLimit, GroupShareHeartbeatIntervalMs,
		GroupShareIsolationLevel, GroupShareRecordLockDurationMs, GroupShareSessionTimeoutMs,
	}
}

// GroupConfigType is the DescribeConfigs type of group config name
// (TypeInt or TypeString), false for a name that is not a group config.
func GroupConfigType(name string) (ConfigType, bool) {
	switch name {
	case GroupShareAutoOffsetReset, GroupShareIsolationLevel, GroupDeadLetterTopicName:
		return TypeString, true
	case GroupConsumerSessionTimeoutMs, GroupConsumerHeartbeatIntervalMs, GroupShareSessionTimeoutMs,
		GroupShareHeartbeatIntervalMs, GroupShareRecordLockDurationMs, GroupShareDeliveryCountLimit:
		return TypeInt, true
	}
	return 0, false
}

// GroupDefaults are the values of the group configs of a group without
// overrides, as Kafka's extractGroupConfigMap: the broker's properties.
func (n *Node) GroupDefaults() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return map[string]string{
		GroupConsumerSessionTimeoutMs:    ms(n.GroupConsumerSessionTimeout),
		GroupConsumerHeartbeatIntervalMs: ms(n.GroupConsumerHeartbeatInterval),
		GroupShareSessionTimeoutMs:       ms(n.GroupShareSessionTimeout),
		GroupShareHeartbeatIntervalMs:    ms(n.GroupShareHeartbeatInterval),
		GroupShareRecordLockDurationMs:   ms(n.GroupShareRecordLockDuration),
		GroupShareDeliveryCountLimit:     strconv.Itoa(int(n.GroupShareDeliveryCountLimit)),
		GroupShareAutoOffsetReset:        "latest",
		GroupShareIsolationLevel:         "read_uncommitted",
		GroupDeadLetterTopicName:         "",
	}
}

// ErrGroupConfig is wrapped by the errors of CheckGroupConfigs; the broker
// answers them INVALID_CONFIG, as Kafka's InvalidConfigurationException.
var ErrGroupConfig = errors.New("invalid group config")

// CheckGroupConfigs checks the overrides of one group as they would be
// after a change, as Kafka's GroupConfig.validate: every name a group
// config ("Unknown group config name: x"), every value of its type, the
// durations and the delivery limit within the broker's min and max
// properties, and each session timeout above its heartbeat interval
// (with the broker's values for what the group does not override). The
// error wraps ErrGroupConfig and carries Kafka's message.
func (n *Node) CheckGroupConfigs(overrides map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := GroupConfigType(name); !ok {
			return fmt.Errorf("%w: Unknown group config name: %s", ErrGroupConfig, name)
		}
	}
	merged := n.GroupDefaults()
	maps.Copy(merged, overrides)
	ints := map[string]int64{}
	for _, name := range GroupConfigNames() {
		v := strings.TrimSpace(merged[name])
		switch name {
		case GroupShareAutoOffsetReset:
			if _, _, err := ParseShareAutoOffsetReset(v); err != nil {
				return fmt.Errorf("%w: Invalid value %s for configuration %s: %v", ErrGroupConfig, v, name, err)
			}
			continue
		case GroupDeadLetterTopicName:
			if strings.HasPrefix(v, "__") {
				return fmt.Errorf("%w: Invalid value %s for configuration %s: a dead-letter topic name cannot start with __", ErrGroupConfig, v, name)
			}
			continue
		case GroupShareIsolationLevel:
			if v != "read_committed" && v != "read_uncommitted" {
				return fmt.Errorf("%w: Invalid value %s for configuration %s: String must be one of: read_committed, read_uncommitted", ErrGroupConfig, v, name)
			}
			continue
		}
		i, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: Invalid value %s for configuration %s: Not a number of type INT", ErrGroupConfig, v, name)
		}
		least := int64(1)
		switch name {
		case GroupShareRecordLockDurationMs:
			least = 1000
		case GroupShareDeliveryCountLimit:
			least = 2
		}
		if i < least {
			return fmt.Errorf("%w: Invalid value %d for configuration %s: Value must be at least %d", ErrGroupConfig, i, name, least)
		}
		ints[name] = i
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	for _, b := range []struct {
		name, minName, maxName string
		min, max               int64
	}{
		{GroupConsumerHeartbeatIntervalMs, "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", ms(n.GroupConsumerMinHeartbeatInterval), ms(n.GroupConsumerMaxHeartbeatInterval)},
		{GroupConsumerSessionTimeoutMs, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms", ms(n.GroupConsumerMinSessionTimeout), ms(n.GroupConsumerMaxSessionTimeout)},
		{GroupShareHeartbeatIntervalMs, "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", ms(n.GroupShareMinHeartbeatInterval), ms(n.GroupShareMaxHeartbeatInterval)},
		{GroupShareSessionTimeoutMs, "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms", ms(n.GroupShareMinSessionTimeout), ms(n.GroupShareMaxSessionTimeout)},
		{GroupShareRecordLockDurationMs, "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms", ms(n.GroupShareMinRecordLockDuration), ms(n.GroupShareMaxRecordLockDuration)},
		{GroupShareDeliveryCountLimit, "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit", int64(n.GroupShareMinDeliveryCountLimit), int64(n.GroupShareMaxDeliveryCountLimit)},
	} {
		if v := ints[b.name]; v < b.min {
			return fmt.Errorf("%w: %s must be greater than or equal to %s (%d)", ErrGroupConfig, b.name, b.minName, b.min)
		} else if v > b.max {
			return fmt.Errorf("%w: %s must be less than or equal to %s (%d)", ErrGroupConfig, b.name, b.maxName, b.max)
		}
	}
	if ints[GroupConsumerSessionTimeoutMs] <= ints[GroupConsumerHeartbeatIntervalMs] {
		return fmt.Errorf("%w: %s must be greater than %s", ErrGroupConfig, GroupConsumerSessionTimeoutMs, GroupConsumerHeartbeatIntervalMs)
	}
	if ints[GroupShareSessionTimeoutMs] <= ints[GroupShareHeartbeatIntervalMs] {
		return fmt.Errorf("%w: %s must be greater than %s", ErrGroupConfig, GroupShareSessionTimeoutMs, GroupShareHeartbeatIntervalMs)
	}
	return nil
}

// GroupConfig is the configuration in effect for a group with overrides
// (its dynamic group configs, nil for none). Overrides were checked when
// set, but the broker's bounds may have changed since: as Kafka's
// GroupConfig.evaluate, a value outside the broker's current min and max
// is capped to them, and one that does not parse is ignored.
func (n *Node) GroupConfig(overrides map[string]string) Group {
	g := Group{
		ConsumerSessionTimeout:    n.GroupConsumerSessionTimeout,
		ConsumerHeartbeatInterval: n.GroupConsumerHeartbeatInterval,
		ShareSessionTimeout:       n.GroupShareSessionTimeout,
		ShareHeartbeatInterval:    n.GroupShareHeartbeatInterval,
		ShareRecordLockDuration:   n.GroupShareRecordLockDuration,
		ShareDeliveryCountLimit:   n.GroupShareDeliveryCountLimit,
		ShareAutoOffsetReset:      "latest",
	}
	if len(overrides) == 0 {
		return g
	}
	dur := func(name string, dst *time.Duration, lo, hi time.Duration) {
		v, ok := overrides[name]
		if !ok {
			return
		}
		i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return
		}
		*dst = min(max(time.Duration(i)*time.Millisecond, lo), hi)
	}
	dur(GroupConsumerSessionTimeoutMs, &g.ConsumerSessionTimeout, n.GroupConsumerMinSessionTimeout, n.GroupConsumerMaxSessionTimeout)
	dur(GroupConsumerHeartbeatIntervalMs, &g.ConsumerHeartbeatInterval, n.GroupConsumerMinHeartbeatInterval, n.GroupConsumerMaxHeartbeatInterval)
	dur(GroupShareSessionTimeoutMs, &g.ShareSessionTimeout, n.GroupShareMinSessionTimeout, n.GroupShareMaxSessionTimeout)
	dur(GroupShareHeartbeatIntervalMs, &g.ShareHeartbeatInterval, n.GroupShareMinHeartbeatInterval, n.GroupShareMaxHeartbeatInterval)
	dur(GroupShareRecordLockDurationMs, &g.ShareRecordLockDuration, n.GroupShareMinRecordLockDuration, n.GroupShareMaxRecordLockDuration)
	if v, ok := overrides[GroupShareDeliveryCountLimit]; ok {
		if i, err := parseInt32(v); err == nil {
			g.ShareDeliveryCountLimit = min(max(i, n.GroupShareMinDeliveryCountLimit), n.GroupShareMaxDeliveryCountLimit)
		}
	}
	if v, ok := overrides[GroupShareAutoOffsetReset]; ok {
		if s, d, err := ParseShareAutoOffsetReset(v); err == nil {
			g.ShareAutoOffsetReset, g.ShareAutoOffsetResetBy = s, d
		}
	}
	g.ShareReadCommitted = strings.TrimSpace(overrides[GroupShareIsolationLevel]) == "read_committed"
	g.DeadLetterTopic = strings.TrimSpace(overrides[GroupDeadLetterTopicName])
	return g
}

// isoDuration is the ISO-8601 duration Java's Duration.parse reads
// (PnDTnHnMn.nS, case-insensitive), without a sign: Kafka refuses
// negative durations in share.auto.offset.reset.
var isoDuration = regexp.MustCompile(`(?i)^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{0,9}))?S)?)?$`)

// ParseShareAutoOffsetReset parses share.auto.offset.reset as Kafka's
// ShareGroupAutoOffsetResetStrategy: "earliest", "latest" or
// "by_duration:<ISO-8601 duration>" (for example by_duration:PT1H30M),
// case-insensitive. It returns the strategy in lower case and, for
// by_duration, the duration.
func ParseShareAutoOffsetReset(v string) (string, time.Duration, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	switch s {
	case "earliest", "latest":
		return s, 0, nil
	}
	rest, ok := strings.CutPrefix(s, "by_duration:")
	if !ok {
		return "", 0, errors.New("valid values are: earliest, latest, by_duration:PnDTnHnMn.nS")
	}
	m := isoDuration.FindStringSubmatch(strings.TrimSpace(rest))
	if m == nil || strings.HasSuffix(strings.ToUpper(rest), "T") || len(rest) < 2 {
		return "", 0, fmt.Errorf("unable to parse duration %q: an ISO-8601 duration without sign such as PT1H is expected", rest)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		x, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || x > int64(1<<62)/int64(unit) {
			return "", 0, fmt.Errorf("duration %q too large", rest)
		}
		d += time.Duration(x) * unit
	}
	if frac := m[5]; frac != "" {
		frac += strings.Repeat("0", 9-len(frac))
		ns, _ := strconv.ParseInt(frac, 10, 64)
		d += time.Duration(ns)
	}
	return "by_duration", d, nil
}
