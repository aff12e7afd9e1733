package share

import "github.com/twmb/franz-go/pkg/kerr"

// TopicPartition names a partition by topic id, as ShareFetch does.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

type sessionKey struct{ group, member string }

// Session is a share session (ShareFetch, KIP-932): the partitions a
// member fetches from this broker, and the epoch its next request must
// carry. A Session is guarded by the Coordinator's lock; use it only through
// the Coordinator's methods.
type Session struct {
	Epoch      int32 // the epoch the next request must carry
	Partitions map[TopicPartition]struct{}
}

// OpenSession applies the session part of a ShareFetch (or, with adds and
// forgets nil, a ShareAcknowledge) of member at epoch: 0 opens a new
// session (replacing any), -1 closes it, a positive epoch must be the
// session's, then adds and forgets change its partitions. It returns the
// session's partitions after the change and whether the session was
// closed; errors SHARE_SESSION_NOT_FOUND and INVALID_SHARE_SESSION_EPOCH.
// A ShareAcknowledge (ackOnly) at epoch 0 is INVALID_SHARE_SESSION_EPOCH.
func (c *Coordinator) OpenSession(groupID, memberID string, epoch int32, adds, forgets []TopicPartition, ackOnly bool) ([]TopicPartition, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := sessionKey{groupID, memberID}
	s := c.sessions[k]
	switch {
	case epoch == 0 && ackOnly:
		return nil, false, kerr.InvalidShareSessionEpoch
	case epoch == 0:
		s = &Session{Partitions: map[TopicPartition]struct{}{}}
		c.sessions[k] = s
	case s == nil:
		return nil, false, kerr.ShareSessionNotFound
	case epoch == -1:
		delete(c.sessions, k)
		out := make([]TopicPartition, 0, len(s.Partitions))
		for tp := range s.Partitions {
			out = append(out, tp)
		}
		return out, true, nil
	case epoch != s.Epoch:
		return nil, false, kerr.InvalidShareSessionEpoch
	}
	for _, tp := range adds {
		s.Partitions[tp] = struct{}{}
	}
	for _, tp := range forgets {
		delete(s.Partitions, tp)
	}
	s.Epoch++
	if s.Epoch < 0 {
		s.Epoch = 1
	}
	out := make([]TopicPartition, 0, len(s.Partitions))
	for tp := range s.Partitions {
		out = append(out, tp)
	}
	return out, false, nil
}

// BindSession records owner (the connection) as the one member's share
// session was opened on; it reports whether owner is new for the session,
// that is whether the caller should arrange CloseOwnedSession at the
// owner's end.
func (c *Coordinator) BindSession(groupID, memberID string, owner any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := sessionKey{groupID, memberID}
	if c.owners[k] == owner {
		return false
	}
	c.owners[k] = owner
	return true
}

// CloseOwnedSession closes member's share session if it is still bound to
// owner (its connection closed): it returns the session's partitions and
// true; false when the session was closed or opened again elsewhere.
func (c *Coordinator) CloseOwnedSession(groupID, memberID string, owner any) ([]TopicPartition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := sessionKey{groupID, memberID}
	if c.owners[k] != owner {
		return nil, false
	}
	delete(c.owners, k)
	s := c.sessions[k]
	if s == nil {
		return nil, false
	}
	delete(c.sessions, k)
	out := make([]TopicPartition, 0, len(s.Partitions))
	for tp := range s.Partitions {
		out = append(out, tp)
	}
	return out, true
}
