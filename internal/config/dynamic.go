package config

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
)

// DynamicMode is how a broker config may be updated while the cluster
// runs, as the "Dynamic Update Mode" column of Kafka's broker config
// docs (DynamicBrokerConfig.dynamicConfigUpdateModes).
type DynamicMode int8

// Dynamic update modes.
const (
	// ReadOnly configs take a restart: server.properties or overrides.
	ReadOnly DynamicMode = iota
	// PerBroker configs may be set per broker only (resource name = the
	// broker's id), never as a cluster-wide default.
	PerBroker
	// ClusterWide configs may be set per broker or as the cluster-wide
	// default (empty resource name); a broker's own value wins.
	ClusterWide
)

func (m DynamicMode) String() string {
	switch m {
	case PerBroker:
		return "per-broker"
	case ClusterWide:
		return "cluster-wide"
	}
	return "read-only"
}

// dynamicModes are the dynamic configs: the cluster-wide ones besides the broker
// synonyms of topic configs (Kafka's DynamicLogConfig.ReconfigurableConfigs,
// see Mode): the log cleaner's (LogCleaner.ReconfigurableConfigs),
// the thread pools' (DynamicThreadPool; Samsa has none, so they are
// accepted and change nothing, as when set statically), the producer state
// expiration (DynamicProducerStateManagerConfig), the replication quotas
// (QuotaConfig.brokerQuotaConfigs) and the connection limits.
var dynamicModes = map[string]DynamicMode{
	"log.cleaner.threads":                 ClusterWide,
	"log.cleaner.dedupe.buffer.size":      ClusterWide,
	"log.cleaner.io.buffer.load.factor":   ClusterWide,
	"log.cleaner.io.buffer.size":          ClusterWide,
	"log.cleaner.io.max.bytes.per.second": ClusterWide,
	"log.cleaner.backoff.ms":              ClusterWide,
	"num.io.threads":                      ClusterWide,
	"num.network.threads":                 ClusterWide,
	"num.recovery.threads.per.data.dir":   ClusterWide,
	"producer.id.expiration.ms":           ClusterWide,
	"leader.replication.throttled.rate":   ClusterWide,
	"follower.replication.throttled.rate": ClusterWide,
	// SocketServer.ReconfigurableConfigs; max.connection.creation.rate is
	// not supported.
	"max.connections":                  ClusterWide,
	"max.connections.per.ip":           ClusterWide,
	"max.connections.per.ip.overrides": ClusterWide,
}

// Mode returns the dynamic update mode of broker property name; unknown
// names are ReadOnly. The broker synonym of each topic config is dynamic
// and cluster-wide; the synonyms in other units (log.retention.hours,
// log.roll.hours, ...) are not, as in Kafka (TopicConfigSynonyms maps each
// topic config to its first synonym only).
func Mode(name string) DynamicMode {
	if m, ok := dynamicModes[name]; ok {
		return m
	}
	if t, ok := brokerSynonyms[name]; ok && name != "" && topicConfigs[t].Synonym == name {
		return ClusterWide
	}
	return ReadOnly
}

// KnownBrokerConfig reports whether name is a broker property Samsa knows:
// a node property or a broker synonym of a topic config.
func KnownBrokerConfig(name string) bool {
	if _, ok := nodeProps[name]; ok {
		return true
	}
	_, ok := brokerSynonyms[name]
	return ok && name != ""
}

// Errors of CheckDynamic; both are INVALID_REQUEST in Kafka.
var (
	// ErrNotDynamic: a config that needs a restart, an unknown one, or a
	// per-broker one set as a cluster default.
	ErrNotDynamic = errors.New("cannot update dynamically")
	// ErrInvalidDynamic: a value that does not parse or is out of range.
	ErrInvalidDynamic = errors.New("invalid dynamic broker config")
)

// CheckDynamic checks dynamic broker configs about to be set, as Kafka's
// DynamicBrokerConfig.validateConfigs: set maps names to values (deletions
// need no check); perBroker says whether they go to one broker (resource
// name = its id) or to the cluster-wide default (empty name). Read-only
// configs give ErrNotDynamic with Kafka's message "Cannot update these
// configs dynamically: [names]"; names Samsa does not know too (Kafka
// stores them as custom configs; a typo here would change nothing
// silently). A value that does not parse gives ErrInvalidDynamic naming
// the config.
func CheckDynamic(set map[string]string, perBroker bool) error {
	names := sortedKeys(set)
	var unknown, readOnly []string
	for _, k := range names {
		switch {
		case !KnownBrokerConfig(k):
			unknown = append(unknown, k)
		case Mode(k) == ReadOnly:
			readOnly = append(readOnly, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: unknown broker configs: [%s]", ErrNotDynamic, strings.Join(unknown, ", "))
	}
	if len(readOnly) > 0 {
		return fmt.Errorf("%w: Cannot update these configs dynamically: [%s]", ErrNotDynamic, strings.Join(readOnly, ", "))
	}
	if !perBroker {
		var per []string
		for _, k := range names {
			if Mode(k) == PerBroker {
				per = append(per, k)
			}
		}
		if len(per) > 0 {
			return fmt.Errorf("%w: Cannot update these configs at default cluster level, broker id must be specified: [%s]", ErrNotDynamic, strings.Join(per, ", "))
		}
	}
	for _, k := range names {
		if err := checkValue(k, set[k]); err != nil {
			return fmt.Errorf("%w: invalid value %q for %s: %v", ErrInvalidDynamic, set[k], k, err)
		}
	}
	return nil
}

// checkValue parses one broker property value as Parse would; the thread
// counts Samsa accepts unused must still be integers of at least 1, as
// Kafka's DynamicThreadPool requires.
func checkValue(name, v string) error {
	switch name {
	case "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir", "log.cleaner.threads":
		if i, err := parseInt32(v); err != nil || i < 1 {
			return fmt.Errorf("%w %q (an integer >= 1)", errBadValue, v)
		}
		return nil
	}
	if p, ok := nodeProps[name]; ok {
		var scratch Node
		return p.set(&scratch, v)
	}
	if t, ok := brokerSynonyms[name]; ok {
		c := topicConfigs[t]
		if c.Synonym == name {
			return c.check(strings.TrimSpace(v))
		}
	}
	return nil
}

// WithDynamic returns the configuration n would have with dynamic broker
// configs applied over its properties, in Kafka's order of precedence:
// perBroker (this broker's DYNAMIC_BROKER_CONFIG) over clusterDefault
// (DYNAMIC_DEFAULT_BROKER_CONFIG) over n's own (STATIC_BROKER_CONFIG) over
// the defaults. Either map may be nil. The result's Set holds every
// property given at any level. An error means the merged properties do not
// parse together (each was checked alone when set); the caller keeps n.
func (n *Node) WithDynamic(clusterDefault, perBroker map[string]string) (*Node, error) {
	if len(clusterDefault) == 0 && len(perBroker) == 0 {
		return n, nil
	}
	props := maps.Clone(n.Set)
	for _, m := range []map[string]string{clusterDefault, perBroker} {
		for k, v := range m {
			if Mode(k) != ReadOnly {
				props[k] = v
			}
		}
	}
	return Parse(props)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TopicConfigForBrokerSynonym returns the topic config broker property
// name sets the default of (retention.ms for log.retention.ms and
// log.retention.hours), and false for other properties.
func TopicConfigForBrokerSynonym(name string) (string, bool) {
	t, ok := brokerSynonyms[name]
	return t, ok && name != ""
}
