package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// manifestConfig is the log config of the manifest tests: small segments
// and index intervals, so that random logs have several segments and
// index entries.
var manifestConfig = Config{SegmentBytes: 4096, IndexIntervalBytes: 256}

func manifestOpts(dir string) ManagerOptions {
	return ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "manifest-test", Default: manifestConfig, RollCheckInterval: -1}
}

func openManifestManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := OpenManager(manifestOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// logState is what a restart must bring back of a log: offsets, segments
// with their indexes and writer state, leader epochs, and the producer
// state as appends and reads see it.
type logState struct {
	LogStart, LogEnd, RecoveryPoint int64
	Segments                        []segmentState
	Epochs                          []EpochEntry
	Producers                       []ProducerInfo
	Aborted                         []AbortedTxn
	FirstUnstable                   int64
	LastSnapshot                    int64
	MaxTimestamp, MaxTimestampAt    int64
}

type segmentState struct {
	Base, Size, MaxTimestamp, OffsetOfMax, Rolling, SinceIndex int64
	Next                                                       int64 // active segment only
	Index                                                      []OffsetEntry
	TimeIndex                                                  []TimeEntry
}

func stateOfLog(t *testing.T, l *Log) logState {
	t.Helper()
	producers, aborted, fu := stateOf(t, l)
	ts, at, _ := l.MaxTimestamp()
	// An epoch assigned at the log end (AssignEpoch) that nothing was
	// written in does not outlive a restart, as in Kafka: the leader
	// assigns it again.
	epochs := slices.DeleteFunc(l.EpochHistory(), func(e EpochEntry) bool { return e.StartOffset >= l.LogEndOffset() })
	st := logState{LogStart: l.LogStartOffset(), LogEnd: l.LogEndOffset(), RecoveryPoint: l.RecoveryPoint(),
		Epochs: epochs, Producers: producers, Aborted: aborted, FirstUnstable: fu,
		LastSnapshot: l.producers.lastSnapshot(), MaxTimestamp: ts, MaxTimestampAt: at}
	segs := l.segments()
	for i, s := range segs {
		ss := segmentState{Base: s.baseOffset, Size: s.size.Load(), MaxTimestamp: s.maxTimestamp.Load(), OffsetOfMax: s.offsetOfMaxTimestamp.Load(),
			Rolling: s.rollingBasedTimestamp, SinceIndex: s.bytesSinceLastIndexEntry,
		}
		if len(s.index.entries) > 0 {
			ss.Index = slices.Clone(s.index.entries)
		}
		if len(s.timeIndex.entries) > 0 {
			ss.TimeIndex = slices.Clone(s.timeIndex.entries)
		}
		if i == len(segs)-1 {
			ss.Next = s.nextOffset
		}
		st.Segments = append(st.Segments, ss)
	}
	return st
}

// managerState is the state of every log of m; closing, it is flushed to
// its end (the recovery point of a log closed cleanly).
func managerState(t *testing.T, m *Manager, closing bool) map[TopicPartition]logState {
	t.Helper()
	out := map[TopicPartition]logState{}
	for tp, l := range m.Logs() {
		st := stateOfLog(t, l)
		if closing {
			// Close flushes the log and may write a producer snapshot.
			st.RecoveryPoint, st.LastSnapshot = st.LogEnd, -1
		}
		out[tp] = st
	}
	return out
}

// stateDiff names the fields of a and b that differ, "" when none.
// LastSnapshot -1 in b matches any.
func stateDiff(a, b logState) string {
	if b.LastSnapshot == -1 {
		b.LastSnapshot = a.LastSnapshot
	}
	var out string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if fa, fb := va.Field(i).Interface(), vb.Field(i).Interface(); !reflect.DeepEqual(fa, fb) {
			out += fmt.Sprintf("\n%s: %+v, want %+v", va.Type().Field(i).Name, fa, fb)
		}
	}
	return out
}

// producerEntries is a log's producer state entry by entry (with the
// batches a retry is checked against), lastSeen aside.
func producerEntries(l *Log) map[int64]producerEntry {
	ps := l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[int64]producerEntry{}
	for id, e := range ps.producers {
		c := *e
		c.lastSeen = time.Time{}
		out[id] = c
	}
	return out
}

// randomLogs fills logs partitions of m with what a partition sees:
// plain batches, idempotent producers, transactions committed, aborted
// and left open, new leader epochs, truncations and DeleteRecords.
func randomLogs(t *testing.T, m *Manager, rng *rand.Rand, logs int) {
	t.Helper()
	for p := range logs {
		l, err := m.Create(TopicPartition{"t", int32(p)}, manifestConfig)
		if err != nil {
			t.Fatal(err)
		}
		epoch := int32(0)
		for range rng.IntN(60) {
			switch op := rng.IntN(20); {
			case op == 0:
				epoch++
			case op == 1 && l.LogEndOffset() > 0:
				// A follower's truncation under a new leader.
				if err := l.Truncate(rng.Int64N(l.LogEndOffset())); err != nil {
					t.Fatal(err)
				}
				epoch++
			case op == 2 && l.LogEndOffset() > 0:
				if err := l.SetLogStartOffset(min(l.LogEndOffset(), l.LogStartOffset()+rng.Int64N(5))); err != nil {
					t.Fatal(err)
				}
			case op == 3:
				// Led at a new epoch, its checkpoint written by the
				// creators or by the next append.
				epoch++
				l.AssignEpoch(epoch)
				if rng.IntN(2) == 0 {
					if err := l.WriteEpochs(); err != nil {
						t.Fatal(err)
					}
				}
			case op < 8:
				if _, err := l.Append(testBatch(t, 1+rng.IntN(5), testEpoch.UnixMilli()+rng.Int64N(1000), "x"), epoch); err != nil {
					t.Fatal(err)
				}
			default:
				// Producer 3 is transactional.
				pid := int64(1 + rng.IntN(3))
				info, _ := l.Producer(pid)
				if pid == 3 && info.CurrentTxnStartOffset >= 0 && rng.IntN(2) == 0 {
					if _, err := l.AppendWith(markerBatch(t, pid, 0, 1, rng.IntN(2) == 0), epoch, OriginCoordinator); err != nil {
						t.Fatal(err)
					}
					continue
				}
				b := pidBatch(t, pid, 0, info.LastSequence+1, 1+rng.IntN(4), pid == 3)
				if _, err := l.AppendWith(b, epoch, OriginClient); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rng.IntN(2) == 0 {
			// Led at an epoch nothing was written in yet when the node
			// stops.
			epoch++
			l.AssignEpoch(epoch)
		}
	}
}

// TestManifestRestartEquivalent: after a clean shutdown, the logs a
// restart sets up from the manifest are those the full open of their
// files gives (offsets, segments, indexes, leader epochs, producers,
// aborted transactions, last stable offset), and they take the same next
// appends: each idempotent producer continues at its next sequence
// (no OutOfOrderSequence) and a retry of its last batch is a duplicate.
func TestManifestRestartEquivalent(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			dir := filepath.Join(t.TempDir(), "a")
			m := openManifestManager(t, dir)
			randomLogs(t, m, rng, 8)
			before := managerState(t, m, true)
			entries := map[TopicPartition]map[int64]producerEntry{}
			for tp, l := range m.Logs() {
				entries[tp] = producerEntries(l)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			// The streamed file is what encodeManifest lays out for
			// the entries it holds (header, count, CRC), one a log.
			written := mustRead(t, filepath.Join(dir, ManifestFile))
			id, _, logs, err := decodeManifest(written)
			if err != nil {
				t.Fatal(err)
			}
			if len(logs) != len(before) || !bytes.Equal(encodeManifest(id, logs), written) {
				t.Fatalf("the manifest holds %d logs of %d, or does not re-encode to itself", len(logs), len(before))
			}
			// The same dir without its manifest: the full open.
			full := filepath.Join(t.TempDir(), "b")
			if err := os.CopyFS(full, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(full, ManifestFile)); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(full, LockFile))

			ma := openManifestManager(t, dir)
			defer ma.Close()
			mb := openManifestManager(t, full)
			defer mb.Close()
			if ma.fromManifest != int64(len(before)) || mb.fromManifest != 0 {
				t.Fatalf("%d and %d logs from the manifest, want %d and 0", ma.fromManifest, mb.fromManifest, len(before))
			}
			afterA, afterB := managerState(t, ma, false), managerState(t, mb, false)
			for tp, want := range before {
				if d := stateDiff(afterA[tp], want); d != "" {
					t.Errorf("%s from the manifest, against before the shutdown: %s", tp, d)
				}
				if d := stateDiff(afterB[tp], want); d != "" {
					t.Errorf("%s from its files, against before the shutdown: %s", tp, d)
				}
				if got := producerEntries(ma.Get(tp)); !reflect.DeepEqual(got, entries[tp]) {
					t.Errorf("%s producers from the manifest:\n%+v\nbefore the shutdown:\n%+v", tp, got, entries[tp])
				}
			}
			// The same appends on both: the next batch of each producer,
			// a retry of it, a new leader epoch.
			for tp := range before {
				la, lb := ma.Get(tp), mb.Get(tp)
				for _, p := range la.Producers() {
					if p.LastSequence < 0 || p.CurrentTxnStartOffset >= 0 {
						continue
					}
					b := pidBatch(t, p.ProducerID, p.ProducerEpoch, p.LastSequence+1, 2, false)
					for range 2 {
						ra, erra := la.AppendWith(b, 9, OriginClient)
						rb, errb := lb.AppendWith(b, 9, OriginClient)
						if erra != nil || errb != nil || ra != rb {
							t.Fatalf("%s producer %d: %+v %v from the manifest, %+v %v from the files", tp, p.ProducerID, ra, erra, rb, errb)
						}
					}
				}
				if d := stateDiff(stateOfLog(t, la), stateOfLog(t, lb)); d != "" {
					t.Errorf("%s after the appends, from the manifest against from the files: %s", tp, d)
				}
			}
		})
	}
}

// writeAndClose opens dir, appends a batch to t-0 and closes cleanly.
func writeAndClose(t *testing.T, dir string) {
	t.Helper()
	m := openManifestManager(t, dir)
	l, err := m.Create(TopicPartition{"t", 0}, manifestConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testBatch(t, 3, testEpoch.UnixMilli(), "w"), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestManifestCrashConsistency: a manifest is trusted only with the
// clean-shutdown marker written after it, naming it. Each case leaves a
// manifest that does not describe the log (written before the last three
// records), and the restart must find them.
func TestManifestCrashConsistency(t *testing.T) {
	cases := map[string]struct {
		// damage changes dir after the second clean shutdown; stale is
		// the manifest of the first.
		damage       func(t *testing.T, dir string, stale []byte)
		fromManifest int64
	}{
		// A shutdown that died between the manifest and the marker,
		// after a start that left the old manifest in place.
		"manifest without marker": {damage: func(t *testing.T, dir string, stale []byte) {
			mustWrite(t, filepath.Join(dir, ManifestFile), stale)
			mustRemove(t, filepath.Join(dir, CleanShutdownFile))
		}},
		// An older Samsa (or Kafka) ran on the dir and shut it down
		// cleanly: its marker names no manifest.
		"marker of another program": {damage: func(t *testing.T, dir string, stale []byte) {
			mustWrite(t, filepath.Join(dir, ManifestFile), stale)
			mustWrite(t, filepath.Join(dir, CleanShutdownFile), []byte(`{"version":0,"brokerEpoch":-1}`))
		}},
		// The marker names another manifest than the one there.
		"marker of another manifest": {damage: func(t *testing.T, dir string, stale []byte) {
			mustWrite(t, filepath.Join(dir, ManifestFile), stale)
		}},
		"truncated manifest": {damage: func(t *testing.T, dir string, _ []byte) {
			b := mustRead(t, filepath.Join(dir, ManifestFile))
			mustWrite(t, filepath.Join(dir, ManifestFile), b[:len(b)/2])
		}},
		"corrupt manifest": {damage: func(t *testing.T, dir string, _ []byte) {
			b := mustRead(t, filepath.Join(dir, ManifestFile))
			b[len(b)-3] ^= 0x40
			mustWrite(t, filepath.Join(dir, ManifestFile), b)
		}},
		"no manifest": {damage: func(t *testing.T, dir string, _ []byte) {
			mustRemove(t, filepath.Join(dir, ManifestFile))
		}},
		"intact": {damage: func(*testing.T, string, []byte) {}, fromManifest: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeAndClose(t, dir)
			stale := mustRead(t, filepath.Join(dir, ManifestFile))
			writeAndClose(t, dir)
			c.damage(t, dir, stale)
			m := openManifestManager(t, dir)
			defer m.Close()
			if m.fromManifest != c.fromManifest {
				t.Errorf("%d logs from the manifest, want %d", m.fromManifest, c.fromManifest)
			}
			if got := m.Get(TopicPartition{"t", 0}).LogEndOffset(); got != 6 {
				t.Fatalf("log end offset %d after the restart, want 6", got)
			}
		})
	}
}

// TestManifestRemovedAtOpen: a start that read the manifest removes it
// and the marker before it takes a write, so that a crash after the
// start (a write the manifest does not hold) opens the logs from their
// files.
func TestManifestRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	writeAndClose(t, dir)
	m := openManifestManager(t, dir)
	if m.fromManifest != 1 {
		t.Fatalf("%d logs from the manifest, want 1", m.fromManifest)
	}
	for _, f := range []string{ManifestFile, CleanShutdownFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the start: %v, want none", f, err)
		}
	}
	if _, err := m.Get(TopicPartition{"t", 0}).Append(testBatch(t, 2, testEpoch.UnixMilli(), "c"), 0); err != nil {
		t.Fatal(err)
	}
	// A crash: what Close writes after the logs is not there.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, filepath.Join(dir, CleanShutdownFile))
	m = openManifestManager(t, dir)
	defer m.Close()
	if m.fromManifest != 0 {
		t.Errorf("%d logs from the manifest after a crash, want 0", m.fromManifest)
	}
	if got := m.Get(TopicPartition{"t", 0}).LogEndOffset(); got != 5 {
		t.Fatalf("log end offset %d, want 5", got)
	}
}

// TestManifestIndexMismatch: a log whose index files do not hold what
// its manifest entry counts is opened from its files.
func TestManifestIndexMismatch(t *testing.T) {
	dir := t.TempDir()
	m := openManifestManager(t, dir)
	randomLogs(t, m, rand.New(rand.NewPCG(7, 7)), 1)
	l := m.Get(TopicPartition{"t", 0})
	for l.segments()[0].index.len() == 0 {
		if _, err := l.Append(testBatch(t, 5, testEpoch.UnixMilli(), "i"), 0); err != nil {
			t.Fatal(err)
		}
	}
	want := stateOfLog(t, l)
	want.RecoveryPoint = want.LogEnd
	idx := l.segments()[0].index.path
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, idx, nil)
	m = openManifestManager(t, dir)
	defer m.Close()
	if m.fromManifest != 0 {
		t.Errorf("%d logs from the manifest, want 0", m.fromManifest)
	}
	if d := stateDiff(stateOfLog(t, m.Get(TopicPartition{"t", 0})), want); d != "" {
		t.Errorf("after the restart: %s", d)
	}
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func manifestSeeds() [][]byte {
	e := newProducerEntry(7)
	e.epoch, e.txnFirstOffset = 2, 40
	e.addBatch(batchMeta{firstSeq: 0, lastSeq: 3, firstOffset: 10, lastOffset: 13, timestamp: 1000})
	logs := []logManifest{{name: "t-0", topicID: testTopicID, hasTopicID: true, logStartOffset: 3, logEndOffset: 50,
		epochs:   []EpochEntry{{0, 0}, {2, 30}},
		segments: []segmentManifest{{baseOffset: 0, size: 4000, indexEntries: 3, timeIndexEntries: 2, txnIndex: true}, {baseOffset: 30, size: 100, maxTimestamp: 5}},
		producers: producerManifest{mapEndOffset: 50, lastSnapOffset: 30, producers: []*producerEntry{e},
			ongoing: []txnSpan{{7, 40, -1}}, unreplicated: []txnSpan{{8, 20, 25}}}}}
	return [][]byte{encodeManifest(manifestID{1}, logs), encodeManifest(manifestID{}, nil), []byte(manifestMagic),
		encodeManifestVersion(1, manifestID{2}, logs)}
}

func FuzzDecodeManifest(f *testing.F) {
	for _, s := range manifestSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, version, logs, err := decodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptManifest) {
				t.Fatalf("error %v does not wrap ErrCorruptManifest", err)
			}
			return
		}
		if again := encodeManifestVersion(version, id, logs); string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestManifestSize: encodeManifest allocates the file's exact size.
func TestManifestSize(t *testing.T) {
	for _, b := range slices.Delete(manifestSeeds(), 2, 3) {
		if len(b) != cap(b) {
			t.Errorf("%d bytes in a buffer of %d", len(b), cap(b))
		}
	}
}

// TestManifestSegmentChanged: a segment file that changed since the clean
// shutdown (grown, or replaced by a directory) is not trusted from the
// manifest: the log is opened from its files, where a grown segment is
// read as it is and one that cannot be opened takes only its log offline
// at start (KAFKA_STORAGE_ERROR at once, not at its first read).
func TestManifestSegmentChanged(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(t *testing.T, seg string)
		offline bool
	}{
		{"grown", func(t *testing.T, seg string) {
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(make([]byte, 7)); err != nil { // a torn tail, truncated by recovery
				t.Fatal(err)
			}
		}, false},
		{"directory", func(t *testing.T, seg string) {
			mustRemove(t, seg)
			if err := os.Mkdir(seg, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"older segment a directory", func(t *testing.T, seg string) {
			first := filepath.Join(filepath.Dir(seg), "00000000000000000000"+logSuffix)
			mustRemove(t, first)
			if err := os.Mkdir(first, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			m := openManifestManager(t, dir)
			randomLogs(t, m, rand.New(rand.NewPCG(9, 9)), 1)
			l := m.Get(TopicPartition{"t", 0})
			segs := l.segments()
			seg := segs[len(segs)-1].path(logSuffix) // the active segment
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			c.change(t, seg)
			m = openManifestManager(t, dir)
			defer m.Close()
			if m.fromManifest != 0 {
				t.Errorf("%d logs from the manifest, want 0", m.fromManifest)
			}
			if err := m.Offline(TopicPartition{"t", 0}); (err != nil) != c.offline {
				t.Errorf("offline: %v, want offline %v", err, c.offline)
			}
		})
	}
}

// TestManifestTopicIDs: a restart from the manifest knows each log's
// topic id without reading partition.metadata (the broker's stray-log
// check asks every log for it: 100,000 reads at 100,000 partitions); a
// log without one (made by Create) reads its file on first use, as do
// the logs of a version 1 manifest (an older Samsa's) and those opened
// from their files after an unclean shutdown.
func TestManifestTopicIDs(t *testing.T) {
	withID, plain := TopicPartition{"t", 0}, TopicPartition{"plain", 0}
	for _, c := range []struct {
		name string
		// change is made to dir after the clean shutdown.
		change       func(t *testing.T, dir string)
		fromManifest int64
		known        bool // withID's id is known without a read
	}{
		{name: "clean", change: func(*testing.T, string) {}, fromManifest: 2, known: true},
		{name: "version 1 manifest", change: func(t *testing.T, dir string) {
			path := filepath.Join(dir, ManifestFile)
			id, version, logs, err := decodeManifest(mustRead(t, path))
			if err != nil || version != manifestVersion {
				t.Fatalf("manifest of version %d, %v", version, err)
			}
			mustWrite(t, path, encodeManifestVersion(1, id, logs))
		}, fromManifest: 2},
		{name: "unclean", change: func(t *testing.T, dir string) {
			mustRemove(t, filepath.Join(dir, CleanShutdownFile))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			m := openManifestManager(t, dir)
			l, err := m.CreateTopic(withID, testTopicID, manifestConfig)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(testBatch(t, 3, testEpoch.UnixMilli(), "i"), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Create(plain, manifestConfig); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			c.change(t, dir)
			// What the file says after the shutdown is another id: a
			// log that reads it shows that id.
			other := testTopicID
			other[15]++
			mustWrite(t, filepath.Join(dir, withID.String(), PartitionMetadataFile), EncodePartitionMetadata(other))

			m = openManifestManager(t, dir)
			defer m.Close()
			if m.fromManifest != c.fromManifest {
				t.Errorf("%d logs from the manifest, want %d", m.fromManifest, c.fromManifest)
			}
			l = m.Get(withID)
			id, ok := l.KnownTopicID()
			if ok != c.known || c.known && id != testTopicID {
				t.Errorf("known topic id after the restart %x %v, want %x %v", id, ok, testTopicID, c.known)
			}
			want := other // read from the file
			if c.known {
				want = testTopicID
			}
			if id, ok, err := l.TopicID(); err != nil || !ok || id != want {
				t.Errorf("topic id %x %v %v, want %x", id, ok, err, want)
			}
			if id, ok := m.Get(plain).KnownTopicID(); ok {
				t.Errorf("a log without partition.metadata knows topic id %x", id)
			}
			if l.LogEndOffset() != 3 {
				t.Errorf("log end offset %d, want 3", l.LogEndOffset())
			}
		})
	}
}
