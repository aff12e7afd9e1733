package broker

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/server"
)

// The share coordinator (KIP-932): the durable state of share-partitions in
// __share_group_state, in Kafka's records (internal/coordinator/share
// records.go): a ShareUpdate per write, merged into the state, and a
// ShareSnapshot holding the whole state first and after every
// share.coordinator.snapshot.update.records.per.snapshot (500) updates; the
// topic is compacted. Each partition of the topic is served by its leader
// from memory, loaded (replayed) when leadership is gained. A
// share-partition leader reads its state on first use or after its
// leadership moved (ReadShareGroupState, API 84, which records its leader
// epoch so that the writes of the leader it replaced are fenced),
// initializing it first when there is none (InitializeShareGroupState, API
// 83, at share.auto.offset.reset's offset: a write or read of a state never
// initialized is INVALID_REQUEST, as in Kafka 4.1+), and writes what
// changed after every acknowledgement before answering it, and after a
// release or a lock expiry changed delivery counts (WriteShareGroupState,
// API 85, with the changed records only, as Kafka's SharePartition); an
// acknowledgement or release whose write fails is rolled back. So a
// failover loses no acknowledgement, redelivers only what was not
// acknowledged and keeps the delivery counts of records released or timed
// out. Both go to the coordinator's broker, in-process when that is this
// one. AlterShareGroupOffsets starts a state afresh
// (InitializeShareGroupState).

// ReadShareGroupState: v0
//
// Version notes:
//   - v0: the version Kafka 4.x serves (inter-broker, KIP-932)

// WriteShareGroupState: v0
//
// Version notes:
//   - v0: the version Kafka 4.x serves (inter-broker, KIP-932)

// DeleteShareGroupState: v0
//
// Version notes:
//   - v0: the version Kafka 4.x serves (inter-broker, KIP-932)

// InitializeShareGroupState: v0
//
// Version notes:
//   - v0: the version Kafka 4.x serves (inter-broker, KIP-932)

func init() {
	register(kmsg.ReadShareGroupState, 0, 0, handleReadShareGroupState)
	register(kmsg.WriteShareGroupState, 0, 0, handleWriteShareGroupState)
	register(kmsg.DeleteShareGroupState, 0, 0, handleDeleteShareGroupState)
	register(kmsg.InitializeShareGroupState, 0, 0, handleInitializeShareGroupState)
	gates[kmsg.InitializeShareGroupState] = gateCluster(opClusterAction)
	gates[kmsg.ReadShareGroupState] = gateCluster(opClusterAction)
	gates[kmsg.WriteShareGroupState] = gateCluster(opClusterAction)
	gates[kmsg.DeleteShareGroupState] = gateCluster(opClusterAction)
}

// errShareStateUnloaded: a state partition not (or no longer) loaded here.
var errShareStateUnloaded = errors.New("share state partition not loaded")

// shareStateTopicConfigs are the configs of __share_group_state, as Kafka
// creates it (compacted, 100 MiB segments).
func shareStateTopicConfigs(int16) map[string]string {
	return map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}
}

// loadShareState reads partition p of __share_group_state into the store.
func (b *Broker) loadShareState(ctx context.Context, p, _ int32) error {
	rp := b.replicas.Get(share.StateTopic, p)
	if rp == nil {
		return kerr.NotLeaderForPartition
	}
	shard := share.NewShard()
	for off := rp.LogStartOffset(); off < rp.LogEndOffset(); {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := rp.Read(off, 1<<20, true, true)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			break
		}
		next := off
		_, err = record.Batches(res.Records, func(batch []byte, h record.Header) error {
			next = h.NextOffset()
			if h.IsControl() {
				return nil
			}
			return record.Records(batch, func(r record.Record) error {
				sr, err := share.DecodeStateRecord(r.Key, r.Value)
				if err != nil {
					b.logger.Warn("skipping a malformed share state record", "partition", p, "offset", r.Offset, "err", err)
					return nil
				}
				shard.Apply(sr)
				return nil
			})
		})
		if err != nil {
			return err
		}
		if next <= off {
			break
		}
		off = next
	}
	b.share.store.Load(p, shard)
	return nil
}

// shareStateLeader returns the partition of __share_group_state of k and
// its leader; ok false when the topic does not exist.
func (b *Broker) shareStateLeader(k share.StateKey) (p, leader int32, ok bool) {
	t := b.image().Topic(share.StateTopic)
	if t == nil || len(t.Partitions) == 0 {
		return 0, -1, false
	}
	p = share.StatePartition(k, int32(len(t.Partitions)))
	return p, t.Partitions[p].Leader, true
}

// retriableShareState reports whether a read or write of share state is
// tried again: the coordinator moving or loading, as Kafka's
// PersisterStateManager retries (COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR); any other error is the
// answer.
func retriableShareState(err error) bool {
	return errors.Is(err, errShareStateUnloaded) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.NotCoordinator)
}

// readShareState returns the durable state of k (nil: none, never
// initialized), retrying while the coordinator moves or loads until ctx is
// done. leaderEpoch is the reader's, recorded by the coordinator (-1: a
// read that neither checks nor records it); an older one than the state's
// is FENCED_LEADER_EPOCH.
func (b *Broker) readShareState(ctx context.Context, k share.StateKey, leaderEpoch int32) (*share.State, error) {
	for {
		st, err := b.readShareStateOnce(ctx, k, leaderEpoch)
		if err == nil || !retriableShareState(err) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, kerr.CoordinatorLoadInProgress
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *Broker) readShareStateOnce(ctx context.Context, k share.StateKey, leaderEpoch int32) (*share.State, error) {
	p, leader, ok := b.shareStateLeader(k)
	if !ok {
		return nil, nil
	}
	if leader == b.node.NodeID {
		st, err := b.readShareStateLocal(ctx, p, k, leaderEpoch)
		if errors.Is(err, kerr.InvalidRequest) {
			return nil, nil // never initialized
		}
		return st, err
	}
	if leader < 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := b.requestBroker(ctx, leader, req)
	if err != nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	resp := kresp.(*kmsg.ReadShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, kerr.UnknownServerError
	}
	r := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(r.ErrorCode); errors.Is(err, kerr.InvalidRequest) {
		return nil, nil // never initialized (the request is well formed)
	} else if err != nil {
		return nil, err
	}
	if r.StartOffset < 0 {
		return nil, nil
	}
	st := &share.State{StateEpoch: r.StateEpoch, StartOffset: r.StartOffset}
	for _, sb := range r.StateBatches {
		s, ok := share.RecordStateOf(sb.DeliveryState)
		if !ok {
			continue
		}
		st.Batches = append(st.Batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: s, DeliveryCount: sb.DeliveryCount})
	}
	return st, nil
}

// shareWriteTimeout bounds a share-partition's write of its state, through
// coordinator moves (the coordinators' 30 s wait for their writes).
const shareWriteTimeout = 30 * time.Second

// writeShareChange writes what changed in sp, the share-partition of
// group/topic/partition, with c in flight (nil: none, only expiries), and
// commits c when it was written or rolls it back otherwise (Kafka's
// SharePartition.rollbackOrProcessStateUpdates). The caller holds
// sp.LockPersist from the change on. It returns the records to write to the
// dead-letter topic and the write's error.
func (b *Broker) writeShareChange(ctx context.Context, groupID string, topicID [16]byte, partition int32, leaderEpoch int32, sp *share.Partition, c *share.Change) ([]share.DeadLetter, error) {
	d := sp.Delta(c)
	var err error
	if !d.Empty() {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		k := share.StateKey{Group: groupID, TopicID: topicID, Partition: partition}
		err = b.writeShareState(ctx, k, share.Write{StateEpoch: sp.StateEpoch(), LeaderEpoch: leaderEpoch, StartOffset: d.Start, Batches: d.Batches})
		cancel()
	}
	return sp.Finish(c, d, err == nil), err
}

// writeShareState applies w to the durable state of k, retrying while the
// share coordinator moves or loads until ctx is done (REQUEST_TIMED_OUT).
func (b *Broker) writeShareState(ctx context.Context, k share.StateKey, w share.Write) error {
	for {
		err := b.writeShareStateOnce(ctx, k, w)
		if err == nil || !retriableShareState(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return kerr.RequestTimedOut
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeShareStateOnce sends w to the share coordinator of k:
// WriteShareGroupState, or InitializeShareGroupState for w.Initialize.
func (b *Broker) writeShareStateOnce(ctx context.Context, k share.StateKey, w share.Write) error {
	p, leader, ok := b.shareStateLeader(k)
	switch {
	case !ok || leader < 0:
		return kerr.CoordinatorNotAvailable
	case leader == b.node.NodeID:
		return b.writeShareStateLocal(ctx, p, k, w)
	}
	var req kmsg.Request
	if w.Initialize {
		r := kmsg.NewPtrInitializeShareGroupStateRequest()
		r.GroupID = k.Group
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, w.StateEpoch, w.StartOffset
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		req = r
	} else {
		r := kmsg.NewPtrWriteShareGroupStateRequest()
		r.GroupID = k.Group
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, w.StateEpoch, w.LeaderEpoch, w.StartOffset
		for _, sb := range w.Batches {
			sw := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
			sw.FirstOffset, sw.LastOffset, sw.DeliveryState, sw.DeliveryCount = sb.First, sb.Last, share.DeliveryState(sb.State), sb.DeliveryCount
			rp.StateBatches = append(rp.StateBatches, sw)
		}
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		req = r
	}
	kresp, err := b.requestBroker(ctx, leader, req)
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	switch resp := kresp.(type) {
	case *kmsg.WriteShareGroupStateResponse:
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
	case *kmsg.InitializeShareGroupStateResponse:
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
	return kerr.UnknownServerError
}

// writeShareStateLocal appends the record for w on k to partition p of
// __share_group_state, led here (a ShareUpdate, or a ShareSnapshot every
// share.coordinator.snapshot.update.records.per.snapshot updates, as
// share.Store.Prepare decides), waits until the high-watermark passes it,
// and applies it to the store. Errors: INVALID_REQUEST for a write to a
// state never initialized (as Kafka 4.1+), FENCED_LEADER_EPOCH,
// FENCED_STATE_EPOCH, errShareStateUnloaded, appendShareState's.
func (b *Broker) writeShareStateLocal(ctx context.Context, p int32, k share.StateKey, w share.Write) error {
	rec, err := b.share.store.Prepare(p, k, w, b.shareUpdatesPerSnapshot(), time.Now())
	if err != nil {
		return shareStoreError(err)
	}
	return b.appendShareRecord(ctx, p, rec)
}

// appendShareRecord appends rec to partition p of __share_group_state, led
// here, waits until it is committed and applies it to the store.
func (b *Broker) appendShareRecord(ctx context.Context, p int32, rec share.StateRecord) error {
	key, value := share.EncodeStateRecord(rec)
	if err := b.appendShareState(ctx, p, []record.Record{{Key: key, Value: value}}); err != nil {
		return err
	}
	b.share.store.Apply(p, rec)
	return nil
}

// shareStoreError maps the errors of share.Store to Kafka's codes.
func shareStoreError(err error) error {
	switch {
	case errors.Is(err, share.ErrNotLoaded):
		return errShareStateUnloaded
	case errors.Is(err, share.ErrUninitialized):
		return kerr.InvalidRequest
	case errors.Is(err, share.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch
	case errors.Is(err, share.ErrFencedStateEpoch):
		return kerr.FencedStateEpoch
	}
	return err
}

// readShareStateLocal answers a read of k's state from partition p of
// __share_group_state, led here, by a share-partition leader at
// leaderEpoch, as Kafka's ShareCoordinatorShard
// readStateAndMaybeUpdateLeaderEpoch: a newer leader epoch than the state's
// is written (and committed) before the answer, so that the writes of the
// leader it replaced are FENCED_LEADER_EPOCH from then on; an older one is
// FENCED_LEADER_EPOCH; a state never initialized is INVALID_REQUEST.
// leaderEpoch -1 neither checks nor records.
func (b *Broker) readShareStateLocal(ctx context.Context, p int32, k share.StateKey, leaderEpoch int32) (*share.State, error) {
	st, rec, err := b.share.store.Read(p, k, leaderEpoch, b.shareUpdatesPerSnapshot(), time.Now())
	if err != nil {
		return nil, shareStoreError(err)
	}
	if rec != nil {
		if err := b.appendShareRecord(ctx, p, *rec); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// shareUpdatesPerSnapshot is share.coordinator.snapshot.update.records.per.snapshot.
// Zero writes a snapshot every time.
func (b *Broker) shareUpdatesPerSnapshot() int {
	if _, set := b.node.Set["share.coordinator.snapshot.update.records.per.snapshot"]; set {
		return int(b.node.ShareCoordinatorSnapshotUpdateRecordsPerSnapshot)
	}
	return share.DefaultUpdatesPerSnapshot
}

// shareStateCoordinatorError checks that k's partition of __share_group_state is
// led and loaded here: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; its
// partition when nil.
func (b *Broker) shareStateCoordinatorError(k share.StateKey) (int32, error) {
	sp, leader, ok := b.shareStateLeader(k)
	switch {
	case !ok || leader != b.node.NodeID:
		return sp, kerr.NotCoordinator
	case !b.share.store.Loaded(sp):
		return sp, kerr.CoordinatorLoadInProgress
	}
	return sp, nil
}

// ReadShareGroupState (API 84, KIP-932, inter-broker): the state of
// share-partitions for their leader, whose leader epoch is recorded
// (readShareStateLocal). Errors per partition: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST (a negative partition, a
// state never initialized), FENCED_LEADER_EPOCH.
func handleReadShareGroupState(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			k := share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			sp, err := b.shareStateCoordinatorError(k)
			var st *share.State
			switch {
			case p.Partition < 0:
				err = kerr.InvalidRequest
			case err == nil:
				st, err = b.readShareStateLocal(ctx, sp, k, p.LeaderEpoch)
				if errors.Is(err, errShareStateUnloaded) {
					err = kerr.CoordinatorLoadInProgress
				}
			}
			rp.ErrorCode = errCode(err)
			if err == nil {
				rp.StateEpoch, rp.StartOffset = st.StateEpoch, st.StartOffset
				for _, sb := range st.Batches {
					r := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
					r.FirstOffset, r.LastOffset, r.DeliveryState, r.DeliveryCount = sb.First, sb.Last, share.DeliveryState(sb.State), sb.DeliveryCount
					rp.StateBatches = append(rp.StateBatches, r)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// WriteShareGroupState (API 85, KIP-932, inter-broker): merges state
// batches into share-partitions' states (a ShareUpdate record, or a
// ShareSnapshot every
// share.coordinator.snapshot.update.records.per.snapshot updates). Errors
// per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_REQUEST (a negative partition, a start offset below -1, an
// unknown delivery state, a reversed batch, or a state never initialized:
// Kafka 4.1+ refuses it instead of creating one), FENCED_LEADER_EPOCH,
// FENCED_STATE_EPOCH.
func handleWriteShareGroupState(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			w := share.Write{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
			var err error
			if p.Partition < 0 || p.StartOffset < -1 {
				err = kerr.InvalidRequest
			}
			for _, sb := range p.StateBatches {
				s, ok := share.RecordStateOf(sb.DeliveryState)
				if !ok || sb.LastOffset < sb.FirstOffset {
					err = kerr.InvalidRequest
					break
				}
				w.Batches = append(w.Batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: s, DeliveryCount: sb.DeliveryCount})
			}
			if err == nil {
				err = b.coordinateShareWrite(ctx, k, w)
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// coordinateShareWrite applies w to k at this broker, its share
// coordinator: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, then
// writeShareStateLocal's errors.
func (b *Broker) coordinateShareWrite(ctx context.Context, k share.StateKey, w share.Write) error {
	sp, err := b.shareStateCoordinatorError(k)
	if err == nil {
		err = b.writeShareStateLocal(ctx, sp, k, w)
	}
	if errors.Is(err, errShareStateUnloaded) {
		return kerr.CoordinatorLoadInProgress
	}
	return err
}

// InitializeShareGroupState (API 83, KIP-932, inter-broker): starts the
// state of share-partitions afresh at a start offset with a new state
// epoch (a ShareSnapshot without state batches). Errors per partition:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH for an
// epoch older than the state's, INVALID_REQUEST for a negative partition
// or a start offset below -1.
func handleInitializeShareGroupState(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			err := error(kerr.InvalidRequest)
			if p.Partition >= 0 && p.StartOffset >= -1 {
				err = b.coordinateShareWrite(ctx, k, share.Write{Initialize: true, StateEpoch: p.StateEpoch, LeaderEpoch: -1, StartOffset: p.StartOffset})
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deleteShareGroupState removes the share-partition state of a deleted
// share group everywhere, so that a group created again under its name
// starts afresh: a DeleteShareGroupState naming the whole group (one topic
// of id zero without partitions: beyond Kafka, whose group coordinator
// names the partitions it initialized, from its
// ShareGroupStatePartitionMetadata records; ours does not keep them) is
// applied here and sent to every other registered broker: each writes
// tombstones for the group's keys in the partitions of __share_group_state
// it leads (found in its store's index by group: the cost is the group's
// share-partitions, not the cluster's partitions), and forgets the group's
// share-partitions it keeps in memory. A broker that cannot be reached is
// logged; its in-memory share-partitions stay until its next leadership
// change. The error is the first tombstone write that failed here.
//
// With topics given, only their partitions' state is deleted (and every
// in-memory share-partition of the group is forgotten, to be loaded again
// from __share_group_state): DeleteShareGroupOffsets, and with none
// AlterShareGroupOffsets after writing the new states.
func (b *Broker) deleteShareGroupState(ctx context.Context, groupID string, topics []*metadata.Topic) error {
	im := b.image()
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = groupID
	if topics == nil {
		req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{kmsg.NewDeleteShareGroupStateRequestTopic()}
	}
	for _, t := range topics {
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID = t.ID
		for p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			rp.Partition = int32(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	for _, br := range im.Brokers() {
		if br.ID == b.node.NodeID || br.Fenced {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		kresp, err := b.requestBroker(rctx, br.ID, req)
		cancel()
		if err == nil {
			for _, t := range kresp.(*kmsg.DeleteShareGroupStateResponse).Topics {
				for _, p := range t.Partitions {
					if err == nil {
						err = kerr.ErrorForCode(p.ErrorCode)
					}
				}
			}
		}
		if err != nil {
			b.logger.Warn("deleting share group state on another broker", "group", clip.String(groupID), "broker", br.ID, "err", err)
		}
	}
	resp := b.applyDeleteShareGroupState(ctx, req)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyDeleteShareGroupState forgets the share-partitions of the request's
// group kept here and writes a tombstone for each of its keys with a state
// in a partition of __share_group_state led here, one batch per partition;
// keys of partitions led elsewhere are left to their leaders (0 in the
// response). A request naming the whole group (wholeGroup: Samsa's brokers
// deleting a group, deleteShareGroupState) deletes every key of the group
// held here, and the response lists them.
func (b *Broker) applyDeleteShareGroupState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) *kmsg.DeleteShareGroupStateResponse {
	b.share.coord.DropGroupPartitions(req.GroupID)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	byPart := map[int32][]share.StateKey{}
	if wholeGroup(req) {
		for sp, keys := range b.share.store.GroupKeys(req.GroupID) {
			if rp := b.replicas.Get(share.StateTopic, sp); rp != nil && rp.IsLeader() {
				byPart[sp] = keys
			}
		}
		req = deleteRequestOf(req.GroupID, byPart)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			sp, leader, ok := b.shareStateLeader(k)
			if ok && leader == b.node.NodeID && b.share.store.Has(sp, k) && !slices.Contains(byPart[sp], k) {
				byPart[sp] = append(byPart[sp], k)
			}
		}
	}
	failed := map[share.StateKey]error{}
	for sp, keys := range byPart {
		if err := b.writeShareTombstones(ctx, sp, keys); err != nil {
			for _, k := range keys {
				failed[k] = err
			}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = errCode(failed[share.StateKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// writeShareTombstones appends tombstones for keys to partition p of
// __share_group_state, led here, waits until they are committed and
// removes the keys from the store.
func (b *Broker) writeShareTombstones(ctx context.Context, p int32, keys []share.StateKey) error {
	recs := make([]record.Record, len(keys))
	for i, k := range keys {
		key, _ := share.EncodeStateRecord(share.StateRecord{Key: k, Kind: share.KindSnapshot})
		recs[i] = record.Record{OffsetDelta: int32(i), Key: key}
	}
	if err := b.appendShareState(ctx, p, recs); err != nil {
		return err
	}
	for _, k := range keys {
		b.share.store.Apply(p, share.StateRecord{Key: k, Kind: share.KindSnapshot})
	}
	return nil
}

// appendShareState appends recs to partition p of __share_group_state, led
// here, in one batch, and waits until the high-watermark passes them (30 s
// at most, as long as the coordinators wait for their writes); a lost
// leadership is NOT_COORDINATOR to the share-partition's leader, which
// finds the new one.
func (b *Broker) appendShareState(ctx context.Context, p int32, recs []record.Record) error {
	rp := b.replicas.Get(share.StateTopic, p)
	if rp == nil || !rp.IsLeader() {
		return kerr.NotCoordinator
	}
	batch, err := internalBatch(recs)
	if err != nil {
		return err
	}
	res, err := rp.AppendInternal(batch)
	if err != nil {
		return storeError(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = b.waitCommitted(wctx, rp, res.LastOffset, share.StateTopic, p)
	cancel()
	if errors.Is(err, kerr.NotLeaderForPartition) {
		return kerr.NotCoordinator
	}
	return err
}

// internalBatch builds a batch of recs as the broker writes its own
// records: no producer id, timestamped now.
func internalBatch(recs []record.Record) ([]byte, error) {
	return record.Build(record.Spec{
		BaseTimestamp: time.Now().UnixMilli(),
		ProducerID:    record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch,
		BaseSequence:  record.NoSequence,
	}, recs)
}

// wholeGroup reports whether a DeleteShareGroupState names every
// share-partition of its group: one topic of id zero (no topic has it)
// without partitions, as Samsa's brokers send when a group is deleted. A
// Kafka broker would find no state under it.
func wholeGroup(req *kmsg.DeleteShareGroupStateRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].TopicID == [16]byte{} && len(req.Topics[0].Partitions) == 0
}

// deleteRequestOf is the DeleteShareGroupState request naming the keys of
// groupID in byPart, topics and partitions sorted.
func deleteRequestOf(groupID string, byPart map[int32][]share.StateKey) *kmsg.DeleteShareGroupStateRequest {
	byTopic := map[[16]byte][]int32{}
	for _, keys := range byPart {
		for _, k := range keys {
			byTopic[k.TopicID] = append(byTopic[k.TopicID], k.Partition)
		}
	}
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = groupID
	for _, id := range slices.SortedFunc(maps.Keys(byTopic), func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID = id
		ps := byTopic[id]
		slices.Sort(ps)
		for _, p := range ps {
			rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func handleDeleteShareGroupState(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return b.applyDeleteShareGroupState(ctx, kreq.(*kmsg.DeleteShareGroupStateRequest)), nil
}
