package config

import (
	"slices"
	"strconv"
	"strings"
)

// More DescribeConfigs config types (Kafka's
// DescribeConfigsResponse.ConfigType).
const (
	TypeShort    ConfigType = 4
	TypeClass    ConfigType = 8
	TypePassword ConfigType = 9
)

// brokerListProps are the node properties Kafka defines as LIST (the
// others it defines as STRING even when they hold commas: listeners,
// advertised.listeners, log.dirs, super.users, controller.listener.names,
// listener.security.protocol.map).
var brokerListProps = []string{"process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
	"sasl.enabled.mechanisms", "ssl.enabled.protocols", "ssl.cipher.suites", "group.coordinator.rebalance.protocols",
	"metric.reporters", "log.cleanup.policy", "group.consumer.assignors"}

// securityTypes are the types of the security properties that are not
// STRING in Kafka.
var securityTypes = map[string]ConfigType{
	"ssl.keystore.password": TypePassword, "ssl.key.password": TypePassword, "ssl.truststore.password": TypePassword,
	"ssl.keystore.key": TypePassword, "ssl.keystore.certificate.chain": TypePassword,
	"ssl.truststore.certificates": TypePassword, "sasl.jaas.config": TypePassword,
	"connections.max.reauth.ms": TypeLong, "sasl.server.max.receive.size": TypeInt,
	"sasl.oauthbearer.clock.skew.seconds":       TypeInt,
	"sasl.oauthbearer.jwks.endpoint.refresh.ms": TypeLong, "ssl.allow.dn.changes": TypeBoolean,
	"ssl.allow.san.changes": TypeBoolean, "sasl.server.callback.handler.class": TypeClass,
	"sasl.login.callback.handler.class": TypeClass, "ssl.engine.factory.class": TypeClass,
}

// kafkaNodeTypes are Kafka's types of the node properties whose parsers
// here are wider or more lenient than Kafka's definition (an int64 parser
// for an INT, a SHORT, a DOUBLE).
var kafkaNodeTypes = map[string]ConfigType{
	"broker.heartbeat.interval.ms": TypeInt, "broker.session.timeout.ms": TypeInt,
	"group.initial.rebalance.delay.ms": TypeInt, "group.max.session.timeout.ms": TypeInt,
	"group.min.session.timeout.ms": TypeInt, "log.flush.offset.checkpoint.interval.ms": TypeInt,
	"offsets.retention.minutes": TypeInt, "producer.id.expiration.ms": TypeInt,
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": TypeInt, "transaction.max.timeout.ms": TypeInt,
	"transaction.remove.expired.transaction.cleanup.interval.ms": TypeInt, "transaction.state.log.segment.bytes": TypeInt,
	"transactional.id.expiration.ms": TypeInt, "log.cleaner.io.buffer.size": TypeInt, "log.cleaner.threads": TypeInt,
	"num.io.threads": TypeInt, "num.network.threads": TypeInt, "socket.receive.buffer.bytes": TypeInt,
	"socket.send.buffer.bytes": TypeInt, "share.coordinator.state.topic.min.isr": TypeShort,
	"offsets.topic.replication.factor": TypeShort, "transaction.state.log.replication.factor": TypeShort,
	"share.coordinator.state.topic.replication.factor": TypeShort, "transaction.state.log.min.isr": TypeInt,
	"log.cleaner.io.buffer.load.factor": TypeDouble, "log.cleaner.io.max.bytes.per.second": TypeDouble,
}

// brokerTypes are the node properties' types: Kafka's where listed in
// kafkaNodeTypes, else computed once from how their parsers take values
// (nodeTypeOf).
var brokerTypes = map[string]ConfigType{}

func init() {
	for name, p := range nodeProps {
		if t, ok := kafkaNodeTypes[name]; ok {
			brokerTypes[name] = t
			continue
		}
		brokerTypes[name] = nodeTypeOf(name, p)
	}
}

// nodeTypeOf infers the type Kafka gives node property name from its
// parser: a list by name; BOOLEAN when it takes true and false only;
// INT when it takes 1 but not 2^31 nor x; LONG when it takes 2^31 but not
// x; DOUBLE when it takes 0.5 but not x; STRING otherwise. The parsers
// write to a scratch Node only.
func nodeTypeOf(name string, p nodeProp) ConfigType {
	if slices.Contains(brokerListProps, name) {
		return TypeList
	}
	ok := func(v string) bool { return p.set(&Node{Set: map[string]string{}}, v) == nil }
	switch {
	case ok("x"):
		return TypeString
	case ok("true") && ok("false"):
		return TypeBoolean
	case ok("2147483648"):
		return TypeLong
	case ok("1"):
		return TypeInt
	case ok("0.5"):
		return TypeDouble
	}
	if _, err := strconv.ParseInt(p.def, 10, 64); err == nil {
		return TypeInt // a bounded integer whose bounds exclude 1
	}
	return TypeString
}

// BrokerConfigType is the DescribeConfigs type of broker property name:
// a node property's, a security property's (also behind
// listener.name.<l>.; <mechanism>.sasl.jaas.config is a PASSWORD), or
// for a topic config's broker synonym the topic config's (INT for the
// .hours and .minutes alternatives). STRING when unknown.
func BrokerConfigType(name string) ConfigType {
	if t, ok := brokerTypes[name]; ok {
		return t
	}
	if securityKey(name) {
		k := name
		if rest, ok := strings.CutPrefix(k, "listener.name."); ok {
			_, k, _ = strings.Cut(rest, ".")
		}
		if strings.HasSuffix(k, "sasl.jaas.config") {
			return TypePassword
		}
		if t, ok := securityTypes[k]; ok {
			return t
		}
		if slices.Contains(brokerListProps, k) {
			return TypeList
		}
		return TypeString
	}
	if t, ok := brokerSynonyms[name]; ok {
		c := topicConfigs[t]
		if c.Synonym == name {
			return c.Type
		}
		return TypeInt
	}
	return TypeString
}

// BrokerConfigSensitive reports whether DescribeConfigs hides the value of
// broker property name: its type is PASSWORD, as Kafka's
// KafkaConfig.maybeSensitive.
func BrokerConfigSensitive(name string) bool { return BrokerConfigType(name) == TypePassword }
