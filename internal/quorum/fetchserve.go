package quorum

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/storage"
)

// Serving __cluster_metadata-0 to observers: the leader of the quorum
// answers their Fetch requests from its log, up to its high-watermark only
// (see the package doc, "Observers").

// Limits of the fetch server.
const (
	// ObserverSessionTimeout: an observer that has not fetched for this
	// long is no longer listed by Describe (Kafka's 5 minutes).
	ObserverSessionTimeout = 5 * time.Minute
	// maxFetchWait bounds an observer's max_wait_ms.
	maxFetchWait = 30 * time.Second
	// defaultFetchBytes is the partition limit of a fetch asking for 0 or
	// fewer bytes.
	defaultFetchBytes = 1 << 20
)

// fetchServer answers observers' fetches of the metadata log of one
// voter (Raft or Local). Safe for concurrent use.
type fetchServer struct {
	log       *storage.Log
	d         *dispatcher
	self      int32
	clusterID string // "" accepts any
	now       func() time.Time

	mu        sync.Mutex // guards observers
	observers map[int32]observerState
}

type observerState struct {
	logEndOffset int64
	lastFetch    time.Time
	times        replicaTimes
}

func newFetchServer(l *storage.Log, d *dispatcher, self int32, clusterID string) *fetchServer {
	return &fetchServer{log: l, d: d, self: self, clusterID: clusterID, now: time.Now, observers: map[int32]observerState{}}
}

// handle answers req, a Fetch (v4-v12) of __cluster_metadata partition 0.
// See Raft.HandleFetch.
func (s *fetchServer) handle(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.ClusterID != nil && *req.ClusterID != "" && s.clusterID != "" && *req.ClusterID != s.clusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	served := false
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			var sp kmsg.FetchResponseTopicPartition
			if rt.Topic == MetadataTopic && rp.Partition == 0 && !served {
				// One wait per request: a repeated partition is answered
				// UNKNOWN_TOPIC_OR_PARTITION.
				sp, served = s.servePartition(ctx, req, rp), true
			} else {
				sp = emptyPartition(rp.Partition)
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func emptyPartition(p int32) kmsg.FetchResponseTopicPartition {
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = p
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
	sp.PreferredReadReplica = -1
	sp.RecordBatches = []byte{}
	return sp
}

// servePartition answers one fetch of the metadata partition, waiting up
// to the request's max_wait_ms for committed batches past its fetch
// offset.
func (s *fetchServer) servePartition(ctx context.Context, req *kmsg.FetchRequest, rp kmsg.FetchRequestTopicPartition) kmsg.FetchResponseTopicPartition {
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	limit := rp.PartitionMaxBytes
	if req.MaxBytes > 0 && req.MaxBytes < limit {
		limit = req.MaxBytes
	}
	if limit <= 0 {
		limit = defaultFetchBytes
	}
	for {
		committed, leader, changed, closed := s.d.watch()
		sp := emptyPartition(rp.Partition)
		sp.HighWatermark, sp.LastStableOffset = committed, committed
		sp.LogStartOffset = s.log.LogStartOffset()
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader.LeaderID, int32(leader.Epoch)
		epoch := int32(leader.Epoch)
		switch {
		case closed:
			sp.CurrentLeader.LeaderID = -1
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			return sp
		case leader.LeaderID != s.self:
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			return sp
		case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
			sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			return sp
		case rp.CurrentLeaderEpoch > epoch:
			sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			return sp
		}
		if rp.FetchOffset > 0 && rp.LastFetchedEpoch >= 0 {
			// KIP-595: the fetcher's last epoch must end, in this log, at
			// or after its fetch offset; otherwise it truncates to where
			// the histories part.
			e, end := s.log.EndOffsetForEpoch(rp.LastFetchedEpoch)
			if e < 0 {
				e, end = -1, s.log.LogStartOffset()
			}
			if e != rp.LastFetchedEpoch || end < rp.FetchOffset {
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = e, end
				return sp
			}
		}
		if req.ReplicaID >= 0 {
			s.noteObserver(req.ReplicaID, rp.FetchOffset)
		}
		if rp.FetchOffset < sp.LogStartOffset || rp.FetchOffset > s.log.LogEndOffset() {
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
			return sp
		}
		if rp.FetchOffset < committed {
			res, err := s.log.Read(rp.FetchOffset, limit, committed, true)
			switch {
			case errors.Is(err, storage.ErrOffsetOutOfRange):
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				return sp
			case errors.Is(err, storage.ErrClosed):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				return sp
			case err != nil:
				sp.ErrorCode = kerr.KafkaStorageError.Code
				return sp
			case len(res.Records) > 0:
				sp.RecordBatches = res.Records
				return sp
			}
		}
		if timeout == nil {
			return sp
		}
		select {
		case <-changed:
		case <-timeout:
			return sp
		case <-ctx.Done():
			return sp
		}
	}
}

// noteObserver records that replica fetched at offset.
func (s *fetchServer) noteObserver(replica int32, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	o, ok := s.observers[replica]
	if !ok {
		o.times = newReplicaTimes()
	}
	o.logEndOffset, o.lastFetch = offset, now
	o.times.fetched(now.UnixMilli(), offset, s.log.LogEndOffset())
	s.observers[replica] = o
}

// observerStates lists the observers seen within ObserverSessionTimeout,
// by node id, forgetting older ones.
func (s *fetchServer) observerStates() []VoterState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []VoterState
	for id, o := range s.observers {
		if now.Sub(o.lastFetch) > ObserverSessionTimeout {
			delete(s.observers, id)
			continue
		}
		out = append(out, VoterState{ID: id, LogEndOffset: o.logEndOffset,
			LastFetchTimestamp: o.times.lastFetch, LastCaughtUpTimestamp: o.times.lastCaughtUp})
	}
	slices.SortFunc(out, func(a, b VoterState) int { return int(a.ID) - int(b.ID) })
	return out
}
