package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record/recordtest"
)

// TestUnhostedPartition: a broker asked for a partition it hosts no
// replica of answers as Kafka's ReplicaManager.getPartitionOrError does:
// NOT_LEADER_OR_FOLLOWER when its metadata has the partition (the client's
// metadata is stale: it should refresh and go to the leader), and
// UNKNOWN_TOPIC_OR_PARTITION only for a partition that does not exist.
// Produce answered UNKNOWN_TOPIC_OR_PARTITION, which made producers fail
// records while a restarted broker caught up.
func TestUnhostedPartition(t *testing.T) {
	c := startCluster(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, adm := clusterClients(t, c)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "uh"); err != nil {
		t.Fatal(err)
	}
	leader := describe(t, adm, "uh").Partitions[0].Leader
	other := c.Brokers()[0]
	if other == leader {
		other = c.Brokers()[1]
	}
	// The other broker knows the topic once it has applied its creation.
	waitFor(t, 20*time.Second, "the topic in the other broker's metadata", func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("uh")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(other)))
		return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == 1
	})
	for _, tc := range []struct {
		partition int32
		want      *kerr.Error
	}{
		{0, kerr.NotLeaderForPartition},
		{7, kerr.UnknownTopicOrPartition},
	} {
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = -1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "uh"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = tc.partition
		pp.Records = recordtest.Raw(recordtest.Plain(1, time.Now().UnixMilli()), recordtest.Good(0))
		pt.Partitions = append(pt.Partitions, pp)
		produce.Topics = append(produce.Topics, pt)
		presp, err := produce.RequestWith(ctx, cl.Broker(int(other)))
		if err != nil {
			t.Fatal(err)
		}
		if got := presp.Topics[0].Partitions[0].ErrorCode; got != tc.want.Code {
			t.Errorf("Produce to partition %d on broker %d: %v, want %v", tc.partition, other, kerr.ErrorForCode(got), tc.want)
		}

		list := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "uh"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = tc.partition, -1
		lt.Partitions = append(lt.Partitions, lp)
		list.Topics = append(list.Topics, lt)
		lresp, err := list.RequestWith(ctx, cl.Broker(int(other)))
		if err != nil {
			t.Fatal(err)
		}
		if got := lresp.Topics[0].Partitions[0].ErrorCode; got != tc.want.Code {
			t.Errorf("ListOffsets of partition %d on broker %d: %v, want %v", tc.partition, other, kerr.ErrorForCode(got), tc.want)
		}

		fetch := kmsg.NewPtrFetchRequest()
		fetch.MaxWaitMillis, fetch.MaxBytes = 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "uh"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = tc.partition, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		fresp, err := fetch.RequestWith(ctx, cl.Broker(int(other)))
		if err != nil {
			t.Fatal(err)
		}
		if got := fresp.Topics[0].Partitions[0].ErrorCode; got != tc.want.Code {
			t.Errorf("Fetch of partition %d on broker %d: %v, want %v", tc.partition, other, kerr.ErrorForCode(got), tc.want)
		}
	}
}
