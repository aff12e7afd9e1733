package controller

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// Broker session defaults (Kafka's broker.session.timeout.ms and
// broker.heartbeat.interval.ms).
const (
	DefaultBrokerSessionTimeout = 9 * time.Second
	DefaultHeartbeatInterval    = 2 * time.Second
)

// formerLeaderGrace is how long a new active controller waits for the
// former quorum leader to answer the quorum or heartbeat before it fences
// that broker without waiting out its session: the quorum's election
// timeout (quorum.RaftConfig's default 10 ticks of 100 ms), the silence
// after which raft itself counts a voter inactive (CheckQuorum).
const formerLeaderGrace = time.Second

// voterActivity is the part of the metadata log (quorum.Raft) that tells
// the leader which voters answered it in its epoch.
type voterActivity interface {
	Describe(ctx context.Context) (quorum.QuorumInfo, error)
}

// brokerTracker is the active controller's view of broker sessions: when
// each broker last heartbeated. It fences brokers whose session expired,
// and the broker of the former quorum leader sooner when it is silent
// (check).
type brokerTracker struct {
	c       *Controller
	timeout time.Duration
	grace   time.Duration // formerLeaderGrace, shorter in tests

	mu       sync.Mutex // guards the fields below
	lastSeen map[int32]time.Time
	// heard are the brokers that heartbeated or registered since this
	// controller became active.
	heard map[int32]bool
	// since is when this controller became active; former is the node
	// that led the quorum before it, -1 when unknown or none (see check).
	since  time.Time
	former int32
	stopc  chan struct{}
	wg     sync.WaitGroup
}

func newBrokerTracker(c *Controller) *brokerTracker {
	timeout := c.node.BrokerSessionTimeout
	if timeout <= 0 {
		timeout = DefaultBrokerSessionTimeout
	}
	return &brokerTracker{c: c, timeout: timeout, grace: formerLeaderGrace, lastSeen: map[int32]time.Time{}, heard: map[int32]bool{}, former: -1}
}

// start begins session checks; every registered broker gets a full
// session from now (a new active controller does not know when brokers
// last heartbeated), except the former quorum leader's when it is silent
// (check). former is the node that led the quorum before, -1 when unknown.
func (t *brokerTracker) start(former int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopc != nil {
		return
	}
	now := time.Now()
	for _, b := range t.c.image.Load().Brokers() {
		t.lastSeen[b.ID] = now
	}
	clear(t.heard)
	t.since, t.former = now, former
	t.stopc = make(chan struct{})
	t.wg.Add(1)
	go t.run(t.stopc, min(t.timeout/4, t.grace/2))
	if t.c.node.AutoLeaderRebalanceEnable {
		t.wg.Add(1)
		go t.leaderBalancer(t.stopc)
	}
	if !t.c.image.Load().Bootstrapped {
		t.wg.Add(1)
		go t.writeBootstrap(t.stopc)
	}
	t.wg.Add(1)
	go t.completeFences(t.stopc)
}

// completeFences completes the fences a former active controller left
// half done (it lost the leadership between two chunks): each fenced
// broker's remaining moves, if any (a walk over every partition per
// fenced broker, once per activation).
func (t *brokerTracker) completeFences(stopc chan struct{}) {
	defer t.wg.Done()
	ctx, cancel := stopContext(stopc)
	defer cancel()
	for _, b := range t.c.image.Load().Brokers() {
		if !b.Fenced {
			continue
		}
		if n, err := t.c.continueFence(ctx, b.ID, b.Epoch); err != nil {
			t.c.logger.Warn("completing the fence of a broker failed", "broker", b.ID, "err", err)
		} else if n > 0 {
			t.c.logger.Info("completed the fence of a broker a former controller began", "broker", b.ID, "records", n)
		}
	}
}

// writeBootstrap writes the bootstrap records once this controller is
// active, unless an earlier controller did; a failure is logged and tried
// again after a backoff (100 ms doubling to 5 s) while this controller is
// active, and on the next activation: brokers serve clients only once
// the records are in their image (broker.Start). A new cluster (no topic yet) also gets the
// default level of each feature the bootstrap records do not set
// (transaction.version=2, as kafka-storage format of Kafka 4.x); a cluster
// that ran before without bootstrap records keeps its features at level
// 0, so that upgrading its nodes one by one changes no client's protocol.
func (t *brokerTracker) writeBootstrap(stopc chan struct{}) {
	defer t.wg.Done()
	ctx, cancel := stopContext(stopc)
	defer cancel()
	c := t.c
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		wrote := false
		err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
			recs := c.bootstrapRecords(im)
			wrote = len(recs) > 0
			return recs, nil
		})
		if err == nil {
			if wrote {
				c.logger.Info("wrote the bootstrap records", "records", len(c.bootstrap))
			}
			return
		}
		c.logger.Warn("writing the bootstrap records failed", "err", err, "retry_in", backoff)
		tm := time.NewTimer(backoff)
		select {
		case <-stopc:
			tm.Stop()
			return
		case <-tm.C:
		}
	}
}

// bootstrapRecords are the records writeBootstrap writes over im, none
// when im has them already: BootstrapRecord, the records of `samsa
// storage format`, and for a new cluster the default feature levels.
func (c *Controller) bootstrapRecords(im *metadata.Image) []metadata.Record {
	if im.Bootstrapped {
		return nil
	}
	recs := append([]metadata.Record{metadata.BootstrapRecord{}}, c.bootstrap...)
	if im.TopicCount() == 0 {
		recs = append(recs, metadata.DefaultFeatureLevels(c.bootstrap)...)
	}
	return recs
}

func (t *brokerTracker) stop() {
	t.mu.Lock()
	stopc := t.stopc
	t.stopc = nil
	t.mu.Unlock()
	if stopc != nil {
		close(stopc)
	}
	t.wg.Wait()
}

func (t *brokerTracker) seen(id int32) {
	t.mu.Lock()
	t.lastSeen[id] = time.Now()
	t.heard[id] = true
	t.mu.Unlock()
}

// expired reports whether broker id's session has expired at now.
func (t *brokerTracker) expired(id int32, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.lastSeen[id]
	return ok && now.Sub(last) > t.timeout
}

// silent reports whether broker id has not been heard from since this
// controller became active.
func (t *brokerTracker) silent(id int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.heard[id]
}

// run checks the sessions every period until stopc closes.
func (t *brokerTracker) run(stopc chan struct{}, period time.Duration) {
	defer t.wg.Done()
	ctx, cancel := stopContext(stopc)
	defer cancel()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stopc:
			return
		case now := <-tick.C:
			t.check(ctx, now)
		}
	}
}

// stopContext is a context canceled when stopc closes or cancel is
// called: stop, called from the goroutine that delivers commits, must not
// wait for a write that waits for a commit to be delivered.
func stopContext(stopc chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stopc:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// check fences, at now, the brokers whose session expired, and the
// former quorum leader's broker once it is known dead.
//
// Kafka's new active controller gives every broker a full session
// (BrokerHeartbeatManager: it cannot know when they last heartbeated), so
// after a kill -9 of the active controller of a combined node, its
// partitions wait broker.session.timeout.ms (9 s) for a leader. Samsa
// goes beyond: the broker of the node that led the quorum before this
// controller is fenced formerLeaderGrace after the activation when, by
// then, it has neither heartbeated nor answered this quorum leader once
// (no append or heartbeat response in this epoch: quorum.QuorumInfo's
// LastFetchTimestamp). An election without it already showed it silent
// for an election timeout; a live former leader answers the new one
// within a heartbeat, and a broker fenced by mistake (alive, cut from
// both) is unfenced by its next heartbeat, as after a session expiry.
// Only a metadata log that reports voter activity (quorum.Raft) allows it.
func (t *brokerTracker) check(ctx context.Context, now time.Time) {
	if !t.c.Active() {
		return // deposed, not yet told (Controller.Active)
	}
	var expired []int32
	former := int32(-1)
	t.mu.Lock()
	for _, b := range t.c.image.Load().Brokers() {
		if b.Fenced {
			continue
		}
		if last, ok := t.lastSeen[b.ID]; ok && now.Sub(last) > t.timeout {
			expired = append(expired, b.ID)
		} else if b.ID == t.former && !t.heard[b.ID] && now.Sub(t.since) >= t.grace {
			former = b.ID
		}
	}
	if former >= 0 {
		t.former = -1 // decided once: answered or fenced, a full session from here
	}
	since := t.since
	t.mu.Unlock()
	for _, id := range expired {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := t.c.fenceExpired(ctx, id, now); err != nil {
			t.c.logger.Warn("fencing broker failed", "broker", id, "err", err)
		}
		cancel()
	}
	if former >= 0 {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := t.c.fenceFormerLeader(ctx, former, since); err != nil {
			t.c.logger.Warn("fencing the former quorum leader's broker failed", "broker", former, "err", err)
		}
		cancel()
	}
}

// RegisterBroker records a broker's endpoints and rack (BrokerRegistration,
// KIP-631) and returns its broker epoch (the offset of the registration
// record, as Kafka uses). A registered broker starts unfenced. A new
// process (incarnation) of a broker first leaves every ISR and leadership
// its previous process held, with new leader epochs, so a restarted broker
// rejoins ISRs only through its leaders' AlterPartition and cannot lead a
// partition it lags on (it leads again only where it was the last in-sync
// replica).
//
// previousEpoch is BrokerRegistration v3's PreviousBrokerEpoch (KIP-966):
// the broker epoch the new process found in its log dirs' clean shutdown
// marker, -1 for none. When it is the registered epoch, the previous
// process closed every log cleanly after its last registration, so its
// logs hold everything it acknowledged, and nobody else led its partitions
// since (that would be in the image): the broker keeps its ISRs and
// leaderships at their epochs, and registering writes one record however
// many partitions it holds (a single node restarted with 100,000 partitions
// rewrote every one). Kafka's controller, on a clean re-registration,
// still moves the broker out as when it is fenced; it has no effect there
// because its controlled shutdown already did, which Samsa skips when no
// other broker could take over (Heartbeat).
//
// A fence of the broker still being committed in chunks (continueFence) is
// completed first, at the broker epoch it began under: the registration
// ends it (a new broker epoch), and what the previous process still held
// would otherwise stay with the new one, at the same leader epochs.
func (c *Controller) RegisterBroker(ctx context.Context, id int32, incarnation metadata.UUID, previousEpoch int64, endpoints []metadata.Endpoint, rack *string) (int64, error) {
	for {
		epoch, halfFenced, err := c.registerBroker(ctx, id, incarnation, previousEpoch, endpoints, rack)
		if err != nil || halfFenced < 0 {
			return epoch, err
		}
		if _, err := c.continueFence(ctx, id, halfFenced); err != nil {
			return 0, err
		}
	}
}

// registerBroker is one attempt of RegisterBroker: the broker epoch, or
// the epoch of the broker's fence still being committed (halfFenced, -1
// when none) and no registration.
func (c *Controller) registerBroker(ctx context.Context, id int32, incarnation metadata.UUID, previousEpoch int64, endpoints []metadata.Endpoint, rack *string) (epoch, halfFenced int64, err error) {
	halfFenced = -1
	err = c.writeThen(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		halfFenced = -1
		if b := im.Broker(id); b != nil && !b.Fenced && equalEndpoints(b.Endpoints, endpoints) && ptrEq(b.Rack, rack) && b.Epoch >= 0 && c.brokerIncarnation[id] == incarnation {
			c.brokers.seen(id)
			epoch = b.Epoch
			return nil, nil
		}
		if b := im.Broker(id); b != nil && b.Fenced && len(c.fenceChunk(im, id, 1)) > 0 {
			halfFenced = b.Epoch
			return nil, nil
		}
		// The broker is alive from now, not only once the registration
		// commits: a session check running on the loop behind this
		// write, over the image with it in flight (the broker registered
		// and unfenced), found the session of the previous process
		// expired and fenced the new one, rewriting every partition it
		// led (a single node restarted with 100,000 partitions appended
		// 100,000 records where its clean re-registration was one).
		c.brokers.seen(id)
		// The bootstrap records come first, in this commit when
		// writeBootstrap has not committed them yet (it failed, or
		// is behind this write on the loop): Kafka's controller
		// writes them at activation, before any registration, and a
		// registration must not commit at features the bootstrap
		// records then change.
		recs := c.bootstrapRecords(im)
		if len(recs) > 0 {
			im = im.Apply(im.Offset+1, recs)
		}
		if b := im.Broker(id); b != nil && !b.Fenced && c.brokerIncarnation[id] != incarnation && previousEpoch >= 0 && previousEpoch == b.Epoch {
			c.logger.Info("broker restarted after a clean shutdown: keeping its ISRs and leaderships", "broker", id, "previous_broker_epoch", previousEpoch)
		} else if b != nil && !b.Fenced && c.brokerIncarnation[id] != incarnation {
			// A new process of a broker whose session is still open (it
			// restarted within broker.session.timeout.ms, or registered
			// with another active controller): what its previous process
			// had may be gone, an unflushed log tail after a power
			// failure. As Kafka's controller does, it leaves every ISR
			// and its leaderships move to other in-sync replicas first,
			// as when its session expires; it rejoins each ISR through
			// AlterPartition once caught up. Leading again at the same
			// epoch with a shorter log would make its followers truncate
			// acknowledged records.
			fence := c.fenceRecords(im, id)
			c.logger.Info("broker restarted: moving it out of its ISRs and leaderships", "broker", id, "partitions", len(fence)-1)
			recs = append(recs, fence...)
			im = im.Apply(im.Offset+1, fence)
		}
		epoch = im.Offset + 1 // the offset of the registration record
		recs = append(recs, metadata.RegisterBrokerRecord{BrokerID: id, Epoch: epoch, IncarnationID: incarnation, Endpoints: endpoints, Rack: rack})
		recs = append(recs, c.electLeaders(im, id)...)
		// A restarted broker's partitions leave it and come back in this
		// one commit: only their last record counts (100,000 records
		// fewer on a node of 100,000 partitions).
		return lastPerPartition(recs), nil
	}, func() {
		c.brokerIncarnation[id] = incarnation
		delete(c.shuttingDown, id)
		c.brokers.seen(id)
	})
	if err != nil {
		return 0, -1, err
	}
	return epoch, halfFenced, nil
}

func ptrEq(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Heartbeat records a broker's heartbeat (BrokerHeartbeat). A fenced
// broker that heartbeats is unfenced and takes back leadership of
// leaderless partitions whose ISR it is in. wantShutdown starts a
// controlled shutdown: leadership moves to other in-sync replicas and the
// broker leaves every ISR it is not the last member of; shouldShutdown
// tells it that this is done (at once when no other broker is live:
// leadership has nowhere to go).
//
// offlineDirs are the directory ids of the broker's log dirs that went
// offline after an I/O error (BrokerHeartbeat's OfflineLogDirs, KIP-858).
// A broker reporting any is fenced as when its session expires: it leaves
// every ISR it is not the last member of and other in-sync replicas take
// over its leaderships, and it stays fenced while it reports them (until
// a new process of it registers). Kafka moves only the partitions of the
// offline dirs, from the replica-to-directory assignments of KIP-858;
// Samsa's metadata has none, so every partition of the broker moves
// (docs/reliability.md).
//
// Heartbeats are answered by the controller's loop, which never waits for
// a commit: one that changes nothing (the broker is unfenced and stays)
// is answered at once even while a CreateTopics of thousands of
// partitions is being committed, which would otherwise expire the session
// of the very broker applying it.
func (c *Controller) Heartbeat(ctx context.Context, id int32, epoch int64, wantShutdown bool, offlineDirs []metadata.UUID) (fenced, shouldShutdown bool, err error) {
	if !c.Active() {
		return false, false, ErrNotController
	}
	own := id == c.node.NodeID
	// The moves of a controlled shutdown or of offline log dirs are
	// committed in chunks: this write decides and commits the first
	// (fenceChunk), continueFence the rest. Answering a controlled
	// shutdown waits for the writes before it (a barrier): when every
	// node stops at once, the last one (the active controller among
	// them) must not leave while the others' leadership moves are still
	// being committed by its quorum. Not this controller's own broker's:
	// once its answer is given the node may stop its quorum, so it waits
	// for the other brokers' shutdowns being answered instead
	// (awaitOtherShutdowns), not for every write before it: when the
	// other nodes stopping with it have already left, an AlterPartition
	// queued meanwhile can never commit. The barrier covers only the
	// writes posted before it, not the later chunks of a shutdown begun
	// before it (posted once its first chunk commits): another broker's
	// shutdown is answered only once no shutdown is moving leaderships
	// any more (awaitShutdownMoves), or the controller's own node, the
	// last to stop, is left without a majority for its later chunks.
	write := c.write
	switch {
	case wantShutdown && own:
		c.shutdownMoves.Add(1)
		defer func() {
			c.shutdownMoves.Add(-1)
			if err == nil {
				err = c.awaitOtherShutdowns(ctx)
			}
		}()
	case wantShutdown:
		write = c.writeBarrier
		c.otherShutdowns.Add(1)
		defer c.otherShutdowns.Add(-1)
		c.shutdownMoves.Add(1)
		defer func() {
			c.shutdownMoves.Add(-1)
			if err == nil {
				err = c.awaitShutdownMoves(ctx)
			}
		}()
	}
	offline := len(offlineDirs) > 0 && !wantShutdown
	stays := false // fenced in controlled shutdown
	began, moved, more := time.Now(), 0, false
	err = write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		if !c.Active() {
			return nil, ErrNotController
		}
		b := im.Broker(id)
		if b == nil || b.Epoch != epoch {
			fenced = true
			return nil, ErrStaleBrokerEpoch
		}
		c.brokers.seen(id)
		if c.shuttingDown[id] && !wantShutdown && !offline {
			// A broker in controlled shutdown stays in it until a new
			// process registers (Kafka's CONTROLLED_SHUTDOWN state):
			// a heartbeat without WantShutdown, one its periodic
			// heartbeats sent while it stopped, must not unfence it and
			// give it leaderships back.
			fenced, stays = true, true
			return nil, nil
		}
		if wantShutdown {
			fenced, shouldShutdown = true, true
			c.shuttingDown[id] = true
			if !c.otherLiveBroker(im, id) {
				// Leadership has nowhere to go (a single node, or the
				// last of a cluster stopping together): taking it away
				// would only rewrite every partition, and do it again
				// when the broker registers (100,000 partitions:
				// seconds of each).
				return nil, nil
			}
			// Nothing once moved out (the last chunk, or a broker
			// fenced before).
			recs := c.fenceChunk(im, id, chunkRecords)
			moved, more = len(recs), len(recs) > 0
			return recs, nil
		}
		if offline {
			fenced = true
			if !b.Fenced {
				c.logger.Warn("broker reports offline log dirs: moving it out of its ISRs and leaderships", "broker", id, "offline_dirs", len(offlineDirs))
			}
			recs := c.fenceChunk(im, id, chunkRecords)
			more = len(recs) > 0
			return recs, nil
		}
		if !b.Fenced {
			return nil, nil
		}
		fenced = true
		reg := metadata.RegisterBrokerRecord{BrokerID: id, Epoch: b.Epoch, Endpoints: b.Endpoints, Rack: b.Rack}
		return append([]metadata.Record{reg}, c.electLeaders(im, id)...), nil
	})
	if err != nil && !(more && isContextErr(err)) {
		return fenced, false, err
	}
	if more {
		// Even when ctx ended first: the first chunk may still commit
		// (fenceWhile).
		n, cerr := c.continueFence(ctx, id, epoch)
		moved += n
		if err == nil {
			err = cerr
		}
		if err != nil {
			return fenced, false, err
		}
	}
	if wantShutdown && moved > 0 {
		c.logger.Info("controlled shutdown: moved the broker out of its leaderships and ISRs", "broker", id, "records", moved, "duration", time.Since(began).Round(time.Millisecond))
	}
	if fenced && !wantShutdown && !offline && !stays {
		c.logger.Info("unfenced broker", "broker", id)
		fenced = false
	}
	return fenced, shouldShutdown, nil
}

// FenceBroker fences a broker whose session expired: it leaves every ISR
// (unless it is the last member) and other in-sync replicas take over the
// partitions it led; a partition whose only in-sync replica it was has no
// leader until it returns (or an unclean election, when the topic's
// unclean.leader.election.enable allows it). The records are committed in
// chunks (fenceChunk), leaderships first.
func (c *Controller) FenceBroker(ctx context.Context, id int32) error {
	return c.fenceWhile(ctx, id, func(*metadata.Image, *metadata.Broker) bool { return true })
}

// fenceExpired fences broker id if its session is still expired at now
// when the loop runs the write: a heartbeat may have arrived meanwhile. A broker in
// controlled shutdown that no other live broker could take over from
// (Heartbeat left it unfenced, in its leaderships) is not fenced either:
// it stops heartbeating once its shutdown is answered, and fencing it
// would move its leaderships nowhere, a write of every partition its
// controller's close then waits for (seen on a single node of 20,000
// partitions stopping at load 58).
func (c *Controller) fenceExpired(ctx context.Context, id int32, now time.Time) error {
	return c.fenceWhile(ctx, id, func(im *metadata.Image, _ *metadata.Broker) bool {
		return c.sessionExpired(im, id, now)
	})
}

// sessionExpired is fenceExpired's decision, on the loop over im.
func (c *Controller) sessionExpired(im *metadata.Image, id int32, now time.Time) bool {
	if !c.brokers.expired(id, now) || c.shuttingDown[id] && !c.otherLiveBroker(im, id) {
		return false
	}
	c.logger.Warn("broker session expired: fencing it", "broker", id)
	return true
}

// fenceFormerLeader fences broker id, the node that led the metadata
// quorum before this controller, when it has not heartbeated since this
// controller became active and has not answered this quorum leader once
// (brokerTracker.check).
func (c *Controller) fenceFormerLeader(ctx context.Context, id int32, since time.Time) error {
	va, ok := c.log.(voterActivity)
	if !ok {
		return nil
	}
	qi, err := va.Describe(ctx)
	if err != nil {
		return err
	}
	for _, v := range qi.Voters {
		if v.ID == id && v.LastFetchTimestamp >= 0 {
			c.logger.Info("the former quorum leader answers the quorum: it gets a full broker session", "broker", id)
			return nil
		}
	}
	return c.fenceWhile(ctx, id, func(_ *metadata.Image, b *metadata.Broker) bool {
		if !c.brokers.silent(id) || c.shuttingDown[id] {
			return false
		}
		c.logger.Warn("the former quorum leader is silent: fencing its broker before its session expires", "broker", id,
			"since_activation", time.Since(since).Round(time.Millisecond))
		return true
	})
}

// fenceWhile fences broker id when start, run on the loop over the
// latest image while the broker is registered and unfenced, says so: the
// first chunk (fenceChunk) in that write, the rest by continueFence.
func (c *Controller) fenceWhile(ctx context.Context, id int32, start func(im *metadata.Image, b *metadata.Broker) bool) error {
	epoch := int64(-1)
	began, n := time.Now(), 0
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		epoch, n = -1, 0
		b := im.Broker(id)
		if b == nil || b.Fenced || !start(im, b) {
			return nil, nil
		}
		recs := c.fenceChunk(im, id, chunkRecords)
		epoch, n = b.Epoch, len(recs)
		return recs, nil
	})
	if epoch < 0 || err != nil && !isContextErr(err) {
		return err
	}
	// The first chunk may still commit when ctx ended first (the
	// tracker's 10 s at load 55: the commit took 3.3 s and its apply
	// 7.7 s more): the rest must follow it, as nothing else starts it
	// again while this controller is active (a fenced broker's session
	// does not expire).
	more, cerr := c.continueFence(ctx, id, epoch)
	if err == nil {
		err = cerr
	}
	if err == nil {
		c.logger.Info("fenced broker", "broker", id, "records", n+more, "duration", time.Since(began).Round(time.Millisecond))
	}
	return err
}

// isContextErr reports a context's cancellation or deadline.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// continueFence commits the rest of broker id's fence, chunk after chunk
// (fenceChunk, writeChunks), while the broker stays fenced at broker
// epoch epoch (a heartbeat that unfences it, or a new registration, ends
// it), and waits for that until ctx ends. It returns the records written.
// The chunks run on a goroutine the controller owns, to the end even when
// ctx ends first (a request timing out): a fence left half done (the
// broker fenced, still in ISRs it holds back) would stay so, since only
// an unfenced broker's session expires; for the same reason a failed
// append is tried again after fenceRetry while this controller stays
// active. They end when this controller is no longer active (the next
// completes it: completeFences) or closes.
func (c *Controller) continueFence(ctx context.Context, id int32, epoch int64) (int, error) {
	c.fenceMu.Lock()
	if c.closed.Load() {
		c.fenceMu.Unlock()
		return 0, ErrNotController
	}
	c.fences.Add(1)
	c.fenceMu.Unlock()
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		defer c.fences.Done()
		for {
			err := c.writeChunks(c.loopCtx, func(im *metadata.Image) ([]metadata.Record, error) {
				b := im.Broker(id)
				if b == nil || b.Epoch != epoch || !b.Fenced {
					return nil, nil
				}
				recs := c.fenceChunk(im, id, chunkRecords)
				n.Add(int64(len(recs)))
				return recs, nil
			})
			if err == nil || errors.Is(err, ErrNotController) || !c.active.Load() {
				done <- err
				return
			}
			c.logger.Warn("committing a chunk of a broker's fence failed: trying again", "broker", id, "err", err)
			select {
			case <-c.loopCtx.Done():
				done <- err
				return
			case <-time.After(fenceRetry):
			}
		}
	}()
	select {
	case err := <-done:
		return int(n.Load()), err
	case <-ctx.Done():
		return int(n.Load()), ctx.Err()
	}
}

// fenceRetry is how long continueFence waits before it tries a failed
// chunk again.
const fenceRetry = 100 * time.Millisecond

// fenceRecords fences broker id over im in one write: every record of
// its fence (see fenceChunk).
func (c *Controller) fenceRecords(im *metadata.Image, id int32) []metadata.Record {
	return c.fenceChunk(im, id, math.MaxInt)
}

// fenceChunk is the next chunk of broker id's fence over im, nil once the
// fence is complete: its registration as fenced when it is not yet, then
// at most limit partitions whose record the fence changes, the ones it
// leads before the ones whose ISR it only is in (availability first). A
// fenced broker leaves every ISR it is not the last member of, and its
// leaderships move to other live in-sync replicas. Each partition record
// changes the partition, so applied in turn over the image each chunk
// makes, the chunks end (writeChunks). It costs a walk over every
// partition of im.
func (c *Controller) fenceChunk(im *metadata.Image, id int32, limit int) []metadata.Record {
	b := im.Broker(id)
	if b == nil {
		return nil
	}
	var recs []metadata.Record
	if !b.Fenced {
		recs = append(recs, metadata.RegisterBrokerRecord{BrokerID: id, Epoch: b.Epoch, Endpoints: b.Endpoints, Rack: b.Rack, Fenced: true})
	}
	n := 0
	for _, leading := range []bool{true, false} {
		for t := range im.Topics() {
			for i, p := range t.Partitions {
				if n == limit {
					return recs
				}
				if leading != (p.Leader == id) || !leading && !slices.Contains(p.ISR, id) {
					continue
				}
				if rec, ok := c.fencePartition(im, t, int32(i), id); ok {
					recs = append(recs, rec)
					n++
				}
			}
		}
	}
	return recs
}

// fencePartition is partition i of t once broker id is fenced, and
// whether that changes it: id leaves the ISR unless it is its last
// member, and when it leads, leadership moves to another live in-sync
// replica (or to none: a partition whose only in-sync replica it was has
// no leader until it returns, or until unclean.leader.election.enable
// picks another live replica).
func (c *Controller) fencePartition(im *metadata.Image, t *metadata.Topic, i int32, id int32) (metadata.PartitionRecord, bool) {
	p := t.Partitions[i]
	fenced := func(r int32) bool {
		if r == id || slices.Contains(p.LostReplicas, r) {
			return true
		}
		rb := im.Broker(r)
		return rb == nil || rb.Fenced
	}
	// A new leader is an in-sync replica not in controlled shutdown, else
	// one that is (it leads until it stops too).
	pick := func(isr []int32) int32 {
		leader := int32(-1)
		for _, r := range isr {
			switch {
			case fenced(r):
			case !c.shuttingDown[r]:
				return r
			case leader < 0:
				leader = r
			}
		}
		return leader
	}
	isr := p.ISR
	if len(isr) > 1 && slices.Contains(isr, id) {
		isr = slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
	}
	leader, epoch := p.Leader, p.LeaderEpoch
	if leader == id {
		leader = pick(isr)
		if leader < 0 && c.uncleanAllowed(im, t) {
			// unclean.leader.election.enable: any live replica, losing
			// what only the ISR had.
			for _, r := range p.Replicas {
				if !fenced(r) {
					leader, isr = r, []int32{r}
					c.logger.Warn("unclean leader election", "topic", t.Name, "partition", i, "leader", r)
					c.UncleanElections.Add(1)
					break
				}
			}
		}
		epoch++
	}
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return metadata.PartitionRecord{}, false
	}
	return metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, LostReplicas: p.LostReplicas, ISR: isr,
		Leader: leader, LeaderEpoch: epoch, PartitionEpoch: p.PartitionEpoch + 1}, true
}

// electLeaders gives broker id (about to be unfenced) the leadership
// of leaderless partitions whose ISR holds it.
func (c *Controller) electLeaders(im *metadata.Image, id int32) []metadata.Record {
	var recs []metadata.Record
	for _, name := range im.TopicNames() {
		t := im.Topic(name)
		for i, p := range t.Partitions {
			if p.Leader >= 0 || !slices.Contains(p.Replicas, id) || slices.Contains(p.LostReplicas, id) {
				continue
			}
			isr := p.ISR
			if !slices.Contains(p.ISR, id) {
				if !c.uncleanAllowed(im, t) {
					continue
				}
				isr = []int32{id}
				c.logger.Warn("unclean leader election", "topic", name, "partition", i, "leader", id)
				c.UncleanElections.Add(1)
			}
			recs = append(recs, metadata.PartitionRecord{TopicID: t.ID, Partition: int32(i), Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, LostReplicas: p.LostReplicas, ISR: isr,
				Leader: id, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1})
		}
	}
	return recs
}

// lastPerPartition drops every PartitionRecord that a later one in recs
// replaces (same topic and partition): the image after the batch is the
// same, as a PartitionRecord sets the whole partition.
func lastPerPartition(recs []metadata.Record) []metadata.Record {
	type key struct {
		topic     metadata.UUID
		partition int32
	}
	last := map[key]int{}
	for i, r := range recs {
		if p, ok := r.(metadata.PartitionRecord); ok {
			last[key{p.TopicID, p.Partition}] = i
		}
	}
	if len(last) == 0 {
		return recs
	}
	out := recs[:0:0]
	for i, r := range recs {
		if p, ok := r.(metadata.PartitionRecord); ok && last[key{p.TopicID, p.Partition}] != i {
			continue
		}
		out = append(out, r)
	}
	return out
}

// otherLiveBroker reports whether a broker other than id is registered,
// unfenced and not in controlled shutdown.
func (c *Controller) otherLiveBroker(im *metadata.Image, id int32) bool {
	for _, b := range im.Brokers() {
		if b.ID != id && !b.Fenced && !c.shuttingDown[b.ID] {
			return true
		}
	}
	return false
}

// AwaitPeersShutdown is called by the active controller's own node once
// its broker's controlled shutdown is done, before its quorum stops. When
// other brokers are stopping too (at least one asked for a controlled
// shutdown since it registered), it waits until every other live broker
// has asked as well and every such request has been answered (its
// leadership moves committed), or ctx ends: a node of a cluster stopped all at once
// whose shutdown heartbeat arrives a moment later would otherwise find no
// controller (and no quorum) and wait out its whole controlled-shutdown
// time. When no other broker is stopping (a rolling restart), it returns
// at once. Returns ctx's error when it gave up.
func (c *Controller) AwaitPeersShutdown(ctx context.Context, self int32) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		done := true
		err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
			stopping, waiting := false, false
			for _, b := range im.Brokers() {
				switch {
				case b.ID == self:
				case c.shuttingDown[b.ID]:
					stopping = true
				case !b.Fenced:
					waiting = true
				}
			}
			done = !stopping || !waiting
			return nil, nil
		})
		if err != nil || done && c.otherShutdowns.Load() == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// awaitOtherShutdowns waits until no controlled-shutdown heartbeat of
// another broker is being answered (their moves committed), or ctx ends.
func (c *Controller) awaitOtherShutdowns(ctx context.Context) error {
	return awaitZero(ctx, &c.otherShutdowns)
}

// awaitShutdownMoves waits until no controlled shutdown's moves are being
// committed (every chunk of each), or ctx ends.
func (c *Controller) awaitShutdownMoves(ctx context.Context) error {
	return awaitZero(ctx, &c.shutdownMoves)
}

// awaitZero polls n every 20 ms until it is zero or ctx ends.
func awaitZero(ctx context.Context, n *atomic.Int32) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for n.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
