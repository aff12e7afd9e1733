package share

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"slices"
	"sync"
	"time"
)

// DefaultUpdatesPerSnapshot is how many ShareUpdate records the share
// coordinator writes for a share-partition between two ShareSnapshot
// records (Kafka's share.coordinator.snapshot.update.records.per.snapshot).
const DefaultUpdatesPerSnapshot = 500

// Errors of Store.Prepare; the broker maps them to Kafka's codes.
var (
	// ErrNotLoaded: the partition of __share_group_state is not loaded
	// here (COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR).
	ErrNotLoaded = errors.New("share: state partition not loaded")
	// ErrFencedLeaderEpoch: a write from an older share-partition leader
	// than the state's (FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("share: write from an older leader epoch")
	// ErrFencedStateEpoch: a write or initialization with an older state
	// epoch than the state's (FENCED_STATE_EPOCH).
	ErrFencedStateEpoch = errors.New("share: write with an older state epoch")
	// ErrUninitialized: a read or write of a share-partition whose state
	// was never initialized (InitializeShareGroupState), or was deleted:
	// INVALID_REQUEST, as Kafka's ShareCoordinatorShard answers.
	ErrUninitialized = errors.New("share: share-partition state not initialized")
)

type stateEntry struct {
	state   *State
	updates int // ShareUpdate records since the last ShareSnapshot
}

// Shard is the state of the share-partitions kept in one partition of
// __share_group_state, built by replaying its records in order. Not safe
// for concurrent use; Store.Load hands it to the store.
type Shard struct {
	m map[StateKey]*stateEntry
}

// NewShard returns an empty shard.
func NewShard() *Shard { return &Shard{m: map[StateKey]*stateEntry{}} }

// Apply replays r: a snapshot replaces the key's state (a tombstone removes
// it), an update is merged into it (Combine; the start offset and leader
// epoch change unless -1).
func (s *Shard) Apply(r StateRecord) {
	e := s.m[r.Key]
	switch {
	case r.State == nil:
		delete(s.m, r.Key)
	case r.Kind == KindSnapshot:
		s.m[r.Key] = &stateEntry{state: r.State}
	case e == nil:
		st := *r.State
		st.Batches = Combine(st.StartOffset, st.Batches)
		s.m[r.Key] = &stateEntry{state: &st}
	default:
		st := *e.state
		if r.State.StartOffset != -1 {
			st.StartOffset = r.State.StartOffset
		}
		if r.State.LeaderEpoch != -1 {
			st.LeaderEpoch = r.State.LeaderEpoch
		}
		st.Batches = Combine(st.StartOffset, e.state.Batches, r.State.Batches)
		s.m[r.Key] = &stateEntry{state: &st, updates: e.updates + 1}
	}
}

// Len returns the number of share-partitions with a state.
func (s *Shard) Len() int { return len(s.m) }

// Store is the share coordinator's view of the partitions of
// __share_group_state this broker leads: the latest state of every
// share-partition in them. Safe for concurrent use.
type Store struct {
	mu     sync.Mutex // guards shards and groups
	shards map[int32]*Shard
	groups groupIndex // the keys of the shards by group (storegroups.go)
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{shards: map[int32]*Shard{}, groups: groupIndex{}} }

// Load makes sh the state of partition p (a partition loaded).
func (s *Store) Load(p int32, sh *Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups.drop(p, s.shards[p])
	s.shards[p] = sh
	s.groups.add(p, sh)
}

// Unload forgets partition p (leadership lost).
func (s *Store) Unload(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups.drop(p, s.shards[p])
	delete(s.shards, p)
}

// Loaded reports whether partition p is loaded.
func (s *Store) Loaded(p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.shards[p]
	return ok
}

// Get returns the state of k kept in partition p; nil when none. The
// caller must not modify it.
func (s *Store) Get(p int32, k StateKey) *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.shards[p]; sh != nil {
		if e := sh.m[k]; e != nil {
			return e.state
		}
	}
	return nil
}

// Has reports whether partition p holds a state for k.
func (s *Store) Has(p int32, k StateKey) bool { return s.Get(p, k) != nil }

// Apply records r, written and committed to partition p.
func (s *Store) Apply(p int32, r StateRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.shards[p]; sh != nil {
		sh.Apply(r)
		if sh.m[r.Key] != nil {
			s.groups.put(p, r.Key)
		} else {
			s.groups.remove(r.Key)
		}
	}
}

// Write is a change of a share-partition's durable state: a
// WriteShareGroupState (API 85) partition, or with Initialize an
// InitializeShareGroupState (API 83) one.
type Write struct {
	StateEpoch  int32 // -1: not checked
	LeaderEpoch int32 // -1: not checked, unchanged
	StartOffset int64 // -1: unchanged (writes only)
	Batches     []StateBatch
	// Initialize starts the state afresh at StartOffset with StateEpoch,
	// dropping every state batch.
	Initialize bool
}

// Prepare returns the record to append to partition p for w on k, as
// Kafka's share coordinator does: a ShareSnapshot for an initialization
// and after perSnapshot updates (at most 0: every write), otherwise a
// ShareUpdate holding w's batches. Errors: ErrNotLoaded,
// ErrUninitialized (a write to a key never initialized: Kafka 4.1+
// refuses it instead of creating a snapshot), ErrFencedLeaderEpoch,
// ErrFencedStateEpoch. Apply the record once committed.
func (s *Store) Prepare(p int32, k StateKey, w Write, perSnapshot int, now time.Time) (StateRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[p]
	if sh == nil {
		return StateRecord{Key: k, Kind: KindSnapshot}, ErrNotLoaded
	}
	return prepare(sh.m[k], k, w, perSnapshot, now)
}

// Read returns the state of k kept in partition p for a share-partition
// leader at leaderEpoch, as Kafka's ShareCoordinatorShard
// readStateAndMaybeUpdateLeaderEpoch (ReadShareGroupState, API 84): a
// state whose leader epoch is newer is ErrFencedLeaderEpoch; a leader
// epoch other than the state's is recorded by the record returned (a
// ShareUpdate, or a ShareSnapshot every perSnapshot updates, carrying the
// new leader epoch and no batches), to append and Apply before answering,
// so that writes of older leaders are fenced from then on. leaderEpoch -1
// reads without checking or recording. Errors: ErrNotLoaded,
// ErrUninitialized, ErrFencedLeaderEpoch. The state must not be modified.
func (s *Store) Read(p int32, k StateKey, leaderEpoch int32, perSnapshot int, now time.Time) (*State, *StateRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[p]
	if sh == nil {
		return nil, nil, ErrNotLoaded
	}
	e := sh.m[k]
	switch {
	case e == nil:
		return nil, nil, ErrUninitialized
	case leaderEpoch == -1 || e.state.LeaderEpoch == leaderEpoch:
		return e.state, nil, nil
	case e.state.LeaderEpoch > leaderEpoch:
		return nil, nil, ErrFencedLeaderEpoch
	}
	r, err := prepare(e, k, Write{StateEpoch: e.state.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: -1}, perSnapshot, now)
	if err != nil {
		return nil, nil, err
	}
	return e.state, &r, nil
}

func prepare(e *stateEntry, k StateKey, w Write, perSnapshot int, now time.Time) (StateRecord, error) {
	r := StateRecord{Key: k, Kind: KindSnapshot}
	ms := now.UnixMilli()
	if e != nil && w.StateEpoch != -1 && e.state.StateEpoch > w.StateEpoch {
		return r, ErrFencedStateEpoch
	}
	if w.Initialize {
		st := &State{StateEpoch: w.StateEpoch, LeaderEpoch: -1, StartOffset: w.StartOffset, CreateTimestamp: ms, WriteTimestamp: ms}
		if e != nil {
			// The leader epoch stays recorded, as Kafka's share
			// coordinator keeps the highest one it saw.
			st.SnapshotEpoch, st.LeaderEpoch = e.state.SnapshotEpoch+1, e.state.LeaderEpoch
		}
		r.State = st
		return r, nil
	}
	if e == nil {
		return r, ErrUninitialized
	}
	if w.LeaderEpoch != -1 && e.state.LeaderEpoch > w.LeaderEpoch {
		return r, ErrFencedLeaderEpoch
	}
	cur := e.state
	leader := cur.LeaderEpoch
	if w.LeaderEpoch != -1 {
		leader = w.LeaderEpoch
	}
	if e.updates >= perSnapshot {
		start := cur.StartOffset
		if w.StartOffset != -1 {
			start = w.StartOffset
		}
		r.State = &State{SnapshotEpoch: cur.SnapshotEpoch + 1, StateEpoch: cur.StateEpoch, LeaderEpoch: leader, StartOffset: start,
			CreateTimestamp: ms, WriteTimestamp: ms, Batches: Combine(start, cur.Batches, w.Batches)}
		return r, nil
	}
	r.Kind = KindUpdate
	start := w.StartOffset
	prune := start
	if prune == -1 {
		prune = cur.StartOffset
	}
	r.State = &State{SnapshotEpoch: cur.SnapshotEpoch, LeaderEpoch: leader, StartOffset: start, Batches: Combine(prune, w.Batches)}
	return r, nil
}

// Combine merges lists of state batches into one sorted list without
// overlaps, from start on: where batches overlap, the one with the higher
// delivery count wins, then the later state (Available, Acknowledged,
// Archived), as Kafka's PersisterStateBatchCombiner; adjacent batches of
// the same state and count are joined. Batches ending before start are
// dropped, one across it is cut, and reversed ones are ignored. It costs
// O(n log n) for n batches in all; O(n) when there are two lists or fewer,
// each sorted without overlaps (a state and the batches of a write merged
// into it: the coordinator's work per write is then linear in the state,
// without sorting it).
func Combine(start int64, lists ...[]StateBatch) []StateBatch {
	var parts [][]StateBatch
	n := 0
	for _, l := range lists {
		n += len(l)
		if !ordered(l) {
			parts = nil
			break
		}
		i := 0
		for i < len(l) && l[i].Last < start {
			i++
		}
		if i < len(l) {
			parts = append(parts, l[i:])
		}
	}
	if len(parts) <= 2 && (parts != nil || n == 0) {
		var a, b []StateBatch
		if len(parts) > 0 {
			a = parts[0]
		}
		if len(parts) > 1 {
			b = parts[1]
		}
		if len(a)+len(b) == 0 {
			return nil
		}
		return mergeTwo(start, a, b)
	}
	all := make([]StateBatch, 0, n)
	for _, l := range lists {
		for _, b := range l {
			if b.Last < b.First || b.Last < start || b.Last == math.MaxInt64 {
				continue
			}
			b.First = max(b.First, start)
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		return nil
	}
	return sweep(all)
}

// ordered reports whether l is sorted without overlaps and holds no
// reversed batch nor one ending at the largest offset.
func ordered(l []StateBatch) bool {
	for i, b := range l {
		if b.Last < b.First || b.Last == math.MaxInt64 || i > 0 && b.First <= l[i-1].Last {
			return false
		}
	}
	return true
}

// sweep is Combine of batches in any order: sorted, cut at every boundary,
// the batch of highest rank kept on each piece. O(n log n).
func sweep(all []StateBatch) []StateBatch {
	if sortedDisjoint(all) {
		return joinAdjacent(all)
	}
	slices.SortFunc(all, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	points := make([]int64, 0, 2*len(all))
	for _, b := range all {
		points = append(points, b.First, b.Last+1)
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var active batchHeap
	var out []StateBatch
	next := 0
	for i := 0; i < len(points)-1; i++ {
		at := points[i]
		for next < len(all) && all[next].First <= at {
			heap.Push(&active, all[next])
			next++
		}
		for len(active) > 0 && active[0].Last < at {
			heap.Pop(&active)
		}
		if len(active) == 0 {
			continue
		}
		top := active[0]
		seg := StateBatch{First: at, Last: points[i+1] - 1, State: top.State, DeliveryCount: top.DeliveryCount}
		if k := len(out) - 1; k >= 0 && out[k].Last == seg.First-1 && out[k].State == seg.State && out[k].DeliveryCount == seg.DeliveryCount {
			out[k].Last = seg.Last
			continue
		}
		out = append(out, seg)
	}
	return out
}

// mergeTwo is Combine of two lists each sorted without overlaps (ordered)
// and ending at or past start, in one pass: where they overlap, the batch
// of higher rank wins; a batch across start is cut there.
func mergeTwo(start int64, a, b []StateBatch) []StateBatch {
	out := make([]StateBatch, 0, len(a)+2*len(b))
	emit := func(x StateBatch) {
		if k := len(out) - 1; k >= 0 && out[k].Last == x.First-1 && out[k].State == x.State && out[k].DeliveryCount == x.DeliveryCount {
			out[k].Last = x.Last
			return
		}
		out = append(out, x)
	}
	var x, y StateBatch
	hasX, hasY := false, false
	for {
		if !hasX && len(a) > 0 {
			x, a, hasX = a[0], a[1:], true
			x.First = max(x.First, start)
		}
		if !hasY && len(b) > 0 {
			y, b, hasY = b[0], b[1:], true
			y.First = max(y.First, start)
		}
		switch {
		case !hasX && !hasY:
			return out
		case !hasY || hasX && x.Last < y.First:
			emit(x)
			hasX = false
		case !hasX || y.Last < x.First:
			emit(y)
			hasY = false
		default:
			// Overlapping: the part before the overlap, then the
			// overlap itself to the nearer end.
			if x.First < y.First {
				emit(StateBatch{First: x.First, Last: y.First - 1, State: x.State, DeliveryCount: x.DeliveryCount})
				x.First = y.First
			} else if y.First < x.First {
				emit(StateBatch{First: y.First, Last: x.First - 1, State: y.State, DeliveryCount: y.DeliveryCount})
				y.First = x.First
			}
			end := min(x.Last, y.Last)
			win := x
			if rank(y) > rank(x) {
				win = y
			}
			emit(StateBatch{First: x.First, Last: end, State: win.State, DeliveryCount: win.DeliveryCount})
			if x.Last == end {
				hasX = false
			} else {
				x.First = end + 1
			}
			if y.Last == end {
				hasY = false
			} else {
				y.First = end + 1
			}
		}
	}
}

func sortedDisjoint(bs []StateBatch) bool {
	for i := 1; i < len(bs); i++ {
		if bs[i].First <= bs[i-1].Last {
			return false
		}
	}
	return true
}

func joinAdjacent(bs []StateBatch) []StateBatch {
	out := make([]StateBatch, 0, len(bs))
	for _, b := range bs {
		if k := len(out) - 1; k >= 0 && out[k].Last == b.First-1 && out[k].State == b.State && out[k].DeliveryCount == b.DeliveryCount {
			out[k].Last = b.Last
			continue
		}
		out = append(out, b)
	}
	return out
}

// rank orders overlapping batches: delivery count, then state id.
func rank(b StateBatch) int32 { return int32(b.DeliveryCount)<<8 | int32(DeliveryState(b.State)) }

// batchHeap is a max-heap of batches by rank.
type batchHeap []StateBatch

func (h batchHeap) Len() int           { return len(h) }
func (h batchHeap) Less(i, j int) bool { return rank(h[i]) > rank(h[j]) }
func (h batchHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *batchHeap) Push(x any)        { *h = append(*h, x.(StateBatch)) }
func (h *batchHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
