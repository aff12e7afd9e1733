package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ConfigType is DescribeConfigs' config type (v3+).
type ConfigType int8

// Config types as DescribeConfigs numbers them.
const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// TopicConfig describes one topic-level config.
type TopicConfig struct {
	Name string
	Type ConfigType
	// Default is Kafka's default when neither the topic nor the broker sets it.
	Default string
	// Synonym is the broker property that sets the default for all topics,
	// with Scale to convert its unit (log.retention.hours → retention.ms);
	// further synonyms in Alt are consulted in order when it is unset.
	Synonym string
	Scale   int64
	Alt     []synonym
	// Valid checks a value; nil means any value of Type.
	Valid func(string) error
	// synonymNoDefault: Kafka defines Synonym without a default of its
	// own (its value comes from the Alt synonyms), so DescribeConfigs
	// lists no DEFAULT_CONFIG entry for it.
	synonymNoDefault bool
}

type synonym struct {
	name  string
	scale int64
	def   string // Kafka's default of the broker property; "" none
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, x := range vals {
			if v == x {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

func cleanupPolicy(v string) error {
	parts := parseList(v)
	if len(parts) == 0 {
		return fmt.Errorf("must be delete, compact or both")
	}
	for _, p := range parts {
		if p != "delete" && p != "compact" {
			return fmt.Errorf("must be delete, compact or both")
		}
	}
	return nil
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil || i < min {
			return fmt.Errorf("must be an integer >= %d", min)
		}
		return nil
	}
}

const longMax = "9223372036854775807"

var topicConfigs = map[string]TopicConfig{}

func init() {
	for _, c := range []TopicConfig{
		{Name: "cleanup.policy", Type: TypeList, Default: "delete", Synonym: "log.cleanup.policy", Valid: cleanupPolicy},
		{Name: "compression.type", Type: TypeString, Default: "producer", Synonym: "compression.type", Valid: oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
		{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", Synonym: "log.cleaner.delete.retention.ms", Valid: atLeast(0)},
		{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", Synonym: "log.segment.delete.delay.ms", Valid: atLeast(0)},
		{Name: "flush.messages", Type: TypeLong, Default: longMax, Synonym: "log.flush.interval.messages", Valid: atLeast(1)},
		{Name: "flush.ms", Type: TypeLong, Default: longMax, Synonym: "log.flush.interval.ms", synonymNoDefault: true, Valid: atLeast(0)},
		{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", Synonym: "log.index.interval.bytes", Valid: atLeast(0)},
		{Name: "max.compaction.lag.ms", Type: TypeLong, Default: longMax, Synonym: "log.cleaner.max.compaction.lag.ms", Valid: atLeast(1)},
		{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", Synonym: "message.max.bytes", Valid: atLeast(0)},
		{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", Synonym: "log.message.timestamp.type", Valid: oneOf("CreateTime", "LogAppendTime")},
		{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: longMax, Synonym: "log.message.timestamp.before.max.ms", Valid: atLeast(0)},
		{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Synonym: "log.message.timestamp.after.max.ms", Valid: atLeast(0)},
		{Name: "message.downconversion.enable", Type: TypeBoolean, Default: "true", Synonym: "log.message.downconversion.enable", Valid: oneOf("true", "false")},
		{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", Synonym: "log.cleaner.min.cleanable.ratio", Valid: func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				return fmt.Errorf("must be a number in [0, 1]")
			}
			return nil
		}},
		{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Synonym: "log.cleaner.min.compaction.lag.ms", Valid: atLeast(0)},
		{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Synonym: "min.insync.replicas", Valid: atLeast(1)},
		{Name: "preallocate", Type: TypeBoolean, Default: "false", Synonym: "log.preallocate", Valid: oneOf("true", "false")},
		// Any long, as Kafka: every negative value means no limit.
		{Name: "retention.bytes", Type: TypeLong, Default: "-1", Synonym: "log.retention.bytes"},
		{Name: "retention.ms", Type: TypeLong, Default: "604800000", Synonym: "log.retention.ms", Scale: 1, synonymNoDefault: true,
			Alt: []synonym{{"log.retention.minutes", 60000, ""}, {"log.retention.hours", 3600000, "168"}}, Valid: atLeast(-1)},
		{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", Synonym: "log.segment.bytes", Valid: atLeast(14)},
		{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", Synonym: "log.index.size.max.bytes", Valid: atLeast(4)},
		{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", Synonym: "log.roll.jitter.ms", synonymNoDefault: true,
			Alt: []synonym{{"log.roll.jitter.hours", 3600000, "0"}}, Valid: atLeast(0)},
		{Name: "segment.ms", Type: TypeLong, Default: "604800000", Synonym: "log.roll.ms", synonymNoDefault: true,
			Alt: []synonym{{"log.roll.hours", 3600000, "168"}}, Valid: atLeast(1)},
		{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", Synonym: "unclean.leader.election.enable", Valid: oneOf("true", "false")},
		{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: ""},
		{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: ""},
	} {
		if c.Scale == 0 {
			c.Scale = 1
		}
		topicConfigs[c.Name] = c
		brokerSynonyms[c.Synonym] = c.Name
		for _, a := range c.Alt {
			brokerSynonyms[a.name] = c.Name
		}
	}
}

// brokerSynonyms maps a broker property to the topic config it defaults.
var brokerSynonyms = map[string]string{}

// BrokerSynonyms returns the broker properties that set the same thing as
// broker property name, highest priority first, as Kafka's
// DynamicBrokerConfig.brokerConfigSynonyms: log.retention.ms,
// log.retention.minutes and log.retention.hours for any of the three;
// log.roll.ms and log.roll.hours; log.roll.jitter.ms and
// log.roll.jitter.hours; log.flush.interval.ms then
// log.flush.scheduler.interval.ms (its fallback) for the first; name alone
// otherwise.
func BrokerSynonyms(name string) []string {
	if name == "log.flush.interval.ms" {
		return []string{name, "log.flush.scheduler.interval.ms"}
	}
	if t, ok := brokerSynonyms[name]; ok && len(topicConfigs[t].Alt) > 0 {
		c := topicConfigs[t]
		out := []string{c.Synonym}
		for _, a := range c.Alt {
			out = append(out, a.name)
		}
		return out
	}
	return []string{name}
}

// BrokerDefault returns Kafka's default of broker property name, the value
// DescribeConfigs reports as DEFAULT_CONFIG, and false when Kafka defines
// none (log.retention.ms, log.retention.minutes, log.roll.ms,
// log.roll.jitter.ms, log.flush.interval.ms, broker.rack, ...: their value
// comes from another property or is null) or the property is unknown.
func BrokerDefault(name string) (string, bool) {
	if p, ok := nodeProps[name]; ok {
		return p.def, p.def != ""
	}
	t, ok := brokerSynonyms[name]
	if !ok {
		return "", false
	}
	c := topicConfigs[t]
	if c.Synonym == name {
		if c.synonymNoDefault {
			return "", false
		}
		return c.Default, true
	}
	for _, a := range c.Alt {
		if a.name == name {
			return a.def, a.def != ""
		}
	}
	return "", false
}

// LookupTopicConfig returns the description of a topic config name.
func LookupTopicConfig(name string) (TopicConfig, bool) {
	c, ok := topicConfigs[name]
	return c, ok
}

// TopicConfigNames lists every topic config name, sorted.
func TopicConfigNames() []string {
	out := make([]string, 0, len(topicConfigs))
	for k := range topicConfigs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ValidateTopicConfig checks one topic config; the error is for
// INVALID_CONFIG's message.
func ValidateTopicConfig(name, value string) error {
	c, ok := topicConfigs[name]
	if !ok {
		return fmt.Errorf("unknown topic config %s", name)
	}
	if err := c.check(value); err != nil {
		return fmt.Errorf("invalid value %q for %s: %v", value, name, err)
	}
	return nil
}

// TopicInt parses the value of an INT or LONG topic config as
// ValidateTopicConfig checks it (32 or 64 bits, then the config's range).
// The broker reads the image's topic configs with it; the error, naming
// the config, is for the log: CreateTopics and AlterConfigs keep invalid
// values out of the metadata.
func TopicInt(name, value string) (int64, error) {
	c, ok := topicConfigs[name]
	if !ok || (c.Type != TypeInt && c.Type != TypeLong) {
		return 0, fmt.Errorf("%s is not an integer topic config", name)
	}
	if err := c.check(value); err != nil {
		return 0, fmt.Errorf("invalid value %q for %s: %v", value, name, err)
	}
	return strconv.ParseInt(value, 10, 64)
}

// TopicRatio parses the value of a DOUBLE topic config
// (min.cleanable.dirty.ratio), as TopicInt does an integer.
func TopicRatio(name, value string) (float64, error) {
	c, ok := topicConfigs[name]
	if !ok || c.Type != TypeDouble {
		return 0, fmt.Errorf("%s is not a double topic config", name)
	}
	if err := c.check(value); err != nil {
		return 0, fmt.Errorf("invalid value %q for %s: %v", value, name, err)
	}
	return strconv.ParseFloat(value, 64)
}

// CleanupPolicy parses cleanup.policy: delete, compact or both, comma
// separated.
func CleanupPolicy(value string) (del, compact bool, err error) {
	if err := cleanupPolicy(value); err != nil {
		return false, false, fmt.Errorf("invalid value %q for cleanup.policy: %v", value, err)
	}
	for _, p := range parseList(value) {
		del = del || p == "delete"
		compact = compact || p == "compact"
	}
	return del, compact, nil
}

// check checks a value against the config's type, then against Valid. An
// INT must fit 32 bits and a LONG 64, as Kafka parses them: a larger
// segment.bytes or max.message.bytes would be cut to 32 bits where used.
func (c TopicConfig) check(v string) error {
	bits := 0
	switch c.Type {
	case TypeInt:
		bits = 32
	case TypeLong:
		bits = 64
	}
	if bits != 0 {
		if _, err := strconv.ParseInt(v, 10, bits); err != nil {
			return fmt.Errorf("not a %d-bit integer", bits)
		}
	}
	if c.Valid != nil {
		return c.Valid(v)
	}
	return nil
}

// ValidateTopicConfigs checks the relations between the configs of one
// topic (each already valid alone, ValidateTopicConfig), as Kafka's
// LogConfig.validateValues does on the topic's configs merged over the
// broker-level defaults: min.compaction.lag.ms must not exceed
// max.compaction.lag.ms. configs are the topic's own; defaults are the
// broker-level values (Node.Topic), nil meaning Kafka's defaults. The error
// is for INVALID_CONFIG's message.
func ValidateTopicConfigs(configs, defaults map[string]string) error {
	value := func(name string) (int64, bool) {
		v, ok := configs[name]
		if !ok {
			v, ok = defaults[name]
		}
		if !ok {
			v = topicConfigs[name].Default
		}
		i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return i, err == nil
	}
	lo, ok1 := value("min.compaction.lag.ms")
	hi, ok2 := value("max.compaction.lag.ms")
	if ok1 && ok2 && lo > hi {
		return fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", lo, hi)
	}
	return nil
}

// brokerTopicDefaults resolves every topic config's broker-level value from
// the node properties, scaling units, and validates them.
func brokerTopicDefaults(props map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(topicConfigs))
	for name, c := range topicConfigs {
		v, src, ok := c.Default, "", false
		if s, given := props[c.Synonym]; given && c.Synonym != "" {
			v, src, ok = s, c.Synonym, true
		}
		for _, a := range c.Alt {
			if ok {
				break
			}
			if s, given := props[a.name]; given {
				i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("config %s=%q: not an integer", a.name, s)
				}
				if i >= 0 {
					i *= a.scale
				}
				v, src, ok = strconv.FormatInt(i, 10), a.name, true
			}
		}
		v = strings.TrimSpace(v)
		if ok {
			if err := c.check(v); err != nil {
				return nil, fmt.Errorf("config %s=%q: %v", src, v, err)
			}
		}
		out[name] = v
	}
	return out, nil
}

// BrokerSource reports which broker property set the broker-level default
// of a topic config, or "" when it is Kafka's default.
func (n *Node) BrokerSource(topicConfig string) string {
	c, ok := topicConfigs[topicConfig]
	if !ok {
		return ""
	}
	if _, ok := n.Set[c.Synonym]; ok && c.Synonym != "" {
		return c.Synonym
	}
	for _, a := range c.Alt {
		if _, ok := n.Set[a.name]; ok {
			return a.name
		}
	}
	return ""
}
