package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/dlq"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
)

// This file wires share groups (KIP-932, internal/coordinator/share) into
// the broker: membership on the broker FindCoordinator names (the leader of
// the group's __consumer_offsets partition), share-partition state on each
// partition's leader, reads of the log for ShareFetch, and the dead-letter
// topic (KIP-1191's errors.deadletterqueue.topic.name group config) written
// when a record is rejected or runs out of deliveries. The handlers are in
// sharegroupheartbeat.go, sharegroupdescribe.go, sharefetch.go and
// shareacknowledge.go.

// shareGroups is the broker's side of share groups.
type shareGroups struct {
	coord *share.Coordinator
	store *share.Store      // the share coordinator's partitions of __share_group_state (sharestate.go)
	loads *coordinatorLoads // of __share_group_state

	mu       sync.Mutex                        // guards the fields below
	expiries map[*share.Partition]*expiryTimer // the armed lock-expiry timer of each share-partition with locks
	stopped  bool                              // the broker is closing: no timer is armed or starts its work
}

// expiryTimer is the lock-expiry timer of one share-partition, armed for
// its earliest lock (share.Partition.NextExpiry): one timer per
// share-partition holding locks, re-armed after each expiry, so the cost
// is proportional to the expiries, not to the records.
type expiryTimer struct {
	at    time.Time
	timer *time.Timer
}

func (b *Broker) startShareGroups() {
	s := &shareGroups{
		coord:    share.New(shareTopics{b}, b.shareSettings),
		store:    share.NewStore(),
		expiries: map[*share.Partition]*expiryTimer{},
	}
	s.loads = newCoordinatorLoads(share.StateTopic, share.StateTopicPartitions, b.loadShareState, s.store.Unload, errShareStateUnloaded)
	s.coord.OnMemberLeave(b.releaseShareMember)
	s.coord.SetJournal(shareJournal{b})
	b.share = s
}

// releaseShareMember releases the records a member that left its group
// (or was removed when its session timed out) holds in the share-partitions
// this broker keeps, as Kafka's share-partition leaders do when the group
// coordinator reports a member gone. Share-partitions led by other brokers
// release the member's records when its connection to them closes or its
// locks expire.
func (b *Broker) releaseShareMember(groupID, member string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // a stopping broker gives up
		defer cancel()
		select {
		case <-b.stop:
		case <-ctx.Done():
		}
	}()
	im := b.image()
	var tps []share.TopicPartition
	for _, ref := range b.share.coord.Partitions(groupID) {
		if t := im.Topic(ref.Topic); t != nil {
			tps = append(tps, share.TopicPartition{TopicID: t.ID, Partition: ref.Partition})
		}
	}
	if len(tps) > 0 {
		b.releaseShareSession(ctx, groupID, member, tps)
	}
}

// shareSettings are the configs in effect for a share group: the
// group.share.* properties with the group's share.* configs (GROUP config
// resources, in the metadata image).
func (b *Broker) shareSettings(groupID string) share.Settings {
	g := b.GroupConfig(groupID)
	return share.Settings{
		LockDuration:      g.ShareRecordLockDuration,
		DeliveryLimit:     int16(g.ShareDeliveryCountLimit),
		SessionTimeout:    g.ShareSessionTimeout,
		HeartbeatInterval: g.ShareHeartbeatInterval,
		MaxLocks:          int(b.node.GroupSharePartitionMaxRecordLocks),
	}
}

// closeShareGroups cancels the loads of __share_group_state in flight.
func (b *Broker) closeShareGroups() {
	if b.share == nil {
		return
	}
	b.share.loads.cancel()
	b.share.loads.wg.Wait()
}

// stopShareTimers stops the lock-expiry timers; called by Close before it
// closes b.stop and waits for b.wg, which the timers' work joins.
func (b *Broker) stopShareTimers() {
	if b.share == nil {
		return
	}
	s := b.share
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for sp, e := range s.expiries {
		e.timer.Stop()
		delete(s.expiries, sp)
	}
}

// armShareExpiry arms the lock-expiry timer of sp, the share-partition of
// group on t/p, for its next lock expiry when no timer is armed for that
// time or earlier.
func (b *Broker) armShareExpiry(groupID string, t *metadata.Topic, p int32, sp *share.Partition) {
	next := sp.NextExpiry()
	if next.IsZero() {
		return
	}
	s := b.share
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.expiries[sp]
	if s.stopped || e != nil && !e.at.After(next) {
		return
	}
	if e != nil {
		e.timer.Stop() // a callback already running sees it was replaced
	}
	e = &expiryTimer{at: next}
	name, id := t.Name, t.ID
	e.timer = time.AfterFunc(time.Until(next), func() { b.expireShareLocks(groupID, name, id, p, sp, e) })
	s.expiries[sp] = e
}

// expireShareLocks is the lock-expiry timer e of sp firing, as Kafka's
// acquisition lock timeout task: the expired records become available
// again (or are archived at group.share.delivery.count.limit), the
// ShareFetch requests waiting on sp are woken, and the records' new states
// are written to __share_group_state (not undone when the write fails, as
// in Kafka: the next write carries them); the records archived go to the
// dead-letter topic once written. The timer is armed again for the next
// expiry while this broker leads the partition and keeps sp.
func (b *Broker) expireShareLocks(groupID, topic string, topicID [16]byte, p int32, sp *share.Partition, e *expiryTimer) {
	s := b.share
	s.mu.Lock()
	if s.stopped || s.expiries[sp] != e {
		s.mu.Unlock()
		return
	}
	delete(s.expiries, sp)
	b.wg.Add(1) // before stopShareTimers returns, so before Close waits
	s.mu.Unlock()
	defer b.wg.Done()

	rp := b.replicas.Get(topic, p)
	if rp == nil || !rp.IsLeader() || b.share.coord.Partition(groupID, topic, p, false) != sp || sp.LoadedAt() != rp.LeaderEpoch() {
		return // leadership moved or the group's state was dropped
	}
	sp.LockPersist()
	if sp.Expire(time.Now()) > 0 {
		b.writeShareExpiriesLocked(groupID, topic, topicID, p, rp, sp)
	}
	sp.UnlockPersist()
	if t := b.image().Topic(topic); t != nil && t.ID == topicID {
		b.armShareExpiry(groupID, t, p, sp)
	}
}

// writeShareExpiriesLocked writes the lock expiries sp applied (by its
// timer, a fetch's Acquire or an Acknowledge) to __share_group_state, as
// Kafka's SharePartition writes the records an acquisition lock timeout
// releases, so that their delivery counts and archivals survive a
// failover, and sends the records archived to the dead-letter topic once
// written (a failed write leaves them to the next one). The caller holds
// sp's persist lock. It gives up after 10 s, or when the broker stops.
func (b *Broker) writeShareExpiriesLocked(groupID, topic string, topicID [16]byte, p int32, rp *replica.Partition, sp *share.Partition) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // a stopping broker gives up
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	dead, err := b.writeShareChange(ctx, groupID, topicID, p, rp.LeaderEpoch(), sp, nil)
	if err != nil {
		b.logger.Warn("writing share-partition state after a lock expiry", "group", clip.String(groupID), "topic", topic, "partition", p, "err", err)
	}
	b.deadLetters(groupID, topic, p, rp, dead)
}

// shareTopics resolves subscribed topics for the share assignor from the
// metadata image.
type shareTopics struct{ b *Broker }

func (t shareTopics) Lookup(name string) ([16]byte, int32, bool) {
	tp := t.b.image().Topic(name)
	if tp == nil {
		return [16]byte{}, 0, false
	}
	return tp.ID, int32(len(tp.Partitions)), true
}

// sharePartition returns the leader's replica of topic/partition and the
// group's share-partition for it, loaded from __share_group_state when used
// first at this leader epoch; without durable state it starts as
// share.auto.offset.reset says (latest, the default: the high-watermark, or
// the last stable offset under read_committed; earliest: the log start
// offset).
func (b *Broker) sharePartition(ctx context.Context, groupID string, t *metadata.Topic, p int32) (*replica.Partition, *share.Partition, error) {
	rp := b.replicas.Get(t.Name, p)
	if rp == nil || !rp.IsLeader() {
		return nil, nil, kerr.NotLeaderForPartition
	}
	sp := b.share.coord.Partition(groupID, t.Name, p, true)
	if epoch := rp.LeaderEpoch(); !sp.Started() || sp.LoadedAt() != epoch {
		sp.LockPersist()
		if !sp.Started() || sp.LoadedAt() != epoch {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			st, err := b.loadSharePartition(ctx, groupID, t.ID, p, epoch, rp)
			cancel()
			if err != nil {
				sp.UnlockPersist()
				return nil, nil, err
			}
			sp.Restore(st.StartOffset, st.Batches)
			sp.SetStateEpoch(st.StateEpoch)
			sp.SetLoadedAt(epoch)
		}
		sp.UnlockPersist()
	}
	sp.AdvanceStart(rp.LogStartOffset())
	return rp, sp, nil
}

// loadSharePartition reads the durable state of group/topic/partition for
// its leader at leaderEpoch (recorded by the share coordinator); a state
// never initialized is initialized first where share.auto.offset.reset
// says (InitializeShareGroupState, state epoch 0; Kafka's group
// coordinator does it when it assigns the partition), creating
// __share_group_state when it is missing, and then read.
func (b *Broker) loadSharePartition(ctx context.Context, groupID string, topicID [16]byte, p, leaderEpoch int32, rp *replica.Partition) (*share.State, error) {
	k := share.StateKey{Group: groupID, TopicID: topicID, Partition: p}
	if _, _, ok := b.shareStateLeader(k); !ok {
		if _, err := b.share.loads.ensureTopic(ctx, b, share.StateTopicPartitions, share.StateTopicReplicationFactor, shareStateTopicConfigs); err != nil {
			return nil, err
		}
	}
	st, err := b.readShareState(ctx, k, leaderEpoch)
	if err != nil || st != nil {
		return st, err
	}
	init := share.Write{Initialize: true, StateEpoch: 0, LeaderEpoch: -1, StartOffset: b.shareResetOffset(groupID, rp)}
	if err := b.writeShareState(ctx, k, init); err != nil {
		return nil, err
	}
	st, err = b.readShareState(ctx, k, leaderEpoch)
	if err == nil && st == nil {
		err = kerr.CoordinatorLoadInProgress // deleted meanwhile: try again
	}
	return st, err
}

// shareResetOffset is where a share-partition without durable state
// starts, as share.auto.offset.reset says: latest (the default) at the
// high-watermark, or the last stable offset under read_committed; earliest
// at the log start offset; by_duration at the first record at or after now
// minus the duration (the latest offset when none is).
func (b *Broker) shareResetOffset(groupID string, rp *replica.Partition) int64 {
	g := b.GroupConfig(groupID)
	latest := rp.HighWatermark()
	if g.ShareReadCommitted {
		latest = rp.LastStableOffset()
	}
	switch g.ShareAutoOffsetReset {
	case "earliest":
		return rp.LogStartOffset()
	case "by_duration":
		off, _, ok, err := rp.Log().OffsetForTimestamp(time.Now().Add(-g.ShareAutoOffsetResetBy).UnixMilli())
		if err == nil && ok && off < latest {
			return off
		}
	}
	return latest
}

// shareReadBytes bounds one read of the log for new records.
const shareReadBytes = 1 << 20

// acquire hands member up to maxRecords records of the share-partition and
// returns the acquired ranges with the batches holding them, at most about
// maxBytes (the first batch whole). Under read_committed it reads below the
// last stable offset and archives aborted transactions' records; control
// batches are archived everywhere.
func (b *Broker) acquire(ctx context.Context, groupID, member string, t *metadata.Topic, p int32, maxRecords int, strict bool, maxBytes int32) ([]share.AcquiredRange, []byte, error) {
	rp, sp, err := b.sharePartition(ctx, groupID, t, p)
	if err != nil {
		return nil, nil, err
	}
	committed := b.GroupConfig(groupID).ShareReadCommitted
	now := time.Now()
	var spans []share.Span
	if from, room := sp.ReadFrom(); room > 0 {
		limit := rp.HighWatermark()
		if committed {
			limit = rp.LastStableOffset()
		}
		if from < limit {
			res, err := rp.Read(from, shareReadBytes, false, true)
			if err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) {
				return nil, nil, err
			}
			var aborted []storage.AbortedTxn
			if committed && len(res.Records) > 0 {
				if aborted, err = rp.Log().AbortedTransactions(from, limit); err != nil {
					return nil, nil, err
				}
			}
			_, _ = record.Batches(res.Records, func(_ []byte, h record.Header) error {
				if h.BaseOffset >= limit {
					return errStopBatches
				}
				skip := h.IsControl()
				if committed && h.IsTransactional() && !skip {
					for _, a := range aborted {
						if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
							skip = true
						}
					}
				}
				spans = append(spans, share.Span{First: h.BaseOffset, Last: min(h.LastOffset(), limit-1), Skip: skip})
				return nil
			})
		}
	}
	got, expired := sp.Acquire(member, maxRecords, strict, spans, now)
	if expired > 0 {
		// Written before the records are handed out, as the timer would
		// have: their delivery counts survive a failover.
		sp.LockPersist()
		b.writeShareExpiriesLocked(groupID, t.Name, t.ID, p, rp, sp)
		sp.UnlockPersist()
	}
	b.armShareExpiry(groupID, t, p, sp)
	if len(got) == 0 {
		return nil, nil, nil
	}
	first, last := got[0].First, got[len(got)-1].Last
	var out []byte
	for off := first; off <= last; {
		res, err := rp.Read(off, shareReadBytes, false, true)
		if err != nil || len(res.Records) == 0 {
			break
		}
		next := off
		_, _ = record.Batches(res.Records, func(batch []byte, h record.Header) error {
			if h.BaseOffset > last || len(out) > 0 && len(out)+len(batch) > int(maxBytes) {
				next = last + 1
				return errStopBatches
			}
			out = append(out, batch...)
			next = h.NextOffset()
			return nil
		})
		if next <= off {
			break
		}
		off = next
	}
	return got, out, nil
}

var errStopBatches = errors.New("stop")

// shareAck applies acknowledgement batches of member to a share-partition
// as one change, writes what changed to __share_group_state, and only then
// commits it (the start offset moves, released records become available to
// other members, rejected ones go to the dead-letter topic) and answers;
// when the write fails the change is rolled back, as Kafka's SharePartition
// does: the records are the member's again, with their lock and delivery
// count, and the error is the answer. An invalid batch applies none
// (INVALID_REQUEST for a type or range that can never be valid,
// INVALID_RECORD_STATE for records the member does not hold), as in Kafka.
func (b *Broker) shareAck(ctx context.Context, groupID, member string, t *metadata.Topic, p int32, batches []ackBatch) error {
	rp := b.replicas.Get(t.Name, p)
	if rp == nil || !rp.IsLeader() {
		return kerr.NotLeaderForPartition
	}
	sp := b.share.coord.Partition(groupID, t.Name, p, false)
	if sp == nil || sp.LoadedAt() != rp.LeaderEpoch() {
		return kerr.InvalidRecordState
	}
	acks := make([]share.AckBatch, len(batches))
	for i, ab := range batches {
		types := make([]share.AckType, len(ab.types))
		for j, t := range ab.types {
			types[j] = share.AckType(t)
		}
		acks[i] = share.AckBatch{First: ab.first, Last: ab.last, Types: types}
	}
	sp.LockPersist()
	defer sp.UnlockPersist()
	c, err := sp.Acknowledge(member, acks, time.Now())
	switch {
	case errors.Is(err, share.ErrInvalidAck):
		return kerr.InvalidRequest
	case err != nil:
		if c.Expired() > 0 { // the lock expiries stand: write them
			b.writeShareExpiriesLocked(groupID, t.Name, t.ID, p, rp, sp)
		}
		return kerr.InvalidRecordState
	}
	dead, err := b.writeShareChange(ctx, groupID, t.ID, p, rp.LeaderEpoch(), sp, c)
	b.deadLetters(groupID, t.Name, p, rp, dead)
	b.armShareExpiry(groupID, t, p, sp)
	if err != nil {
		b.logger.Warn("writing share-partition state; acknowledgement rolled back", "group", clip.String(groupID), "topic", t.Name, "partition", p, "err", err)
		return shareWriteError(err)
	}
	return nil
}

// shareWriteError is the answer to an acknowledgement whose write failed,
// as Kafka's SharePartition maps the persister's errors: the coordinator
// moving is COORDINATOR_NOT_AVAILABLE, a newer leader's epoch
// NOT_LEADER_OR_FOLLOWER; a write not committed in time REQUEST_TIMED_OUT
// (waitCommitted's answer, and a deadline or cancellation on the way);
// other Kafka errors are given as they are (a storage error
// KAFKA_STORAGE_ERROR, where Kafka answers UNKNOWN_SERVER_ERROR), and
// any other error is UNKNOWN_SERVER_ERROR.
func shareWriteError(err error) error {
	var ke *kerr.Error
	switch {
	case retriableShareState(err):
		return kerr.CoordinatorNotAvailable
	case errors.Is(err, kerr.FencedLeaderEpoch):
		return kerr.NotLeaderForPartition
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	case errors.As(err, &ke):
		return ke
	}
	return kerr.UnknownServerError
}

// shareRequestDenied checks the group and member of a ShareFetch or
// ShareAcknowledge: INVALID_REQUEST without a group id or member id,
// GROUP_AUTHORIZATION_FAILED without READ on the group; 0 when allowed.
// Any other member id is taken as it is, of any length, as
// ShareGroupHeartbeat takes it and Kafka 4.2's broker does (KAFKA-19846:
// the member id is a string; 4.1 parsed it as a base64 UUID and failed
// others); membership is not checked here.
func (b *Broker) shareRequestDenied(c *server.Conn, groupID, member string) int16 {
	switch {
	case groupID == "" || member == "":
		return kerr.InvalidRequest.Code
	case !b.authorized(c, opRead, resGroup, groupID):
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// ackPartition checks and applies the acknowledgement batches of one
// partition of a ShareFetch or ShareAcknowledge: UNKNOWN_TOPIC_ID for a
// topic not in the image, TOPIC_AUTHORIZATION_FAILED without READ on it,
// INVALID_REQUEST for Renew outside a renew request (v2 IsRenewAck), then
// shareAck's errors.
func (b *Broker) ackPartition(ctx context.Context, c *server.Conn, groupID, member string, topic *metadata.Topic, p int32, batches []ackBatch, renew bool) error {
	switch {
	case topic == nil:
		return kerr.UnknownTopicID
	case !validAckBatches(batches, renew):
		return kerr.InvalidRequest
	case !b.authorized(c, opRead, resTopic, topic.Name):
		return kerr.TopicAuthorizationFailed
	case p < 0 || int(p) >= len(topic.Partitions):
		return kerr.UnknownTopicOrPartition
	}
	return b.shareAck(ctx, groupID, member, topic, p, batches)
}

// validAckBatches is Kafka's KafkaApis.validateAcknowledgementBatches for
// the batches of one partition: each batch's first offset at most its
// last, at or after the previous batch's last (which starts at -1, so no
// negative offsets), one type or one per offset, types Gap to Reject, and
// Renew only in a renew request (v2 IsRenewAck, KIP-1222). False is
// INVALID_REQUEST for the partition, before any batch applies.
func validAckBatches(batches []ackBatch, renew bool) bool {
	prev := int64(-1)
	for _, ab := range batches {
		n := int64(len(ab.types))
		if ab.first > ab.last || ab.first < prev || n == 0 || n > 1 && ab.last-ab.first != n-1 {
			return false
		}
		for _, t := range ab.types {
			if t < int8(share.AckGap) || t > int8(share.AckRenew) || !renew && share.AckType(t) == share.AckRenew {
				return false
			}
		}
		prev = ab.last
	}
	return true
}

// ackBatch is one acknowledgement batch of ShareFetch or ShareAcknowledge.
type ackBatch struct {
	first, last int64
	types       []int8
}

// releaseShareSession releases what member holds in the partitions tps
// (of its closed session, or kept here when it left its group).
func (b *Broker) releaseShareSession(ctx context.Context, groupID, member string, tps []share.TopicPartition) {
	im := b.image()
	now := time.Now()
	for _, tp := range tps {
		t := im.TopicByID(tp.TopicID)
		if t == nil {
			continue
		}
		sp := b.share.coord.Partition(groupID, t.Name, tp.Partition, false)
		if sp == nil {
			continue
		}
		// The released records are written as Available with their
		// delivery count, as Kafka writes a release; a failed write
		// rolls the release back (the records come back at their lock
		// expiry).
		rp := b.replicas.Get(t.Name, tp.Partition)
		if rp == nil || !rp.IsLeader() {
			continue
		}
		sp.LockPersist()
		if c, n := sp.ReleaseMember(member, now); n > 0 {
			dead, err := b.writeShareChange(ctx, groupID, t.ID, tp.Partition, rp.LeaderEpoch(), sp, c)
			b.deadLetters(groupID, t.Name, tp.Partition, rp, dead)
			if err != nil {
				b.logger.Warn("writing share-partition state; release rolled back", "group", clip.String(groupID), "topic", t.Name, "partition", tp.Partition, "err", err)
			}
		}
		sp.UnlockPersist()
	}
}

// deadLetters writes the records a share-partition gave up on to the
// group's dead-letter topic (errors.deadletterqueue.topic.name, KIP-1191),
// when one is set and exists, to its partition source%partitions: the
// record's key, value and headers (beyond Kafka, which writes only the
// context unless errors.deadletterqueue.copy.record.enable) and the
// __dlq.errors.* headers naming topic, partition, offset, group, delivery
// count and reason. Appended here when this broker leads that partition,
// else produced to its leader in the background (produceDeadLetters).
// Failures are logged: the records stay archived.
func (b *Broker) deadLetters(groupID, topic string, p int32, src *replica.Partition, dead []share.DeadLetter) {
	if len(dead) == 0 {
		return
	}
	name := b.GroupConfig(groupID).DeadLetterTopic
	if name == "" {
		return
	}
	log := b.logger.With("group", clip.String(groupID), "topic", topic, "partition", p, "dlq_topic", name)
	t := b.image().Topic(name)
	if t == nil || len(t.Partitions) == 0 {
		log.Warn("share group dead-letter topic does not exist; records archived without a copy", "records", len(dead))
		return
	}
	dp := p % int32(len(t.Partitions))
	recs := make([]record.Record, 0, len(dead))
	for i, d := range dead {
		r := record.Record{OffsetDelta: int32(i)}
		if orig, ok := readRecord(src, d.Offset); ok {
			r.Key, r.Value, r.Headers = orig.Key, orig.Value, orig.Headers
		}
		reason := dlq.ReasonDeliveryLimited
		if d.Rejected {
			reason = dlq.ReasonRejected
		}
		for _, h := range dlq.Headers(topic, p, d.Offset, groupID, int(d.DeliveryCount), reason) {
			r.Headers = append(r.Headers, record.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs = append(recs, r)
	}
	batch, err := internalBatch(recs)
	if err != nil {
		log.Warn("writing to the share group dead-letter topic", "err", err, "records", len(dead))
		return
	}
	if dst := b.replicas.Get(name, dp); dst != nil && dst.IsLeader() {
		if _, err := dst.AppendInternal(batch); err != nil {
			log.Warn("writing to the share group dead-letter topic", "err", err, "records", len(dead))
		}
		return
	}
	select {
	case <-b.stop:
		log.Warn("broker stopping; dead letters archived without a copy", "records", len(dead))
		return
	default:
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := b.produceDeadLetters(name, dp, batch); err != nil {
			log.Warn("producing to the share group dead-letter topic", "err", err, "records", len(dead))
		}
	}()
}

// deadLetterTimeout bounds the attempts to produce one batch of dead
// letters to another broker, through leader moves.
const deadLetterTimeout = 30 * time.Second

// produceDeadLetters produces batch to partition dp of the dead-letter
// topic name through its leader (a Produce v9 with acks=1 over the
// inter-broker connection, as durable as the local append), appending it
// here if leadership came here, retrying retriable errors and a missing
// leader every 100 ms for up to deadLetterTimeout or until the broker
// stops.
func (b *Broker) produceDeadLetters(name string, dp int32, batch []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), deadLetterTimeout)
	defer cancel()
	for {
		err := b.produceDeadLettersOnce(ctx, name, dp, batch)
		if err == nil || !kerr.IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-b.stop:
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *Broker) produceDeadLettersOnce(ctx context.Context, name string, dp int32, batch []byte) error {
	t := b.image().Topic(name)
	if t == nil || int(dp) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition
	}
	leader := t.Partitions[dp].Leader
	switch {
	case leader < 0:
		return kerr.LeaderNotAvailable
	case leader == b.node.NodeID:
		dst := b.replicas.Get(name, dp)
		if dst == nil || !dst.IsLeader() {
			return kerr.NotLeaderForPartition
		}
		_, err := dst.AppendInternal(batch)
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = name
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = dp, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	kresp, err := b.requestBroker(rctx, leader, req)
	if err != nil {
		return kerr.NetworkException // retriable: the leader may be moving
	}
	resp := kresp.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// readRecord returns the record at offset of rp, copied.
func readRecord(rp *replica.Partition, offset int64) (record.Record, bool) {
	res, err := rp.Read(offset, 1, false, true)
	if err != nil {
		return record.Record{}, false
	}
	var out record.Record
	found := false
	_, _ = record.Batches(res.Records, func(batch []byte, h record.Header) error {
		return record.Records(batch, func(r record.Record) error {
			if r.Offset == offset {
				out = record.Record{Key: clone(r.Key), Value: clone(r.Value)}
				for _, h := range r.Headers {
					out.Headers = append(out.Headers, record.RecordHeader{Key: h.Key, Value: clone(h.Value)})
				}
				found = true
				return errStopBatches
			}
			return nil
		})
	})
	return out, found
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// waitShareFetch blocks until a record may be acquirable from rps (any
// byte the high-watermark passes, or a change of leadership), records of
// sps (the fetch's share-partitions, and only those) were released or their
// lock expired, a lock expires (next), d passed, or ctx is done.
func (b *Broker) waitShareFetch(ctx context.Context, rps []*replica.Partition, sps []*share.Partition, next time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	if !next.IsZero() {
		if until := time.Until(next); until < d {
			d = max(until, time.Millisecond)
		}
	}
	w := replica.NewWaiter()
	defer w.Close()
	for _, rp := range rps {
		rp.WatchBytes(w, false)
	}
	w.Arm(1)
	released := make(chan struct{}, 1)
	for _, sp := range sps {
		sp.Watch(released)
		defer sp.Unwatch(released)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.C():
	case <-released:
	case <-t.C:
	case <-ctx.Done():
	case <-b.stop:
	}
}
