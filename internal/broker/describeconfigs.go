package broker

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeConfigs v1-v4 for topics and brokers, with sources (default,
// static broker, dynamic topic), synonyms (v1+) and types (v3+, KIP-569).
func init() { register(kmsg.DescribeConfigs, 1, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	im := b.image()
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		wanted := func(name string) bool {
			if r.ConfigNames == nil {
				return true
			}
			for _, n := range r.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
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
				v, src := b.topicConfig(t, name)
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.Source = name, kmsg.StringPtr(v), src
				c.ConfigType = kmsg.ConfigType(tc.Type)
				c.IsDefault = src == kmsg.ConfigSourceDefaultConfig
				if req.IncludeSynonyms {
					if src == kmsg.ConfigSourceDynamicTopicConfig {
						c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(name, v, src))
					}
					if bs := b.node.BrokerSource(name); bs != "" {
						c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(bs, b.node.Set[bs], kmsg.ConfigSourceStaticBrokerConfig))
					}
					c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(tc.Synonym, tc.Default, kmsg.ConfigSourceDefaultConfig))
				}
				rr.Configs = append(rr.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(b.node.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr("not this broker")
				break
			}
			for _, bc := range b.node.BrokerConfigs() {
				if !wanted(bc.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = bc.Name, kmsg.StringPtr(bc.Value)
				c.Source = kmsg.ConfigSourceDefaultConfig
				if bc.Set {
					c.Source = kmsg.ConfigSourceStaticBrokerConfig
				}
				c.IsDefault = !bc.Set
				c.ReadOnly = true
				c.ConfigType = kmsg.ConfigTypeString
				if req.IncludeSynonyms {
					c.ConfigSynonyms = append(c.ConfigSynonyms, synonym(bc.Name, bc.Value, c.Source))
				}
				rr.Configs = append(rr.Configs, c)
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("unsupported resource type")
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func synonym(name, value string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, kmsg.StringPtr(value), src
	return s
}
