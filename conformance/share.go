package conformance

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareRecords is how many records the share-group runners produce, over
// the topic's 3 partitions (record i to partition i % 3).
const shareRecords = 300

// setupShareGroup sets the scenario group's share.auto.offset.reset to
// earliest (IncrementalAlterConfigs on the GROUP resource), so that the
// share group reads the records the runner produces before its consumers
// join, and waits until every broker describes it: a share-partition
// starts on its leader, at its first fetch, from the group config the
// leader's metadata image holds, and on the cluster a broker may apply
// the change after another already describes it (the start would then be
// the log end, and the runner would wait for records forever).
func setupShareGroup(ctx context.Context, e *Env) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, e.Group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = "share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, e.Client)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("share.auto.offset.reset of %s: %w", e.Group, err)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, e.Group, []string{"share.auto.offset.reset"}
	dreq.Resources = append(dreq.Resources, dr)
	return onEveryBroker(ctx, e, "share.auto.offset.reset of "+e.Group, "earliest", func(b *kgo.Broker) string {
		dresp, err := dreq.RequestWith(ctx, b)
		switch {
		case err != nil:
			return err.Error()
		case len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 1:
			return fmt.Sprintf("%d resources", len(dresp.Resources))
		case dresp.Resources[0].Configs[0].Value == nil:
			return "null"
		}
		return *dresp.Resources[0].Configs[0].Value
	})
}

// verifyShareGroup checks from the broker's side that every record was
// acknowledged or archived: each share-partition's start offset
// (DescribeShareGroupOffsets) is its partition's log end offset.
func verifyShareGroup(ctx context.Context, e *Env) error {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = e.Group
	t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	t.Topic, t.Partitions = e.Topic, []int32{0, 1, 2}
	g.Topics = append(g.Topics, t)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, e.Client)
	if err != nil {
		return fmt.Errorf("broker side: DescribeShareGroupOffsets: %w", err)
	}
	if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 {
		return fmt.Errorf("broker side: DescribeShareGroupOffsets: %d groups", len(resp.Groups))
	}
	if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
		return fmt.Errorf("broker side: DescribeShareGroupOffsets: %w", err)
	}
	for _, p := range resp.Groups[0].Topics[0].Partitions {
		want := int64(shareRecords / 3)
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil || p.StartOffset != want {
			return fmt.Errorf("broker side: share-partition %d starts at %d (%v), want %d: records neither acknowledged nor archived", p.Partition, p.StartOffset, err, want)
		}
	}
	return nil
}
