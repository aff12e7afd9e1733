package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/samsahq/samsa/internal/metadata"
)

// ErrNoReassignmentInProgress: a cancellation for a partition that is not
// being reassigned (NO_REASSIGNMENT_IN_PROGRESS).
var ErrNoReassignmentInProgress = errors.New("no reassignment in progress")

// Reassignment is one partition of AlterPartitionReassignments: Replicas
// is the target replica list, nil to cancel a reassignment in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// AlterPartitionReassignments starts or cancels partition reassignments
// (KIP-455). A reassignment adds the target replicas not yet assigned
// (they replicate from the leader like any follower), and once all of
// them are in the ISR, the replicas not in the target are removed and a
// leader outside the target hands over to one inside. Returns one error
// (nil on success) per entry.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs []Reassignment) ([]error, error) {
	errs := make([]error, len(reqs))
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return reassignRecords(im, reqs, errs), nil
	})
	return errs, err
}

// reassignRecords returns the records of reqs over im, setting errs[i]
// for each refused entry.
func reassignRecords(im *metadata.Image, reqs []Reassignment, errs []error) []metadata.Record {
	var recs []metadata.Record
	for i, r := range reqs {
		t := im.Topic(r.Topic)
		if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			errs[i] = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Topic, r.Partition)
			continue
		}
		p := t.Partitions[r.Partition]
		original := slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.AddingReplicas, id) })
		if r.Replicas == nil {
			if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
				errs[i] = ErrNoReassignmentInProgress
				continue
			}
			recs = append(recs, retarget(im, t, r.Partition, p, original, original))
			continue
		}
		if err := validReplicas(im, r.Replicas); err != nil {
			errs[i] = err
			continue
		}
		recs = append(recs, retarget(im, t, r.Partition, p, original, r.Replicas))
	}
	return recs
}

func validReplicas(im *metadata.Image, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: empty replica list", ErrInvalidReplication)
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if seen[r] {
			return fmt.Errorf("%w: replica %d listed twice", ErrInvalidReplication, r)
		}
		seen[r] = true
		if im.Broker(r) == nil {
			return fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplication, r)
		}
	}
	return nil
}

// retarget builds the record that moves partition i from original towards
// target.
func retarget(im *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition, original, target []int32) metadata.PartitionRecord {
	var adding, removing []int32
	for _, r := range target {
		if !slices.Contains(original, r) {
			adding = append(adding, r)
		}
	}
	for _, r := range original {
		if !slices.Contains(target, r) {
			removing = append(removing, r)
		}
	}
	replicas := append(slices.Clone(target), removing...)
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !slices.Contains(replicas, r) })
	rec := metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: replicas, ISR: isr,
		AddingReplicas: adding, RemovingReplicas: removing,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
	maybeCompleteReassignment(im, &rec)
	rec.LostReplicas = lostAmong(p.LostReplicas, rec.Replicas)
	return rec
}

// maybeCompleteReassignment finishes the reassignment rec describes once
// every adding replica is in the ISR: the removing replicas leave, and a
// leader outside the target hands over to an in-sync target replica.
func maybeCompleteReassignment(im *metadata.Image, rec *metadata.PartitionRecord) {
	if len(rec.AddingReplicas) == 0 && len(rec.RemovingReplicas) == 0 {
		return
	}
	for _, r := range rec.AddingReplicas {
		if !slices.Contains(rec.ISR, r) {
			return
		}
	}
	target := slices.DeleteFunc(slices.Clone(rec.Replicas), func(r int32) bool { return slices.Contains(rec.RemovingReplicas, r) })
	isr := slices.DeleteFunc(slices.Clone(rec.ISR), func(r int32) bool { return !slices.Contains(target, r) })
	if len(isr) == 0 {
		return // nothing of the target is in sync yet
	}
	rec.Replicas, rec.ISR, rec.AddingReplicas, rec.RemovingReplicas = target, isr, nil, nil
	if !slices.Contains(target, rec.Leader) {
		rec.Leader = -1
		for _, r := range target {
			if slices.Contains(isr, r) && live(im, r) && !slices.Contains(rec.LostReplicas, r) {
				rec.Leader = r
				break
			}
		}
		rec.LeaderEpoch++
	}
}

// Reassigning is a partition being reassigned, for
// ListPartitionReassignments.
type Reassigning struct {
	Topic            string
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ListPartitionReassignments returns the reassignments in progress, of
// parts or of every partition when parts is nil.
func (c *Controller) ListPartitionReassignments(parts []PartitionRef) []Reassigning {
	im := c.image.Load()
	var out []Reassigning
	add := func(name string, i int32, p metadata.Partition) {
		if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
			out = append(out, Reassigning{name, i, p.Replicas, p.AddingReplicas, p.RemovingReplicas})
		}
	}
	if parts == nil {
		for _, name := range im.TopicNames() {
			for i, p := range im.Topic(name).Partitions {
				add(name, int32(i), p)
			}
		}
		return out
	}
	for _, ref := range parts {
		if t := im.Topic(ref.Topic); t != nil && ref.Partition >= 0 && int(ref.Partition) < len(t.Partitions) {
			add(ref.Topic, ref.Partition, t.Partitions[ref.Partition])
		}
	}
	return out
}
