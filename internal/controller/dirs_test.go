package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
)

// A broker that cannot host its replicas reports them lost
// (AssignReplicasToDirs to DirectoryId.LOST, KIP-858): it leaves their
// ISRs, its leaderships move to other in-sync replicas, and a partition
// whose only in-sync replica it is has no leader. A lost replica is no
// candidate in any election, nor for the ISR, even after its broker
// registers again, until the broker assigns it to an online directory:
// then it leads a leaderless partition whose ISR holds it, and may rejoin
// the others' ISRs.
func TestAssignReplicasToDirsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, epochs, part := sharedAndAlone(t, ctx)
	errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "other", Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{2, 1, 3}}}}, false)
	if err != nil || errs[0] != nil {
		t.Fatalf("create: %v %v", err, errs)
	}
	id := func(topic string) metadata.UUID { return c.Image().Topic(topic).ID }
	shared0, alone0 := part("shared"), part("alone")
	lost := []DirAssignment{{id("shared"), 0, DirectoryLost}, {id("alone"), 0, DirectoryLost}, {id("other"), 0, DirectoryLost}}
	if errs, err := c.AssignReplicasToDirs(ctx, 1, epochs[1], lost); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("assign lost: %v %v", err, errs)
	}
	check := func(topic string, leader, epoch int32, isr, lostReplicas []int32) {
		t.Helper()
		p := part(topic)
		if p.Leader != leader || p.LeaderEpoch != epoch || !slices.Equal(p.ISR, isr) || !slices.Equal(p.LostReplicas, lostReplicas) {
			t.Fatalf("%s: leader %d epoch %d ISR %v lost %v; want %d %d %v %v", topic, p.Leader, p.LeaderEpoch, p.ISR, p.LostReplicas, leader, epoch, isr, lostReplicas)
		}
	}
	check("shared", 2, shared0.LeaderEpoch+1, []int32{2, 3}, []int32{1})
	check("alone", -1, alone0.LeaderEpoch+1, []int32{1}, []int32{1})
	check("other", 2, 0, []int32{2, 3}, []int32{1})

	// Reported again: nothing to write.
	off := c.Image().Offset
	if _, err := c.AssignReplicasToDirs(ctx, 1, epochs[1], lost); err != nil {
		t.Fatal(err)
	}
	if c.Image().Offset != off {
		t.Fatalf("a repeated report wrote records: offset %d, was %d", c.Image().Offset, off)
	}

	// No election picks it.
	res, err := c.ElectLeaders(ctx, ElectPreferred, []PartitionRef{{"alone", 0}, {"shared", 0}})
	if err != nil {
		t.Fatal(err)
	}
	for ref, e := range res {
		if !errors.Is(e, ErrPreferredLeaderNotAvailable) {
			t.Fatalf("preferred election of %v: %v, want PREFERRED_LEADER_NOT_AVAILABLE", ref, e)
		}
	}
	p := part("shared")
	if _, _, err := c.AlterPartition(ctx, 2, id("shared"), 0, p.LeaderEpoch, p.PartitionEpoch, []int32{2, 3, 1}); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("AlterPartition adding the lost replica: %v, want INELIGIBLE_REPLICA", err)
	}
	// A new process of broker 1 registers: still lost.
	e1, err := c.RegisterBroker(ctx, 1, incarnation(9), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	alone := part("alone")
	if alone.Leader != -1 || !slices.Equal(alone.LostReplicas, []int32{1}) {
		t.Fatalf("alone after the registration: leader %d lost %v", alone.Leader, alone.LostReplicas)
	}

	// Errors per partition, and for the whole request.
	bad := []DirAssignment{{metadata.UUID{42}, 0, DirectoryLost}, {id("shared"), 5, DirectoryLost}}
	errs, err = c.AssignReplicasToDirs(ctx, 1, e1, bad)
	if err != nil || !errors.Is(errs[0], ErrUnknownTopicID) || !errors.Is(errs[1], ErrUnknownTopic) {
		t.Fatalf("unknown topic id, partition: %v %v", err, errs)
	}
	errs, err = c.AssignReplicasToDirs(ctx, 3, epochs[3], []DirAssignment{{id("alone"), 0, DirectoryLost}})
	if err != nil || !errors.Is(errs[0], ErrNotReplica) {
		t.Fatalf("not a replica: %v %v", err, errs)
	}
	if _, err := c.AssignReplicasToDirs(ctx, 1, epochs[1], lost); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("the previous process's epoch: %v, want STALE_BROKER_EPOCH", err)
	}

	// Fixed: assigned to an online directory.
	online := metadata.UUID{9, 9}
	errs, err = c.AssignReplicasToDirs(ctx, 1, e1, []DirAssignment{{id("shared"), 0, online}, {id("alone"), 0, online}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("assign online: %v %v", err, errs)
	}
	check("alone", 1, alone.LeaderEpoch+1, []int32{1}, nil)
	p = part("shared")
	check("shared", 2, shared0.LeaderEpoch+1, []int32{2, 3}, nil)
	if isr, _, err := c.AlterPartition(ctx, 2, id("shared"), 0, p.LeaderEpoch, p.PartitionEpoch, []int32{2, 3, 1}); err != nil || !slices.Equal(isr, []int32{2, 3, 1}) {
		t.Fatalf("AlterPartition adding the replica hosted again: %v %v", isr, err)
	}
	// "other" is still lost on broker 1: a later write of it keeps that.
	p = part("other")
	if _, _, err := c.AlterPartition(ctx, 2, id("other"), 0, p.LeaderEpoch, p.PartitionEpoch, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	if l := part("other").LostReplicas; part("other").PartitionEpoch == p.PartitionEpoch || !slices.Equal(l, []int32{1}) {
		t.Fatalf("other: lost %v, want [1]", l)
	}
}

// One AssignReplicasToDirs naming a partition many times (more than a
// write's chunk of items) is judged by its last entry, in one write: the
// partition is marked once, not flapped between lost and online write
// after write (each moving its leadership), and every entry is answered.
func TestAssignReplicasToDirsDuplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, epochs, part := sharedAndAlone(t, ctx)
	id := c.Image().Topic("shared").ID
	p0 := part("shared")
	items := make([]DirAssignment, 2*chunkRecords+3) // the last one LOST
	for i := range items {
		items[i] = DirAssignment{id, 0, DirectoryLost}
		if i%2 == 1 {
			items[i].Dir = metadata.UUID{9, 9}
		}
	}
	off := c.Image().Offset
	errs, err := c.AssignReplicasToDirs(ctx, 1, epochs[1], items)
	if err != nil || len(errs) != len(items) || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("assign: %v, %d answers (%d items)", err, len(errs), len(items))
	}
	p := part("shared")
	if n := c.Image().Offset - off; n != 1 || p.LeaderEpoch != p0.LeaderEpoch+1 || !slices.Equal(p.LostReplicas, []int32{1}) {
		t.Fatalf("shared: %d records written, leader epoch %d (was %d), lost %v; want one record, one leadership move, lost [1]",
			n, p.LeaderEpoch, p0.LeaderEpoch, p.LostReplicas)
	}
}
