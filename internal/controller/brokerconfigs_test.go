package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
)

// Turning unclean.leader.election.enable on, as the cluster-wide dynamic
// default or on a topic, elects a live replica for the leaderless
// partitions it covers at once; a per-broker value does not count for the
// controller, as in Kafka, and validate_only changes nothing.
func TestUncleanElectionOnConfigChange(t *testing.T) {
	c := newLocalController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id := int32(1); id <= 3; id++ {
		if _, err := c.RegisterBroker(ctx, id, incarnation(byte(id)), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + id}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	errs, err := c.CreateTopics(ctx, []CreateTopic{
		{Name: "a", Partitions: 1, ReplicationFactor: 2, Assignments: [][]int32{{2, 3}}},
		{Name: "b", Partitions: 1, ReplicationFactor: 2, Assignments: [][]int32{{2, 3}}},
	}, false)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	// 3 leaves the ISRs, then 2, the last in-sync replica, fails; 3
	// comes back out of sync: no leader.
	for _, id := range []int32{3, 2} {
		if err := c.FenceBroker(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RegisterBroker(ctx, 3, incarnation(33), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9003}}, nil); err != nil {
		t.Fatal(err)
	}
	leader := func(topic string) int32 { return c.Image().Topic(topic).Partitions[0].Leader }
	if leader("a") != -1 || leader("b") != -1 {
		t.Fatalf("leaders %d, %d; want none", leader("a"), leader("b"))
	}
	on := []ConfigChange{{Name: "unclean.leader.election.enable", Value: new("true")}}
	if err := c.AlterBrokerConfigs(ctx, "1", on, false, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(ctx, "", on, false, true); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterTopicConfigs(ctx, "b", on, false, true); err != nil {
		t.Fatal(err)
	}
	if leader("a") != -1 || leader("b") != -1 {
		t.Fatalf("a per-broker value or validate_only elected: leaders %d, %d", leader("a"), leader("b"))
	}
	if err := c.AlterTopicConfigs(ctx, "b", on, false, false); err != nil {
		t.Fatal(err)
	}
	if leader("a") != -1 || leader("b") != 3 {
		t.Fatalf("after the topic config: leaders %d, %d; want -1, 3", leader("a"), leader("b"))
	}
	if err := c.AlterBrokerConfigs(ctx, "", on, false, false); err != nil {
		t.Fatal(err)
	}
	if leader("a") != 3 {
		t.Fatalf("after the cluster default: leader of a %d, want 3", leader("a"))
	}
	// Read-only configs: INVALID_REQUEST.
	if err := c.AlterBrokerConfigs(ctx, "", []ConfigChange{{Name: "log.dirs", Value: new("/x")}}, false, false); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("log.dirs: %v", err)
	}
}
