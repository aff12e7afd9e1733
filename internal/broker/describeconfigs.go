package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeConfigs: v1-4
//
// Version notes:
//   - v1: the lowest version served
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: IncludeDocumentation (request), ConfigType (response
//     ResourceConfig), Documentation (response ResourceConfig)
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)

// DescribeConfigs v1-v4 for topics, brokers and broker loggers, with
// sources, synonyms (v1+) and types (v3+, KIP-569), as Kafka's ConfigHelper
// answers them:
//
//   - a topic config's source is that of its first synonym, DEFAULT_CONFIG
//     without any; its synonyms are the topic's own value
//     (DYNAMIC_TOPIC_CONFIG) when set, then those of its broker synonym
//     (brokerSynonyms): for retention.ms, log.retention.ms set as a
//     dynamic config of this broker, as a cluster-wide dynamic default, in
//     the properties, then log.retention.minutes and log.retention.hours
//     likewise.
//   - a broker resource named by this node's id lists every property with
//     the value in effect, its type (config.BrokerConfigType) and the
//     synonyms of its name: the node properties (broker.id and node.id
//     with the node's id), the ssl.* and sasl.* properties and those set
//     behind listener.name.<l>.; a PASSWORD (ssl.key.password,
//     sasl.jaas.config, ...) is sensitive, without a value here or in its
//     synonyms, as Kafka's KafkaConfig.maybeSensitive. The empty name
//     lists the cluster-wide dynamic defaults set, with only their
//     DYNAMIC_DEFAULT_BROKER_CONFIG synonyms. As Kafka's
//     createBrokerConfigEntry, both mark read-only the configs that cannot
//     be updated dynamically (config.Mode); another name is
//     INVALID_REQUEST.
//   - a GROUP resource (type 32) lists the group configs
//     (config.GroupConfigNames) with the group's own value (source
//     GROUP_CONFIG) or the broker's (DEFAULT_CONFIG), as Kafka's
//     ConfigHelper; the group need not exist; an empty name is
//     INVALID_REQUEST.
//   - a BROKER_LOGGER resource (KIP-412) named by this node's id lists the
//     loggers (loglevel.Root and the components) with their levels,
//     source DYNAMIC_BROKER_LOGGER_CONFIG.
//
// An empty list of config names, like a null one, asks for every config.
func init() { register(kmsg.DescribeConfigs, 1, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	im := b.image()
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		wanted := func(name string) bool {
			return len(r.ConfigNames) == 0 || slices.Contains(r.ConfigNames, name)
		}
		add := func(name string, value *string, typ config.ConfigType, readOnly bool, synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ConfigType, c.ReadOnly = name, value, kmsg.ConfigType(typ), readOnly
			c.Source = kmsg.ConfigSourceDefaultConfig
			if len(synonyms) > 0 {
				c.Source = synonyms[0].Source
			}
			c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
			if typ == config.TypePassword {
				// Kafka's KafkaConfig.maybeSensitive: no value, here
				// or in a synonym.
				c.IsSensitive, c.Value = true, nil
				for i := range synonyms {
					synonyms[i].Value = nil
				}
			}
			if req.IncludeSynonyms {
				c.ConfigSynonyms = synonyms
			}
			rr.Configs = append(rr.Configs, c)
		}
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := im.Topic(r.ResourceName)
			if t == nil {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			for _, name := range config.TopicConfigNames() {
				if !wanted(name) {
					continue
				}
				tc, _ := config.LookupTopicConfig(name)
				v, _ := b.topicConfig(t, name)
				var synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
				if tv, ok := t.Configs[name]; ok {
					synonyms = append(synonyms, synonym(name, &tv, kmsg.ConfigSourceDynamicTopicConfig))
				}
				if tc.Synonym != "" {
					synonyms = append(synonyms, b.brokerSynonyms(tc.Synonym)...)
				}
				add(name, &v, tc.Type, false, synonyms)
			}
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName == "" {
				def := im.BrokerConfigs("")
				for _, name := range slices.Sorted(maps.Keys(def)) {
					if !wanted(name) {
						continue
					}
					v := def[name]
					syn := slices.DeleteFunc(b.brokerSynonyms(name), func(s kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) bool {
						return s.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig
					})
					add(name, &v, config.BrokerConfigType(name), config.Mode(name) == config.ReadOnly, syn)
				}
				break
			}
			if msg := b.checkBrokerResource(r.ResourceName); msg != "" {
				rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, &msg
				break
			}
			for _, bc := range b.config().BrokerConfigs() {
				if !wanted(bc.Name) {
					continue
				}
				v := &bc.Value
				if bc.Null {
					v = nil // null in Kafka: no default and not set, or sensitive
				}
				add(bc.Name, v, bc.Type, config.Mode(bc.Name) == config.ReadOnly, b.brokerSynonyms(bc.Name))
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			if err := b.checkLoggerResource(r.ResourceName); err != nil {
				rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
				break
			}
			if b.levels == nil {
				break
			}
			for _, l := range b.levels.Loggers() {
				if !wanted(l[0]) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.ConfigType = l[0], kmsg.StringPtr(l[1]), kmsg.ConfigType(config.TypeString)
				c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
				rr.Configs = append(rr.Configs, c)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if r.ResourceName == "" {
				rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Group name must not be empty")
				break
			}
			own := im.GroupConfigs(r.ResourceName)
			defaults := b.config().GroupDefaults()
			for _, name := range config.GroupConfigNames() {
				if !wanted(name) {
					continue
				}
				typ, _ := config.GroupConfigType(name)
				var synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
				v := defaults[name]
				if gv, ok := own[name]; ok {
					v = gv
					synonyms = append(synonyms, synonym(name, &gv, kmsg.ConfigSourceGroupConfig))
				}
				add(name, &v, typ, false, synonyms)
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("unsupported resource type")
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// checkBrokerResource returns Kafka's INVALID_REQUEST message for a broker
// resource name that is not this node's id, "" for this node's.
func (b *Broker) checkBrokerResource(name string) string {
	id, err := strconv.ParseInt(name, 10, 32)
	switch {
	case err != nil:
		return "Broker id must be an integer, but it is: " + name
	case int32(id) != b.node.NodeID:
		return fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", b.node.NodeID, name)
	}
	return ""
}

// brokerSynonyms are the synonyms of broker property name in Kafka's order
// (ConfigHelper.configSynonyms): each of config.BrokerSynonyms(name) set
// as a dynamic config of this broker (DYNAMIC_BROKER_CONFIG), then as a
// cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), then in
// the node's properties (STATIC_BROKER_CONFIG), then each that has a
// default in Kafka (DEFAULT_CONFIG); those before the first entry of name
// itself are dropped. So retention.ms of a topic, whose broker synonym
// log.retention.ms is set neither in the properties nor by default, lists
// no synonym even when log.retention.hours is set: Kafka does the same
// (the dropped entries are meant for describing a property's base name).
func (b *Broker) brokerSynonyms(name string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	names := config.BrokerSynonyms(name)
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	im := b.image()
	for _, level := range []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{
		{im.BrokerConfigs(b.brokerResource()), kmsg.ConfigSourceDynamicBrokerConfig},
		{im.BrokerConfigs(""), kmsg.ConfigSourceDynamicDefaultBrokerConfig},
	} {
		for _, n := range names {
			if v, ok := level.m[n]; ok {
				out = append(out, synonym(n, &v, level.src))
			}
		}
	}
	for _, n := range names {
		if v, ok := b.node.Set[n]; ok {
			out = append(out, synonym(n, &v, kmsg.ConfigSourceStaticBrokerConfig))
		}
	}
	for _, n := range names {
		if v, ok := config.BrokerDefault(n); ok {
			out = append(out, synonym(n, &v, kmsg.ConfigSourceDefaultConfig))
		}
	}
	for len(out) > 0 && out[0].Name != name {
		out = out[1:]
	}
	return out
}

func synonym(name string, value *string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, value, src
	return s
}
