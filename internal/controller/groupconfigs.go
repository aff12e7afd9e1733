package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
)

// AlterGroupConfigs applies changes to the dynamic configs of group id
// (AlterConfigs and IncrementalAlterConfigs on GROUP resources, resource
// type 32): consumer.session.timeout.ms, share.record.lock.duration.ms and
// the other names of config.GroupConfigNames. With replace, configs of the
// group not in changes are removed first (AlterConfigs semantics). The
// group need not exist, as in Kafka. An empty id is ErrInvalidRequest; a
// config that is unknown, does not parse or lies outside the broker's
// bounds (config.Node.CheckGroupConfigs, with this node's properties) is
// ErrInvalidConfig with Kafka's message. The change is a ConfigRecord per
// config in the metadata log, as Kafka stores group configs, so it
// reaches every node and survives restarts.
func (c *Controller) AlterGroupConfigs(ctx context.Context, id string, changes []ConfigChange, replace, validateOnly bool) error {
	if id == "" {
		return fmt.Errorf("%w: Group name must not be empty", ErrInvalidRequest)
	}
	return c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return c.groupConfigRecords(im, id, changes, replace, validateOnly)
	})
}

func (c *Controller) groupConfigRecords(im *metadata.Image, id string, changes []ConfigChange, replace, validateOnly bool) ([]metadata.Record, error) {
	cur := im.GroupConfigs(id)
	merged := map[string]string{}
	if !replace {
		maps.Copy(merged, cur)
	}
	listed := map[string]bool{}
	var recs []metadata.Record
	for _, ch := range changes {
		listed[ch.Name] = true
		if ch.Value == nil {
			delete(merged, ch.Name)
			if _, ok := cur[ch.Name]; !ok {
				continue // deleting what is not there changes nothing
			}
		} else {
			merged[ch.Name] = *ch.Value
		}
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceGroup, ResourceName: id, Name: ch.Name, Value: ch.Value})
	}
	if replace {
		for k := range cur {
			if !listed[k] {
				recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceGroup, ResourceName: id, Name: k})
			}
		}
	}
	if err := c.node.CheckGroupConfigs(merged); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.TrimPrefix(err.Error(), config.ErrGroupConfig.Error()+": "))
	}
	if validateOnly {
		return nil, nil
	}
	return recs, nil
}
