package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/storage"
)

// RaftConfig configures a Raft voter. Zero values mean the defaults.
type RaftConfig struct {
	// NodeID is this voter's node.id.
	NodeID int32
	// Voters are controller.quorum.voters; NodeID must be one. Changing
	// the set of voters of an existing quorum is not supported yet.
	Voters []config.Voter
	// Log is __cluster_metadata-0 (see MetadataLog). The caller opens it
	// and closes it after Close.
	Log *storage.Log
	// Transport carries the raft messages (NewTCPTransport); Raft starts
	// it and closes it in Close.
	Transport Transport
	// TickInterval is raft's logical clock period (default 100 ms).
	TickInterval time.Duration
	// ElectionTicks: a follower that hears nothing from a leader for a
	// random number of ticks in [ElectionTicks, 2*ElectionTicks) starts an
	// election (default 10: 1-2 s at the default tick, as Kafka's
	// controller.quorum.election.timeout.ms of 1000 ms with its backoff).
	// A leader that hears from no quorum for ElectionTicks steps down.
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat period in ticks (default
	// 1); below ElectionTicks.
	HeartbeatTicks int
	// ClusterID, when set, is checked against the cluster id of observers'
	// fetches (INCONSISTENT_CLUSTER_ID when they differ).
	ClusterID string
	// OnStop, when set, is called once, from the voter's loop, with the
	// error that stopped the voter (its log could not be written, a full
	// disk included; raft panicked); not at Close. The voter answers
	// nothing from then on: the node should halt, as Kafka's fatal fault
	// handler ends the process.
	OnStop func(err error)
	// Logger nil discards.
	Logger *slog.Logger
}

// Raft is a voter of the replicated metadata log: go.etcd.io/raft/v3's
// RawNode decides elections and commits, driven by one loop goroutine that
// owns it, stores its entries in Log and sends its messages through
// Transport. It implements Log. Safe for concurrent use.
type Raft struct {
	cfg    RaftConfig
	id     uint64 // raft id
	logger *slog.Logger
	store  *logStore
	d      *dispatcher
	fetch  *fetchServer

	recvc    chan *raftpb.Message
	propc    chan *proposal
	unreachc chan uint64
	infoc    chan chan QuorumInfo
	stop     chan struct{}
	done     chan struct{} // closed when the loop ends
	once     sync.Once

	mu  sync.Mutex // guards err
	err error      // why the loop ended

	// Owned by the loop goroutine.
	rn      *raft.RawNode
	pending map[uint64]*proposal // by index
	leading bool
	status  raft.BasicStatus
	// fetches are the voters' fetch times in this leadership, by node
	// id; reset when it changes.
	fetches map[int32]*replicaTimes

	vote atomic.Int32 // node id voted for in the current term, -1 none

	// caughtUp is closed once the committed log reaches catchUp, the
	// read index the quorum's leader gave after OpenRaft (WaitCaughtUp).
	caughtUp chan struct{}
	// Owned by the loop goroutine.
	catchUp      uint64 // that read index; 0 before the answer
	committedIdx uint64 // the raft index of the last committed entry delivered
	readAsked    int    // ticks since the last read-index request; -1 none yet
}

// catchUpCtx marks the read-index requests of the catch-up after
// OpenRaft (raft echoes it in the answer's ReadState).
var catchUpCtx = []byte("samsa-catch-up")

// proposal is one Append waiting for its entry to commit.
type proposal struct {
	data        []byte
	index, term uint64     // set by the loop once proposed
	offset      int64      // set by the loop once committed
	res         chan error // capacity 1
}

// QuorumInfo is the state of the quorum as DescribeQuorum reports it.
type QuorumInfo struct {
	Leadership
	// HighWatermark: offsets below it are committed.
	HighWatermark int64
	// Voters in node id order. A leader knows every voter's log end
	// offset; other voters only their own (the rest are -1).
	Voters []VoterState
	// Observers are the nodes that fetched the log from this voter as
	// observers (brokers that are not voters) within
	// ObserverSessionTimeout, in node id order; their LogEndOffset is
	// their last fetch offset. Only the leader serves observers.
	Observers []VoterState
}

// VoterState is one voter or observer in QuorumInfo.
type VoterState struct {
	ID           int32
	LogEndOffset int64 // -1 unknown
	// LastFetchTimestamp is when the replica last fetched from the
	// leader, in Unix milliseconds; -1 never in this leader's epoch. A
	// voter fetches when it answers the leader's appends and heartbeats
	// (raft's MsgAppResp, MsgHeartbeatResp). The leader itself: now.
	LastFetchTimestamp int64
	// LastCaughtUpTimestamp is the last time the replica had all the
	// leader had, in Unix milliseconds, as Kafka's
	// LeaderState.ReplicaState computes it: the time of a fetch at the
	// leader's log end, or of the previous fetch when this one reached
	// the log end the leader had then; -1 never. The leader itself: now.
	LastCaughtUpTimestamp int64
}

// replicaTimes are a replica's LastFetchTimestamp and
// LastCaughtUpTimestamp as the leader tracks them.
type replicaTimes struct {
	lastFetch, lastCaughtUp int64 // Unix ms; -1 never
	leaderEnd               int64 // the leader's log end at the last fetch; -1 none
}

func newReplicaTimes() replicaTimes { return replicaTimes{-1, -1, -1} }

// fetched records a fetch at nowMs that reached offset (the replica's log
// end) while the leader's log ended at leaderEnd, as Kafka's
// ReplicaState.updateFollowerState.
func (t *replicaTimes) fetched(nowMs, offset, leaderEnd int64) {
	switch {
	case offset >= leaderEnd:
		t.lastCaughtUp = max(t.lastCaughtUp, nowMs)
	case t.leaderEnd >= 0 && offset >= t.leaderEnd:
		t.lastCaughtUp = max(t.lastCaughtUp, t.lastFetch)
	}
	t.leaderEnd = leaderEnd
	t.lastFetch = max(t.lastFetch, nowMs)
}

// Defaults of RaftConfig and limits passed to raft.
const (
	defaultTickInterval = 100 * time.Millisecond
	maxSizePerMsg       = 1 << 20
	maxInflightMsgs     = 256
	maxUncommittedBytes = 64 << 20
	recvQueue           = 4096
)

// OpenRaft opens the voter's state from cfg.Log and its quorum-state file,
// starts the transport and the loop, and returns. Errors: an invalid
// config, ErrFormat (wrapped) for a log or state file it cannot use,
// storage errors, the transport's Start error.
func OpenRaft(cfg RaftConfig) (_ *Raft, err error) {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = defaultTickInterval
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.HeartbeatTicks >= cfg.ElectionTicks {
		return nil, fmt.Errorf("quorum: heartbeat ticks %d not below election ticks %d", cfg.HeartbeatTicks, cfg.ElectionTicks)
	}
	if cfg.Log == nil || cfg.Transport == nil {
		return nil, errors.New("quorum: RaftConfig needs a Log and a Transport")
	}
	var voters []int32
	for _, v := range cfg.Voters {
		voters = append(voters, v.ID)
	}
	slices.Sort(voters)
	if !slices.Contains(voters, cfg.NodeID) {
		return nil, fmt.Errorf("quorum: node %d is not among the voters %v", cfg.NodeID, cfg.Voters)
	}
	if len(slices.Compact(slices.Clone(voters))) != len(voters) {
		return nil, fmt.Errorf("quorum: voter listed twice in %v", cfg.Voters)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "quorum", "node", cfg.NodeID)
	store, err := openLogStore(cfg.Log, voters)
	if err != nil {
		return nil, err
	}
	r := &Raft{
		cfg:      cfg,
		id:       raftID(cfg.NodeID),
		logger:   logger,
		store:    store,
		recvc:    make(chan *raftpb.Message, recvQueue),
		propc:    make(chan *proposal, 64),
		unreachc: make(chan uint64, 64),
		infoc:    make(chan chan QuorumInfo),
		stop:     make(chan struct{}),
		pending:  map[uint64]*proposal{},
		fetches:  map[int32]*replicaTimes{},
		done:     make(chan struct{}),
		caughtUp: make(chan struct{}),
	}
	r.vote.Store(-1)
	commit := store.commit()
	r.committedIdx, r.readAsked = commit, -1
	err = r.guard(func() error {
		var err error
		r.rn, err = raft.NewRawNode(&raft.Config{
			ID:                        r.id,
			ElectionTick:              cfg.ElectionTicks,
			HeartbeatTick:             cfg.HeartbeatTicks,
			Storage:                   store,
			Applied:                   commit,
			MaxSizePerMsg:             maxSizePerMsg,
			MaxCommittedSizePerReady:  4 * maxSizePerMsg,
			MaxUncommittedEntriesSize: maxUncommittedBytes,
			MaxInflightMsgs:           maxInflightMsgs,
			CheckQuorum:               true,
			PreVote:                   true,
			DisableProposalForwarding: true,
			Logger:                    raftLogger{logger},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	r.status = r.rn.BasicStatus()
	r.d = newDispatcher(cfg.Log, cfg.NodeID, store.endOffset(commit), r.leadership(), logger)
	r.fetch = newFetchServer(cfg.Log, r.d, cfg.NodeID, cfg.ClusterID)
	if len(voters) == 1 {
		if err := r.guard(r.rn.Campaign); err != nil {
			return nil, err
		}
	}
	if err := cfg.Transport.Start(r.receive, r.unreachable); err != nil {
		return nil, err
	}
	logger.Info("metadata quorum voter started", "voters", voters, "leader_epoch", r.status.GetTerm(),
		"high_watermark", store.endOffset(commit), "log_end_offset", store.end)
	go r.run()
	return r, nil
}

// guard runs fn, turning a panic of raft (which panics on storage errors
// and broken invariants) into an error.
func (r *Raft) guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("quorum: raft panicked: %v", p)
		}
	}()
	return fn()
}

// receive passes a message from the transport to the loop, dropping it
// when it is not for this voter, carries entries this voter could not
// store, or the loop is behind.
func (r *Raft) receive(m *raftpb.Message) {
	if m.GetTo() != r.id {
		return
	}
	// Appends carry log entries; a read-index request and its answer
	// carry the request's context as an entry's data, not a record batch.
	var ents []*raftpb.Entry
	if typ := m.GetType(); typ != raftpb.MsgReadIndex && typ != raftpb.MsgReadIndexResp {
		ents = m.GetEntries()
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal {
			r.logger.Warn("dropping raft message with a configuration change", "from", nodeID(m.GetFrom()))
			return
		}
		if _, err := checkEntryData(e.GetData()); err != nil {
			r.logger.Warn("dropping raft message with a malformed entry", "from", nodeID(m.GetFrom()), "index", e.GetIndex(), "err", err)
			return
		}
	}
	if m.GetSnapshot() != nil && !raft.IsEmptySnap(m.GetSnapshot()) {
		r.logger.Warn("dropping raft snapshot (not supported yet)", "from", nodeID(m.GetFrom()))
		return
	}
	select {
	case r.recvc <- m:
	default:
	}
}

func (r *Raft) unreachable(voter int32) {
	select {
	case r.unreachc <- raftID(voter):
	default:
	}
}

// run is the loop: the only goroutine touching rn and the store.
func (r *Raft) run() {
	defer close(r.done)
	ticker := time.NewTicker(r.cfg.TickInterval)
	defer ticker.Stop()
	// The first turn handles what OpenRaft left ready (a single voter's
	// campaign) without waiting for a tick.
	if r.turn(nil) {
		return
	}
	for {
		var err error
		select {
		case <-r.stop:
			if err := r.store.setHardState(r.rn.BasicStatus().HardState); err != nil {
				r.logger.Warn("writing the quorum state on close failed", "err", err)
			}
			r.finish(ErrClosed)
			return
		case <-ticker.C:
			err = r.guard(func() error { r.rn.Tick(); r.askCatchUp(true); return nil })
		case m := <-r.recvc:
			err = r.guard(func() error {
				for {
					// Errors are messages raft ignores (from an unknown
					// peer, a stale local message type).
					_ = r.rn.Step(m)
					r.noteFetch(m)
					select {
					case m = <-r.recvc:
						continue
					default:
					}
					return nil
				}
			})
		case p := <-r.propc:
			err = r.guard(func() error { r.propose(p); return nil })
		case id := <-r.unreachc:
			err = r.guard(func() error { r.rn.ReportUnreachable(id); return nil })
		case c := <-r.infoc:
			err = r.guard(func() error { c <- r.info(); return nil })
		}
		if r.turn(err) {
			return
		}
	}
}

// turn ends a turn of the loop that err ended (nil: an event stepped):
// it handles what raft has ready and asks for the catch-up's read index.
// It reports whether the loop must end (the voter stopped).
func (r *Raft) turn(err error) bool {
	if err == nil {
		err = r.guard(r.handleReady)
	}
	if err == nil && r.catchUp == 0 {
		err = r.guard(func() error { r.askCatchUp(false); return r.handleReady() })
	}
	if err != nil {
		r.logger.Error("metadata quorum voter stopped", "err", err)
		r.finish(err)
		if r.cfg.OnStop != nil {
			r.cfg.OnStop(err)
		}
		return true
	}
	return false
}

// finish fails every pending proposal and publishes that no leader is
// known to listeners.
func (r *Raft) finish(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	for i, p := range r.pending {
		p.res <- err
		delete(r.pending, i)
	}
	r.d.setLeader(Leadership{Epoch: int64(r.status.GetTerm()), LeaderID: -1}, -1)
}

// propose proposes p and the proposals queued behind it. Proposals run
// with no unstable entry in raft's log (handleReady drained them), so the
// n-th accepted one lands at the store's last index + n.
func (r *Raft) propose(p *proposal) {
	next := r.store.last + 1
	for {
		switch err := r.rn.Propose(p.data); {
		case err == nil:
			p.index, p.term = next, r.rn.BasicStatus().GetTerm()
			r.pending[next] = p
			next++
		case r.rn.BasicStatus().RaftState != raft.StateLeader:
			p.res <- r.notLeader()
		default:
			p.res <- fmt.Errorf("%w: %v", ErrDropped, err)
		}
		select {
		case p = <-r.propc:
		default:
			return
		}
	}
}

func (r *Raft) notLeader() error {
	if lead := r.status.Lead; lead != raft.None {
		return fmt.Errorf("%w: the leader is node %d in epoch %d", ErrNotLeader, nodeID(lead), r.status.GetTerm())
	}
	return fmt.Errorf("%w: no leader known in epoch %d", ErrNotLeader, r.status.GetTerm())
}

// handleReady persists, sends and applies what raft has ready, until it
// has nothing more.
func (r *Raft) handleReady() error {
	for r.rn.HasReady() {
		rd := r.rn.Ready()
		r.status = r.rn.BasicStatus()
		if !raft.IsEmptySnap(rd.Snapshot) {
			return fmt.Errorf("quorum: raft produced a snapshot (not supported yet)")
		}
		if len(rd.Entries) > 0 {
			if err := r.store.append(rd.Entries, r.status.GetTerm(), nodeID(r.status.Lead)); err != nil {
				return err
			}
			if rd.MustSync {
				if err := r.cfg.Log.Flush(); err != nil {
					return err
				}
			}
			r.checkProposed(rd.Entries)
		}
		// A change of the commit index alone is not worth an fsync: it is
		// written with the next term, vote or entries, and on Close. A
		// voter restarting after a crash learns the rest from the leader.
		if rd.MustSync && !raft.IsEmptyHardState(rd.HardState) {
			if err := r.store.setHardState(rd.HardState); err != nil {
				return err
			}
		}
		for _, m := range rd.Messages {
			r.cfg.Transport.Send(m)
		}
		for _, rs := range rd.ReadStates {
			if r.catchUp == 0 && bytes.Equal(rs.RequestCtx, catchUpCtx) {
				r.catchUp = max(rs.Index, 1)
			}
		}
		if n := len(rd.CommittedEntries); n > 0 {
			r.committedIdx = rd.CommittedEntries[n-1].GetIndex()
			r.d.setCommitted(r.store.endOffset(r.committedIdx))
			for _, e := range rd.CommittedEntries {
				if p := r.pending[e.GetIndex()]; p != nil {
					delete(r.pending, e.GetIndex())
					if e.GetTerm() == p.term {
						p.offset = r.store.baseOffset(e.GetIndex())
						p.res <- nil
					} else {
						p.res <- fmt.Errorf("%w: the entry was replaced in epoch %d", ErrNotLeader, e.GetTerm())
					}
				}
			}
		}
		r.updateLeadership()
		r.rn.Advance(rd)
		if r.catchUp > 0 && r.committedIdx >= r.catchUp {
			select {
			case <-r.caughtUp:
			default:
				close(r.caughtUp)
				r.logger.Debug("committed log reached the leader's read index", "high_watermark", r.store.endOffset(r.committedIdx))
			}
		}
	}
	return nil
}

// askCatchUp asks the leader, until it answers, for its commit index (a
// read index, raft's ReadIndex: the leader's commit once it committed an
// entry of its epoch, confirmed by a quorum): every entry committed
// before this voter started is at or below it. The commit index this
// voter stored may be older (it is written without an fsync of its own),
// so the committed log it replays at start may miss deletions and
// creations the quorum committed before a crash. A request goes when a
// leader is known, again every election timeout while unanswered (raft
// drops it when the leadership changes); on the loop goroutine, tick
// when called for a tick of raft's clock.
func (r *Raft) askCatchUp(tick bool) {
	if r.catchUp > 0 {
		return
	}
	if tick && r.readAsked >= 0 {
		r.readAsked++
	}
	if r.rn.BasicStatus().Lead == raft.None || r.readAsked >= 0 && r.readAsked < r.cfg.ElectionTicks {
		return
	}
	r.readAsked = 0
	r.rn.ReadIndex(catchUpCtx)
}

// checkProposed fails pending proposals whose index was written with
// another entry: one of another leader, or (a broken assumption of
// propose, not expected) other data.
func (r *Raft) checkProposed(ents []*raftpb.Entry) {
	for _, e := range ents {
		p := r.pending[e.GetIndex()]
		switch {
		case p == nil:
		case e.GetTerm() != p.term:
			delete(r.pending, e.GetIndex())
			p.res <- fmt.Errorf("%w: the entry was replaced in epoch %d", ErrNotLeader, e.GetTerm())
		case !bytes.Equal(e.GetData(), p.data):
			delete(r.pending, e.GetIndex())
			r.logger.Error("proposal index mismatch", "index", e.GetIndex(), "term", e.GetTerm())
			p.res <- fmt.Errorf("%w: entry %d is not the proposal", ErrDropped, e.GetIndex())
		}
	}
}

// leadership is the leadership in r.status.
func (r *Raft) leadership() Leadership {
	return Leadership{Epoch: int64(r.status.GetTerm()), LeaderID: nodeID(r.status.Lead)}
}

// updateLeadership publishes the leadership after a Ready and fails the
// pending proposals of a leadership that ended.
func (r *Raft) updateLeadership() {
	leading := r.status.RaftState == raft.StateLeader
	epochStart := int64(-1)
	if leading {
		epochStart = r.store.termStartOffset(r.status.GetTerm())
	}
	if r.leading && !leading {
		err := r.notLeader()
		for i, p := range r.pending {
			p.res <- err
			delete(r.pending, i)
		}
	}
	if leading != r.leading {
		r.fetches = map[int32]*replicaTimes{}
		r.logger.Info("metadata quorum leadership changed", "leader", nodeID(r.status.Lead), "leader_epoch", r.status.GetTerm(), "leading", leading)
	}
	r.leading = leading
	r.vote.Store(nodeID(r.status.GetVote()))
	r.d.setLeader(r.leadership(), epochStart)
}

// info builds QuorumInfo on the loop goroutine.
func (r *Raft) info() QuorumInfo {
	committed, _, _ := r.d.state()
	qi := QuorumInfo{Leadership: r.leadership(), HighWatermark: committed}
	st := r.rn.Status()
	now := time.Now().UnixMilli()
	for _, v := range r.store.voters {
		vs := VoterState{ID: v, LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}
		if pr, ok := st.Progress[raftID(v)]; ok && r.leading {
			vs.LogEndOffset = r.store.endOffset(pr.Match)
			if t := r.fetches[v]; t != nil {
				vs.LastFetchTimestamp, vs.LastCaughtUpTimestamp = t.lastFetch, t.lastCaughtUp
			}
		}
		if v == r.cfg.NodeID {
			vs.LogEndOffset = r.store.end
			if r.leading {
				vs.LastFetchTimestamp, vs.LastCaughtUpTimestamp = now, now
			}
		}
		qi.Voters = append(qi.Voters, vs)
	}
	return qi
}

// noteFetch records, on the leader, that a voter answered an append or a
// heartbeat (m, just stepped): Kafka's voters fetch, ours are sent
// entries, and an answer is the fetch that says how far the voter's log
// reaches (its match index).
func (r *Raft) noteFetch(m *raftpb.Message) {
	if typ := m.GetType(); !r.leading || !(typ == raftpb.MsgAppResp && !m.GetReject() || typ == raftpb.MsgHeartbeatResp) {
		return
	}
	var match uint64
	found := false
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == m.GetFrom() {
			match, found = pr.Match, true
		}
	})
	if !found {
		return
	}
	v := nodeID(m.GetFrom())
	t := r.fetches[v]
	if t == nil {
		t = new(replicaTimes)
		*t = newReplicaTimes()
		r.fetches[v] = t
	}
	t.fetched(time.Now().UnixMilli(), int64(match), int64(r.store.last))
}

// closedErr is why the loop ended.
func (r *Raft) closedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		return ErrClosed
	}
	return r.err
}

// Append implements Log: on the leader it proposes recs as one entry (one
// batch, an offset per record) and returns the batch's base offset once it
// is committed and the high-watermark passed it. Errors: ErrNotLeader (with the leader when known), ErrDropped,
// ErrEntryTooLarge, ErrClosed or the error that stopped the voter,
// ctx.Err(). After ErrNotLeader from a lost leadership, or ctx.Err(), the
// entry may still be committed.
func (r *Raft) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	if len(recs) == 0 {
		committed, _, _ := r.d.state()
		return committed, nil
	}
	data, err := encodeEntry(recs, time.Now().UnixMilli())
	if err != nil {
		return 0, err
	}
	p := &proposal{data: data, res: make(chan error, 1)}
	select {
	case r.propc <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-r.done:
		return 0, r.closedErr()
	}
	select {
	case err := <-p.res:
		if err != nil {
			return 0, err
		}
		return p.offset, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-r.done:
		// The loop may have answered just before ending.
		select {
		case err := <-p.res:
			if err == nil {
				return p.offset, nil
			}
			return 0, err
		default:
			return 0, r.closedErr()
		}
	}
}

// WaitCaughtUp waits until the committed log this voter delivers reaches
// the commit point the quorum's leader gave after OpenRaft (a read index,
// see askCatchUp): a Replay after it covers every entry the quorum
// committed before this process started, as Kafka's controllers and
// brokers catch up with the leader's high-watermark before they publish
// metadata. It needs a quorum of voters and a leader. Errors: ctx.Err(),
// ErrClosed or the error that stopped the voter.
func (r *Raft) WaitCaughtUp(ctx context.Context) error {
	select {
	case <-r.caughtUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		select {
		case <-r.caughtUp:
			return nil
		default:
			return r.closedErr()
		}
	}
}

// Replay implements Log.
func (r *Raft) Replay(fn func(offset int64, recs []metadata.Record) error) error {
	return r.d.replay(fn)
}

// Register implements Log.
func (r *Raft) Register(from int64, l Listener) (unregister func()) {
	return r.d.register(from, l)
}

// Leader implements Log.
func (r *Raft) Leader() Leadership {
	_, l, _ := r.d.state()
	return l
}

// Vote is the node id this voter voted for in the current epoch, -1 when
// none (Kafka's raft-metrics current-vote).
func (r *Raft) Vote() int32 { return r.vote.Load() }

// HighWatermark is the committed end of the log: offsets below it are
// committed.
func (r *Raft) HighWatermark() int64 {
	c, _, _ := r.d.state()
	return c
}

// Describe returns the quorum's state (DescribeQuorum). Errors: ErrClosed
// or the error that stopped the voter, ctx.Err().
func (r *Raft) Describe(ctx context.Context) (QuorumInfo, error) {
	c := make(chan QuorumInfo, 1)
	select {
	case r.infoc <- c:
	case <-ctx.Done():
		return QuorumInfo{}, ctx.Err()
	case <-r.done:
		return QuorumInfo{}, r.closedErr()
	}
	select {
	case qi := <-c:
		qi.Observers = r.fetch.observerStates()
		return qi, nil
	case <-r.done:
		return QuorumInfo{}, r.closedErr()
	}
}

// HandleFetch answers req, a Fetch (v4-v12, as the controller listener
// decodes it) of __cluster_metadata partition 0 from an observer, as
// KRaft's leader answers its observers (KIP-595). Only the leader serves
// it; it sends committed batches only, from the fetch offset up to the
// high-watermark, waiting up to max_wait_ms (at most 30 s) for them. Each
// partition response carries the high-watermark and the current leader
// (the current_leader tagged field) and, per error:
//
//   - NOT_LEADER_OR_FOLLOWER: this voter does not lead (or is closed);
//   - FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: current_leader_epoch is
//     older / newer than this leader's epoch;
//   - diverging_epoch set: the fetcher's last_fetched_epoch does not
//     reach its fetch offset in this log; it truncates to the end offset
//     and fetches again;
//   - OFFSET_OUT_OF_RANGE: the fetch offset is outside the log.
//
// Other topics and partitions get UNKNOWN_TOPIC_OR_PARTITION; a cluster id
// other than RaftConfig.ClusterID gets INCONSISTENT_CLUSTER_ID. A
// replica_id of 0 or more is recorded as an observer for Describe. Safe
// for concurrent use.
func (r *Raft) HandleFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	return r.fetch.handle(ctx, req)
}

// Close stops the loop, the transport and the listeners and waits for
// them; pending Appends fail with ErrClosed. The log stays open (the
// caller closes it). It returns the transport's Close error.
func (r *Raft) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	err := r.cfg.Transport.Close()
	r.d.close()
	return err
}

// raftLogger sends raft's logging to slog, its chatty Info at debug level
// (Raft logs leadership changes itself). raft's Panic and Fatal panic; the
// loop turns that into an error.
type raftLogger struct{ l *slog.Logger }

func (l raftLogger) Debug(v ...any)                 { l.l.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Info(v ...any)                  { l.l.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)               { l.l.Warn(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.l.Warn(fmt.Sprintf(format, v...))
}
func (l raftLogger) Error(v ...any)                 { l.l.Error(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.l.Error(fmt.Sprintf(format, v...)) }
func (l raftLogger) Fatal(v ...any)                 { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any) { l.Panicf(format, v...) }
func (l raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	l.l.Error(s)
	panic(s)
}
func (l raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	l.l.Error(s)
	panic(s)
}
