package broker

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/replica"
)

// Fetch sessions (KIP-227, Fetch v7+), as Kafka's FetchManager and
// FetchSessionCache: a client's full fetch with session epoch 0 (INITIAL)
// creates a session holding its partitions and their fetch parameters;
// its next fetches (epoch 1, 2, ...) name only the partitions whose
// parameters changed (and forgotten_topics_data for those it drops), and
// the response lists only the partitions with something new: records, an
// error, a changed high-watermark, last stable offset or log start
// offset, a preferred read replica or a diverging epoch. A follower of
// 10,000 partitions then sends and receives only the ones that move.
//
// Epoch -1 (FINAL) closes the session named (if any) and is served as a
// full fetch without a session. An incremental fetch naming an unknown
// session gets FETCH_SESSION_ID_NOT_FOUND, one with another epoch than the
// session expects INVALID_FETCH_SESSION_EPOCH; the client then starts
// over with a full fetch.

// A follower's session goes further than Kafka's (issue 13): Kafka reads
// every partition of the session on each incremental fetch and drops the
// unchanged ones from the response, so an idle cluster of 10,000
// partitions per follower burnt CPU walking them twice a second. Here
// the session registers a replica.SessionWatch with each of its
// partitions, which marks them on each change (appends, high-watermark,
// truncation, markers, DeleteRecords, leadership, ISR, removal); an
// incremental fetch reads only the partitions it names, the marked ones,
// and those whose last read was not settled (an error, records, a
// follower not at the log end or not in the ISR). Its fetch time counts
// for the partitions it did not read (the ISR's replica.lag.time.max.ms,
// see SessionWatch). Every sessionSweepInterval it reads them all, which
// carries what no mark covers (a log start offset moved by retention)
// and bounds any change missed. Per-partition fetch counts
// (TotalFetchRequestsPerSec) then count the partitions read.

// sessionSweepInterval is how often a follower's session reads every
// partition it holds (see above).
const sessionSweepInterval = 30 * time.Second

// sessionEvictionAge is how long a session must have been idle before a
// new one may take its slot (Kafka's
// min.incremental.fetch.session.eviction.ms, 120 s, not a config there).
const sessionEvictionAge = 2 * time.Minute

// fetchSessions is the broker's session cache, bounded by
// max.incremental.fetch.session.cache.slots sessions. Safe for concurrent
// use.
type fetchSessions struct {
	mu    sync.Mutex // guards byID and each session's lastUsed
	slots int
	byID  map[int32]*fetchSession
}

// fetchSession is one session. Its mutex serializes the requests using it
// (a client sends the next epoch only after the previous response).
type fetchSession struct {
	id       int32
	follower bool      // a replica's session (Kafka's privileged sessions)
	lastUsed time.Time // guarded by fetchSessions.mu

	mu    sync.Mutex // guards the fields below
	epoch int32      // the epoch the next request must carry
	parts map[sessionKey]*sessionPartition
	// order is the order partitions are read in; those that returned
	// records move to the end, so that max_bytes does not starve the
	// last ones (Kafka's ImplicitLinkedHashCollection rotation).
	order []*sessionPartition

	// watch marks the partitions of a follower's session that changed;
	// nil for a consumer's, which reads all of them each time.
	watch *replica.SessionWatch
	// pending are the partitions the next fetch reads (each with
	// pending set; removed ones are skipped).
	pending   []*sessionPartition
	lastSweep time.Time // when every partition was last made pending
	closed    bool      // evicted or removed: registers no more watches
}

type sessionKey struct {
	topic     string
	partition int32
}

// sessionPartition is one partition of a session: the fetch parameters
// the client last sent, and what the broker last answered for it.
type sessionPartition struct {
	key                sessionKey
	fetchOffset        int64
	logStartOffset     int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32

	highWatermark, lastStableOffset, respLogStart int64
	removed                                       bool // forgotten, being dropped from order
	returned                                      bool // returned records, moving to the end of order

	// Follower sessions: part is the partition the session's watch is
	// registered with (nil: none); pending, that the next fetch reads
	// it (in fetchSession.pending).
	part    *replica.Partition
	pending bool
}

func newFetchSessions(slots int32) *fetchSessions {
	return &fetchSessions{slots: int(slots), byID: map[int32]*fetchSession{}}
}

// Len is the number of sessions cached.
func (fs *fetchSessions) Len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.byID)
}

// remove drops session id and unregisters its watches.
func (fs *fetchSessions) remove(id int32) {
	fs.mu.Lock()
	s := fs.byID[id]
	delete(fs.byID, id)
	fs.mu.Unlock()
	s.close()
}

// lookup returns session id, marking it used.
func (fs *fetchSessions) lookup(id int32, now time.Time) *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := fs.byID[id]
	if s != nil {
		s.lastUsed = now
	}
	return s
}

// create makes a session for a full fetch's partitions, or returns nil
// when every slot is taken by a session it may not evict: one idle for
// sessionEvictionAge, else, for a follower's session, the least recently
// used consumer session. watch is a follower session's (nil: its fetches
// read every partition, as a consumer's).
func (fs *fetchSessions) create(follower bool, watch *replica.SessionWatch, now time.Time) *fetchSession {
	s, victim := fs.createEvicting(follower, watch, now)
	victim.close()
	return s
}

func (fs *fetchSessions) createEvicting(follower bool, watch *replica.SessionWatch, now time.Time) (s, victim *fetchSession) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.slots <= 0 {
		return nil, nil
	}
	if len(fs.byID) >= fs.slots {
		var stale, consumer *fetchSession
		for _, s := range fs.byID {
			if now.Sub(s.lastUsed) >= sessionEvictionAge && (stale == nil || s.lastUsed.Before(stale.lastUsed)) {
				stale = s
			}
			if !s.follower && (consumer == nil || s.lastUsed.Before(consumer.lastUsed)) {
				consumer = s
			}
		}
		victim = stale
		if victim == nil && follower {
			victim = consumer
		}
		if victim == nil {
			return nil, nil
		}
		delete(fs.byID, victim.id)
	}
	s = &fetchSession{follower: follower, lastUsed: now, epoch: 1, parts: map[sessionKey]*sessionPartition{}, watch: watch, lastSweep: now}
	for {
		s.id = rand.Int32N(math.MaxInt32) + 1
		if fs.byID[s.id] == nil {
			break
		}
	}
	fs.byID[s.id] = s
	return s, victim
}

// close unregisters s's watches (s evicted or removed); nil does
// nothing.
func (s *fetchSession) close() {
	if s == nil || s.watch == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, sp := range s.order {
		if sp.part != nil {
			sp.part.Unwatch(s.watch)
			sp.part = nil
		}
	}
}

// updateLocked applies an incremental request's partitions and forgotten
// topics to s. Called with s.mu held.
func (s *fetchSession) updateLocked(req *kmsg.FetchRequest) {
	for _, rt := range req.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			k := sessionKey{rt.Topic, rp.Partition}
			sp := s.parts[k]
			if sp == nil {
				sp = &sessionPartition{key: k, highWatermark: -2, lastStableOffset: -2, respLogStart: -2}
				s.parts[k] = sp
				s.order = append(s.order, sp)
			}
			sp.set(rp)
			s.markPendingLocked(sp)
		}
	}
	removed := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := sessionKey{ft.Topic, p}
			if sp := s.parts[k]; sp != nil {
				sp.removed = true
				delete(s.parts, k)
				removed = true
				if sp.part != nil {
					sp.part.Unwatch(s.watch)
					sp.part = nil
				}
			}
		}
	}
	if removed {
		kept := s.order[:0]
		for _, sp := range s.order {
			if !sp.removed {
				kept = append(kept, sp)
			}
		}
		clear(s.order[len(kept):])
		s.order = kept
	}
}

func (sp *sessionPartition) set(rp *kmsg.FetchRequestTopicPartition) {
	sp.fetchOffset = rp.FetchOffset
	sp.logStartOffset = rp.LogStartOffset
	sp.maxBytes = rp.PartitionMaxBytes
	sp.currentLeaderEpoch = rp.CurrentLeaderEpoch
	sp.lastFetchedEpoch = rp.LastFetchedEpoch
}

// requestLocked returns req with the topics of every partition of s, in
// s's order (topics repeat when their partitions are not adjacent, which
// the response handling does not mind). Called with s.mu held.
func (s *fetchSession) requestLocked(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	return requestFor(req, s.order, false)
}

// markPendingLocked makes the next fetch of a follower's session read sp.
// Called with s.mu held.
func (s *fetchSession) markPendingLocked(sp *sessionPartition) {
	if s.watch != nil && !sp.pending {
		sp.pending = true
		s.pending = append(s.pending, sp)
	}
}

// pendingRequestLocked returns req with the partitions of a follower's
// session that this fetch reads: those its requests named, those whose
// watch marked them since, and those not settled at their last read;
// every one once per sessionSweepInterval. O(partitions read), and
// O(partitions of s) once per sweep. Called with s.mu held.
func (s *fetchSession) pendingRequestLocked(req *kmsg.FetchRequest, now time.Time) *kmsg.FetchRequest {
	if now.Sub(s.lastSweep) >= sessionSweepInterval {
		s.lastSweep = now
		for _, sp := range s.order {
			s.markPendingLocked(sp)
		}
	}
	for _, p := range s.watch.Drain(nil) {
		if sp := s.parts[sessionKey{p.Topic, p.Partition}]; sp != nil {
			s.markPendingLocked(sp)
		}
	}
	if len(s.pending)*4 >= len(s.order) {
		return requestFor(req, s.order, true) // many: keep s's order
	}
	return requestFor(req, s.pending, true)
}

// settleLocked applies what a follower session's fetch found in the
// partitions it read: the watch moves to a partition that was made
// anew, and a settled one is read again only once it changes. Then it
// stamps the fetch, whose reads began at readAt, on the watch. Called
// with s.mu held.
func (s *fetchSession) settleLocked(reads []sessionRead, readAt time.Time) {
	for _, r := range reads {
		sp := s.parts[r.key]
		if sp == nil {
			continue
		}
		if r.p != sp.part {
			if sp.part != nil {
				sp.part.Unwatch(s.watch)
				sp.part = nil
			}
			if r.p != nil && !s.closed {
				r.p.Watch(s.watch)
				sp.part = r.p
			}
			continue // changes between the read and the watch: read again
		}
		if r.settled {
			sp.pending = false
		}
	}
	kept := s.pending[:0]
	for _, sp := range s.pending {
		if sp.pending && !sp.removed {
			kept = append(kept, sp)
		}
	}
	clear(s.pending[len(kept):])
	s.pending = kept
	s.watch.Fetched(readAt)
}

// sessionRead is what a follower session's fetch found in one partition
// it read (fetchOnce): the partition hosted (nil: none), and whether the
// read settled it (the follower in the ISR, at the log end, no error).
type sessionRead struct {
	key     sessionKey
	p       *replica.Partition
	settled bool
}

// requestFor returns req naming the partitions parts (when pendingOnly,
// those of them pending and not removed), in that order, and no forgotten
// topics.
func requestFor(req *kmsg.FetchRequest, parts []*sessionPartition, pendingOnly bool) *kmsg.FetchRequest {
	full := *req
	full.Topics = nil
	full.ForgottenTopics = nil
	for _, sp := range parts {
		if pendingOnly && (!sp.pending || sp.removed) {
			continue
		}
		if n := len(full.Topics); n == 0 || full.Topics[n-1].Topic != sp.key.topic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = sp.key.topic
			full.Topics = append(full.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = sp.key.partition
		rp.FetchOffset = sp.fetchOffset
		rp.LogStartOffset = sp.logStartOffset
		rp.PartitionMaxBytes = sp.maxBytes
		rp.CurrentLeaderEpoch = sp.currentLeaderEpoch
		rp.LastFetchedEpoch = sp.lastFetchedEpoch
		rt := &full.Topics[len(full.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return &full
}

// fillLocked makes s hold the partitions of a full request and what resp
// answered for them. Called with s.mu held.
func (s *fetchSession) fillLocked(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	s.updateLocked(req)
	s.respondLocked(resp, false)
}

// respondLocked records what resp answers for each partition of s and,
// when incremental, drops the partitions with nothing new (Kafka's
// CachedPartition.maybeUpdateResponseData); partitions that returned
// records move to the end of s's order. Called with s.mu held.
func (s *fetchSession) respondLocked(resp *kmsg.FetchResponse, incremental bool) {
	rotate := false
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			sp := s.parts[sessionKey{rt.Topic, rp.Partition}]
			records := len(rp.RecordBatches) > 0
			must := sp == nil || records || rp.ErrorCode != 0 || rp.PreferredReadReplica >= 0 || rp.DivergingEpoch.Epoch >= 0 ||
				rp.HighWatermark != sp.highWatermark || rp.LastStableOffset != sp.lastStableOffset || rp.LogStartOffset != sp.respLogStart
			if sp != nil {
				sp.highWatermark, sp.lastStableOffset, sp.respLogStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
				if records {
					sp.returned = true
					rotate = true
				}
			}
			if must || !incremental {
				parts = append(parts, rp)
			}
		}
		if len(parts) > 0 || !incremental {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	clear(resp.Topics[len(topics):])
	resp.Topics = topics
	if !rotate {
		return
	}
	kept := make([]*sessionPartition, 0, len(s.order))
	var moved []*sessionPartition
	for _, sp := range s.order {
		if sp.returned {
			sp.returned = false
			moved = append(moved, sp)
		} else {
			kept = append(kept, sp)
		}
	}
	s.order = append(kept, moved...)
}

// sessionError is the top-level error of an incremental fetch whose
// session cannot be used.
func sessionError(s *fetchSession, epoch int32) *kerr.Error {
	if s == nil {
		return kerr.FetchSessionIDNotFound
	}
	if epoch != s.epoch {
		return kerr.InvalidFetchSessionEpoch
	}
	return nil
}
