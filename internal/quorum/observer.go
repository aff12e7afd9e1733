package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// Fetcher sends an observer's Fetch requests to a voter's controller
// listener. Implementations are safe for concurrent use.
type Fetcher interface {
	// Fetch sends req (its version set) to voter and returns the response.
	// Errors: connection and protocol errors, ctx.Err().
	Fetch(ctx context.Context, voter config.Voter, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error)
	// Close closes the connections.
	Close() error
}

// ObserverConfig configures an Observer. Zero values mean the defaults.
type ObserverConfig struct {
	// NodeID is this node's node.id, sent as the fetch's replica id; it
	// must not be a voter.
	NodeID int32
	// Voters are controller.quorum.voters: the controller listeners asked
	// for the leader and fetched from.
	Voters []config.Voter
	// Log is __cluster_metadata-0 (see MetadataLog). The caller opens it
	// and closes it after Close.
	Log *storage.Log
	// ClusterID is sent with every fetch; a leader of another cluster
	// answers INCONSISTENT_CLUSTER_ID.
	ClusterID string
	// Dial, when set, opens the connections to the controllers (TLS and
	// SASL of a secured controller listener); nil dials plain TCP.
	Dial wire.DialFunc
	// FetchMaxWait is how long the leader holds a fetch that finds nothing
	// new (default 500 ms, KRaft's fetch max wait).
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds the batches of one fetch response (default 8
	// MiB); a larger batch is still fetched whole.
	FetchMaxBytes int32
	// RequestTimeout bounds a fetch beyond FetchMaxWait (default 2 s, as
	// controller.quorum.request.timeout.ms); past it the leader is
	// considered lost.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed fetch,
	// doubling from one to the other (defaults 50 ms, 1 s).
	MinBackoff, MaxBackoff time.Duration
	// Fetcher carries the fetches (default: Kafka-protocol connections to
	// the voters' addresses).
	Fetcher Fetcher
	// Logger nil discards.
	Logger *slog.Logger
}

// Observer follows the metadata log without being a voter, as a KRaft
// broker does: it fetches __cluster_metadata-0 from the quorum's leader
// with the Fetch API, stores what it gets in its own copy of the log
// (truncating where its history diverges from the leader's) and delivers
// the committed batches. It implements Log; Append always fails with
// ErrNotLeader. Safe for concurrent use.
//
// The leader is learned from fetch responses (their current_leader, and
// NOT_LEADER_OR_FOLLOWER or epoch errors): with no leader known the
// observer asks the voters in turn. A fetch that fails or times out makes
// the leader unknown (LeaderID -1) until a voter names one.
//
// The high-watermark is not persisted: after a restart nothing is
// delivered until the leader's first answer gives it, then the stored log
// is delivered up to it without fetching it again. WaitCaughtUp waits for
// that, so that a Replay right after it covers the whole log.
type Observer struct {
	cfg     ObserverConfig
	logger  *slog.Logger
	d       *dispatcher
	fetcher Fetcher

	ctx    context.Context // canceled by Close: the fetch in flight
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// caughtUp is closed once the delivered log reaches the
	// high-watermark of the leader's first answer.
	caughtUp chan struct{}

	// Owned by the loop goroutine.
	catchUpTo int64 // that high-watermark, -1 before the first answer
	leader    Leadership
	next      int   // index in cfg.Voters of the voter to ask when no leader is known
	stuckErr  error // a divergence below the high-watermark, logged once
}

// OpenObserver starts an observer on cfg.Log. Errors: no voters, no log,
// NodeID among the voters.
func OpenObserver(cfg ObserverConfig) (*Observer, error) {
	if len(cfg.Voters) == 0 || cfg.Log == nil {
		return nil, errors.New("quorum: ObserverConfig needs voters and a Log")
	}
	for _, v := range cfg.Voters {
		if v.ID == cfg.NodeID {
			return nil, fmt.Errorf("quorum: node %d is a voter, not an observer", cfg.NodeID)
		}
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 8 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "quorum-observer", "node", cfg.NodeID)
	fetcher := cfg.Fetcher
	if fetcher == nil {
		fetcher = newWireFetcher(cfg.NodeID, max(cfg.FetchMaxBytes, MaxEntryBytes)+1<<20, cfg.Dial)
	}
	epoch, _ := cfg.Log.LatestEpoch()
	o := &Observer{
		cfg:       cfg,
		logger:    logger,
		fetcher:   fetcher,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		caughtUp:  make(chan struct{}),
		catchUpTo: -1,
		leader:    Leadership{Epoch: int64(max(epoch, 0)), LeaderID: -1},
		next:      int(cfg.NodeID) % len(cfg.Voters),
	}
	if o.next < 0 {
		o.next = 0
	}
	o.d = newDispatcher(cfg.Log, cfg.NodeID, cfg.Log.LogStartOffset(), o.leader, logger)
	o.ctx, o.cancel = context.WithCancel(context.Background())
	go o.run()
	return o, nil
}

// Append implements Log: an observer never leads. Errors: ErrNotLeader
// (naming the leader when known).
func (o *Observer) Append(context.Context, []metadata.Record) (int64, error) {
	_, l, _ := o.d.state()
	if l.LeaderID >= 0 {
		return 0, fmt.Errorf("%w: an observer; the leader is node %d in epoch %d", ErrNotLeader, l.LeaderID, l.Epoch)
	}
	return 0, fmt.Errorf("%w: an observer; no leader known in epoch %d", ErrNotLeader, l.Epoch)
}

// Replay implements Log.
func (o *Observer) Replay(fn func(offset int64, recs []metadata.Record) error) error {
	return o.d.replay(fn)
}

// Register implements Log.
func (o *Observer) Register(from int64, l Listener) (unregister func()) {
	return o.d.register(from, l)
}

// Leader implements Log.
func (o *Observer) Leader() Leadership {
	_, l, _ := o.d.state()
	return l
}

// HighWatermark is the committed end of the log as delivered: offsets
// below it are committed. It is the log start offset until the leader's
// first answer.
func (o *Observer) HighWatermark() int64 {
	c, _, _ := o.d.state()
	return c
}

// WaitCaughtUp waits until the committed log delivered reaches the
// high-watermark the leader gave in its first answer since OpenObserver:
// a broker that waits for it before building its image (Replay) starts
// from the whole log it stored, not batch by batch. Errors: ctx.Err(),
// ErrClosed.
func (o *Observer) WaitCaughtUp(ctx context.Context) error {
	select {
	case <-o.caughtUp:
		return nil
	case <-ctx.Done():
	case <-o.done:
	}
	select {
	case <-o.caughtUp:
		return nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close stops fetching and the listeners and waits for them. The log
// stays open (the caller closes it). It returns the Fetcher's Close error.
func (o *Observer) Close() error {
	o.once.Do(func() {
		close(o.stop)
		o.cancel()
	})
	<-o.done
	err := o.fetcher.Close()
	o.d.close()
	return err
}

// run is the fetch loop: the only goroutine that writes the log.
func (o *Observer) run() {
	defer close(o.done)
	var backoff time.Duration
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-o.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-o.stop:
			return
		default:
		}
		if o.fetchOnce() {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, o.cfg.MinBackoff), o.cfg.MaxBackoff)
		}
	}
}

// setLeader records and publishes the leadership.
func (o *Observer) setLeader(l Leadership) {
	if l != o.leader {
		o.logger.Debug("metadata quorum leader", "leader", l.LeaderID, "leader_epoch", l.Epoch)
	}
	o.leader = l
	o.d.setLeader(l, -1)
}

// lostLeader makes the leader unknown and moves the next probe to the
// voter after target.
func (o *Observer) lostLeader(target int) {
	o.next = (target + 1) % len(o.cfg.Voters)
	if o.leader.LeaderID >= 0 {
		o.setLeader(Leadership{Epoch: o.leader.Epoch, LeaderID: -1})
	}
}

// voterIndex is the index in cfg.Voters of node id, or -1.
func (o *Observer) voterIndex(id int32) int {
	for i, v := range o.cfg.Voters {
		if v.ID == id {
			return i
		}
	}
	return -1
}

// fetchOnce sends one fetch to the leader (or, with none known, to the
// next voter) and handles its response. It reports progress: false asks
// the loop to back off.
func (o *Observer) fetchOnce() bool {
	target := o.voterIndex(o.leader.LeaderID)
	toLeader := target >= 0
	if !toLeader {
		target = o.next
	}
	voter := o.cfg.Voters[target]
	log := o.cfg.Log
	leo := log.LogEndOffset()
	lastEpoch := int32(-1)
	if e, ok := log.LatestEpoch(); ok && leo > log.LogStartOffset() {
		lastEpoch = e
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = o.cfg.NodeID
	req.MaxWaitMillis = int32(o.cfg.FetchMaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = o.cfg.FetchMaxBytes
	req.SessionEpoch = -1
	if o.cfg.ClusterID != "" {
		req.ClusterID = kmsg.StringPtr(o.cfg.ClusterID)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = MetadataTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.CurrentLeaderEpoch = -1
	if toLeader {
		rp.CurrentLeaderEpoch = int32(o.leader.Epoch)
	}
	rp.FetchOffset = leo
	rp.LastFetchedEpoch = lastEpoch
	rp.LogStartOffset = log.LogStartOffset()
	rp.PartitionMaxBytes = o.cfg.FetchMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.FetchMaxWait+o.cfg.RequestTimeout)
	resp, err := o.fetcher.Fetch(ctx, voter, req)
	cancel()
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	var sp *kmsg.FetchResponseTopicPartition
	if err == nil {
		sp = metadataPartition(resp)
		if sp == nil {
			err = errors.New("no __cluster_metadata-0 in the fetch response")
		}
	}
	if err != nil {
		if o.ctx.Err() == nil {
			o.logger.Debug("metadata fetch failed", "voter", voter.ID, "leader", toLeader, "err", err)
		}
		o.lostLeader(target)
		return false
	}

	// The voter's view of the leadership, when newer than ours.
	cl := sp.CurrentLeader
	changed := false
	if e := int64(cl.LeaderEpoch); cl.LeaderEpoch >= 0 && (e > o.leader.Epoch || e == o.leader.Epoch && o.leader.LeaderID < 0 && cl.LeaderID >= 0) {
		if cl.LeaderID >= 0 && o.voterIndex(cl.LeaderID) < 0 {
			o.logger.Warn("metadata quorum leader is not in controller.quorum.voters", "leader", cl.LeaderID, "voter", voter.ID)
			cl.LeaderID = -1
		}
		o.setLeader(Leadership{Epoch: e, LeaderID: cl.LeaderID})
		changed = true
	}

	switch sp.ErrorCode {
	case 0:
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code:
		if changed && o.leader.LeaderID >= 0 {
			return true // ask the new leader at once
		}
		o.lostLeader(target)
		return false
	case kerr.OffsetOutOfRange.Code:
		// The fetch offset is past the leader's log: what this copy holds
		// beyond the leader's high-watermark was never committed.
		if hw := sp.HighWatermark; hw >= 0 && hw < leo {
			return o.truncate(hw, voter.ID) == nil
		}
		o.logger.Warn("metadata fetch out of range", "voter", voter.ID, "fetch_offset", leo, "leader_log_start_offset", sp.LogStartOffset)
		return false
	default:
		o.logger.Warn("metadata fetch failed", "voter", voter.ID, "err", kerr.ErrorForCode(sp.ErrorCode))
		o.lostLeader(target)
		return false
	}

	// A voter that serves the log leads it.
	if o.leader.LeaderID != voter.ID {
		o.setLeader(Leadership{Epoch: max(o.leader.Epoch, int64(cl.LeaderEpoch)), LeaderID: voter.ID})
	}
	if div := sp.DivergingEpoch; div.EndOffset >= 0 {
		to := div.EndOffset
		if e, end := log.EndOffsetForEpoch(div.Epoch); e < 0 {
			to = log.LogStartOffset()
		} else {
			to = min(to, end)
		}
		return o.truncate(to, voter.ID) == nil
	}
	if err := o.append(sp.RecordBatches, leo); err != nil {
		o.logger.Warn("storing fetched metadata failed", "voter", voter.ID, "fetch_offset", leo, "err", err)
		return false
	}
	if hw := sp.HighWatermark; hw >= 0 {
		committed := min(hw, log.LogEndOffset())
		o.d.setCommitted(committed)
		if o.catchUpTo < 0 {
			o.catchUpTo = hw
		}
		if committed >= o.catchUpTo {
			select {
			case <-o.caughtUp:
			default:
				close(o.caughtUp)
			}
		}
	}
	return true
}

// metadataPartition finds __cluster_metadata-0 in resp.
func metadataPartition(resp *kmsg.FetchResponse) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		if resp.Topics[i].Topic != MetadataTopic {
			continue
		}
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == 0 {
				return &resp.Topics[i].Partitions[j]
			}
		}
	}
	return nil
}

// truncate cuts the stored log at offset, which must not be below what
// was delivered as committed. Errors: such an offset, storage errors.
func (o *Observer) truncate(offset int64, voter int32) error {
	if committed, _, _ := o.d.state(); offset < committed {
		err := fmt.Errorf("%w: the leader's log diverges at offset %d, below the committed offset %d already delivered", ErrFormat, offset, committed)
		if o.stuckErr == nil {
			o.logger.Error("metadata log cannot follow the leader", "voter", voter, "err", err)
		}
		o.stuckErr = err
		return err
	}
	o.logger.Info("truncating the metadata log to the leader's history", "voter", voter, "offset", offset, "log_end_offset", o.cfg.Log.LogEndOffset())
	if err := o.cfg.Log.Truncate(offset); err != nil {
		o.logger.Warn("truncating the metadata log failed", "offset", offset, "err", err)
		return err
	}
	return nil
}

// append stores the whole batches of b that end past leo (the log end
// offset the fetch asked from), each checked (record.Validate). A trailing
// partial batch is ignored. Errors: ErrFormat (wrapped) for a batch
// straddling leo or offsets out of order, record errors, storage errors.
func (o *Observer) append(b []byte, leo int64) error {
	start, end, pos := -1, 0, 0
	next := leo
	_, err := record.Batches(b, func(batch []byte, h record.Header) error {
		at := pos
		pos += len(batch)
		if h.NextOffset() <= next {
			return nil // already stored
		}
		if h.BaseOffset != next {
			return fmt.Errorf("%w: fetched batch at offset %d, expected %d", ErrFormat, h.BaseOffset, next)
		}
		if _, err := record.Validate(batch); err != nil {
			return err
		}
		if start < 0 {
			start = at
		}
		end, next = pos, h.NextOffset()
		return nil
	})
	if err != nil && !errors.Is(err, record.ErrTruncated) {
		return err
	}
	if start < 0 {
		return nil
	}
	_, err = o.cfg.Log.AppendAsFollower(b[start:end])
	return err
}

// wireFetcher is the default Fetcher: one wire.Client per voter.
type wireFetcher struct {
	clientID string
	maxBytes int32
	dial     wire.DialFunc

	mu      sync.Mutex // guards clients
	clients map[int32]*wire.Client
}

func newWireFetcher(node int32, maxResponseBytes int32, dial wire.DialFunc) *wireFetcher {
	return &wireFetcher{clientID: "samsa-observer-" + strconv.Itoa(int(node)), maxBytes: maxResponseBytes, dial: dial, clients: map[int32]*wire.Client{}}
}

func (f *wireFetcher) Fetch(ctx context.Context, voter config.Voter, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	f.mu.Lock()
	c := f.clients[voter.ID]
	if c == nil {
		c = wire.NewClient(voter.Addr(), f.clientID, f.maxBytes).WithDial(f.dial)
		f.clients[voter.ID] = c
	}
	f.mu.Unlock()
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

func (f *wireFetcher) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, c := range f.clients {
		errs = append(errs, c.Close())
	}
	f.clients = map[int32]*wire.Client{}
	return errors.Join(errs...)
}
