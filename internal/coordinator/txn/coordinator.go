package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsahq/samsa/internal/coordinator/actor"
	"github.com/samsahq/samsa/internal/coordinator/appendq"
	"github.com/samsahq/samsa/internal/deadline"
)

// Errors returned by the Coordinator's partition methods.
var (
	// ErrClosed: the Coordinator was closed.
	ErrClosed = errors.New("txn: coordinator closed")
	// ErrPartitionUnloaded: UnloadPartition was called while LoadPartition
	// was reading the partition.
	ErrPartitionUnloaded = errors.New("txn: partition unloaded while loading")
	// ErrInvalidPartition: a partition outside [0, NumPartitions).
	ErrInvalidPartition = errors.New("txn: invalid __transaction_state partition")
)

// errUnloaded completes the writes of a partition that was unloaded.
var errUnloaded = errors.New("txn: partition unloaded")

// Store is the coordinator's view of the partitions of __transaction_state
// this broker leads. It is called from the coordinator's own goroutines,
// never while holding its state; calls on one partition never overlap.
type Store interface {
	// Append writes recs, in order, to partition and returns once they are
	// committed (below the high-watermark), or an error. Errors carrying a
	// Kafka error code (*kerr.Error, possibly wrapped) are mapped as Kafka
	// maps them for clients: NOT_LEADER_OR_FOLLOWER and
	// KAFKA_STORAGE_ERROR become NOT_COORDINATOR; UNKNOWN_TOPIC_OR_PARTITION,
	// NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT
	// COORDINATOR_NOT_AVAILABLE; MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE
	// UNKNOWN_SERVER_ERROR; any other error COORDINATOR_NOT_AVAILABLE.
	Append(ctx context.Context, partition int32, recs []Record) error

	// Load reads partition from its log start offset to its
	// high-watermark, as of the call, calling fn for each record in offset
	// order, and returns fn's first error or its own.
	Load(ctx context.Context, partition int32, fn func(Record) error) error
}

// Marker is the end of a transaction to write to its partitions: a COMMIT
// or ABORT control record for ProducerID at ProducerEpoch, from the
// coordinator of CoordinatorEpoch (the leader epoch of its partition of
// __transaction_state), as WriteTxnMarkers carries it.
type Marker struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
}

// MarkerWriter writes transaction markers through each partition's leader
// (locally, or with WriteTxnMarkers to another broker). It is called from
// the coordinator's goroutines, possibly concurrently for different
// transactions.
type MarkerWriter interface {
	// WriteMarkers writes m to each of its partitions, at most one marker
	// per partition per call, and returns the partitions to try again
	// (leader unknown, moving or unreachable). Partitions whose topic is
	// gone or whose leader refuses the marker for good (an epoch newer
	// than the marker's) are not returned; the implementation logs them.
	// ctx ends when the coordinator gives up the transaction (its
	// partition unloaded, or Close).
	WriteMarkers(ctx context.Context, m Marker) (retry []TopicPartition)
}

// Deps are the collaborators of a Coordinator.
type Deps struct {
	Store   Store
	Markers MarkerWriter
	// NewProducerID hands out a producer id never used before (from the
	// blocks the controller reserves, KIP-730). It may block; it is called
	// from request goroutines, never from the state goroutine.
	NewProducerID func(ctx context.Context) (int64, error)
	// OnTransition, when set, is called on the run goroutine after each
	// state change is written (tests and metrics); it must not block.
	OnTransition func(transactionalID string, state string)
	Logger       *slog.Logger // nil discards
}

// Coordinator is the transaction coordinator of one broker: a state machine
// per loaded partition of __transaction_state, all run by one goroutine.
// Its request methods are safe for concurrent use; each blocks until its
// answer is ready, until ctx ends, or until the Coordinator closes.
type Coordinator struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	// loop is the run goroutine, which runs every request's function
	// and every deadline, and waits in Close for the writers and marker
	// senders.
	loop *actor.Loop

	// Owned by the run goroutine.
	partitions map[int32]*partition
	writers    map[int32]*appendq.Writer[Record]
	timers     *deadline.Queue // the loop's
}

// partition is one loaded (or loading) partition of __transaction_state.
type partition struct {
	id    int32
	epoch int32 // the coordinator epoch: its leader epoch when loaded
	// loaded is false while LoadPartition reads it.
	loaded bool
	txns   map[string]*txnMeta
	writer *appendq.Writer[Record]
	ctx    context.Context // canceled when unloaded: marker senders stop
	cancel context.CancelFunc
	log    *slog.Logger
}

// New starts a Coordinator that owns no partition yet: every
// transactional id gets NOT_COORDINATOR until LoadPartition. cfg should
// have passed Validate. Close stops it.
func New(cfg Config, deps Deps) *Coordinator {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	loop := actor.New()
	c := &Coordinator{
		cfg:        cfg.withDefaults(),
		deps:       deps,
		log:        deps.Logger,
		loop:       loop,
		partitions: map[int32]*partition{},
		writers:    map[int32]*appendq.Writer[Record]{},
		timers:     loop.Timers(),
	}
	loop.Start(func() {
		c.scheduleTimeoutCheck()
		c.scheduleExpirationCheck()
	}, func() {
		for _, p := range c.partitions {
			p.cancel()
		}
		for _, w := range c.writers {
			w.Stop()
		}
	})
	return c
}

// Close stops the Coordinator: waiting requests get
// COORDINATOR_NOT_AVAILABLE (their writes may still become durable), loads,
// writes and marker sends in flight are canceled, and Close returns once
// every goroutine it started has exited. Transactions left prepared are
// completed by whichever coordinator loads their partition next. Safe to
// call more than once.
func (c *Coordinator) Close() error {
	c.loop.Close()
	return nil
}

// NumPartitions is transaction.state.log.num.partitions as configured.
func (c *Coordinator) NumPartitions() int32 { return c.cfg.NumPartitions }

// Partition returns the partition of __transaction_state of
// transactionalID; its leader is the id's coordinator.
func (c *Coordinator) Partition(transactionalID string) int32 {
	return PartitionFor(transactionalID, c.cfg.NumPartitions)
}

// post hands fn to the run goroutine; false if the Coordinator closed.
func (c *Coordinator) post(fn func()) bool { return c.loop.Post(fn) }

// call runs fn on the run goroutine and waits for the first value it passes
// to reply (actor.Call). ok is false when ctx ended or the Coordinator
// closed first.
func call[T any](c *Coordinator, ctx context.Context, fn func(reply func(T))) (v T, ok bool) {
	return actor.Call(c.loop, ctx, fn)
}

// partitionOf finds the loaded partition of transactionalID:
// NOT_COORDINATOR when not owned, COORDINATOR_LOAD_IN_PROGRESS while
// loading.
func (c *Coordinator) partitionOf(transactionalID string) (*partition, int16) {
	part := c.partitions[c.Partition(transactionalID)]
	switch {
	case part == nil:
		return nil, kerr.NotCoordinator.Code
	case !part.loaded:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return part, 0
}

func (c *Coordinator) sortedPartitions() []*partition {
	return slices.SortedFunc(maps.Values(c.partitions), func(a, b *partition) int { return cmp.Compare(a.id, b.id) })
}

func (p *partition) sortedTxns() []*txnMeta {
	return slices.SortedFunc(maps.Values(p.txns), func(a, b *txnMeta) int { return cmp.Compare(a.id, b.id) })
}

// owns reports whether part is still the loaded partition of its id.
func (c *Coordinator) owns(part *partition) bool {
	return c.partitions[part.id] == part && part.loaded
}

// write persists the new state next of m (a nil next writes a tombstone)
// and calls done on the run goroutine with the result; m is pending
// meanwhile. On success the state is applied before done runs.
func (c *Coordinator) write(part *partition, m *txnMeta, next *snapshot, done func(err error)) {
	m.pending = true
	rec := Record{Key: keyOf(m.id)}
	if next != nil {
		rec.Value = valueOf(*next)
	}
	written := func(err error) {
		m.pending = false
		if err == nil && !c.owns(part) {
			err = errUnloaded
		}
		if err == nil && part.txns[m.id] != m {
			err = errUnloaded // expired or replaced meanwhile
		}
		if err == nil {
			if next == nil {
				delete(part.txns, m.id)
				m.state = stateDead
			} else {
				m.snapshot = *next
			}
			if c.deps.OnTransition != nil {
				c.deps.OnTransition(m.id, m.state.String())
			}
		}
		done(err)
	}
	if part.writer == nil || !part.writer.Enqueue([]Record{rec}, written) {
		written(errUnloaded)
	}
}

// appendErrorCode maps a Store.Append error to the code clients get, as
// Kafka's TransactionStateManager.appendTransactionToLog.
func appendErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	if errors.Is(err, errUnloaded) {
		return kerr.NotCoordinator.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable.Code
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return kerr.NotCoordinator.Code
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return kerr.UnknownServerError.Code
		}
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// LoadPartition makes this Coordinator the coordinator of the
// transactional ids of partition p of __transaction_state, as when this
// broker becomes its leader at leader epoch coordinatorEpoch: it reads the
// partition through Store.Load (requests get COORDINATOR_LOAD_IN_PROGRESS
// meanwhile), then writes the markers of the transactions found prepared
// and completes them. It returns once loaded, with ctx's error, the
// Store's, ErrPartitionUnloaded, ErrInvalidPartition or ErrClosed. A call
// for a partition already loaded or loading returns nil at once. Safe for
// concurrent use; the read runs on the caller's goroutine.
func (c *Coordinator) LoadPartition(ctx context.Context, p, coordinatorEpoch int32) error {
	if p < 0 || p >= c.cfg.NumPartitions {
		return fmt.Errorf("%w: %d of %d", ErrInvalidPartition, p, c.cfg.NumPartitions)
	}
	type started struct {
		part       *partition
		prevWriter <-chan struct{}
	}
	st, ok := call(c, ctx, func(reply func(started)) {
		if c.partitions[p] != nil {
			reply(started{})
			return
		}
		pctx, cancel := context.WithCancel(c.loop.Ctx())
		part := &partition{id: p, epoch: coordinatorEpoch, txns: map[string]*txnMeta{}, ctx: pctx, cancel: cancel,
			log: c.log.With("partition", p, "coordinator_epoch", coordinatorEpoch)}
		c.partitions[p] = part
		var prev <-chan struct{}
		if w := c.writers[p]; w != nil {
			prev = w.Exited()
		}
		reply(started{part: part, prevWriter: prev})
	})
	if !ok {
		return c.ctxErr(ctx)
	}
	if st.part == nil {
		return nil
	}
	begin := time.Now()
	loaded := map[string]snapshot{}
	records, skipped := 0, 0
	var lastErr error
	err := c.loop.Read(ctx, st.prevWriter, func(ctx context.Context) error {
		return c.deps.Store.Load(ctx, p, func(rec Record) error {
			records++
			d, err := Decode(rec)
			if err != nil {
				skipped++
				if !errors.Is(err, ErrUnknownRecord) {
					lastErr = err
				}
				return nil
			}
			if d.Value == nil {
				delete(loaded, d.Key.TransactionalID)
				return nil
			}
			loaded[d.Key.TransactionalID] = snapshotFrom(d.Value)
			return nil
		})
	})
	res, ok := call(c, context.Background(), func(reply func(error)) {
		if c.partitions[p] != st.part {
			reply(ErrPartitionUnloaded)
			return
		}
		if err != nil {
			st.part.cancel()
			delete(c.partitions, p)
			reply(err)
			return
		}
		if lastErr != nil {
			st.part.log.Warn("skipped corrupt __transaction_state records", "skipped", skipped, "last_err", lastErr)
		}
		c.install(st.part, loaded)
		st.part.log.Info("loaded __transaction_state partition", "transactional_ids", len(st.part.txns),
			"records", records, "skipped_records", skipped, "duration", time.Since(begin))
		reply(nil)
	})
	if !ok {
		return ErrClosed
	}
	return res
}

// install makes the loaded state live: transactions found prepared get
// their markers written and are completed; dead ones are dropped.
func (c *Coordinator) install(part *partition, loaded map[string]snapshot) {
	for id, s := range loaded {
		if s.state == stateDead || s.state == statePrepareEpochFence {
			continue
		}
		part.txns[id] = &txnMeta{id: id, snapshot: s}
	}
	part.writer = c.startWriter(part.id)
	part.loaded = true
	for _, m := range part.sortedTxns() {
		if isPrepare(m.state) {
			c.sendMarkers(part, m)
		}
	}
}

func (c *Coordinator) ctxErr(ctx context.Context) error { return c.loop.Err(ctx, ErrClosed) }

// UnloadPartition gives up partition p, as when this broker stops leading
// it: its transactional ids are dropped from memory, writes not yet
// durable fail with NOT_COORDINATOR and marker sends stop (the next
// coordinator resends them). Unloading a partition not loaded is a no-op.
// Safe for concurrent use.
func (c *Coordinator) UnloadPartition(p int32) {
	call(c, context.Background(), func(reply func(struct{})) {
		if part := c.partitions[p]; part != nil {
			delete(c.partitions, p)
			part.cancel()
			wasLoaded := part.loaded
			part.loaded = false
			if part.writer != nil {
				for _, done := range part.writer.Stop() {
					done(errUnloaded)
				}
			}
			if wasLoaded {
				part.log.Info("unloaded __transaction_state partition", "transactional_ids", len(part.txns))
			}
		}
		reply(struct{}{})
	})
}

// startWriter starts the writer of p; called on the run goroutine.
func (c *Coordinator) startWriter(p int32) *appendq.Writer[Record] {
	w := appendq.New(c.loop.Ctx(), p, appendq.Config[Record]{
		Append:   c.deps.Store.Append,
		Timeout:  c.cfg.WriteTimeout,
		MaxBytes: maxAppendBytes,
		Size:     func(r Record) int { return len(r.Key) + len(r.Value) },
		Post:     c.post,
		Log:      c.log,
		Topic:    transactionStateTopic,
	})
	c.writers[p] = w
	c.loop.Go(w.Run)
	return w
}
