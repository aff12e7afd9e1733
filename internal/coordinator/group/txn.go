package group

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is transactional offset commits (KIP-98, KIP-447): TxnOffsetCommit
// writes a group's offsets as part of a producer's transaction; they stay
// pending, invisible to OffsetFetch, until the transaction coordinator's
// marker on the group's partition of __consumer_offsets commits them
// (CompleteTxn), or are dropped by an ABORT.

// txnCompletion is a marker reported while the partition loads.
type txnCompletion struct {
	producerID int64
	commit     bool
}

// TxnOffsetCommit handles TxnOffsetCommit (v0-v5) and returns once the
// offsets are written as a transactional batch of the producer; they are
// applied when the transaction commits. From v3 the member id, generation
// and group.instance.id are checked as for OffsetCommit (KIP-447), except
// that a rebalance in progress does not fail it. Errors per partition:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
// OFFSET_METADATA_TOO_LARGE, INVALID_COMMIT_OFFSET_SIZE, PRODUCER_FENCED
// (an epoch older than the producer's on the partition). The broker checks
// that the partition is in the producer's transaction (AddOffsetsToTxn,
// or an implicit add for v5+, KIP-890 part 2) as it sees fit; the log checks the producer epoch.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	r, ok := call(c, ctx, func(reply func(*kmsg.TxnOffsetCommitResponse)) { c.txnOffsetCommit(req, reply) })
	if !ok {
		r = txnCommitResponse(req, codeUnavailable)
	}
	return r
}

func txnCommitResponse(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	resp := txnCommitResponse(req, 0)
	failAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		reply(resp)
	}
	part, code := c.partitionOf(req.Group)
	if code != 0 {
		failAll(code)
		return
	}
	now := time.Now()
	g := part.groups[req.Group]
	if g == nil && c.isShareGroup(req.Group) {
		failAll(kerr.GroupIDNotFound.Code) // as an OffsetCommit
		return
	}
	if g == nil {
		g = newGroup(part, req.Group, now)
		part.groups[g.id] = g
	}
	if req.Version >= 3 {
		if code := g.validateTxnOffsetCommit(req.MemberID, req.InstanceID, req.Generation); code != 0 {
			failAll(code)
			return
		}
	} else if g.state == stateDead {
		failAll(kerr.CoordinatorNotAvailable.Code)
		return
	}
	txn := &TxnInfo{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	type commit struct {
		tp    tp
		entry offsetEntry
	}
	var commits []commit
	var recs []Record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			md := derefOr(p.Metadata, "")
			if utf16Len(md) > int(c.cfg.OffsetMetadataMaxBytes) {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			e := offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: md, commitTimestamp: now.UnixMilli(), expireTimestamp: -1}
			if req.Version < 2 {
				e.leaderEpoch = -1
			}
			k := tp{t.Topic, p.Partition}
			commits = append(commits, commit{k, e})
			recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition), Value: offsetValue(e), Txn: txn})
		}
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	c.appendRecords(part, recs, func(err error) {
		if code := txnCommitErrorCode(err); code != 0 {
			failAll(code)
			return
		}
		if g.pendingTxnOffsets == nil {
			g.pendingTxnOffsets = map[int64]map[tp]offsetEntry{}
		}
		pending := g.pendingTxnOffsets[req.ProducerID]
		if pending == nil {
			pending = map[tp]offsetEntry{}
			g.pendingTxnOffsets[req.ProducerID] = pending
		}
		for _, cm := range commits {
			pending[cm.tp] = cm.entry
		}
		reply(resp)
	})
}

// txnCommitErrorCode maps a Store.Append error of a transactional commit:
// a fenced producer epoch is PRODUCER_FENCED, the rest as commits.
func txnCommitErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) && ke == kerr.InvalidProducerEpoch {
		return kerr.ProducerFenced.Code
	}
	return commitErrorCode(err)
}

// validateTxnOffsetCommit is validateOffsetCommit for transactional
// commits (Kafka's isTransactional: no REBALANCE_IN_PROGRESS).
func (g *group) validateTxnOffsetCommit(memberID string, instanceID *string, generation int32) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.cg != nil {
		return g.cg.validateOffsetCommit(memberID, generation, 9, true)
	}
	if generation < 0 && g.state == stateEmpty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}

// CompleteTxn applies (commit) or drops the offsets that producerID's
// transaction committed to the groups of partition of __consumer_offsets,
// once its COMMIT or ABORT marker is written there (the broker calls it
// after writing the marker, as Kafka's scheduleHandleTxnCompletion). A
// partition still loading applies it once loaded; one not owned ignores
// it (its next coordinator reads the marker from the log). Returns once
// applied, or when ctx ends or the Coordinator closes.
func (c *Coordinator) CompleteTxn(ctx context.Context, partition int32, producerID int64, commit bool) {
	call(c, ctx, func(reply func(struct{})) {
		if part := c.partitions[partition]; part != nil {
			if !part.loaded {
				part.txnCompletions = append(part.txnCompletions, txnCompletion{producerID, commit})
			} else {
				c.completeTxn(part, producerID, commit)
			}
		}
		reply(struct{}{})
	})
}

// completeTxn ends producerID's pending offsets in part's groups.
func (c *Coordinator) completeTxn(part *partition, producerID int64, commit bool) {
	for _, g := range part.sortedGroups() {
		pending, ok := g.pendingTxnOffsets[producerID]
		if !ok {
			continue
		}
		delete(g.pendingTxnOffsets, producerID)
		if !commit || g.state == stateDead {
			continue
		}
		for k, e := range pending {
			g.offsets[k] = e
		}
		c.logGroup(g).Debug("committed transactional offsets", "producer_id", producerID, "offsets", len(pending))
	}
}

// hasPendingTxnOffset reports whether an open transaction committed an
// offset for k (OffsetFetch with require_stable gets
// UNSTABLE_OFFSET_COMMIT then, KIP-447).
func (g *group) hasPendingTxnOffset(k tp) bool {
	for _, p := range g.pendingTxnOffsets {
		if _, ok := p[k]; ok {
			return true
		}
	}
	return false
}

// applyTxn folds a record of a transaction, or its marker, into the load.
func (ls *loadState) applyTxn(rec Record) error {
	pid := rec.Txn.ProducerID
	if rec.Txn.Marker {
		pending := ls.txnOffsets[pid]
		delete(ls.txnOffsets, pid)
		if !rec.Txn.Commit {
			return nil
		}
		for group, offsets := range pending {
			o := ls.offsets[group]
			if o == nil {
				o = map[tp]offsetEntry{}
				ls.offsets[group] = o
			}
			for k, e := range offsets {
				o[k] = e
			}
		}
		return nil
	}
	d, err := Decode(Record{Key: rec.Key, Value: rec.Value})
	if err != nil || d.OffsetKey == nil || d.OffsetValue == nil {
		ls.skipped++
		if err != nil && !errors.Is(err, ErrUnknownRecord) {
			ls.lastErr = err
		}
		return nil
	}
	if ls.txnOffsets == nil {
		ls.txnOffsets = map[int64]map[string]map[tp]offsetEntry{}
	}
	groups := ls.txnOffsets[pid]
	if groups == nil {
		groups = map[string]map[tp]offsetEntry{}
		ls.txnOffsets[pid] = groups
	}
	o := groups[d.OffsetKey.Group]
	if o == nil {
		o = map[tp]offsetEntry{}
		groups[d.OffsetKey.Group] = o
	}
	o[tp{d.OffsetKey.Topic, d.OffsetKey.Partition}] = offsetEntryFrom(d.OffsetValue)
	return nil
}

// installTxnOffsets gives the groups the offsets of the transactions still
// open at the end of the load.
func (ls *loadState) installTxnOffsets(part *partition, now time.Time) {
	for pid, groups := range ls.txnOffsets {
		for id, offsets := range groups {
			g := part.groups[id]
			if g == nil {
				g = newGroup(part, id, now)
				part.groups[id] = g
			}
			if g.pendingTxnOffsets == nil {
				g.pendingTxnOffsets = map[int64]map[tp]offsetEntry{}
			}
			g.pendingTxnOffsets[pid] = offsets
		}
	}
}
