package broker

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
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

// Sessions go further than Kafka's (issue 13): Kafka reads every
// partition of the session on each incremental fetch and drops the
// unchanged ones from the response, so an idle cluster of 10,000
// partitions per follower burnt CPU walking them twice a second, and a
// consumer of 10,000 mostly idle partitions cost as much on each poll.
// Here the session registers a replica.SessionWatch with each of its
// partitions, which marks them on each change (appends, high-watermark,
// truncation, markers and so the last stable offset, a log start offset
// raised by DeleteRecords or retention, leadership, epochs, ISR,
// removal); an incremental fetch reads only the partitions it names, the
// marked ones, and those whose last read was not settled. A follower's
// read settles when it found no records and no error with the follower
// in the ISR at the log end; its fetch time counts for the partitions it
// did not read (the ISR's replica.lag.time.max.ms, see SessionWatch). A
// consumer's read settles when it found no records, no aborted
// transaction and no error, with the fetch offset at the high-watermark
// (read_uncommitted) or at or past the last stable offset
// (read_committed), and no preferred read replica to choose (KIP-392: a
// rack-aware selector's answer depends on the followers' state, which no
// mark covers, so such a consumer's partitions are read every time); a
// read cut by max_bytes, the read budget or a quota is then not settled
// and is read again. A fetch answered empty by a quota (throttle.go)
// forgets what it answered (fetchSession.unsentLocked). The session
// reads everything again when the ACLs or the principal change. Every
// sessionSweepInterval it reads them all, which bounds any change
// missed. A session idle for sessionEvictionAge drops its watches
// (fetchSessions.expire) and reads everything at its next fetch. A
// fetch that waits first watches the partitions it read that its session
// did not watch (those it added, or all after the session was dormant)
// and reads them again (fetchSession.watchLocked), so that their changes
// wake it.
// Per-partition fetch counts (TotalFetchRequestsPerSec) then count the
// partitions read.

// sessionSweepInterval is how often a session reads every partition it
// holds (see above).
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

	// watch marks the partitions of the session that changed.
	watch *replica.SessionWatch
	// access is the authorizer and client of the last fetch: another
	// one reads every partition (ACLs are checked on the partitions
	// read).
	access sessionAccess
	// dormant: idle for sessionEvictionAge, its watches dropped
	// (fetchSessions.expire); the next fetch reads every partition.
	dormant bool
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

	// part is the partition the session's watch is registered with
	// (nil: none); pending, that the next fetch reads it (in
	// fetchSession.pending).
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
// used consumer session. watch is the session's (nil: its fetches read
// every partition).
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
	s.unwatchLocked()
}

// unwatchLocked unregisters s's watches. Called with s.mu held.
func (s *fetchSession) unwatchLocked() {
	for _, sp := range s.order {
		if sp.part != nil {
			sp.part.Unwatch(s.watch)
			sp.part = nil
		}
	}
}

// expire drops the watches of the sessions unused for
// sessionEvictionAge at now, which Kafka would evict for a new session
// and clients have most likely left (a consumer that closed without a
// FINAL fetch): their partitions no longer mark them on each change.
// Such a session stays in the cache; its next fetch reads every
// partition and watches them again. O(sessions).
func (fs *fetchSessions) expire(now time.Time) {
	fs.mu.Lock()
	var idle []*fetchSession
	for _, s := range fs.byID {
		if now.Sub(s.lastUsed) >= sessionEvictionAge {
			idle = append(idle, s)
		}
	}
	fs.mu.Unlock()
	for _, s := range idle {
		s.mu.Lock()
		if s.watch != nil && !s.dormant && !s.closed {
			s.dormant = true
			s.unwatchLocked()
		}
		s.mu.Unlock()
	}
}

// sessionExpireInterval is how often the broker looks for idle sessions
// whose watches to drop (fetchSessions.expire).
const sessionExpireInterval = 30 * time.Second

// expireSessions drops the watches of idle sessions every
// sessionExpireInterval until b stops. Started by Start, waited for by
// Close.
func (b *Broker) expireSessions() {
	defer b.wg.Done()
	t := time.NewTicker(sessionExpireInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.sessions.expire(now)
		}
	}
}

// sessionAccess is who fetches through a session, as far as the ACLs
// are concerned.
type sessionAccess struct {
	authz           *acl.Authorizer // nil: no authorizer enabled
	principal, host string
}

// accessLocked records who fetches now; when that changed since the
// last fetch, the next read covers every partition. Called with s.mu
// held.
func (s *fetchSession) accessLocked(a sessionAccess) {
	if a != s.access {
		s.access = a
		s.lastSweep = time.Time{}
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

// markPendingLocked makes the next fetch of s read sp. Called with s.mu
// held.
func (s *fetchSession) markPendingLocked(sp *sessionPartition) {
	if s.watch != nil && !sp.pending {
		sp.pending = true
		s.pending = append(s.pending, sp)
	}
}

// pendingRequestLocked returns req with the partitions of s that this
// fetch reads: those its requests named, those whose watch marked them
// since, and those not settled at their last read; every one once per
// sessionSweepInterval, after the session was dormant or its access
// changed. O(partitions read), and O(partitions of s) once per sweep.
// Called with s.mu held.
func (s *fetchSession) pendingRequestLocked(req *kmsg.FetchRequest, now time.Time) *kmsg.FetchRequest {
	if s.dormant || now.Sub(s.lastSweep) >= sessionSweepInterval {
		s.dormant = false
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

// settleLocked applies what a session's fetch found in the partitions
// it read: the watch moves to a partition that was made anew, and a
// settled one is read again only once it changes. Those that returned
// records go to the end of the pending ones, so that max_bytes does not
// starve the others. Then it stamps the fetch, whose reads began at
// readAt, on the watch. Called with s.mu held.
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
		if r.records {
			sp.returned = true
		}
	}
	kept := s.pending[:0]
	var moved []*sessionPartition
	for _, sp := range s.pending {
		switch {
		case !sp.pending || sp.removed:
			sp.returned = false
		case sp.returned:
			sp.returned = false
			moved = append(moved, sp)
		default:
			kept = append(kept, sp)
		}
	}
	kept = append(kept, moved...)
	clear(s.pending[len(kept):])
	s.pending = kept
	s.watch.Fetched(readAt)
}

// watchLocked registers s's watch with the partitions of reads it holds
// but does not watch (added to s by the fetch, or every one after s was
// dormant), so that a fetch waiting on the watch wakes on their changes,
// and reports whether it registered any: the caller reads them again,
// for the changes between its read and the watch, and settleLocked then
// treats them as watched. A closed session registers none. Called with
// s.mu held.
func (s *fetchSession) watchLocked(reads []sessionRead) bool {
	if s.closed {
		return false
	}
	added := false
	for _, r := range reads {
		sp := s.parts[r.key]
		if sp == nil || r.p == nil || r.p == sp.part {
			continue
		}
		if sp.part != nil {
			sp.part.Unwatch(s.watch)
		}
		r.p.Watch(s.watch)
		sp.part = r.p
		added = true
	}
	return added
}

// unsentLocked makes s forget what it answered in resp, a response
// replaced by an empty one before it was sent (a consumer over its
// quota, throttle.go), as Kafka's throttled response leaves the session
// as it was: each partition of resp is answered again at the next fetch
// that reads it, which is the next one. Called with s.mu held.
func (s *fetchSession) unsentLocked(resp *kmsg.FetchResponse) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if sp := s.parts[sessionKey{rt.Topic, rp.Partition}]; sp != nil {
				sp.highWatermark, sp.lastStableOffset, sp.respLogStart = -2, -2, -2
				s.markPendingLocked(sp)
			}
		}
	}
}

// sessionRead is what a session's fetch found in one partition it read
// (fetchOnce): the partition hosted (nil: none), whether the read settled
// it (see above) and whether it returned records.
type sessionRead struct {
	key     sessionKey
	p       *replica.Partition
	settled bool
	records bool
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
