package replica

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

	mu    sync.Mutex // guards parts
	parts map[TopicPartition]*Partition
}

func newFetcher(m *Manager, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	f := &fetcher{m: m, leader: leader, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{}), parts: map[TopicPartition]*Partition{}}
	if !m.spawn(f.run) {
		cancel() // the manager is closing: a fetcher that never runs
	}
	return f
}

func (f *fetcher) add(p *Partition) {
	f.mu.Lock()
	f.parts[p.TopicPartition] = p
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
	}
	return len(f.parts)
}

func (f *fetcher) stop() { f.cancel() }

func (f *fetcher) snapshot() map[TopicPartition]*Partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[TopicPartition]*Partition, len(f.parts))
	for k, v := range f.parts {
		out[k] = v
	}
	return out
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
	for f.ctx.Err() == nil {
		parts := f.snapshot()
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
			client = wire.NewClient(addr, "samsa-replica-"+strconv.Itoa(int(f.m.opts.NodeID)), f.m.opts.FetchMaxBytes+(1<<20)).WithDial(f.m.opts.Dial)
		}
		req := f.request(parts)
		if len(req.Topics) == 0 {
			// Every partition is throttled: wait for the quota window.
			f.sleep(max(f.m.opts.FollowerThrottle.Wait(time.Now()), 10*time.Millisecond))
			continue
		}
		ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
		resp, err := client.Request(ctx, req)
		cancel()
		if err != nil {
			if f.ctx.Err() == nil {
				log.Debug("follower fetch failed", "err", err)
				f.sleep(followerBackoff)
			}
			continue
		}
		if f.handle(parts, resp.(*kmsg.FetchResponse)) {
			f.sleep(followerBackoff)
		}
	}
}

func (f *fetcher) request(parts map[TopicPartition]*Partition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(followerFetchVersion)
	req.ReplicaID = f.m.opts.NodeID
	req.MaxWaitMillis = int32(followerFetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = f.m.opts.FetchMaxBytes
	req.SessionEpoch = -1
	byTopic := map[string]int{}
	throttled := f.m.opts.FollowerThrottle.Exceeded(time.Now())
	for tp, p := range parts {
		if throttled && p.Config().FollowerThrottled.Has(tp.Partition, f.m.opts.NodeID) {
			continue // over follower.replication.throttled.rate
		}
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
		rp.CurrentLeaderEpoch = p.LeaderEpoch()
		rp.FetchOffset = p.LogEndOffset()
		rp.LastFetchedEpoch = -1
		if e, ok := p.log.LatestEpoch(); ok {
			rp.LastFetchedEpoch = e
		}
		rp.LogStartOffset = p.LogStartOffset()
		rp.PartitionMaxBytes = followerPartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
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
				f.m.logger.Debug("follower fetch partition failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
			}
		}
	}
	return total > 0 && failed == total
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
		if err := p.log.SetLogStartOffset(ls); err != nil {
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
	p.hw.Store(offset)
	return nil
}
