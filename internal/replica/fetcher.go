package replica

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/wire"
)

// Follower fetch parameters (Kafka's replica.fetch.* defaults).
const (
	followerFetchMaxWait      = 500 * time.Millisecond // replica.fetch.wait.max.ms
	followerPartitionMaxBytes = 1 << 20                // replica.fetch.max.bytes
	followerBackoff           = time.Second            // replica.fetch.backoff.ms
	followerFetchVersion      = 12                     // first version with LastFetchedEpoch (KIP-595 style divergence)
)

// fetcher replicates the partitions one leader leads to this broker: it
// sends Fetch requests as a replica (replica id = this broker), appends what
// it gets, and truncates where the leader reports a diverging epoch.
type fetcher struct {
	m      *Manager
	leader int32
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // guards parts and changed
	parts map[TopicPartition]*Partition
	// changed are the partitions added or removed since run last took
	// them (update).
	changed map[TopicPartition]bool
	// watch is registered with every partition in parts: it marks those
	// whose fetch parameters may have moved (appends, truncation, log
	// start, leadership), so that an incremental request looks at those
	// only (SessionWatch).
	watch *SessionWatch

	// view is run's copy of parts, updated from changed (update);
	// lastSweep is when a request last looked at every partition. Only
	// run uses them.
	view      map[TopicPartition]*Partition
	lastSweep time.Time

	// sess is the fetch session (KIP-227) with the leader; only run uses
	// it.
	sess fetchSession
	// delayed holds partitions out of the fetches until a time, after
	// the leader sent them corrupt batches (Kafka's delayPartitions with
	// replica.fetch.backoff.ms); only run uses it.
	delayed map[TopicPartition]time.Time
}

// fetchSession is a follower's side of a fetch session (Kafka's
// FetchSessionHandler): the session id and next epoch, and the fetch
// parameters the leader's session holds for each partition, so that an
// incremental request names only the partitions whose parameters changed
// and forgets those no longer fetched.
type fetchSession struct {
	id    int32 // 0: none, the next request is a full one
	epoch int32 // the epoch of the next incremental request
	held  map[TopicPartition]fetchParams
	// next is what held becomes when the request in flight succeeds: the
	// whole of it when nextAll, else the changes to it (a zero
	// fetchParams, p nil, for a partition forgotten).
	next    map[TopicPartition]fetchParams
	nextAll bool
	full    bool // the request in flight is a full one
}

// fetchParams are the per-partition fields of a follower's fetch.
type fetchParams struct {
	p                   *Partition
	offset, logStart    int64
	leaderEpoch, lastEp int32
}

// reset drops the session: the next request is a full one.
func (s *fetchSession) reset() { s.id, s.epoch, s.held = 0, 0, nil }

func newFetcher(m *Manager, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	f := &fetcher{m: m, leader: leader, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		parts: map[TopicPartition]*Partition{}, changed: map[TopicPartition]bool{}, watch: NewSessionWatch(), view: map[TopicPartition]*Partition{}}
	if !m.spawn(f.run) {
		cancel() // the manager is closing: a fetcher that never runs
	}
	return f
}

func (f *fetcher) add(p *Partition) {
	f.mu.Lock()
	if old := f.parts[p.TopicPartition]; old != p {
		if old != nil {
			old.Unwatch(f.watch)
		}
		p.Watch(f.watch)
	}
	f.parts[p.TopicPartition] = p
	f.changed[p.TopicPartition] = true
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// remove drops p and returns how many partitions remain.
func (f *fetcher) remove(p *Partition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parts[p.TopicPartition] == p {
		delete(f.parts, p.TopicPartition)
		f.changed[p.TopicPartition] = true
		p.Unwatch(f.watch)
	}
	return len(f.parts)
}

func (f *fetcher) stop() { f.cancel() }

// update brings run's view of the partitions up to date and returns it
// with the partitions added or removed since the last call; O(those).
func (f *fetcher) update() (view map[TopicPartition]*Partition, changed []TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp := range f.changed {
		if p, ok := f.parts[tp]; ok {
			f.view[tp] = p
		} else {
			delete(f.view, tp)
		}
		changed = append(changed, tp)
	}
	clear(f.changed)
	return f.view, changed
}

func (f *fetcher) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (f *fetcher) run() {
	log := f.m.logger.With("leader", f.leader)
	var client *wire.Client
	defer func() {
		if client != nil {
			client.Close()
		}
	}()
	var changed []TopicPartition // added or removed, not yet in a request
	for f.ctx.Err() == nil {
		parts, more := f.update()
		changed = append(changed, more...)
		if len(parts) == 0 {
			select {
			case <-f.ctx.Done():
				return
			case <-f.kick:
				continue
			}
		}
		addr, ok := f.m.opts.LeaderAddr(f.leader)
		if !ok {
			f.sleep(followerBackoff)
			continue
		}
		if client == nil || client.Addr() != addr {
			if client != nil {
				client.Close()
			}
			f.sess.reset()
			client = wire.NewClient(addr, "samsa-replica-"+strconv.Itoa(int(f.m.opts.NodeID)), f.m.opts.FetchMaxBytes+(1<<20)).WithDial(f.m.opts.Dial)
		}
		req := f.request(parts, changed)
		changed = changed[:0]
		if f.sess.full && len(req.Topics) == 0 {
			// Every partition is throttled (wait for the quota window)
			// or delayed after corrupt data (wait for the first due).
			now := time.Now()
			wait := f.m.opts.FollowerThrottle.Wait(now)
			if d, ok := f.nextDue(); ok {
				wait = max(wait, d.Sub(now))
			}
			f.sleep(max(wait, 10*time.Millisecond))
			continue
		}
		ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
		// The records are appended before the next request: they may
		// alias the client's receive buffer.
		resp, err := client.RequestReusing(ctx, req)
		cancel()
		if err != nil {
			f.sess.reset() // the leader may or may not have seen it
			if f.ctx.Err() == nil {
				log.Debug("follower fetch failed", "err", err)
				f.sleep(followerBackoff)
			}
			continue
		}
		fresp := resp.(*kmsg.FetchResponse)
		f.sess.done(fresp)
		if fresp.ErrorCode == kerr.FetchSessionIDNotFound.Code || fresp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code {
			continue // a full fetch at once
		}
		if f.handle(parts, fresp) {
			f.sleep(followerBackoff)
		}
	}
}

// request builds the next fetch: a full one naming every partition that is
// not throttled when there is no session (asking for one with epoch 0),
// else an incremental one naming only the partitions whose fetch
// parameters changed since the session last saw them, and forgetting
// those no longer fetched. changed are the partitions added to or removed
// from parts since the last request.
//
// An incremental request looks only at changed and at the partitions the
// watch marked (O(those)), unless a throttle or a delayed partition is in
// play or followerSweep passed since it last looked at every one (which
// carries a log start offset moved by this broker's retention).
func (f *fetcher) request(parts map[TopicPartition]*Partition, changed []TopicPartition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(followerFetchVersion)
	req.ReplicaID = f.m.opts.NodeID
	req.MaxWaitMillis = int32(followerFetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = f.m.opts.FetchMaxBytes
	s := &f.sess
	s.full = s.id == 0
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	if s.full {
		req.SessionEpoch = 0 // INITIAL: a full fetch that asks for a session
	}
	byTopic := map[string]int{}
	now := time.Now()
	marked := f.watch.Drain(nil)
	if !s.full && len(f.delayed) == 0 && !f.m.opts.FollowerThrottle.Exceeded(now) && now.Sub(f.lastSweep) < followerSweep {
		s.next, s.nextAll = map[TopicPartition]fetchParams{}, false
		look := func(tp TopicPartition) {
			if _, ok := s.next[tp]; ok {
				return
			}
			p, ok := parts[tp]
			if !ok {
				if _, held := s.held[tp]; held {
					s.next[tp] = fetchParams{}
					f.forget(req, tp)
				}
				return
			}
			fp := paramsOf(p)
			if s.held[tp] == fp {
				return
			}
			s.next[tp] = fp
			f.name(req, byTopic, tp, fp)
		}
		for _, tp := range changed {
			look(tp)
		}
		for _, p := range marked {
			look(p.TopicPartition)
		}
		return req
	}
	f.lastSweep = now
	s.next, s.nextAll = make(map[TopicPartition]fetchParams, len(parts)), true
	for tp := range f.delayed {
		if _, ok := parts[tp]; !ok {
			delete(f.delayed, tp) // no longer fetched from this leader
		}
	}
	throttled := f.m.opts.FollowerThrottle.Exceeded(now)
	for tp, p := range parts {
		if throttled && p.Config().FollowerThrottled.Has(tp.Partition, f.m.opts.NodeID) {
			continue // over follower.replication.throttled.rate
		}
		if until, ok := f.delayed[tp]; ok {
			if now.Before(until) {
				continue // out of the session too, as Kafka's delayed partitions
			}
			delete(f.delayed, tp)
		}
		fp := paramsOf(p)
		s.next[tp] = fp
		if !s.full && s.held[tp] == fp {
			continue // the session has it
		}
		f.name(req, byTopic, tp, fp)
	}
	if !s.full {
		for tp := range s.held {
			if _, ok := s.next[tp]; !ok {
				f.forget(req, tp)
			}
		}
	}
	return req
}

// followerSweep is how often a follower's incremental request looks at
// every partition it fetches, not only those marked (request).
const followerSweep = 30 * time.Second

// paramsOf is p's fetch parameters now.
func paramsOf(p *Partition) fetchParams {
	fp := fetchParams{p: p, offset: p.LogEndOffset(), logStart: p.LogStartOffset(), leaderEpoch: p.LeaderEpoch(), lastEp: -1}
	if e, ok := p.log.LatestEpoch(); ok {
		fp.lastEp = e
	}
	return fp
}

// name adds tp with fp to req; byTopic indexes req's topics.
func (f *fetcher) name(req *kmsg.FetchRequest, byTopic map[string]int, tp TopicPartition, fp fetchParams) {
	i, ok := byTopic[tp.Topic]
	if !ok {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tp.Topic
		req.Topics = append(req.Topics, rt)
		i = len(req.Topics) - 1
		byTopic[tp.Topic] = i
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.CurrentLeaderEpoch = fp.leaderEpoch
	rp.FetchOffset = fp.offset
	rp.LastFetchedEpoch = fp.lastEp
	rp.LogStartOffset = fp.logStart
	rp.PartitionMaxBytes = followerPartitionMaxBytes
	req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	f.m.fetchPartitionsSent.Add(1)
}

// forget adds tp to req's forgotten topics (consecutive partitions of a
// topic share an entry; the leader does not mind a topic twice).
func (f *fetcher) forget(req *kmsg.FetchRequest, tp TopicPartition) {
	if n := len(req.ForgottenTopics); n > 0 && req.ForgottenTopics[n-1].Topic == tp.Topic {
		req.ForgottenTopics[n-1].Partitions = append(req.ForgottenTopics[n-1].Partitions, tp.Partition)
		return
	}
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic = tp.Topic
	ft.Partitions = []int32{tp.Partition}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
}

// sessionDone moves the session on after a response: a new session from a
// full fetch, the next epoch after an incremental one, none after a
// session error (the next fetch is a full one, at once).
func (s *fetchSession) done(resp *kmsg.FetchResponse) {
	switch {
	case resp.ErrorCode == kerr.FetchSessionIDNotFound.Code || resp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code:
		s.reset()
	case resp.ErrorCode != 0:
		// Another top-level error: the leader may not have moved the
		// session on.
		s.reset()
	case resp.SessionID == 0:
		s.reset() // the leader keeps no session for us (its cache is full)
	case s.full:
		s.id, s.epoch, s.held = resp.SessionID, 1, s.next
	default:
		s.epoch = NextSessionEpoch(s.epoch)
		if s.nextAll {
			s.held = s.next
			break
		}
		for tp, fp := range s.next {
			if fp.p == nil {
				delete(s.held, tp)
			} else {
				s.held[tp] = fp
			}
		}
	}
	s.next = nil
}

// NextSessionEpoch is the fetch session epoch (KIP-227) after e: 1 after
// math.MaxInt32, as Kafka's FetchMetadata.nextEpoch.
func NextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// handle applies a fetch response; it reports whether the fetcher should
// back off (every partition failed).
func (f *fetcher) handle(parts map[TopicPartition]*Partition, resp *kmsg.FetchResponse) (backoff bool) {
	if resp.ErrorCode != 0 {
		return true
	}
	failed, total := 0, 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			total++
			p := parts[TopicPartition{rt.Topic, rp.Partition}]
			if p == nil || p.IsLeader() {
				continue
			}
			if err := f.apply(p, &rp); err != nil {
				failed++
				if errors.Is(err, record.ErrCorrupt) {
					// Nothing was stored; fetch it again after the
					// backoff, as Kafka's fetcher does after a
					// CorruptRecordException.
					f.delay(p.TopicPartition)
					f.m.logger.Warn("follower fetched corrupt batches: not stored, fetched again after replica.fetch.backoff.ms", "topic", rt.Topic, "partition", rp.Partition, "fetch_offset", p.LogEndOffset(), "err", err)
					continue
				}
				f.m.logger.Debug("follower fetch partition failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
			}
		}
	}
	return total > 0 && failed == total
}

// delay keeps tp out of the fetches for followerBackoff.
func (f *fetcher) delay(tp TopicPartition) {
	if f.delayed == nil {
		f.delayed = map[TopicPartition]time.Time{}
	}
	f.delayed[tp] = time.Now().Add(followerBackoff)
}

// nextDue returns the earliest time a delayed partition is fetched again;
// ok is false when none is delayed.
func (f *fetcher) nextDue() (due time.Time, ok bool) {
	for _, t := range f.delayed {
		if !ok || t.Before(due) {
			due, ok = t, true
		}
	}
	return due, ok
}

func (f *fetcher) apply(p *Partition, rp *kmsg.FetchResponseTopicPartition) error {
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		// Our log end is outside the leader's log: below its log start
		// (start over there) or, after an unclean election, past its end.
		leo := p.LogEndOffset()
		if leo < rp.LogStartOffset {
			return p.restartAt(rp.LogStartOffset)
		}
		return p.truncateAsFollower(rp.HighWatermark)
	default:
		return kerr.ErrorForCode(rp.ErrorCode)
	}
	if d := rp.DivergingEpoch; d.Epoch >= 0 && d.EndOffset >= 0 {
		// KIP-595/KIP-279: our last epoch is not the leader's history
		// past EndOffset. Truncate to where both histories agree: the
		// earlier of the two ends of that epoch, or, when we never had
		// it, the end of our largest earlier epoch; then fetch again
		// (and truncate further if need be).
		to := d.EndOffset
		if e, end := p.log.EndOffsetForEpoch(d.Epoch); e >= 0 {
			if e != d.Epoch {
				to = end
			} else {
				to = min(to, end)
			}
		}
		f.m.logger.Info("truncating diverged follower", "topic", p.Topic, "partition", p.Partition, "epoch", d.Epoch, "end_offset", d.EndOffset,
			"truncate_to", to, "log_end_offset", p.LogEndOffset())
		return p.truncateAsFollower(to)
	}
	if p.Config().FollowerThrottled.Has(p.Partition, f.m.opts.NodeID) {
		f.m.opts.FollowerThrottle.Record(int64(len(rp.RecordBatches)), time.Now())
	}
	if err := p.appendAsFollower(rp.RecordBatches, rp.HighWatermark); err != nil {
		return err
	}
	p.Stats.Replicated(int64(len(rp.RecordBatches)))
	// Follow the leader's log start offset (retention, DeleteRecords), so
	// that this replica deletes the same records.
	if ls := min(rp.LogStartOffset, p.LogEndOffset()); ls > p.LogStartOffset() {
		if err := p.SetLogStartOffset(ls); err != nil {
			return err
		}
	}
	return nil
}

// restartAt empties the follower's log to start at offset.
func (p *Partition) restartAt(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leader.Load() {
		return nil
	}
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.setHW(offset)
	p.purg.truncated(-1) // after the high-watermark: it marks the sessions
	return nil
}
