package quorum

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// raftID is the raft id of a node: raft reserves 0 for "none" and Kafka
// allows node.id 0, so ids are shifted by one.
func raftID(node int32) uint64 { return uint64(node) + 1 }

// nodeID is the node id of a raft id; -1 for raft's None (0).
func nodeID(id uint64) int32 { return int32(id) - 1 }

// termStart is the first index of a run of entries of one term.
type termStart struct{ index, term uint64 }

// logStore is raft's Storage over the __cluster_metadata-0 log (entry
// index i is the i-th batch, its term the batch's partition leader epoch)
// and the quorum-state file. The base offset of every entry and the terms
// (as runs, one per leader epoch, like Kafka's leader-epoch cache) are
// kept in memory, so Term does no I/O and Entries reads only the batches
// asked for. Not safe for concurrent use: raft calls it, and Raft writes
// it, from the loop goroutine only.
type logStore struct {
	log    *storage.Log
	path   string  // of the quorum-state file
	voters []int32 // node ids, for LEADER_CHANGE records
	now    func() time.Time

	hs    *raftpb.HardState // as last persisted; nil before the first write
	cs    *raftpb.ConfState
	terms []termStart // increasing index and term
	last  uint64      // last index, 0 for an empty log
	// bases[i-1] is the base offset of entry i; an entry spans as many
	// offsets as it has records. end is the offset after the last entry.
	bases []int64
	end   int64
}

// openLogStore reads the log's batch headers and the quorum-state file.
// Errors: ErrFormat (wrapped) when the log does not start at offset 0,
// offsets have a hole, an epoch is below 1 (a log written by Local) or
// decreases, or the quorum-state commit index is past the last entry;
// storage errors.
func openLogStore(l *storage.Log, voters []int32) (*logStore, error) {
	s := &logStore{
		log:    l,
		path:   filepath.Join(l.Dir(), StateFile),
		voters: voters,
		now:    time.Now,
		cs:     &raftpb.ConfState{},
	}
	for _, v := range voters {
		s.cs.Voters = append(s.cs.Voters, raftID(v))
	}
	if start := l.LogStartOffset(); start != 0 {
		return nil, fmt.Errorf("%w: log starts at offset %d (snapshots are not supported yet)", ErrFormat, start)
	}
	err := readBatches(l, 0, l.LogEndOffset(), func(b []byte, h record.Header) error {
		idx := s.last + 1
		switch {
		case h.BaseOffset != s.end:
			return fmt.Errorf("%w: batch at offset %d, expected %d", ErrFormat, h.BaseOffset, s.end)
		case h.PartitionLeaderEpoch < 1:
			return fmt.Errorf("%w: batch at offset %d has leader epoch %d (written by a single-node log?)", ErrFormat, h.BaseOffset, h.PartitionLeaderEpoch)
		}
		s.noteTerm(idx, uint64(h.PartitionLeaderEpoch))
		if n := len(s.terms); n > 1 && s.terms[n-1].term < s.terms[n-2].term {
			return fmt.Errorf("%w: leader epoch decreases at offset %d", ErrFormat, h.BaseOffset)
		}
		s.bases = append(s.bases, h.BaseOffset)
		s.last, s.end = idx, h.NextOffset()
		return nil
	})
	if err != nil {
		return nil, err
	}
	st, ok, err := readState(l.FS(), s.path)
	if err != nil {
		return nil, err
	}
	if ok {
		if uint64(st.CommitIndex) > s.last {
			return nil, fmt.Errorf("%w: %s commit index %d past the last entry %d", ErrFormat, StateFile, st.CommitIndex, s.last)
		}
		s.hs = &raftpb.HardState{
			Term:   new(uint64(st.LeaderEpoch)),
			Vote:   new(raftID(st.VotedID)),
			Commit: new(uint64(st.CommitIndex)),
		}
	}
	return s, nil
}

// baseOffset is the base offset of entry i, in [1, last].
func (s *logStore) baseOffset(i uint64) int64 { return s.bases[i-1] }

// endOffset is the offset after entry i, in [0, last]: the log end offset
// of a log holding entries up to i.
func (s *logStore) endOffset(i uint64) int64 {
	if i >= s.last {
		return s.end
	}
	return s.bases[i]
}

func (s *logStore) noteTerm(idx, term uint64) {
	if n := len(s.terms); n == 0 || s.terms[n-1].term != term {
		s.terms = append(s.terms, termStart{index: idx, term: term})
	}
}

// commit is the persisted commit index.
func (s *logStore) commit() uint64 { return s.hs.GetCommit() }

// InitialState implements raft.Storage: the persisted hard state and the
// configured voters.
func (s *logStore) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	var hs *raftpb.HardState
	if s.hs != nil {
		hs = proto.Clone(s.hs).(*raftpb.HardState)
	}
	return hs, proto.Clone(s.cs).(*raftpb.ConfState), nil
}

// Entries implements raft.Storage: the entries [lo, hi), at least one,
// more while their sizes stay within maxSize. Data of an entry is its batch
// as stored (raft's empty entry, a control batch, has none).
func (s *logStore) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo < 1 {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 || lo >= hi {
		return nil, raft.ErrUnavailable
	}
	var (
		ents []*raftpb.Entry
		size uint64
	)
	idx := lo
	err := readBatches(s.log, s.baseOffset(lo), s.endOffset(hi-1), func(b []byte, h record.Header) error {
		if h.BaseOffset != s.baseOffset(idx) {
			return fmt.Errorf("%w: entry %d at offset %d, read a batch at %d", ErrFormat, idx, s.baseOffset(idx), h.BaseOffset)
		}
		e := entryOf(idx, b, h)
		n := uint64(proto.Size(e))
		if len(ents) > 0 && size+n > maxSize {
			return errStop
		}
		ents, size = append(ents, e), size+n
		idx++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ents) == 0 {
		return nil, raft.ErrUnavailable
	}
	return ents, nil
}

// entryOf is entry idx, stored as batch b.
func entryOf(idx uint64, b []byte, h record.Header) *raftpb.Entry {
	e := &raftpb.Entry{
		Term:  new(uint64(h.PartitionLeaderEpoch)),
		Index: new(idx),
		Type:  raftpb.EntryNormal.Enum(),
	}
	if !h.IsControl() {
		e.Data = b
	}
	return e
}

// Term implements raft.Storage.
func (s *logStore) Term(i uint64) (uint64, error) {
	if i == 0 {
		return 0, nil
	}
	if i > s.last {
		return 0, raft.ErrUnavailable
	}
	k := sort.Search(len(s.terms), func(k int) bool { return s.terms[k].index > i })
	return s.terms[k-1].term, nil
}

// LastIndex implements raft.Storage.
func (s *logStore) LastIndex() (uint64, error) { return s.last, nil }

// FirstIndex implements raft.Storage: always 1 until snapshots exist.
func (s *logStore) FirstIndex() (uint64, error) { return 1, nil }

// Snapshot implements raft.Storage: an empty snapshot (index 0) holding
// the voters; raft asks for one only when entries below FirstIndex are
// needed, which cannot happen without compaction.
func (s *logStore) Snapshot() (*raftpb.Snapshot, error) {
	return &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		ConfState: proto.Clone(s.cs).(*raftpb.ConfState),
		Index:     new(uint64(0)),
		Term:      new(uint64(0)),
	}}, nil
}

// append writes ents, consecutive entries, after entry ents[0].Index-1,
// first truncating the log when they overwrite an uncommitted tail. raft's empty
// entries become LEADER_CHANGE control batches naming leader (a node id,
// -1 unknown) when their term is term. Data of ents is copied, never
// modified. It does not fsync. Errors: ErrFormat for a gap, a decreasing
// term, an entry that is not a proper batch (checkEntryData) or a
// configuration change (never proposed); storage errors.
func (s *logStore) append(ents []*raftpb.Entry, term uint64, leader int32) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if first == 0 || first > s.last+1 {
		return fmt.Errorf("%w: appending index %d after last index %d", ErrFormat, first, s.last)
	}
	if first <= s.commit() {
		return fmt.Errorf("%w: appending index %d at or below the commit index %d", ErrFormat, first, s.commit())
	}
	size := 0
	for _, e := range ents {
		size += len(e.GetData())
	}
	buf := make([]byte, 0, size+len(ents)*128)
	prevTerm, _ := s.Term(first - 1)
	now := s.now().UnixMilli()
	start := s.endOffset(first - 1)
	next := start
	bases := make([]int64, 0, len(ents))
	for i, e := range ents {
		idx, t := e.GetIndex(), e.GetTerm()
		if idx != first+uint64(i) || t < prevTerm {
			return fmt.Errorf("%w: entry %d of term %d after term %d", ErrFormat, idx, t, prevTerm)
		}
		if e.GetType() != raftpb.EntryNormal {
			return fmt.Errorf("%w: entry %d of type %v", ErrFormat, idx, e.GetType())
		}
		epoch, err := checkedEpoch(t)
		if err != nil {
			return err
		}
		prevTerm = t
		bases = append(bases, next)
		if len(e.GetData()) == 0 {
			who := int32(-1)
			if t == term {
				who = leader
			}
			b, err := leaderChangeBatch(next, epoch, who, s.voters, now)
			if err != nil {
				return err
			}
			buf = append(buf, b...)
			next++
			continue
		}
		h, err := checkEntryData(e.GetData())
		if err != nil {
			return fmt.Errorf("entry %d: %w", idx, err)
		}
		start := len(buf)
		buf = append(buf, e.GetData()...)
		record.SetBaseOffset(buf[start:], next)
		record.SetPartitionLeaderEpoch(buf[start:], epoch)
		next += int64(h.LastOffsetDelta) + 1
	}
	if first <= s.last {
		if err := s.log.Truncate(start); err != nil {
			return err
		}
		k := sort.Search(len(s.terms), func(k int) bool { return s.terms[k].index >= first })
		s.terms = s.terms[:k]
		s.bases = s.bases[:first-1]
		s.last, s.end = first-1, start
	}
	if _, err := s.log.AppendAsFollower(buf); err != nil {
		return err
	}
	for _, e := range ents {
		s.noteTerm(e.GetIndex(), e.GetTerm())
	}
	s.bases = append(s.bases, bases...)
	s.last, s.end = ents[len(ents)-1].GetIndex(), next
	return nil
}

// setHardState persists hs in the quorum-state file (fsynced), through
// the metadata log's vfs.FS. An error stops the voter (the node halts):
// raft must not send the vote or entries it could not persist.
func (s *logStore) setHardState(hs *raftpb.HardState) error {
	if s.hs != nil && s.hs.GetTerm() == hs.GetTerm() && s.hs.GetVote() == hs.GetVote() && s.hs.GetCommit() == hs.GetCommit() {
		return nil
	}
	err := writeState(s.log.FS(), s.path, hardState{
		LeaderEpoch: int64(hs.GetTerm()),
		VotedID:     nodeID(hs.GetVote()),
		CommitIndex: int64(hs.GetCommit()),
	})
	if err != nil {
		return err
	}
	s.hs = proto.Clone(hs).(*raftpb.HardState)
	return nil
}

// termStartOffset is the offset of the first entry of term, -1 if none.
func (s *logStore) termStartOffset(term uint64) int64 {
	for k := len(s.terms) - 1; k >= 0; k-- {
		if s.terms[k].term == term {
			return s.baseOffset(s.terms[k].index)
		}
		if s.terms[k].term < term {
			break
		}
	}
	return -1
}
