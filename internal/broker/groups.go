package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
)

// This file wires the group coordinator (internal/coordinator/group) into
// the broker: its Store over the partitions of __consumer_offsets this
// broker leads, the creation of that topic on first use, and the loading
// and unloading of its partitions as leadership changes in the metadata
// image. The handlers of the group APIs are in their own files.

// offsetsTopic is Kafka's internal topic of committed offsets and group
// metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicConfigs are the topic configs Kafka creates __consumer_offsets
// with (offsets.topic.segment.bytes is 100 MiB by default).
var offsetsTopicConfigs = map[string]string{
	"cleanup.policy":   "compact",
	"compression.type": "producer",
	"segment.bytes":    "104857600",
}

// groups is the broker's side of the group coordinator.
type groups struct {
	coord *group.Coordinator
	loads *coordinatorLoads // of __consumer_offsets
}

// startGroups creates the coordinator; called by New before the first
// image is applied.
func (b *Broker) startGroups() {
	n := b.node
	cfg := group.Config{
		OffsetsTopicNumPartitions: n.OffsetsTopicNumPartitions,
		InitialRebalanceDelay:     n.GroupInitialRebalanceDelay,
		MinSessionTimeout:         n.GroupMinSessionTimeout,
		MaxSessionTimeout:         n.GroupMaxSessionTimeout,
		MaxSize:                   n.GroupMaxSize,
		OffsetsRetention:          n.OffsetsRetention,

		ConsumerSessionTimeout:       n.GroupConsumerSessionTimeout,
		ConsumerMinSessionTimeout:    n.GroupConsumerMinSessionTimeout,
		ConsumerMaxSessionTimeout:    n.GroupConsumerMaxSessionTimeout,
		ConsumerHeartbeatInterval:    n.GroupConsumerHeartbeatInterval,
		ConsumerMinHeartbeatInterval: n.GroupConsumerMinHeartbeatInterval,
		ConsumerMaxHeartbeatInterval: n.GroupConsumerMaxHeartbeatInterval,
		ConsumerMaxSize:              n.GroupConsumerMaxSize,
		ConsumerAssignors:            n.GroupConsumerAssignors,
		ConsumerMigrationPolicy:      n.GroupConsumerMigrationPolicy,
		Overrides: func(id string) group.Overrides {
			gc := b.GroupConfig(id)
			return group.Overrides{ConsumerSessionTimeout: gc.ConsumerSessionTimeout, ConsumerHeartbeatInterval: gc.ConsumerHeartbeatInterval}
		},
		ShareGroup: func(id string) bool { return b.share != nil && b.share.coord.Holds(id) },
		ShareLoaded: func(p int32, recs []group.ShareRecord) {
			if b.share != nil {
				b.share.coord.LoadPartition(p, recs)
			}
		},
	}
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = -1 // Kafka's 0: no delay (zero means the default in group.Config)
	}
	if err := cfg.Validate(); err != nil {
		b.logger.Error("group coordinator config", "err", err)
	}
	coord := group.New(cfg, offsetsStore{b}, b.logger.With("component", "group-coordinator"))
	coord.SetTopics(imageTopics{b})
	b.groups = &groups{coord: coord, loads: newCoordinatorLoads(offsetsTopic, coord.NumPartitions(),
		func(ctx context.Context, p, _ int32) error { return coord.LoadPartition(ctx, p) },
		func(p int32) {
			coord.UnloadPartition(p)
			b.unloadShareGroups(p)
		}, group.ErrPartitionUnloaded)}
}

// closeGroups stops the coordinator: parked group requests are answered
// and loads in flight canceled.
func (b *Broker) closeGroups() {
	g := b.groups
	if g == nil {
		return
	}
	g.loads.cancel()
	g.coord.Close()
	g.loads.wg.Wait()
}

// applyGroupImage loads the partitions of __consumer_offsets this broker
// became the leader of (in the background) and unloads those it no longer
// leads. Called from applyImage, with the controller's lock held: it never
// blocks on the log.
func (b *Broker) applyGroupImage(next *metadata.Image) {
	g := b.groups
	if g == nil {
		return
	}
	if t := next.Topic(offsetsTopic); t != nil && int32(len(t.Partitions)) != g.coord.NumPartitions() {
		b.logger.Warn("__consumer_offsets partitions differ from offsets.topic.num.partitions; groups hash by the configured count",
			"partitions", len(t.Partitions), "offsets.topic.num.partitions", g.coord.NumPartitions())
	}
	g.loads.apply(b, next)
}

// ensureOffsetsTopic returns __consumer_offsets, creating it with Kafka's
// configs for it when missing (offsets.topic.num.partitions partitions,
// offsets.topic.replication.factor replicas capped by the brokers
// registered).
func (b *Broker) ensureOffsetsTopic(ctx context.Context) (*metadata.Topic, error) {
	return b.groups.loads.ensureTopic(ctx, b, b.node.OffsetsTopicNumPartitions, b.node.OffsetsTopicReplicationFactor,
		func(int16) map[string]string { return maps.Clone(offsetsTopicConfigs) })
}

// clientIDKey carries the request header's client.id in the context of a
// request, for the handlers that need it (JoinGroup).
type clientIDKey struct{}

func withClientID(ctx context.Context, id *string) context.Context {
	if id == nil {
		return ctx
	}
	return context.WithValue(ctx, clientIDKey{}, *id)
}

func clientIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}

// clientHost formats a connection's remote address as Kafka shows client
// hosts: "/" and the IP.
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}

// offsetsStore is the group coordinator's Store: the partitions of
// __consumer_offsets this broker leads.
type offsetsStore struct{ b *Broker }

func (s offsetsStore) partition(p int32) (*replica.Partition, error) {
	rp := s.b.replicas.Get(offsetsTopic, p)
	if rp == nil {
		return nil, kerr.NotLeaderForPartition
	}
	return rp, nil
}

// Append writes recs as one uncompressed batch (offsets.topic.compression.codec
// defaults to none) and waits until the high-watermark passes it.
func (s offsetsStore) Append(ctx context.Context, p int32, recs []group.Record) error {
	rp, err := s.partition(p)
	if err != nil {
		return err
	}
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		rs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	spec := record.Spec{
		BaseTimestamp: time.Now().UnixMilli(),
		ProducerID:    record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch,
		BaseSequence:  record.NoSequence,
	}
	if tx := recs[0].Txn; tx != nil {
		// TxnOffsetCommit: a transactional batch of the producer, whose
		// epoch the log checks (a fenced producer gets
		// INVALID_PRODUCER_EPOCH).
		spec.Transactional, spec.ProducerID, spec.ProducerEpoch = true, tx.ProducerID, tx.ProducerEpoch
	}
	batch, err := record.Build(spec, rs)
	if err != nil {
		return err
	}
	if max := rp.Config().MaxMessageBytes; max > 0 && len(batch) > int(max) {
		return kerr.MessageTooLarge
	}
	var res storage.AppendResult
	if tx := recs[0].Txn; tx != nil {
		res, err = rp.AppendInternalTxn(batch, s.b.takeOffsetsGuard(p, tx.ProducerID))
	} else {
		res, err = rp.AppendInternal(batch)
	}
	if err != nil {
		return storeError(err)
	}
	// Committed once the high-watermark passed the batch (at once on a
	// single node; after the followers fetched it otherwise).
	return s.b.waitCommitted(ctx, rp, res.LastOffset, offsetsTopic, p)
}

// Load reads the partition from its log start offset to its log end
// offset (Kafka's GroupMetadataManager loads to the log end: a new
// leader's high-watermark may lag records the previous leader committed,
// and this leader never truncates them), with readPartition. Records of
// transactional batches (TxnOffsetCommit) come with their producer, and
// transaction markers as records with Txn.Marker; other control batches
// are skipped.
func (s offsetsStore) Load(ctx context.Context, p int32, fn func(group.Record) error) error {
	rp, err := s.partition(p)
	if err != nil {
		return err
	}
	start := rp.LogStartOffset()
	return readPartition(ctx, rp, func(batch []byte, h record.Header) error {
		var tx *group.TxnInfo
		if h.IsTransactional() {
			tx = &group.TxnInfo{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
		}
		return record.Records(batch, func(r record.Record) error {
			if r.Offset < start {
				return nil
			}
			if h.IsControl() {
				// Transaction markers end TxnOffsetCommit's offsets.
				m, err := record.ParseEndTxnMarker(r.Key, r.Value)
				if err != nil || tx == nil {
					return nil
				}
				return fn(group.Record{Txn: &group.TxnInfo{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Marker: true, Commit: m.Commit}})
			}
			return fn(group.Record{Key: r.Key, Value: r.Value, Txn: tx})
		})
	})
}

// storeError maps a replica or storage error to the Kafka error the
// coordinator expects from its Store.
func storeError(err error) error {
	switch {
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, storage.ErrClosed):
		return kerr.NotLeaderForPartition
	case errors.Is(err, replica.ErrMessageTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, replica.ErrRecordListLarge):
		return kerr.RecordListTooLarge
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, storage.ErrInvalidTxnState):
		return kerr.InvalidTxnState
	}
	return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
}

// imageTopics is the group coordinator's view of the topics: the current
// metadata image.
type imageTopics struct{ b *Broker }

func (t imageTopics) Topic(name string) ([16]byte, int32, bool) {
	tm := t.b.image().Topic(name)
	if tm == nil {
		return [16]byte{}, 0, false
	}
	return tm.ID, int32(len(tm.Partitions)), true
}

func (t imageTopics) TopicName(id [16]byte) (string, bool) {
	tm := t.b.image().TopicByID(id)
	if tm == nil {
		return "", false
	}
	return tm.Name, true
}

func (t imageTopics) Version() int64 { return t.b.image().Offset }

func (t imageTopics) Names() []string { return t.b.image().TopicNames() }

func (t imageTopics) Racks(id [16]byte, p int32) []string {
	im := t.b.image()
	tm := im.TopicByID(id)
	if tm == nil || p < 0 || int(p) >= len(tm.Partitions) {
		return nil
	}
	var racks []string
	for _, r := range tm.Partitions[p].Replicas {
		if b := im.Broker(r); b != nil && b.Rack != nil && !slices.Contains(racks, *b.Rack) {
			racks = append(racks, *b.Rack)
		}
	}
	return racks
}
