package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/share"
)

// Durable share-partition state across share-partition leader failovers:
// delivery counts written when locks expire, read back by the new leader.

// shareFetchOnce sends one ShareFetch for partition 0 of topicID as member
// to broker id (a new share session, closed by the next) and returns the
// acquired ranges.
func shareFetchOnce(t *testing.T, cl *kgo.Client, id int32, group, member string, topicID [16]byte, epoch int32, wait time.Duration) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatalf("share fetch of %s at %d: %v", member, id, err)
	}
	resp := kresp.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch of %s at %d: %v", member, id, kerr.ErrorForCode(resp.ErrorCode))
	}
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("share fetch of %s at %d: %v", member, id, kerr.ErrorForCode(p.ErrorCode))
			}
			got = append(got, p.AcquiredRecords...)
		}
	}
	return got
}

// shareStateBatches reads the durable state of group's partition 0 of
// topicID from whichever broker is its share coordinator
// (ReadShareGroupState, API 84); ok false while none answers.
func shareStateBatches(cl *kgo.Client, brokers []int32, group string, topicID [16]byte) (start int64, batches []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch, ok bool) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.LeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for _, id := range brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kresp, err := cl.Broker(int(id)).Request(ctx, req)
		cancel()
		if err != nil {
			continue
		}
		resp := kresp.(*kmsg.ReadShareGroupStateResponse)
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && resp.Topics[0].Partitions[0].ErrorCode == 0 {
			p := resp.Topics[0].Partitions[0]
			return p.StartOffset, p.StateBatches, true
		}
	}
	return 0, nil, false
}

// TestShareGroupDeliveryCountsFailover: on 3 nodes with a 1 s record lock
// and a delivery limit of 2, a member acquires 10 records and never
// acknowledges them. The lock expiry, with no fetch or acknowledgement to
// trigger it, writes their delivery count (1) to __share_group_state. The
// share-partition's leader is stopped; at the new leader another member
// acquires them with delivery count 2, and when those locks expire too
// the records are archived: nobody gets them a third time. Before, expiry
// happened only inside a fetch or an acknowledgement and wrote nothing,
// so the new leader handed the records out with delivery count 1 again.
func TestShareGroupDeliveryCountsFailover(t *testing.T) {
	props := map[string]string{
		"group.share.min.record.lock.duration.ms": "1000",
		"group.share.min.delivery.count.limit":    "2",
	}
	for k, v := range groupProps {
		props[k] = v
	}
	c := startCluster(t, 3, props)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := clusterClients(t, c)
	const topic, group, total = "jobs", "workers", 10
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var td kadm.TopicDetail
	waitFor(t, 30*time.Second, "a leader with a full ISR", func() bool {
		td = describe(t, adm, topic)
		return td.Partitions[0].Leader >= 0 && len(td.Partitions[0].ISR) == 3
	})
	setShareGroupConfigs(t, c.Addrs()[0], group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "1000",
		"share.delivery.count.limit":    "2",
	})
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte("job")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	leader := td.Partitions[0].Leader
	got := shareFetchOnce(t, cl, leader, group, "member-a-0000000000001", td.ID, 0, 5*time.Second)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != total-1 || got[0].DeliveryCount != 1 {
		t.Fatalf("first delivery: %+v", got)
	}
	waitFor(t, 20*time.Second, "the expired locks' delivery counts in __share_group_state", func() bool {
		start, batches, ok := shareStateBatches(cl, c.Brokers(), group, td.ID)
		return ok && start == 0 && len(batches) == 1 && batches[0].LastOffset == total-1 &&
			batches[0].DeliveryState == 0 && batches[0].DeliveryCount == 1
	})

	checkShareStateRecords(t, c.Addrs())

	if err := c.StopNode(leader); err != nil {
		t.Fatal(err)
	}
	var next int32
	waitFor(t, 30*time.Second, "a new leader", func() bool {
		next = describe(t, adm, topic).Partitions[0].Leader
		return next >= 0 && next != leader
	})
	var again []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	waitFor(t, 30*time.Second, "the records at the new leader", func() bool {
		again = shareFetchOnce(t, cl, next, group, "member-b-0000000000002", td.ID, 0, time.Second)
		return len(again) > 0
	})
	if len(again) != 1 || again[0].FirstOffset != 0 || again[0].LastOffset != total-1 || again[0].DeliveryCount != 2 {
		t.Fatalf("after the failover: %+v, want offsets 0-%d delivered the 2nd time", again, total-1)
	}
	// At the limit, the second expiry archives them.
	waitFor(t, 20*time.Second, "the records archived at the delivery limit", func() bool {
		start, _, ok := shareStateBatches(cl, c.Brokers(), group, td.ID)
		return ok && start == total
	})
	if third := shareFetchOnce(t, cl, next, group, "member-c-0000000000003", td.ID, 0, time.Second); len(third) != 0 {
		t.Fatalf("delivered a third time: %+v", third)
	}
}

// checkShareStateRecords reads __share_group_state from the start and
// checks that every record is one of Kafka's share coordinator records
// (ShareSnapshot key type 0 or ShareUpdate key type 1, value version 0) and
// that the first of a key is a snapshot.
func checkShareStateRecords(t *testing.T, seeds []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(share.StateTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[share.StateKey]bool{}
	for len(seen) == 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record in %s: %v", share.StateTopic, ctx.Err())
		}
		for _, r := range fs.Records() {
			if len(r.Key) < 2 || r.Key[0] != 0 || r.Key[1] > 1 || len(r.Value) < 2 || r.Value[0] != 0 || r.Value[1] != 0 {
				t.Fatalf("not a ShareSnapshot/ShareUpdate record: key %x value %x", r.Key, r.Value)
			}
			d, err := share.DecodeStateRecord(r.Key, r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !seen[d.Key] && d.Kind != share.KindSnapshot {
				t.Fatalf("the first record of %+v is of type %d, not a ShareSnapshot", d.Key, d.Kind)
			}
			seen[d.Key] = true
		}
	}
}

// TestShareVersionFeature: ApiVersions v3 reports share.version supported
// 0-1 and finalized at 1, as a Kafka 4.2 broker with share groups enabled;
// the Java clients and kafka-features.sh read it there.
func TestShareVersionFeature(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa-test", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("api versions: %v %v", err, resp)
	}
	supported, finalized := false, false
	for _, f := range resp.SupportedFeatures {
		supported = supported || f.Name == "share.version" && f.MinVersion == 0 && f.MaxVersion == 1
	}
	for _, f := range resp.FinalizedFeatures {
		finalized = finalized || f.Name == "share.version" && f.MaxVersionLevel == 1
	}
	if !supported || !finalized || resp.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("v%d features: supported %+v, finalized %+v at epoch %d", resp.Version, resp.SupportedFeatures, resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
	}
}
