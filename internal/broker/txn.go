package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/coordinator/txn"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// This file wires the transaction coordinator (internal/coordinator/txn)
// into the broker: its Store over the partitions of __transaction_state
// this broker leads, the creation of that topic on first use, the loading
// and unloading of its partitions as leadership changes, and the writing
// of transaction markers to partition leaders, here or on other brokers
// (WriteTxnMarkers). The handlers of the transaction APIs are in their own
// files.

// txnTopic is Kafka's internal topic of transaction metadata.
const txnTopic = "__transaction_state"

// markerWriteTimeout bounds one attempt at writing a marker (its
// replication included); the coordinator retries past it.
const markerWriteTimeout = 30 * time.Second

// txns is the broker's side of the transaction coordinator.
type txns struct {
	coord *txn.Coordinator
	loads *coordinatorLoads // of __transaction_state, loaded at their leader epoch (the coordinator epoch)

	clientsMu sync.Mutex // guards clients
	clients   map[string]*wire.Client

	// offsetsGuards are the KIP-890 guards of TxnOffsetCommits verified
	// with the coordinator and not yet appended to __consumer_offsets, by
	// partition and producer id (txnoffsetcommit.go).
	offsetsGuards sync.Map // offsetsGuardKey -> *replica.TxnVerification
}

// offsetsGuardKey names a TxnOffsetCommit in flight.
type offsetsGuardKey struct {
	partition  int32
	producerID int64
}

// takeOffsetsGuard returns and forgets the guard of producerID's
// TxnOffsetCommit to partition of __consumer_offsets, or nil.
func (b *Broker) takeOffsetsGuard(partition int32, producerID int64) *replica.TxnVerification {
	v, ok := b.txns.offsetsGuards.LoadAndDelete(offsetsGuardKey{partition, producerID})
	if !ok {
		return nil
	}
	return v.(*replica.TxnVerification)
}

// startTxns creates the coordinator; called by New.
func (b *Broker) startTxns() {
	n := b.node
	cfg := txn.Config{
		NumPartitions:             n.TransactionStateLogNumPartitions,
		MaxTimeout:                n.TransactionMaxTimeout,
		TransactionalIDExpiration: n.TransactionalIDExpiration,
		AbortTimedOutInterval:     n.TransactionAbortTimedOutInterval,
		RemoveExpiredIDInterval:   n.TransactionRemoveExpiredInterval,
		OffsetsTopicNumPartitions: n.OffsetsTopicNumPartitions,
	}
	if err := cfg.Validate(); err != nil {
		b.logger.Error("transaction coordinator config", "err", err)
	}
	coord := txn.New(cfg, txn.Deps{
		Store:         txnStore{b},
		Markers:       markerWriter{b},
		NewProducerID: b.nextProducerID,
		Logger:        b.logger.With("component", "txn-coordinator"),
	})
	b.txns = &txns{coord: coord, clients: map[string]*wire.Client{},
		loads: newCoordinatorLoads(txnTopic, coord.NumPartitions(), coord.LoadPartition, coord.UnloadPartition, txn.ErrPartitionUnloaded)}
}

// closeTxns stops the coordinator and closes the connections to other
// brokers.
func (b *Broker) closeTxns() {
	t := b.txns
	if t == nil {
		return
	}
	t.loads.cancel()
	t.coord.Close()
	t.loads.wg.Wait()
	t.clientsMu.Lock()
	for _, c := range t.clients {
		c.Close()
	}
	t.clients = map[string]*wire.Client{}
	t.clientsMu.Unlock()
}

// applyTxnImage loads the partitions of __transaction_state this broker
// became the leader of (in the background, at their leader epoch, the
// coordinator epoch) and unloads those it no longer leads. Called from
// applyImage; it never blocks on the log.
func (b *Broker) applyTxnImage(next *metadata.Image) {
	t := b.txns
	if t == nil {
		return
	}
	t.loads.apply(b, next)
}

// ensureTxnTopic returns __transaction_state, creating it with Kafka's
// configs when missing (transaction.state.log.num.partitions partitions,
// transaction.state.log.replication.factor replicas capped by the brokers
// registered, compacted, uncompressed).
func (b *Broker) ensureTxnTopic(ctx context.Context) (*metadata.Topic, error) {
	return b.txns.loads.ensureTopic(ctx, b, b.node.TransactionStateLogNumPartitions, b.node.TransactionStateLogReplicationFactor,
		func(rf int16) map[string]string {
			minISR := min(b.node.TransactionStateLogMinISR, int32(rf))
			return map[string]string{
				"cleanup.policy":                 "compact",
				"compression.type":               "uncompressed",
				"unclean.leader.election.enable": "false",
				"segment.bytes":                  strconv.FormatInt(b.node.TransactionStateLogSegmentBytes, 10),
				"min.insync.replicas":            strconv.Itoa(int(max(minISR, 1))),
			}
		})
}

// txnStore is the transaction coordinator's Store: the partitions of
// __transaction_state this broker leads.
type txnStore struct{ b *Broker }

// Append writes recs as one uncompressed batch and waits until the
// high-watermark passes it.
func (s txnStore) Append(ctx context.Context, p int32, recs []txn.Record) error {
	rp := s.b.replicas.Get(txnTopic, p)
	if rp == nil {
		return kerr.NotLeaderForPartition
	}
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		rs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	batch, err := record.Build(record.Spec{
		BaseTimestamp: time.Now().UnixMilli(),
		ProducerID:    record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch,
		BaseSequence:  record.NoSequence,
	}, rs)
	if err != nil {
		return err
	}
	if max := rp.Config().MaxMessageBytes; max > 0 && len(batch) > int(max) {
		return kerr.MessageTooLarge
	}
	res, err := rp.AppendInternal(batch)
	if err != nil {
		return storeError(err)
	}
	return s.b.waitCommitted(ctx, rp, res.LastOffset, txnTopic, p)
}

// waitCommitted waits in rp's purgatory until the high-watermark of rp
// passes offset (at once on a single node), or until rp is no longer the
// hosted partition or its leader (NOT_LEADER_OR_FOLLOWER); ctx's end gives
// REQUEST_TIMED_OUT. The group and transaction coordinators' writes wait
// here.
func (b *Broker) waitCommitted(ctx context.Context, rp *replica.Partition, offset int64, topic string, p int32) error {
	if rp.HighWatermark() > offset {
		return nil
	}
	w := replica.NewWaiter()
	defer w.Close()
	rp.WatchHighWatermark(w, offset)
	for rp.HighWatermark() <= offset {
		if b.replicas.Get(topic, p) != rp || !rp.IsLeader() {
			return kerr.NotLeaderForPartition
		}
		select {
		case <-w.C():
		case <-ctx.Done():
			return kerr.RequestTimedOut
		}
	}
	return nil
}

// Load reads the partition from its log start offset to its log end
// offset, as Kafka's TransactionStateManager.loadTransactionMetadata: a
// new leader's high-watermark may lag state changes the previous
// coordinator had committed (and answered), such as a partition added to
// a transaction, which a load to the high-watermark forgot.
func (s txnStore) Load(ctx context.Context, p int32, fn func(txn.Record) error) error {
	rp := s.b.replicas.Get(txnTopic, p)
	if rp == nil {
		return kerr.NotLeaderForPartition
	}
	return readPartition(ctx, rp, func(batch []byte, h record.Header) error {
		if h.IsControl() {
			return nil
		}
		return record.Records(batch, func(r record.Record) error {
			return fn(txn.Record{Key: r.Key, Value: r.Value})
		})
	})
}

// readPartition calls fn for each batch of rp from its log start offset to
// its log end offset as of the call, skipping the records below the start
// (fn sees whole batches: it filters by offset itself if it must).
func readPartition(ctx context.Context, rp *replica.Partition, fn func(batch []byte, h record.Header) error) error {
	off, end := rp.LogStartOffset(), rp.LogEndOffset()
	for off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := rp.Read(off, 1<<20, true, true)
		if errors.Is(err, storage.ErrOffsetOutOfRange) && off < res.LogStartOffset {
			off = res.LogStartOffset
			continue
		}
		if err != nil {
			return storeError(err)
		}
		if len(res.Records) == 0 {
			return fmt.Errorf("reading %s-%d at offset %d below the log end offset %d: no records", rp.Topic, rp.Partition, off, end)
		}
		next := off
		if _, err := record.Batches(res.Records, func(batch []byte, h record.Header) error {
			next = h.NextOffset()
			return fn(batch, h)
		}); err != nil {
			return fmt.Errorf("reading %s-%d at offset %d: %w", rp.Topic, rp.Partition, off, err)
		}
		if next <= off {
			return fmt.Errorf("reading %s-%d: no progress at offset %d", rp.Topic, rp.Partition, off)
		}
		off = next
	}
	return nil
}

// markerWriter writes the coordinator's markers: to partitions this
// broker leads directly, to the others with WriteTxnMarkers to their
// leader.
type markerWriter struct{ b *Broker }

// markerOutcome classifies the result of writing one marker.
type markerOutcome int

const (
	markerDone  markerOutcome = iota // written, or not needed
	markerRetry                      // try again later
	markerDrop                       // never: topic gone, or refused for good
)

func (w markerWriter) WriteMarkers(ctx context.Context, m txn.Marker) []txn.TopicPartition {
	b := w.b
	im := b.image()
	var retry []txn.TopicPartition
	remote := map[int32][]txn.TopicPartition{}
	for _, tp := range m.Partitions {
		t := im.Topic(tp.Topic)
		if t == nil || int(tp.Partition) >= len(t.Partitions) {
			b.logger.Warn("dropping transaction marker for a partition that no longer exists", "transactional_id", clip.String(m.TransactionalID), "topic", tp.Topic, "partition", tp.Partition)
			continue
		}
		leader := t.Partitions[tp.Partition].Leader
		switch {
		case leader < 0:
			retry = append(retry, tp)
		case leader == b.node.NodeID:
			code := b.writeMarker(ctx, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, tp.Topic, tp.Partition)
			switch classifyMarkerCode(code) {
			case markerRetry:
				retry = append(retry, tp)
			case markerDrop:
				b.logger.Warn("transaction marker refused", "transactional_id", clip.String(m.TransactionalID), "topic", tp.Topic, "partition", tp.Partition, "err", kerr.ErrorForCode(code))
			}
		default:
			remote[leader] = append(remote[leader], tp)
		}
	}
	for leader, tps := range remote {
		retry = append(retry, w.writeRemote(ctx, leader, m, tps)...)
	}
	return retry
}

// classifyMarkerCode says what a WriteTxnMarkers partition error means for
// the coordinator.
func classifyMarkerCode(code int16) markerOutcome {
	switch code {
	case 0:
		return markerDone
	case kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code,
		kerr.CorruptMessage.Code, kerr.InvalidRecord.Code:
		return markerDrop
	}
	return markerRetry
}

// writeRemote sends WriteTxnMarkers for tps to broker leader and returns
// the partitions to retry.
func (w markerWriter) writeRemote(ctx context.Context, leader int32, m txn.Marker, tps []txn.TopicPartition) []txn.TopicPartition {
	b := w.b
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			mk.Topics = append(mk.Topics, t)
		}
		mk.Topics[len(mk.Topics)-1].Partitions = append(mk.Topics[len(mk.Topics)-1].Partitions, tp.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{mk}
	ctx, cancel := context.WithTimeout(ctx, markerWriteTimeout)
	defer cancel()
	kresp, err := b.requestBroker(ctx, leader, req)
	if err != nil {
		b.logger.Debug("WriteTxnMarkers failed", "broker", leader, "err", err)
		return tps
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	done := map[txn.TopicPartition]bool{}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				tp := txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				switch classifyMarkerCode(p.ErrorCode) {
				case markerDone:
					done[tp] = true
				case markerDrop:
					done[tp] = true
					b.logger.Warn("transaction marker refused", "transactional_id", clip.String(m.TransactionalID), "broker", leader, "topic", t.Topic, "partition", p.Partition, "err", kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	var retry []txn.TopicPartition
	for _, tp := range tps {
		if !done[tp] {
			retry = append(retry, tp)
		}
	}
	return retry
}

// requestBroker sends req to broker id over a connection kept for such
// requests.
func (b *Broker) requestBroker(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	addr, ok := b.brokerAddr(id)
	if !ok {
		return nil, fmt.Errorf("broker %d has no address", id)
	}
	t := b.txns
	t.clientsMu.Lock()
	c := t.clients[addr]
	if c == nil {
		c = wire.NewClient(addr, "samsa-broker-"+strconv.Itoa(int(b.node.NodeID)), 16<<20).WithDial(b.dialBroker)
		t.clients[addr] = c
	}
	t.clientsMu.Unlock()
	return c.Request(ctx, req)
}

// writeMarker writes one COMMIT or ABORT marker to a partition this broker
// leads and waits until it is committed (acks=all, as Kafka writes them);
// on __consumer_offsets it then tells the group coordinator to apply or
// drop the transaction's offsets. It returns the Kafka error code of the
// partition for WriteTxnMarkers.
func (b *Broker) writeMarker(ctx context.Context, pid int64, epoch int16, coordinatorEpoch int32, commit bool, topic string, partition int32) int16 {
	p := b.replicas.Get(topic, partition)
	if p == nil {
		if t := b.image().Topic(topic); t == nil || int(partition) >= len(t.Partitions) {
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.NotLeaderForPartition.Code
	}
	res, written, err := p.AppendTxnMarker(pid, epoch, coordinatorEpoch, commit, time.Now().UnixMilli())
	if err != nil {
		if code := errCode(err); code != kerr.UnknownServerError.Code {
			return code
		}
		b.logger.Error("writing transaction marker failed", "topic", topic, "partition", partition, "err", err)
		return kerr.KafkaStorageError.Code
	}
	if written {
		ctx, cancel := context.WithTimeout(ctx, markerWriteTimeout)
		defer cancel()
		if err := b.waitCommitted(ctx, p, res.LastOffset, topic, partition); err != nil {
			return errCode(err)
		}
	}
	if topic == offsetsTopic && b.groups != nil {
		b.groups.coord.CompleteTxn(ctx, partition, pid, commit)
	}
	return 0
}

// txnCoordinatorOf returns the broker leading the partition of
// __transaction_state of transactionalID, or -1.
func (b *Broker) txnCoordinatorOf(transactionalID string) int32 {
	t := b.image().Topic(txnTopic)
	p := txn.PartitionFor(transactionalID, b.txns.coord.NumPartitions())
	if t == nil || int(p) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[p].Leader
}

// verifyPartitionsInTxn asks the coordinator of txnID whether each
// partition is in the open transaction of pid at epoch (KIP-890 part 1);
// codes are per partition, zero when it is. Codes a producer would not
// retry but that only say the coordinator is busy or moving become
// NOT_ENOUGH_REPLICAS, which it retries, as Kafka's ReplicaManager does;
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH. With mode
// txn.AddImplicit (Produce v12+, TxnOffsetCommit v5+: KIP-890 part 2) the
// coordinator adds the partitions instead of checking them.
func (b *Broker) verifyPartitionsInTxn(ctx context.Context, txnID string, pid int64, epoch int16, tps []verifyKey, mode txn.AddMode) map[verifyKey]int16 {
	out := make(map[verifyKey]int16, len(tps))
	set := func(code int16) {
		for _, k := range tps {
			out[k] = code
		}
	}
	var ttps []txn.TopicPartition
	for _, k := range tps {
		ttps = append(ttps, txn.TopicPartition{Topic: k.topic, Partition: k.partition})
	}
	per := map[txn.TopicPartition]int16{}
	var code int16
	addedLocally := false
	switch leader := b.txnCoordinatorOf(txnID); {
	case leader < 0:
		code = kerr.CoordinatorNotAvailable.Code
	case leader == b.node.NodeID:
		code, per = b.txns.coord.AddPartitions(ctx, txnID, pid, epoch, ttps, mode)
		addedLocally = mode != txn.AddVerifyOnly // every partition added when code is 0
	default:
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		if mode == txn.AddImplicit {
			req.Version = 5 // as Kafka 4.0's AddPartitionsToTxnManager
		}
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnID, pid, epoch, mode == txn.AddVerifyOnly
		for _, tp := range ttps {
			if n := len(tx.Topics); n == 0 || tx.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
				t.Topic = tp.Topic
				tx.Topics = append(tx.Topics, t)
			}
			tx.Topics[len(tx.Topics)-1].Partitions = append(tx.Topics[len(tx.Topics)-1].Partitions, tp.Partition)
		}
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		kresp, err := b.requestBroker(rctx, leader, req)
		cancel()
		if err != nil {
			code = kerr.CoordinatorNotAvailable.Code
			break
		}
		resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
		code = resp.ErrorCode
		for _, rt := range resp.Transactions {
			for _, t := range rt.Topics {
				for _, p := range t.Partitions {
					per[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
				}
			}
		}
	}
	mapCode := func(c int16) int16 {
		switch c {
		case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
			return kerr.NotEnoughReplicas.Code
		case kerr.ProducerFenced.Code:
			return kerr.InvalidProducerEpoch.Code
		}
		return c
	}
	if code != 0 {
		set(mapCode(code))
		return out
	}
	for i, k := range tps {
		c, ok := per[ttps[i]]
		if !ok && !addedLocally {
			c = kerr.InvalidTxnState.Code // not answered: not verified
		}
		out[k] = mapCode(c)
	}
	return out
}

// registerTxnAPI registers a transaction API with the versions the
// coordinator implements.
func registerTxnAPI(key kmsg.Key, h handlerFunc) {
	for _, v := range txn.APIVersions {
		if v.Key == int16(key) {
			register(key, v.Min, v.Max, h)
			return
		}
	}
	panic("transaction coordinator does not implement " + key.Name())
}

// knownPartition reports whether topic has partition in the image.
func knownPartition(im *metadata.Image, topic string, partition int32) bool {
	t := im.Topic(topic)
	return t != nil && partition >= 0 && int(partition) < len(t.Partitions)
}

// groupOffsetsPartition is the partition of __consumer_offsets of group.
func (b *Broker) groupOffsetsPartition(groupID string) int32 {
	return group.PartitionFor(groupID, b.groups.coord.NumPartitions())
}
