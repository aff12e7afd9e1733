package controller

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
)

// AlterBrokerConfigs applies changes to the dynamic configs of broker
// resource name: a broker id, or "" for the cluster-wide defaults
// (AlterConfigs and IncrementalAlterConfigs on BROKER resources). With
// replace, dynamic configs of the resource not in changes are removed
// first (AlterConfigs semantics). The values are checked with
// config.CheckDynamic; every error is ErrInvalidRequest, as Kafka answers
// a broker config it cannot apply (ConfigAdminManager, KAFKA-13609). The
// change is a ConfigRecord per config in the metadata log, so it reaches
// every node and survives restarts.
func (c *Controller) AlterBrokerConfigs(ctx context.Context, name string, changes []ConfigChange, replace, validateOnly bool) error {
	if name != "" {
		if _, err := strconv.ParseInt(name, 10, 32); err != nil {
			return fmt.Errorf("%w: Node id must be an integer, but it is: %s", ErrInvalidRequest, name)
		}
	}
	return c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return c.brokerConfigRecords(im, name, changes, replace, validateOnly)
	})
}

func (c *Controller) brokerConfigRecords(im *metadata.Image, name string, changes []ConfigChange, replace, validateOnly bool) ([]metadata.Record, error) {
	cur := im.BrokerConfigs(name)
	set := map[string]string{}
	listed := map[string]bool{}
	var recs []metadata.Record
	for _, ch := range changes {
		listed[ch.Name] = true
		if ch.Value == nil {
			if _, ok := cur[ch.Name]; !ok {
				continue // deleting what is not there changes nothing
			}
		} else {
			set[ch.Name] = *ch.Value
		}
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: name, Name: ch.Name, Value: ch.Value})
	}
	if err := config.CheckDynamic(set, name != ""); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if replace {
		for k := range cur {
			if !listed[k] {
				recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: name, Name: k})
			}
		}
	}
	// The configs as they would be, parsed together over this node's
	// properties (the relations Parse checks, such as
	// min.compaction.lag.ms <= max.compaction.lag.ms).
	merged := map[string]string{}
	if !replace {
		maps.Copy(merged, cur)
	}
	for _, ch := range changes {
		if ch.Value != nil {
			merged[ch.Name] = *ch.Value
		} else {
			delete(merged, ch.Name)
		}
	}
	if _, err := c.node.WithDynamic(merged, nil); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if validateOnly || len(recs) == 0 {
		return nil, nil
	}
	if name == "" {
		recs = append(recs, c.uncleanAfterConfig(im, recs, "")...)
	}
	return recs, nil
}

// topicDefaults are the broker-level defaults of topic configs as the
// controller resolves them (Kafka's ConfigurationControlManager): the
// cluster-wide dynamic defaults of im over this node's properties;
// per-broker dynamic configs do not count.
func (c *Controller) topicDefaults(im *metadata.Image) map[string]string {
	n, err := c.node.WithDynamic(im.BrokerConfigs(""), nil)
	if err != nil {
		return c.node.Topic
	}
	return n.Topic
}
