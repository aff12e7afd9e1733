package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/samsahq/samsa/internal/metadata"
)

// DirectoryLost is KIP-858's DirectoryId.LOST (Uuid 0:1): the directory
// of a replica its broker cannot host, as AssignReplicasToDirs carries it.
var DirectoryLost = metadata.UUID{15: 1}

// ErrUnknownTopicID: AssignReplicasToDirs named a topic id the image does
// not hold (UNKNOWN_TOPIC_ID).
var ErrUnknownTopicID = errors.New("unknown topic id")

// ErrNotReplica: AssignReplicasToDirs named a partition the broker is not
// a replica of (NOT_LEADER_OR_FOLLOWER, as Kafka's controller answers).
var ErrNotReplica = errors.New("the broker is not a replica of the partition")

// DirAssignment is one partition of AssignReplicasToDirs (API key 73,
// v0, KIP-858): the broker's replica of it is in directory Dir.
// DirectoryLost says the broker cannot host it; any other id says it can.
type DirAssignment struct {
	TopicID   metadata.UUID
	Partition int32
	Dir       metadata.UUID
}

// AssignReplicasToDirs records where broker id's replicas live
// (AssignReplicasToDirs v0, KIP-858). Samsa's metadata keeps no directory
// per replica, only the lost ones (PartitionRecord.LostReplicas), so an
// assignment changes the image only when a replica becomes lost or stops
// being lost:
//
//   - to DirectoryLost: the replica becomes lost; the broker leaves the
//     partition's ISR unless it is its last member, and a partition it
//     leads gets another live in-sync replica as leader, or none (leader
//     -1, as Kafka's ReplicationControlManager moves a replica whose
//     directory is offline out through generateLeaderAndIsrUpdates). A
//     lost replica is no candidate in any election and cannot join the
//     ISR (AlterPartition answers INELIGIBLE_REPLICA).
//   - to any other directory: the replica is no longer lost. A partition
//     without a leader whose ISR holds the broker gets it as leader
//     (the single replica of a replication factor 1 partition, back after
//     its disk was fixed); otherwise the broker follows and rejoins the
//     ISR through AlterPartition once caught up.
//
// epoch must be the broker's registered epoch (ErrStaleBrokerEpoch). A
// partition named more than once is judged by its last entry (the others
// get its answer). The items are committed in writes of at most
// chunkRecords partitions. It returns one error per item (nil, ErrUnknownTopicID, ErrUnknownTopic for
// a partition out of range, ErrNotReplica), or a write's error
// (ErrNotController, ErrStaleBrokerEpoch, a commit failure) for all.
// Safe for concurrent use.
func (c *Controller) AssignReplicasToDirs(ctx context.Context, id int32, epoch int64, items []DirAssignment) ([]error, error) {
	if !c.Active() {
		return nil, ErrNotController
	}
	uniq, at := lastPerItem(items)
	errs := make([]error, len(uniq))
	for lo := 0; lo < len(uniq) || lo == 0; lo += chunkRecords {
		hi := min(lo+chunkRecords, len(uniq))
		err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
			if !c.Active() {
				return nil, ErrNotController
			}
			if b := im.Broker(id); b == nil || b.Epoch != epoch {
				return nil, ErrStaleBrokerEpoch
			}
			return c.assignDirs(im, id, uniq[lo:hi], errs[lo:hi]), nil
		})
		if err != nil {
			return nil, err
		}
	}
	if at == nil {
		return errs, nil
	}
	out := make([]error, len(items))
	for i, j := range at {
		out[i] = errs[j]
	}
	return out, nil
}

// lastPerItem is items with one entry per partition, its last (in the
// order of those last entries), and at[i], the index in uniq of item i's
// partition; at is nil (and uniq items) when no partition repeats. A
// request naming a partition many times would otherwise mark it once per
// entry, across writes: lost, online, lost again, each moving its
// leadership.
func lastPerItem(items []DirAssignment) (uniq []DirAssignment, at []int) {
	type key struct {
		id metadata.UUID
		p  int32
	}
	last := make(map[key]int, len(items))
	for i, it := range items {
		last[key{it.TopicID, it.Partition}] = i
	}
	if len(last) == len(items) {
		return items, nil
	}
	idx := make(map[key]int, len(last))
	for i, it := range items {
		if k := (key{it.TopicID, it.Partition}); last[k] == i {
			idx[k] = len(uniq)
			uniq = append(uniq, it)
		}
	}
	at = make([]int, len(items))
	for i, it := range items {
		at[i] = idx[key{it.TopicID, it.Partition}]
	}
	return uniq, at
}

// assignDirs is the records of one chunk of AssignReplicasToDirs over im,
// its per-item errors in errs.
func (c *Controller) assignDirs(im *metadata.Image, id int32, items []DirAssignment, errs []error) []metadata.Record {
	var marks []metadata.Record // the replicas becoming lost or online
	var lost []int              // the items becoming lost
	for i, it := range items {
		t := im.TopicByID(it.TopicID)
		switch {
		case t == nil:
			errs[i] = ErrUnknownTopicID
			continue
		case it.Partition < 0 || int(it.Partition) >= len(t.Partitions):
			errs[i] = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, t.Name, it.Partition)
			continue
		}
		p := t.Partitions[it.Partition]
		if !slices.Contains(p.Replicas, id) {
			errs[i] = fmt.Errorf("%w: broker %d, %s-%d", ErrNotReplica, id, t.Name, it.Partition)
			continue
		}
		isLost := slices.Contains(p.LostReplicas, id)
		rec := metadata.PartitionRecord{TopicID: t.ID, Partition: it.Partition, Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
			ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
		switch {
		case it.Dir == DirectoryLost:
			if isLost && p.Leader != id && (len(p.ISR) == 1 || !slices.Contains(p.ISR, id)) {
				continue // already moved out
			}
			rec.LostReplicas = p.LostReplicas
			if !isLost {
				rec.LostReplicas = append(slices.Clone(p.LostReplicas), id)
			}
			c.logger.Warn("broker cannot host its replica: moving it out of the partition's ISR and leadership", "broker", id, "topic", t.Name, "partition", it.Partition)
			lost = append(lost, i)
		case isLost:
			rec.LostReplicas = slices.DeleteFunc(slices.Clone(p.LostReplicas), func(r int32) bool { return r == id })
			if len(rec.LostReplicas) == 0 {
				rec.LostReplicas = nil
			}
			if p.Leader < 0 && slices.Contains(p.ISR, id) && live(im, id) {
				rec.Leader, rec.LeaderEpoch = id, p.LeaderEpoch+1
			}
			c.logger.Info("broker hosts its replica again", "broker", id, "topic", t.Name, "partition", it.Partition, "leader", rec.Leader)
		default:
			continue // online, and known so
		}
		marks = append(marks, rec)
	}
	if len(lost) == 0 {
		return marks
	}
	// The lost replicas leave their ISRs and leaderships over the image
	// that marks them lost, as a fence of the broker moves all of its
	// replicas (fencePartition: a lost replica is no candidate).
	after := im.Apply(im.Offset+1, marks)
	recs := marks
	for _, i := range lost {
		it := items[i]
		t := after.TopicByID(it.TopicID)
		if rec, ok := c.fencePartition(after, t, it.Partition, id); ok {
			recs = append(recs, rec)
		}
	}
	return lastPerPartition(recs)
}

// lostAmong is the lost replicas that are still among replicas (a
// reassignment removed the others), nil when none.
func lostAmong(lost, replicas []int32) []int32 {
	if len(lost) == 0 {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(lost), func(r int32) bool { return !slices.Contains(replicas, r) })
	if len(out) == 0 {
		return nil
	}
	return out
}
