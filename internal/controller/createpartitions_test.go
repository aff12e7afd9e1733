package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
)

// CreatePartitions rejects a manual assignment that does not fit with
// INVALID_REPLICA_ASSIGNMENT, as Kafka does (kafkajs's createPartitions
// spec checks it), and accepts one that fits.
func TestCreatePartitionsAssignments(t *testing.T) {
	c := newLocalController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id := int32(1); id <= 2; id++ {
		if _, err := c.RegisterBroker(ctx, id, incarnation(byte(id)), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + id}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{1}}}}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	for _, tc := range []struct {
		name        string
		assignments [][]int32
	}{
		{"fewer assignments than new partitions", [][]int32{{1}}},
		{"unknown broker", [][]int32{{1}, {10}}},
		{"empty replica list", [][]int32{{1}, {}}},
		{"replica listed twice", [][]int32{{1}, {2, 2}}},
		{"replication factor other than the topic's", [][]int32{{1}, {1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CreatePartitions(ctx, "t", 3, tc.assignments, false)
			if !errors.Is(err, ErrInvalidReplicaAssignment) {
				t.Fatalf("err %v, want ErrInvalidReplicaAssignment", err)
			}
		})
	}
	if got := len(c.Image().Topic("t").Partitions); got != 1 {
		t.Fatalf("%d partitions after rejected requests, want 1", got)
	}
	if err := c.CreatePartitions(ctx, "t", 3, [][]int32{{2}, {1}}, false); err != nil {
		t.Fatal(err)
	}
	if p := c.Image().Topic("t").Partitions; len(p) != 3 || p[1].Leader != 2 || p[2].Leader != 1 {
		t.Fatalf("partitions after a valid assignment: %+v", p)
	}
}
