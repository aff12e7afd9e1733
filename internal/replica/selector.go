package replica

import (
	"slices"
	"time"
)

// PreferredReadReplica picks the replica a consumer in clientRack should
// fetch offset from, as Kafka's RackAwareReplicaSelector does over the
// replicas ReplicaManager.findPreferredReadReplica offers it: the leader
// (this broker, rack leaderRack) and each follower in the ISR whose log
// holds offset (log start <= offset <= log end). With no client rack, or
// no such replica in the client's rack, or the leader in it, it returns
// -1 (read from the leader); otherwise the most caught-up follower in
// that rack: the highest log end offset, then the shortest time since it
// last caught up. rack returns a broker's rack and whether the broker can
// serve (registered, not fenced). It returns -1 on a follower, as only a
// leader redirects.
func (p *Partition) PreferredReadReplica(clientRack, leaderRack string, offset int64, rack func(id int32) (string, bool), now time.Time) int32 {
	if clientRack == "" || !p.leader.Load() || clientRack == leaderRack {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best := int32(-1)
	var bestEnd int64
	var bestLag time.Duration
	isr := p.ISR()
	for id, f := range p.followers {
		if !slices.Contains(isr, id) || f.logEndOffset < offset || f.logStartOffset > offset {
			continue
		}
		if r, ok := rack(id); !ok || r != clientRack {
			continue
		}
		lag := now.Sub(f.caughtUp())
		if best < 0 || f.logEndOffset > bestEnd || (f.logEndOffset == bestEnd && (lag < bestLag || (lag == bestLag && id < best))) {
			best, bestEnd, bestLag = id, f.logEndOffset, lag
		}
	}
	return best
}
