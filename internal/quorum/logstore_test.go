package quorum

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

func openTestLog(t *testing.T, dir string, segment int64) *storage.Log {
	t.Helper()
	l, err := storage.Open(storage.OpenOptions{Dir: dir, Config: storage.Config{SegmentBytes: segment}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ent is an entry of term at index; seq > 0 gives it 1+seq%3 metadata
// records (so entries span 1 to 3 offsets), 0 makes it raft's empty entry.
func ent(t *testing.T, index, term uint64, seq int64) *raftpb.Entry {
	t.Helper()
	e := &raftpb.Entry{Index: new(index), Term: new(term), Type: raftpb.EntryNormal.Enum()}
	if seq > 0 {
		var recs []metadata.Record
		for i := range 1 + seq%3 {
			recs = append(recs, seqRecord(seq*10+i))
		}
		b, err := encodeEntry(recs, 1000)
		if err != nil {
			t.Fatal(err)
		}
		e.Data = b
	}
	return e
}

// checkEntries compares Entries(lo, hi) of s with want, data decoded, and
// checks the offsets the entries were stored at.
func checkEntries(t *testing.T, s *logStore, lo, hi uint64, want []*raftpb.Entry) {
	t.Helper()
	got, err := s.Entries(lo, hi, 1<<30)
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", lo, hi, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Entries(%d, %d): %d entries, want %d", lo, hi, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.GetIndex() != w.GetIndex() || g.GetTerm() != w.GetTerm() || (len(g.GetData()) == 0) != (len(w.GetData()) == 0) {
			t.Fatalf("entry %d: got %d/%d (%d bytes), want %d/%d (%d bytes)", i, g.GetIndex(), g.GetTerm(), len(g.GetData()), w.GetIndex(), w.GetTerm(), len(w.GetData()))
		}
		if len(w.GetData()) == 0 {
			continue
		}
		gr, err := decodeBatch(g.GetData())
		if err != nil {
			t.Fatal(err)
		}
		wr, _ := decodeBatch(w.GetData())
		if !slices.Equal(gr, wr) {
			t.Fatalf("entry %d: records %v, want %v", g.GetIndex(), gr, wr)
		}
		h, _ := record.ParseHeader(g.GetData())
		if h.BaseOffset != s.baseOffset(g.GetIndex()) || h.PartitionLeaderEpoch != int32(g.GetTerm()) {
			t.Fatalf("entry %d stored at offset %d epoch %d", g.GetIndex(), h.BaseOffset, h.PartitionLeaderEpoch)
		}
	}
	// Offsets follow each other: an entry spans one offset per record.
	next := int64(0)
	for i := uint64(1); i <= s.last; i++ {
		if s.baseOffset(i) != next {
			t.Fatalf("entry %d at offset %d, want %d", i, s.baseOffset(i), next)
		}
		next = s.endOffset(i)
	}
	if next != s.end || next != s.log.LogEndOffset() {
		t.Fatalf("end offset %d, store %d, log %d", next, s.end, s.log.LogEndOffset())
	}
}

func TestLogStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m-0")
	l := openTestLog(t, dir, 0)
	s, err := openLogStore(l, []int32{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	hs, cs, _ := s.InitialState()
	if !raft.IsEmptyHardState(hs) || len(cs.GetVoters()) != 3 || cs.GetVoters()[0] != 1 {
		t.Fatalf("initial state %v %v", hs, cs)
	}
	if fi, _ := s.FirstIndex(); fi != 1 {
		t.Fatalf("first index %d", fi)
	}
	if li, _ := s.LastIndex(); li != 0 {
		t.Fatalf("last index %d", li)
	}
	if term, err := s.Term(0); term != 0 || err != nil {
		t.Fatalf("Term(0) = %d, %v", term, err)
	}
	if _, err := s.Entries(1, 2, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Entries on an empty log: %v", err)
	}

	ents := []*raftpb.Entry{ent(t, 1, 1, 0), ent(t, 2, 1, 2), ent(t, 3, 1, 3), ent(t, 4, 2, 0), ent(t, 5, 2, 5)}
	if err := s.append(ents, 2, 1); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, s, 1, 6, ents)
	checkEntries(t, s, 2, 4, ents[1:3])
	if got, _ := s.Entries(1, 6, 1); len(got) != 1 {
		t.Fatalf("maxSize 1 gave %d entries", len(got))
	}
	for i, want := range []uint64{0, 1, 1, 1, 2, 2} {
		if term, err := s.Term(uint64(i)); term != want || err != nil {
			t.Fatalf("Term(%d) = %d, %v; want %d", i, term, err, want)
		}
	}
	if _, err := s.Term(6); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term past the end: %v", err)
	}
	// Entries 1-5 span 1, 3, 1, 1 and 3 offsets.
	if start := s.termStartOffset(2); start != 5 || s.end != 9 {
		t.Fatalf("term 2 starts at offset %d, log ends at %d", start, s.end)
	}
	// The empty entry of term 2 is a LEADER_CHANGE naming the leader.
	err = readBatches(l, 5, 6, func(b []byte, h record.Header) error {
		if !h.IsControl() {
			t.Fatalf("offset 5 is not a control batch")
		}
		return record.Records(b, func(r record.Record) error {
			if typ, _ := record.ParseControlKey(r.Key); typ != record.ControlLeaderChange {
				t.Fatalf("control type %v", typ)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}

	// A new leader overwrites the uncommitted tail from index 4.
	if err := s.setHardState(&raftpb.HardState{Term: new(uint64(3)), Vote: new(uint64(2)), Commit: new(uint64(3))}); err != nil {
		t.Fatal(err)
	}
	tail := []*raftpb.Entry{ent(t, 4, 3, 0), ent(t, 5, 3, 50), ent(t, 6, 3, 60)}
	if err := s.append(tail, 3, 1); err != nil {
		t.Fatal(err)
	}
	want := append(ents[:3:3], tail...)
	checkEntries(t, s, 1, 7, want)
	if l.LogEndOffset() != 10 || s.termStartOffset(2) != -1 || s.termStartOffset(3) != 5 {
		t.Fatalf("log end %d, term starts %d %d", l.LogEndOffset(), s.termStartOffset(2), s.termStartOffset(3))
	}

	for _, bad := range [][]*raftpb.Entry{
		{ent(t, 8, 3, 8)},                  // gap
		{ent(t, 3, 3, 3)},                  // at the commit index
		{ent(t, 7, 2, 7)},                  // term goes back
		{ent(t, 7, 3, 7), ent(t, 9, 3, 9)}, // not consecutive
		{{Index: new(uint64(7)), Term: new(uint64(3)), Type: raftpb.EntryConfChange.Enum()}},
		{{Index: new(uint64(7)), Term: new(uint64(3)), Data: []byte("not a batch")}},
	} {
		if err := s.append(bad, 3, 1); err == nil {
			t.Fatalf("append of %v: no error", bad)
		}
	}
	checkEntries(t, s, 1, 7, want)

	// Reopen: the terms come back from the batches, the hard state from
	// the quorum-state file.
	l.Close()
	l = openTestLog(t, dir, 0)
	s, err = openLogStore(l, []int32{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, s, 1, 7, want)
	hs, _, _ = s.InitialState()
	if hs.GetTerm() != 3 || hs.GetVote() != 2 || hs.GetCommit() != 3 {
		t.Fatalf("hard state after reopen: %v", hs)
	}
	if term, _ := s.Term(6); term != 3 {
		t.Fatalf("Term(6) after reopen: %d", term)
	}
}

func TestLogStoreRejects(t *testing.T) {
	t.Run("single-node log", func(t *testing.T) {
		l := openTestLog(t, t.TempDir(), 0)
		b, err := encodeBatch([]metadata.Record{seqRecord(1), seqRecord(2)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := openLogStore(l, []int32{1}); !errors.Is(err, ErrFormat) {
			t.Fatalf("opening a Local log: %v", err)
		}
	})
	t.Run("commit index past the last entry", func(t *testing.T) {
		dir := t.TempDir()
		l := openTestLog(t, dir, 0)
		if err := writeState(nil, filepath.Join(dir, StateFile), hardState{LeaderEpoch: 2, VotedID: 1, CommitIndex: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := openLogStore(l, []int32{1}); !errors.Is(err, ErrFormat) {
			t.Fatalf("open: %v", err)
		}
	})
	t.Run("compacted log", func(t *testing.T) {
		l := openTestLog(t, t.TempDir(), 0)
		if err := l.TruncateFullyAndStartAt(10); err != nil {
			t.Fatal(err)
		}
		if _, err := openLogStore(l, []int32{1}); !errors.Is(err, ErrFormat) {
			t.Fatalf("open: %v", err)
		}
	})
}

// TestLogStoreMatchesMemoryStorage applies random appends (with tail
// overwrites) to the log store and to raft's MemoryStorage and compares
// what raft reads from both, across many small segments.
func TestLogStoreMatchesMemoryStorage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := openTestLog(t, t.TempDir(), 2048)
	s, err := openLogStore(l, []int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	ms := raft.NewMemoryStorage()
	term, seq := uint64(1), int64(0)
	for round := range 200 {
		last, _ := ms.LastIndex()
		first := last + 1
		if last > 0 && rng.IntN(4) == 0 {
			first = last - uint64(rng.IntN(int(min(last, 5)))) // overwrite a tail
			term++
		}
		var ents []*raftpb.Entry
		for i := range uint64(1 + rng.IntN(5)) {
			seq++
			if i == 0 && first <= last {
				ents = append(ents, ent(t, first, term, 0))
				continue
			}
			ents = append(ents, ent(t, first+i, term, seq))
		}
		if err := ms.Append(ents); err != nil {
			t.Fatal(err)
		}
		if err := s.append(ents, term, 1); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		mlast, _ := ms.LastIndex()
		if slast, _ := s.LastIndex(); slast != mlast {
			t.Fatalf("round %d: last index %d, memory %d", round, slast, mlast)
		}
		for i := uint64(0); i <= mlast; i++ {
			mt, _ := ms.Term(i)
			if st, err := s.Term(i); st != mt || err != nil {
				t.Fatalf("round %d: Term(%d) = %d, %v; memory %d", round, i, st, err, mt)
			}
		}
		lo := 1 + uint64(rng.IntN(int(mlast)))
		hi := lo + 1 + uint64(rng.IntN(int(mlast-lo+1)))
		want, _ := ms.Entries(lo, hi, 1<<30)
		checkEntries(t, s, lo, hi, want)
	}
	if segs := countSegments(t, l.Dir()); segs < 5 {
		t.Fatalf("%d segments", segs)
	}
}
