package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// Fetch: v4-12
//
// Version notes:
//   - v4: the lowest version served: isolation_level and aborted
//     transactions (KIP-98)
//   - v5: LogStartOffset (request TopicPartition), LogStartOffset (response
//     TopicPartition)
//   - v6: no field change
//   - v7: Topic (request ForgottenTopic), SessionID (request), SessionEpoch
//     (request), ForgottenTopics (request), ErrorCode (response), SessionID
//     (response)
//   - v8: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v9: CurrentLeaderEpoch (request TopicPartition)
//   - v10: zstd-compressed batches (KIP-110)
//   - v11: Rack (request), PreferredReadReplica (response TopicPartition)
//   - v12: flexible versions: compact encodings and tagged fields (KIP-482),
//     LastFetchedEpoch (request TopicPartition)

// Fetch v4-v12, with fetch sessions from v7 (KIP-227, fetchsession.go). A
// fetch that finds fewer than min_bytes waits up to max_wait_ms in the
// partitions' purgatory, woken when appends make enough bytes readable.
// max_bytes and the partition max bytes bound the response, except that the
// first batch found is returned whole (KIP-74). read_committed consumers
// (v4+, KIP-98) read below the last stable offset and get the aborted
// transactions in range; read_uncommitted ones read up to the
// high-watermark. On a controller listener Fetch reads __cluster_metadata
// only (observers, describequorum.go); another topic gets a top-level
// INVALID_REQUEST, as from Kafka's KafkaRaftClient. Fetch from the closest
// replica (KIP-392): see fetchOnce. A consumer with a consumer_byte_rate
// quota has max_bytes capped and is answered empty when over its quota
// (throttle.go), as in Kafka. A partition named more than once is read
// and answered once (dedupFetch).
func init() { register(kmsg.Fetch, 4, 12, handleFetch) }

func handleFetch(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	kresp := req.ResponseKind().(*kmsg.FetchResponse)
	if b.onControllerListener(c) {
		if b.quorum == nil || !isMetadataFetch(req) {
			kresp.ErrorCode = kerr.InvalidRequest.Code
			return kresp, nil
		}
		// An observer following the metadata quorum.
		return b.quorum.HandleFetch(ctx, req), nil
	}
	resp := &wire.FetchResponse{FetchResponse: kresp, Sendfile: b.node.FetchSendfile}
	follower := req.ReplicaID >= 0
	var sess *fetchSession          // the session of an incremental fetch
	create := false                 // a full fetch asking for a session
	var watch *replica.SessionWatch // a new session's (fetchsession.go)
	var sr *sessionReads            // what a session's fetch reads
	if follower && b.authorizer().Enabled && !b.authorizedCluster(c, opClusterAction) {
		follower = false // read as a consumer's session: every partition, each denied
	}
	if req.Version >= 7 {
		switch {
		case req.SessionEpoch < 0:
			// FINAL: close the session, serve a full fetch without one.
			if req.SessionID != 0 {
				b.sessions.remove(req.SessionID)
			}
		case req.SessionEpoch == 0:
			// INITIAL: a full fetch that asks for a new session.
			if req.SessionID != 0 {
				b.sessions.remove(req.SessionID)
			}
			create = true
			watch = replica.NewSessionWatch()
			sr = &sessionReads{watch: watch}
		default:
			sess = b.sessions.lookup(req.SessionID, time.Now())
			if sess != nil {
				sess.mu.Lock()
			}
			if err := sessionError(sess, req.SessionEpoch); err != nil {
				if sess != nil {
					sess.mu.Unlock()
				}
				kresp.ErrorCode = err.Code
				return kresp, nil
			}
			sess.updateLocked(req)
			sess.epoch = replica.NextSessionEpoch(sess.epoch)
			if sess.watch != nil {
				sess.accessLocked(b.fetchAccess(c))
				sr = &sessionReads{watch: sess.watch, incremental: req}
				sr.at = time.Now()
				req = sess.pendingRequestLocked(req, sr.at)
			} else {
				req = sess.requestLocked(req)
			}
			sess.mu.Unlock()
		}
	}
	if sess == nil {
		// A full fetch: each partition once (an incremental one's come
		// from the session, keyed by partition already).
		req = dedupFetch(req)
		if sr != nil {
			sr.at = time.Now()
		}
	}
	// finish records the response in the session (dropping, for an
	// incremental fetch, the partitions with nothing new) or creates one.
	finish := func() (kmsg.Response, error) {
		var s *fetchSession
		switch {
		case sess != nil:
			s = sess
			s.mu.Lock()
			s.respondLocked(kresp, true)
		case create && kresp.ErrorCode == 0:
			if s = b.sessions.create(req.ReplicaID >= 0, watch, time.Now()); s == nil {
				return resp, nil
			}
			s.mu.Lock()
			s.accessLocked(b.fetchAccess(c))
			s.fillLocked(req, kresp)
		default:
			return resp, nil
		}
		if sr != nil {
			s.settleLocked(sr.got, sr.at)
		}
		s.mu.Unlock()
		kresp.SessionID = s.id
		resp.Unsent = func() {
			s.mu.Lock()
			s.unsentLocked(kresp)
			s.mu.Unlock()
		}
		return resp, nil
	}
	// A consumer may not ask for more than its consumer_byte_rate allows
	// in a quota window: more would be throttled for sure. A quota
	// allowing less than a byte still returns the first batch (KIP-74),
	// as Kafka's fetch with max bytes 0. Applied to each request a
	// session's fetch reads (sessionReads.next makes new ones).
	quotaBytes, quota := int32(0), false
	if req.ReplicaID < 0 {
		quotaBytes, quota = b.fetchQuotaBytes(c, clientIDFrom(ctx))
	}
	capQuota := func() {
		if quota {
			req.MaxBytes = max(min(req.MaxBytes, quotaBytes), 1)
			req.MinBytes = min(req.MinBytes, req.MaxBytes)
		}
	}
	capQuota()
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	// A partition given to this broker whose log is still being made is
	// waited for, up to max_wait_ms.
	b.awaitPending(ctx, deadline, func(add func(string, int32)) {
		denied := b.fetchDenied(c, req)
		for _, rt := range req.Topics {
			if denied[rt.Topic] {
				continue
			}
			for _, rp := range rt.Partitions {
				add(rt.Topic, rp.Partition)
			}
		}
	})
	var acct fetchAcct
	defer func() { acct.count(req.ReplicaID >= 0) }()
	// A fetch short of min_bytes waits in the purgatory of its partitions,
	// which count the bytes appends make readable (to the log end for a
	// follower, to the high-watermark for a consumer): it reads again
	// once they may add up to what it lacks, not on every append. A
	// follower session's fetch waits on its watch instead, and reads
	// again what changed (fetchsession.go).
	var waiter *replica.Waiter
	defer func() {
		if waiter != nil {
			waiter.Close()
		}
	}()
	read := func() (int, bool) {
		resp.Reset()
		kresp.Topics = kresp.Topics[:0]
		// The ACLs of the topics read, each time: a session's next
		// read may name others.
		return b.fetchOnce(req, resp, &acct, b.fetchDenied(c, req), time.Now().Add(fetchReadBudget(req.MaxWaitMillis)), sr)
	}
	for {
		var seen int64 // bytes counted before this read
		if waiter != nil {
			seen = waiter.Bytes()
		}
		bytes, failed := read()
		if bytes >= int(req.MinBytes) || failed || req.MaxWaitMillis <= 0 {
			b.served(req, bytes)
			return finish()
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			b.served(req, bytes)
			return finish()
		}
		var wake <-chan struct{}
		switch {
		case sess != nil && sr != nil:
			// Partitions the session does not watch yet (added by this
			// fetch, or all after it was dormant) are watched before the
			// wait, and read again: they may have changed in between.
			if sr.watchRead(sess) {
				continue
			}
			wake = sr.watch.C()
		case waiter == nil:
			waiter = replica.NewWaiter()
			for _, rt := range req.Topics {
				for _, rp := range rt.Partitions {
					if p := b.replicas.Get(rt.Topic, rp.Partition); p != nil {
						p.WatchBytes(waiter, req.ReplicaID >= 0)
					}
				}
			}
			// Data may have arrived between the read and the watch.
			continue
		default:
			// Appended bytes counted during the read may be in bytes too:
			// the wake may come early, never late.
			waiter.Arm(seen + int64(req.MinBytes) - int64(bytes))
			wake = waiter.C()
		}
		timer := time.NewTimer(wait)
		waitStart := time.Now()
		select {
		case <-wake:
			timer.Stop()
			metrics.AddRemote(ctx, time.Since(waitStart))
		case <-timer.C:
			metrics.AddRemote(ctx, time.Since(waitStart))
			// One last read at the deadline.
			req = sr.next(sess, req)
			capQuota()
			bytes, _ := read()
			b.served(req, bytes)
			return finish()
		case <-ctx.Done():
			timer.Stop()
			resp.Release()
			return nil, ctx.Err()
		}
		req = sr.next(sess, req)
		capQuota()
	}
}

// sessionReads is what a session's fetch reads (fetchsession.go):
// its watch, the time its last read began, and what that read found in
// each partition.
type sessionReads struct {
	watch       *replica.SessionWatch
	incremental *kmsg.FetchRequest // the request as received (incremental fetch)
	at          time.Time
	got         []sessionRead
}

// next returns the request for the next read of an incremental session
// fetch: the partitions pending, with those changed since;
// req itself otherwise.
func (sr *sessionReads) next(sess *fetchSession, req *kmsg.FetchRequest) *kmsg.FetchRequest {
	if sr == nil || sess == nil {
		return req
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sr.at = time.Now()
	return sess.pendingRequestLocked(sr.incremental, sr.at)
}

// watchRead registers the session's watch with the partitions the last
// read found that the session does not watch (fetchSession.watchLocked),
// so that their changes wake the fetch's wait, and reports whether there
// were any.
func (sr *sessionReads) watchRead(sess *fetchSession) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.watchLocked(sr.got)
}

// served counts the record bytes of a response to a consumer
// (Broker.ConsumerBytesOut).
func (b *Broker) served(req *kmsg.FetchRequest, bytes int) {
	if req.ReplicaID < 0 {
		b.consumerBytesOut.Add(int64(bytes))
	}
}

// minFetchReadBudget is the least time one read of a fetch's partitions
// may spend reading records (fetchReadBudget).
const minFetchReadBudget = 500 * time.Millisecond

// fetchReadBudget is how long one read of a fetch's partitions reads
// records: max_wait_ms, at least minFetchReadBudget. Once it is spent and
// some records were read, the partitions left answer with no records and
// their offsets (high-watermark, last stable offset, log start), as those
// past fetch.max.bytes do (KIP-74), and the client fetches them next. Beyond
// Kafka, whose fetch reads every partition it can within the byte limits
// whatever the time: a consumer's first fetch of 100,000 partitions on a
// loaded machine opens a file for each (past log.open.files.max) and took
// longer than the client's request timeout (franz-go: 10 s past max wait),
// so the client gave up, fetched again from the same offsets on a new
// connection, and never read a record.
func fetchReadBudget(maxWaitMillis int32) time.Duration {
	return max(time.Duration(maxWaitMillis)*time.Millisecond, minFetchReadBudget)
}

// dedupFetch returns req with each topic-partition once, as Kafka's
// FetchRequest.fetchData, a map keyed by topic-partition, holds them: at
// the place of its first occurrence, with the fetch parameters of its last;
// partitions of one topic that end up adjacent share a topic entry, as
// Kafka's FetchResponse groups them. req itself when it names none twice.
// A request naming one partition 100,000 times read its batch each time
// (14,563 copies, 1 MiB). O(partitions in req).
func dedupFetch(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n < 2 {
		return req
	}
	at := make(map[sessionKey]int, n) // index in flat
	flat := make([]fetchRef, 0, n)
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			k := sessionKey{rt.Topic, rt.Partitions[j].Partition}
			if x, ok := at[k]; ok {
				flat[x].p = &rt.Partitions[j] // the last parameters win
				continue
			}
			at[k] = len(flat)
			flat = append(flat, fetchRef{t: rt, p: &rt.Partitions[j]})
		}
	}
	if len(flat) == n {
		return req
	}
	out := *req
	out.Topics = nil
	for _, f := range flat {
		if l := len(out.Topics); l == 0 || out.Topics[l-1].Topic != f.t.Topic {
			rt := *f.t
			rt.Partitions = nil
			out.Topics = append(out.Topics, rt)
		}
		rt := &out.Topics[len(out.Topics)-1]
		rt.Partitions = append(rt.Partitions, *f.p)
	}
	return &out
}

// fetchRef is one partition of a Fetch request and its topic.
type fetchRef struct {
	t *kmsg.FetchRequestTopic
	p *kmsg.FetchRequestTopicPartition
}

// fetchAccess is who fetches on c, for a session's checks of the ACLs
// (sessionAccess).
func (b *Broker) fetchAccess(c *server.Conn) sessionAccess {
	a := b.authorizer()
	if !a.Enabled {
		return sessionAccess{}
	}
	return sessionAccess{authz: a, principal: connPrincipal(c), host: connHost(c)}
}

// fetchDenied is the set of requested topics c may not fetch, as Kafka's
// KafkaApis: a follower (replica id >= 0) needs CLUSTER_ACTION on the
// cluster, else every topic is denied; a consumer needs READ on each
// topic. Nil when none is denied.
func (b *Broker) fetchDenied(c *server.Conn, req *kmsg.FetchRequest) map[string]bool {
	if !b.authorizer().Enabled {
		return nil
	}
	var denied map[string]bool
	all := req.ReplicaID >= 0 && !b.authorizedCluster(c, opClusterAction)
	for _, rt := range req.Topics {
		if all || req.ReplicaID < 0 && !b.authorized(c, opRead, resTopic, rt.Topic) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[rt.Topic] = true
		}
	}
	return denied
}

// fetchOnce reads every requested partition into resp and returns the
// bytes of records found and whether any partition failed; topics in
// denied get TOPIC_AUTHORIZATION_FAILED.
//
// A partition this broker follows serves a consumer's Fetch v11+ up to the
// high-watermark it knows (KIP-392), with Kafka's errors when it cannot:
// FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH for a current_leader_epoch
// older or newer than its own, OFFSET_OUT_OF_RANGE for an offset outside
// its log (the client then goes back to the leader), and
// NOT_LEADER_OR_FOLLOWER for older versions and for followers' fetches.
// With replica.selector.class set to the RackAwareReplicaSelector, a
// leader answers a consumer with a rack (rack_id) by a
// preferred_read_replica instead of records when an in-sync follower in
// that rack holds the offset (Partition.PreferredReadReplica); a
// redirected partition counts as failed, so that the response goes out at
// once, as in Kafka.
//
// Once records were read and readUntil has passed, the partitions left are
// read with no bytes (fetchReadBudget); a zero readUntil reads them all.
//
// acct keeps what it read, for the topics' metrics.
func (b *Broker) fetchOnce(req *kmsg.FetchRequest, wresp *wire.FetchResponse, acct *fetchAcct, denied map[string]bool, readUntil time.Time, sr *sessionReads) (total int, failed bool) {
	acct.reset()
	var watch *replica.SessionWatch
	if sr != nil {
		sr.got = sr.got[:0]
		watch = sr.watch
	}
	resp := wresp.FetchResponse
	diverged, redirected := false, false
	defer func() { failed = failed || diverged || redirected }()
	if req.ReplicaID < 0 {
		n := 0
		for _, rt := range req.Topics {
			n += len(rt.Partitions)
		}
		b.consumerPartitionsRead.Add(int64(n))
	}
	// Kafka's min(max_bytes, fetch.max.bytes): a max_bytes of 0 or less
	// caps the response at the first batch found (KIP-74 returns it
	// whatever the cap), not at fetch.max.bytes. Fetch v0-v2 have no
	// max_bytes: kmsg's default is MaxInt32, as Kafka's.
	maxBytes := max(min(req.MaxBytes, b.node.FetchMaxBytes), 0)
	follower := req.ReplicaID >= 0
	// A consumer's Fetch v11+ may read from a follower (KIP-392); older
	// ones and followers' need the leader (Kafka's
	// FetchParams.fetchOnlyLeader).
	leaderOnly := follower || req.Version < 11
	selector := req.Version >= 11 && b.node.ReplicaSelectorClass == config.RackAwareReplicaSelector && req.Rack != ""
	var rackOf func(int32) (string, bool)
	if selector {
		im := b.image()
		rackOf = func(id int32) (string, bool) {
			br := im.Broker(id)
			if br == nil || br.Fenced || br.Rack == nil {
				return "", br != nil && !br.Fenced
			}
			return *br.Rack, true
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark = -1
			sp.LastStableOffset = -1
			sp.LogStartOffset = -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{}
			if sr != nil {
				sr.got = append(sr.got, sessionRead{key: sessionKey{rt.Topic, rp.Partition}})
			}
			if denied[rt.Topic] {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				failed = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p := b.replicas.Get(rt.Topic, rp.Partition)
			if sr != nil {
				sr.got[len(sr.got)-1].p = p
			}
			if p == nil {
				sp.ErrorCode = b.absentCode(rt.Topic, rp.Partition)
				failed = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			// Kafka's Partition.localLogWithEpochOrThrow: the leader
			// epoch first, then leadership when the fetch needs it.
			if err := p.CheckEpoch(rp.CurrentLeaderEpoch); err != nil {
				acct.add(p, 0, err)
				sp.ErrorCode = errCode(err)
				failed = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if leaderOnly && !p.IsLeader() {
				acct.add(p, 0, nil) // a fetch request, not a failed one (as Kafka)
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				failed = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if selector && !follower {
				if id := p.PreferredReadReplica(req.Rack, b.node.BrokerRack, rp.FetchOffset, rackOf, time.Now()); id >= 0 {
					// KIP-392: no records, the leader's offsets, and the
					// response goes out at once.
					sp.PreferredReadReplica = id
					sp.HighWatermark, sp.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
					sp.LastStableOffset = p.LastStableOffset()
					st.Partitions = append(st.Partitions, sp)
					redirected = true
					continue
				}
			}
			if follower && req.Version >= 12 && rp.LastFetchedEpoch >= 0 {
				// KIP-595 style divergence check: the follower's last
				// epoch must end, in our history, at or after its fetch
				// offset; otherwise it truncates to where it diverged.
				e, end := p.Log().EndOffsetForEpoch(rp.LastFetchedEpoch)
				if e < 0 {
					e, end = 0, p.LogStartOffset()
				}
				if e < rp.LastFetchedEpoch || end < rp.FetchOffset {
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = e, end
					sp.HighWatermark, sp.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
					sp.LastStableOffset = p.LastStableOffset()
					st.Partitions = append(st.Partitions, sp)
					diverged = true
					continue
				}
			}
			limit := rp.PartitionMaxBytes
			if rest := maxBytes - int32(total); rest < limit {
				limit = rest
			}
			if limit < 0 || total > 0 && !readUntil.IsZero() && time.Now().After(readUntil) {
				limit = 0
			}
			// The first batch found is returned whole whatever the limits
			// (KIP-74), a partition_max_bytes of 0 or less too, as Kafka's
			// ReplicaManager reads with minOneMessage.
			minOne := total == 0
			if follower && b.replicas.LeaderThrottled(p, req.ReplicaID) {
				limit, minOne = 0, false // over leader.replication.throttled.rate: no records this time
			}
			var slice storage.FileSlice
			var res replica.ReadResult
			var err error
			if req.IsolationLevel == 1 && !follower {
				// read_committed (KIP-98): up to the last stable offset,
				// with the aborted transactions in range.
				slice, res, err = p.ReadSliceCommitted(rp.FetchOffset, limit, minOne)
			} else {
				slice, res, err = p.ReadSlice(rp.FetchOffset, limit, follower, minOne)
			}
			if follower && err == nil {
				b.replicas.LeaderSent(p, req.ReplicaID, slice.Length)
			}
			if follower && err == nil {
				settled := b.replicas.FollowerFetched(p, req.ReplicaID, rp.FetchOffset, rp.LogStartOffset, watch)
				if sr != nil {
					sr.got[len(sr.got)-1].settled = settled && slice.Length == 0 && len(slice.Data) == 0
				}
			}
			if !follower && err == nil && sr != nil {
				// A consumer's read settles once it is at the end of
				// what it may read (fetchsession.go): nothing to
				// return, nothing cut by the limits. With a rack-aware
				// selector the answer depends on the followers: read
				// every time.
				end := res.HighWatermark
				if req.IsolationLevel == 1 {
					end = res.LastStableOffset
				}
				sr.got[len(sr.got)-1].settled = !selector && slice.Length == 0 && len(slice.Data) == 0 &&
					len(res.AbortedTransactions) == 0 && (rp.FetchOffset == end || req.IsolationLevel == 1 && rp.FetchOffset > end && rp.FetchOffset <= res.HighWatermark)
			}
			if sr != nil {
				sr.got[len(sr.got)-1].records = slice.Length > 0 || len(slice.Data) > 0
			}
			sp.HighWatermark = res.HighWatermark
			sp.LastStableOffset = res.LastStableOffset
			sp.LogStartOffset = res.LogStartOffset
			for _, a := range res.AbortedTransactions {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, at)
			}
			acct.add(p, slice.Length, err)
			switch {

			case err != nil:
				sp.ErrorCode = errCode(err)
				if sp.ErrorCode == kerr.UnknownServerError.Code {
					b.logger.Warn("fetch failed", "topic", rt.Topic, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
				}
				failed = true
				slice.Release()
			case slice.Data != nil:
				sp.RecordBatches = slice.Data
				total += len(slice.Data)
			case slice.Length > 0:
				wresp.SetRecords(&sp, wire.FileRegion{File: slice.File, Position: slice.Position, Length: slice.Length, Release: slice.Release})
				total += int(slice.Length)
			default:
				slice.Release()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return total, failed
}
