package replica

import (
	"testing"
	"time"
)

// PreferredReadReplica follows Kafka's RackAwareReplicaSelector over the
// replicas ReplicaManager.findPreferredReadReplica offers: in-sync
// followers holding the offset, in the client's rack, the most caught-up
// first; the leader (-1) otherwise.
func TestPreferredReadReplica(t *testing.T) {
	m := newTestManager(t)
	p := follow(t, m, 0, 10, batch(t, 0, 0, 10))
	racks := map[int32]string{1: "a", 2: "b", 3: "b", 4: "c", 5: "b"}
	rack := func(id int32) (string, bool) { r, ok := racks[id]; return r, ok && id != 5 }
	now := time.Now()
	if got := p.PreferredReadReplica("b", "a", 5, rack, now); got != -1 {
		t.Fatalf("a follower redirected to %d; only leaders do", got)
	}
	p.makeLeader(State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3, 4, 5}, ISR: []int32{1, 2, 3, 5}}, now)
	p.UpdateFollower(2, 8, 0, now)
	p.UpdateFollower(3, 10, 2, now)
	p.UpdateFollower(4, 10, 0, now) // not in the ISR
	p.UpdateFollower(5, 10, 0, now) // fenced (rack says so)
	for _, tc := range []struct {
		name       string
		clientRack string
		offset     int64
		want       int32
	}{
		{"no client rack", "", 5, -1},
		{"the leader's rack", "a", 5, -1},
		{"most caught up in the rack", "b", 5, 3},
		{"only one holds the offset", "b", 9, 3},
		{"below a follower's log start", "b", 1, 2},
		{"past every log end", "b", 11, -1},
		{"rack of a follower out of the ISR", "c", 5, -1},
		{"unknown rack", "z", 5, -1},
	} {
		if got := p.PreferredReadReplica(tc.clientRack, "a", tc.offset, rack, now); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
