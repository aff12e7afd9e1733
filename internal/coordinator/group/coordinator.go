package group

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
	ErrClosed = errors.New("group: coordinator closed")
	// ErrPartitionUnloaded: UnloadPartition was called while LoadPartition
	// was reading the partition.
	ErrPartitionUnloaded = errors.New("group: partition unloaded while loading")
	// ErrInvalidPartition: a partition outside [0, OffsetsTopicNumPartitions).
	ErrInvalidPartition = errors.New("group: invalid __consumer_offsets partition")
)

// errUnloaded completes the writes of a partition that was unloaded.
var errUnloaded = errors.New("group: partition unloaded")

// Client identifies the client of a JoinGroup, from the request header and
// the connection; DescribeGroups reports it per member.
type Client struct {
	// ID is the client.id of the request header; it prefixes the member
	// ids of dynamic members.
	ID string
	// Host is the client's address as Kafka shows it ("/127.0.0.1").
	Host string
}

// Coordinator is the group coordinator of one broker: a state machine per
// loaded partition of __consumer_offsets, all run by one goroutine. Its
// request methods are safe for concurrent use; each blocks until its answer
// is ready (a JoinGroup until the rebalance completes, a commit until its
// records are written), or until ctx is done or the Coordinator closed.
type Coordinator struct {
	cfg   Config
	store Store
	log   *slog.Logger

	// loop is the run goroutine, which runs every request's function
	// and every deadline, and waits in Close for the writers.
	loop *actor.Loop

	// Owned by the run goroutine.
	partitions map[int32]*partition
	writers    map[int32]*appendq.Writer[Record] // the latest writer per partition, maybe stopping
	timers     *deadline.Queue                   // the loop's
	seq        uint64                            // member join order
	topics     Topics                            // SetTopics; nil: none
	regexes    regexCache                        // regex subscriptions' matches at topics' version
	stats      consumerStats                     // for tests
	scratch    struct {                          // maybeBumpAndAssign's, reused
		ams []assignMember
		had []bool
	}
}

// consumerStats counts the work of KIP-848 groups, for tests of what a
// heartbeat recomputes.
type consumerStats struct {
	assignments  int // target assignments computed
	resolves     int // subscriptions resolved against the topics
	regexMatches int // regexes matched against the topic names
}

// partition is one loaded (or loading) partition of __consumer_offsets.
type partition struct {
	id     int32
	loaded bool
	groups map[string]*group
	writer *appendq.Writer[Record]
	log    *slog.Logger
	// txnCompletions are transaction markers reported by CompleteTxn while
	// the partition loads, applied once loaded (txn.go).
	txnCompletions []txnCompletion
	// deletedTopics are topics whose offsets DeleteTopicOffsets removed
	// while the partition loaded, removed once loaded (topics.go).
	deletedTopics []string
}

// New starts a Coordinator that owns no partition yet (every group gets
// NOT_COORDINATOR until LoadPartition). cfg should have passed Validate;
// logger nil discards. Close stops it.
func New(cfg Config, store Store, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	loop := actor.New()
	c := &Coordinator{
		cfg:        cfg.withDefaults(),
		store:      store,
		log:        logger,
		loop:       loop,
		partitions: map[int32]*partition{},
		writers:    map[int32]*appendq.Writer[Record]{},
		timers:     loop.Timers(),
	}
	loop.Start(c.scheduleRetentionCheck, func() {
		for _, w := range c.writers {
			w.Stop()
		}
	})
	return c
}

// Close stops the Coordinator: requests waiting get COORDINATOR_NOT_AVAILABLE
// (their writes may still become durable), loads and appends in flight are
// canceled, and Close returns once every goroutine it started has exited.
// Safe to call more than once.
func (c *Coordinator) Close() error {
	c.loop.Close()
	return nil
}

// Partition returns the partition of __consumer_offsets of groupID (see
// PartitionFor); its leader is the group's coordinator.
func (c *Coordinator) Partition(groupID string) int32 {
	return PartitionFor(groupID, c.cfg.OffsetsTopicNumPartitions)
}

// NumPartitions is offsets.topic.num.partitions as configured.
func (c *Coordinator) NumPartitions() int32 { return c.cfg.OffsetsTopicNumPartitions }

// post hands fn to the run goroutine; false if the Coordinator closed.
func (c *Coordinator) post(fn func()) bool { return c.loop.Post(fn) }

// call runs fn on the run goroutine and waits for the first value it passes
// to reply, which never blocks fn (actor.Call). ok is false when ctx ended
// or the Coordinator closed first.
func call[T any](c *Coordinator, ctx context.Context, fn func(reply func(T))) (v T, ok bool) {
	return actor.Call(c.loop, ctx, fn)
}

func (c *Coordinator) nextSeq() uint64 {
	c.seq++
	return c.seq
}

// partitionOf finds the loaded partition of groupID: NOT_COORDINATOR when
// this coordinator does not own it, COORDINATOR_LOAD_IN_PROGRESS while
// loading.
func (c *Coordinator) partitionOf(groupID string) (*partition, int16) {
	part := c.partitions[c.Partition(groupID)]
	switch {
	case part == nil:
		return nil, kerr.NotCoordinator.Code
	case !part.loaded:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return part, 0
}

// sortedPartitions returns the partitions by id.
func (c *Coordinator) sortedPartitions() []*partition {
	return slices.SortedFunc(maps.Values(c.partitions), func(a, b *partition) int { return cmp.Compare(a.id, b.id) })
}

func (p *partition) sortedGroups() []*group {
	return slices.SortedFunc(maps.Values(p.groups), func(a, b *group) int { return cmp.Compare(a.id, b.id) })
}

// owns reports whether part is still the loaded partition of its id.
func (c *Coordinator) owns(part *partition) bool {
	return c.partitions[part.id] == part && part.loaded
}

// appendRecords writes recs to part and calls done on the run goroutine
// with the result; errUnloaded if the partition was unloaded meanwhile.
// Writes to one partition complete in the order they were issued.
func (c *Coordinator) appendRecords(part *partition, recs []Record, done func(err error)) {
	wrapped := func(err error) {
		if !c.owns(part) {
			err = errUnloaded
		}
		done(err)
	}
	if part.writer == nil || !part.writer.Enqueue(recs, wrapped) {
		wrapped(errUnloaded)
	}
}

// appendErrorCode maps a Store.Append error to the error code clients get
// for group metadata writes, as Kafka's appendGroupMetadataErrorToResponseError.
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
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			return kerr.UnknownServerError.Code
		}
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// commitErrorCode maps a Store.Append error for offset commits, as Kafka's
// GroupMetadataManager.storeOffsets: too-large writes are
// INVALID_COMMIT_OFFSET_SIZE.
func commitErrorCode(err error) int16 {
	code := appendErrorCode(err)
	if code == kerr.UnknownServerError.Code {
		var ke *kerr.Error
		if errors.As(err, &ke) && (ke == kerr.MessageTooLarge || ke == kerr.RecordListTooLarge || ke == kerr.InvalidFetchSize) {
			return kerr.InvalidCommitOffsetSize.Code
		}
	}
	return code
}

// LoadPartition makes this Coordinator the coordinator of the groups of
// partition p of __consumer_offsets, as when this broker becomes its
// leader: it reads the partition through Store.Load, rebuilding groups and
// committed offsets, while requests for its groups get
// COORDINATOR_LOAD_IN_PROGRESS. It returns once loaded, with ctx's error,
// the Store's, ErrPartitionUnloaded if UnloadPartition came first,
// ErrInvalidPartition or ErrClosed; on error the partition is not owned.
// A call for a partition already loaded or loading returns nil at once.
// Safe for concurrent use; the read runs on the caller's goroutine.
func (c *Coordinator) LoadPartition(ctx context.Context, p int32) error {
	if p < 0 || p >= c.cfg.OffsetsTopicNumPartitions {
		return fmt.Errorf("%w: %d of %d", ErrInvalidPartition, p, c.cfg.OffsetsTopicNumPartitions)
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
		part := &partition{id: p, groups: map[string]*group{}, log: c.log.With("partition", p)}
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
	ls := newLoadState()
	// After the previous leadership's last write.
	err := c.loop.Read(ctx, st.prevWriter, func(ctx context.Context) error {
		return c.store.Load(ctx, p, ls.apply)
	})
	res, ok := call(c, context.Background(), func(reply func(error)) {
		if c.partitions[p] != st.part {
			reply(ErrPartitionUnloaded)
			return
		}
		if err != nil {
			delete(c.partitions, p)
			reply(err)
			return
		}
		c.install(st.part, ls)
		st.part.log.Info("loaded __consumer_offsets partition",
			"groups", len(st.part.groups), "offsets", ls.numOffsets(), "records", ls.records,
			"skipped_records", ls.skipped, "duration", time.Since(begin))
		reply(nil)
	})
	if !ok {
		return ErrClosed
	}
	return res
}

func (c *Coordinator) ctxErr(ctx context.Context) error { return c.loop.Err(ctx, ErrClosed) }

// UnloadPartition gives up partition p, as when this broker stops leading
// it: its groups are dropped from memory, parked JoinGroup and SyncGroup
// requests get NOT_COORDINATOR, and so do writes not yet durable. It
// returns once the state is dropped (a Store.Append in flight may still be
// running). Unloading a partition not loaded is a no-op. Safe for
// concurrent use.
func (c *Coordinator) UnloadPartition(p int32) {
	call(c, context.Background(), func(reply func(struct{})) {
		c.unload(p)
		reply(struct{}{})
	})
}

func (c *Coordinator) unload(p int32) {
	part := c.partitions[p]
	if part == nil {
		return
	}
	delete(c.partitions, p)
	wasLoaded := part.loaded
	part.loaded = false
	if part.writer != nil {
		for _, done := range part.writer.Stop() {
			done(errUnloaded)
		}
	}
	for _, g := range part.sortedGroups() {
		c.unloadGroup(g)
	}
	if wasLoaded {
		part.log.Info("unloaded __consumer_offsets partition", "groups", len(part.groups))
	}
}

// unloadGroup marks g Dead, stops its timers and answers its parked
// requests with NOT_COORDINATOR.
func (c *Coordinator) unloadGroup(g *group) {
	c.timers.Cancel(g.joinTimer)
	c.timers.Cancel(g.syncTimer)
	g.joinTimer, g.syncTimer = nil, nil
	for _, t := range g.pending {
		c.timers.Cancel(t)
	}
	g.transition(stateDead, time.Now())
	if g.cg != nil {
		for _, m := range g.cg.members {
			c.timers.Cancel(m.session)
			c.timers.Cancel(m.revocation)
			m.session, m.revocation = nil, nil
		}
	}
	for _, m := range g.sortedMembers() {
		c.timers.Cancel(m.heartbeat)
		m.heartbeat = nil
		completeJoin(m, errJoinResponse(m.join, kerr.NotCoordinator.Code, m.id))
		completeSync(m, kerr.NotCoordinator.Code, nil, nil)
	}
}

// startWriter starts the writer of p; called on the run goroutine.
func (c *Coordinator) startWriter(p int32) *appendq.Writer[Record] {
	w := appendq.New(c.loop.Ctx(), p, appendq.Config[Record]{
		Append:   c.store.Append,
		Timeout:  c.cfg.OffsetCommitTimeout,
		MaxBytes: c.cfg.MaxAppendBytes,
		Size:     func(r Record) int { return len(r.Key) + len(r.Value) },
		// A transaction's records go alone: they form a batch of their
		// own; so do the writes that asked to (Record.Alone).
		Alone: func(recs []Record) bool { return len(recs) > 0 && (recs[0].Txn != nil || recs[0].Alone) },
		Post:  c.post,
		Log:   c.log,
		Topic: offsetsTopicName,
	})
	c.writers[p] = w
	c.loop.Go(w.Run)
	return w
}
