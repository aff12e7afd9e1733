package samsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/metadata"
)

// CreateTopics and DeleteTopics are answered with their own results while
// the active controller's node still applies them to its logs (held here,
// as a deletion of thousands of partitions holds it for 10-25 s), sent to
// a broker that forwards them and to the controller's own. The active
// controller answered only once its node had applied the write: past the
// forwarding broker's 10 s attempt, which sent the request again, and the
// DeleteTopics of 30 topics it had deleted came back
// UNKNOWN_TOPIC_OR_PARTITION for each (a CreateTopics TOPIC_ALREADY_EXISTS).
func TestAdminAnsweredWhileControllerApplies(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl, adm := clusterClients(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		if _, err := adm.CreateTopic(ctx, 10, 3, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	var ctrl int32
	waitFor(t, time.Minute, "an active controller", func() bool { ctrl = c.ActiveController(); return ctrl >= 0 })
	other := ctrl%3 + 1
	node := c.Node(ctrl)
	check := func(what string, codes map[string]int16) {
		t.Helper()
		for name, code := range codes {
			if code != 0 {
				t.Fatalf("%s: %s answered %v", what, name, kerr.ErrorForCode(code))
			}
		}
	}
	// hold holds the controller node's apply of the commit cond shows
	// while do runs, until do's answer came and the commit is held.
	hold := func(what string, cond func(*metadata.Image) bool, do func() map[string]int16) {
		t.Helper()
		held, release := samsa.HoldMetadataApply(node, cond)
		defer release()
		check(what, do())
		select {
		case <-held: // the answer may come before the listeners reach the hold
		case <-ctx.Done():
			t.Fatalf("%s: answered, but the controller's apply was never held", what)
		}
	}
	deleteTopics := func(via int32, names ...string) map[string]int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 60_000
		for _, n := range names {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
			req.TopicNames = append(req.TopicNames, n)
		}
		resp, err := req.RequestWith(ctx, cl.Broker(int(via)))
		if err != nil {
			t.Fatalf("DeleteTopics via %d: %v", via, err)
		}
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			if rt.Topic != nil {
				out[*rt.Topic] = rt.ErrorCode
			}
		}
		if len(out) != len(names) {
			t.Fatalf("DeleteTopics via %d: %d results for %d topics", via, len(out), len(names))
		}
		return out
	}
	createTopic := func(via int32, name string) map[string]int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 60_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 10, 3
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(via)))
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("CreateTopics via %d: %v %+v", via, err, resp)
		}
		return map[string]int16{name: resp.Topics[0].ErrorCode}
	}
	gone := func(names ...string) func(*metadata.Image) bool {
		return func(im *metadata.Image) bool {
			for _, n := range names {
				if im.Topic(n) != nil {
					return false
				}
			}
			return true
		}
	}
	there := func(name string) func(*metadata.Image) bool {
		return func(im *metadata.Image) bool { return im.Topic(name) != nil }
	}
	hold("DeleteTopics via a broker", gone("a"), func() map[string]int16 { return deleteTopics(other, "a") })
	hold("CreateTopics via a broker", there("c"), func() map[string]int16 { return createTopic(other, "c") })
	hold("CreateTopics via the controller's node", there("d"), func() map[string]int16 { return createTopic(ctrl, "d") })
	hold("DeleteTopics via the controller's node", gone("b", "c", "d"), func() map[string]int16 { return deleteTopics(ctrl, "b", "c", "d") })
	waitFor(t, time.Minute, "no topic left in any node's metadata", func() bool {
		for _, id := range c.Brokers() {
			if n := c.Node(id); n == nil || len(samsa.MetadataImage(n).TopicNames()) != 0 {
				return false
			}
		}
		return true
	})
}
