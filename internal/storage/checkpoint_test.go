package storage

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/storage/vfs/errorfs"
)

func TestOffsetCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), RecoveryPointCheckpointFile)
	got, err := ReadOffsetCheckpoint(nil, path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := map[TopicPartition]int64{
		{"a-b-c", 3}:              17,
		{"a-b-c", 0}:              0,
		{"__consumer_offsets", 9}: 1 << 40,
	}
	if err := WriteOffsetCheckpoint(nil, path, want); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "0\n3\n__consumer_offsets 9 1099511627776\na-b-c 0 0\na-b-c 3 17\n" {
		t.Fatalf("file:\n%s", b)
	}
	if got, err = ReadOffsetCheckpoint(nil, path); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v %v", got, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("tmp file left")
	}
}

// TestEncodeOffsetCheckpoint: the in-place encoder writes what
// EncodeCheckpoint writes from the sorted lines, for no partition, negative
// offsets and the int64 extremes too.
func TestEncodeOffsetCheckpoint(t *testing.T) {
	for _, offsets := range []map[TopicPartition]int64{
		{},
		{{"t", 0}: -1, {"t", 10}: math.MaxInt64, {"s", 2}: math.MinInt64, {"t", 9}: 0},
	} {
		var lines [][]string
		for _, tp := range slices.SortedFunc(maps.Keys(offsets), func(a, b TopicPartition) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		}) {
			lines = append(lines, []string{tp.Topic, strconv.Itoa(int(tp.Partition)), strconv.FormatInt(offsets[tp], 10)})
		}
		if got, want := EncodeOffsetCheckpoint(offsets), EncodeCheckpoint(0, lines); string(got) != string(want) {
			t.Errorf("%v:\n%s\nwant\n%s", offsets, got, want)
		}
	}
}

func TestParseCheckpointErrors(t *testing.T) {
	cases := []string{
		"",
		"0\n",
		"1\n0\n",
		"0\n1\n",
		"0\n1\na 0 1\nb 0 2\n",
		"0\n2\na 0 1\n",
		"0\n-1\n",
		"0\n1\na 0\n",
		"0\n1\na  0 1\n",
		"0\n1\na x 1\n",
		"0\n1\na -1 1\n",
		"0\n1\na 0 1x\n",
		"0\n1\nb@d 0 1\n",
		"0\n2\na 0 1\na 0 2\n",
		"0\n1\n" + strings.Repeat("a", 5000) + " 0 1\n",
	}
	for _, c := range cases {
		if _, err := DecodeOffsetCheckpoint([]byte(c)); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("%q: %v", c, err)
		}
	}
	// Kafka's leader-epoch-checkpoint has two fields a line.
	lines, err := ParseCheckpoint([]byte("0\n2\n0 0\n3 120\n"), 0, 2)
	if err != nil || !reflect.DeepEqual(lines, [][]string{{"0", "0"}, {"3", "120"}}) {
		t.Fatalf("%v %v", lines, err)
	}
	if got := string(EncodeCheckpoint(0, lines)); got != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("encode %q", got)
	}
}

func TestParseTopicPartition(t *testing.T) {
	cases := []struct {
		in string
		tp TopicPartition
		ok bool
	}{
		{"foo-0", TopicPartition{"foo", 0}, true},
		{"my-topic-12", TopicPartition{"my-topic", 12}, true},
		{"__consumer_offsets-49", TopicPartition{"__consumer_offsets", 49}, true},
		{"foo", TopicPartition{}, false},
		{"-1", TopicPartition{}, false},
		{"foo-", TopicPartition{}, false},
		{"foo--1", TopicPartition{"foo-", 1}, true},
		{"foo-+1", TopicPartition{}, false},
		{"foo-1.abc-delete", TopicPartition{}, false},
		{"fo o-1", TopicPartition{}, false},
		{"foo-99999999999", TopicPartition{}, false},
	}
	for _, c := range cases {
		tp, ok := ParseTopicPartition(c.in)
		if ok != c.ok || (ok && tp != c.tp) {
			t.Errorf("%q: %v %v", c.in, tp, ok)
		}
		if ok && tp.String() != c.in {
			t.Errorf("%q: String %q", c.in, tp.String())
		}
	}
}

func TestMetaProperties(t *testing.T) {
	m := MetaProperties{Version: 1, NodeID: 3, ClusterID: NewUUID(), DirectoryID: NewUUID()}
	path := filepath.Join(t.TempDir(), MetaPropertiesFile)
	if err := WriteMetaProperties(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMetaProperties(path)
	if err != nil || got != m {
		t.Fatalf("%+v %v", got, err)
	}
	// A file as Kafka's kafka-storage format writes it.
	kafka := "#\n#Thu Nov 28 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=Y4sqQxW7SOuVkhu1QpRWcw\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
	got, err = DecodeMetaProperties([]byte(kafka))
	want := MetaProperties{Version: 1, NodeID: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qk", DirectoryID: "Y4sqQxW7SOuVkhu1QpRWcw"}
	if err != nil || got != want {
		t.Fatalf("%+v %v", got, err)
	}
	if !strings.HasPrefix(string(want.Encode(time.Unix(0, 0))), "#\n#Thu Jan  1 00:00:00 UTC 1970\nnode.id=1\n") {
		t.Fatalf("encode:\n%s", want.Encode(time.Unix(0, 0)))
	}
	for _, bad := range []string{"", "version=2\nnode.id=1\ncluster.id=x\n", "version=1\ncluster.id=x\n", "version=1\nnode.id=1\n", "junk\n"} {
		if _, err := DecodeMetaProperties([]byte(bad)); !errors.Is(err, ErrCorruptMetaProperties) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for range 100 {
		id := NewUUID()
		if len(id) != 22 || id[0] == '-' {
			t.Fatalf("uuid %q", id)
		}
	}
}

// TestCleanShutdownMarkerForms: the marker is written in Kafka's form
// (CleanShutdownFileHandler: a map of strings, "broker_epoch") and read in
// it, in the form Samsa wrote before (numbers, "brokerEpoch"), and round
// trips the manifest id.
func TestCleanShutdownMarkerForms(t *testing.T) {
	for _, c := range []struct {
		in    string
		epoch int64
		id    string
	}{
		{`{"version":"0","broker_epoch":"17"}`, 17, ""}, // Kafka 3.7+
		{`{"broker_epoch":"-1","version":"0"}`, -1, ""},
		{`{"version":0,"brokerEpoch":42}`, 42, ""}, // Samsa before
		{`{"version":0,"brokerEpoch":42,"samsaManifestId":"ab"}`, 42, "ab"},
		{`{"version":"0","broker_epoch":"9","samsa_manifest_id":"cd"}`, 9, "cd"},
		{`{"version":"1","broker_epoch":"9"}`, -1, ""},
		{`{"broker_epoch":"9"}`, -1, ""},
		{`{"version":"0","broker_epoch":"-1L"}`, -1, ""}, // Kafka's default text
		{`{"version":"0","broker_epoch":"-5"}`, -1, ""},
		{`{"version":"0"}`, -1, ""},
		{``, -1, ""},
		{`[]`, -1, ""},
		{`{"version":"0","broker_epoch":"3","samsa_manifest_id":7}`, 3, ""},
	} {
		epoch, id := decodeCleanShutdown([]byte(c.in))
		if epoch != c.epoch || id != c.id {
			t.Errorf("%s: epoch %d id %q, want %d %q", c.in, epoch, id, c.epoch, c.id)
		}
	}
	for _, id := range []string{"", "0123abcd"} {
		b := encodeCleanShutdown(88, id)
		var kafka map[string]string // what Kafka's reader decodes it into
		if err := json.Unmarshal(b, &kafka); err != nil || kafka["version"] != "0" || kafka["broker_epoch"] != "88" {
			t.Fatalf("%s: Kafka's reader would get %v (%v)", b, kafka, err)
		}
		if epoch, got := decodeCleanShutdown(b); epoch != 88 || got != id {
			t.Fatalf("%s: round trip %d %q", b, epoch, got)
		}
	}
}

func FuzzDecodeCleanShutdown(f *testing.F) {
	f.Add([]byte(`{"version":"0","broker_epoch":"17","samsa_manifest_id":"ab"}`))
	f.Add([]byte(`{"version":0,"brokerEpoch":42}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if epoch, _ := decodeCleanShutdown(b); epoch < -1 {
			t.Fatalf("epoch %d", epoch)
		}
	})
}

// checkpointFiles reads the Manager's three checkpoint files of dir.
func checkpointFiles(t *testing.T, dir string) map[string]map[TopicPartition]int64 {
	t.Helper()
	out := map[string]map[TopicPartition]int64{}
	for _, name := range []string{RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile, CleanerOffsetCheckpointFile} {
		m, err := ReadOffsetCheckpoint(nil, filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = m
	}
	return out
}

// movedCheckpointManager opens a Manager on dir through fsys with two logs
// whose recovery points are checkpointed, then moves them (an append and
// a flush) without a checkpoint. (A new log start offset would kick a
// checkpoint of the retention task.)
func movedCheckpointManager(t *testing.T, dir string, fsys vfs.FS) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{Dirs: []string{dir}, NodeID: 1, ClusterID: "ck", RollCheckInterval: -1, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var logs []*Log
	for _, tp := range []TopicPartition{{"a", 0}, {"b", 1}} {
		l, err := m.Create(tp, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(testBatch(t, 3, 1000, tp.String()), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if _, err := l.Append(testBatch(t, 2, 2000, "more"), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestCheckpointSyncFailure: when the fsync of one of a dir's checkpoint
// files fails, none of the three is replaced (they are renamed only once
// all three are durable) and no temporary file stays; the next
// checkpoint writes them. ENOSPC keeps the dir online.
func TestCheckpointSyncFailure(t *testing.T) {
	dir := t.TempDir()
	fail := &errorfs.Toggle{Match: errorfs.Match{Kinds: errorfs.OpSync, PathContains: LogStartOffsetCheckpointFile + ".tmp"}, Err: syscall.ENOSPC}
	m := movedCheckpointManager(t, dir, errorfs.Wrap(vfs.Default, fail))
	before := checkpointFiles(t, dir)
	fail.Set(true)
	if err := m.Checkpoint(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("checkpoint with a failing fsync: %v, want ENOSPC", err)
	}
	if got := checkpointFiles(t, dir); !reflect.DeepEqual(got, before) {
		t.Errorf("a failed checkpoint replaced files:\n%v\nwere\n%v", got, before)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	fail.Set(false)
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if after := checkpointFiles(t, dir); reflect.DeepEqual(after[RecoveryPointCheckpointFile], before[RecoveryPointCheckpointFile]) {
		t.Errorf("recovery points not rewritten by the checkpoint after the failure: %v", after)
	}
	if len(m.OfflineDirs()) != 0 {
		t.Errorf("ENOSPC took the dir offline")
	}
}

// TestCheckpointCrash: a crash of the machine at any filesystem call of a
// checkpoint leaves each checkpoint file as it was or as the checkpoint
// writes it, never empty or partial; a crash after it returned leaves
// the new ones. The three files of the dir wait on the disk together:
// three fsyncs of files, one of the dir.
func TestCheckpointCrash(t *testing.T) {
	var want map[string]map[TopicPartition]int64 // what the checkpoint writes: k = 0 crashes at no call
	for k := 0; ; k++ {
		dir := t.TempDir()
		crash := errorfs.NewCrashFS(nil)
		var armed, crashed atomic.Bool
		var calls, fileSyncs, dirSyncs atomic.Int64
		hook := errorfs.Func(func(op errorfs.Op) error {
			if !armed.Load() || op.Kind&errorfs.OpMutate == 0 || !strings.HasPrefix(op.Path, dir) {
				return nil
			}
			switch {
			case op.Kind == errorfs.OpSync && op.Path == dir:
				dirSyncs.Add(1)
			case op.Kind == errorfs.OpSync:
				fileSyncs.Add(1)
			}
			if calls.Add(1) == int64(k) {
				crashed.Store(true)
				crash.Crash(errorfs.CrashOptions{})
				return errorfs.ErrCrashed
			}
			return nil
		})
		m := movedCheckpointManager(t, dir, errorfs.Wrap(crash, hook))
		before := checkpointFiles(t, dir)
		armed.Store(true)
		err := m.Checkpoint()
		if !crashed.Load() {
			if err != nil {
				t.Fatal(err)
			}
			crash.Crash(errorfs.CrashOptions{})
			got := checkpointFiles(t, dir)
			if k == 0 {
				want = got
				if fileSyncs.Load() != 3 || dirSyncs.Load() != 1 {
					t.Errorf("a checkpoint of one dir made %d fsyncs of files and %d of the dir, want 3 and 1", fileSyncs.Load(), dirSyncs.Load())
				}
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("crash after the checkpoint returned: %v, want %v", got, want)
			}
			break
		}
		for name, offs := range checkpointFiles(t, dir) {
			if !reflect.DeepEqual(offs, before[name]) && !reflect.DeepEqual(offs, want[name]) {
				t.Errorf("crash at call %d: %s holds %v, neither %v nor %v", k, name, offs, before[name], want[name])
			}
		}
	}
	if len(want[RecoveryPointCheckpointFile]) != 2 {
		t.Fatalf("the checkpoint wrote recovery points %v", want[RecoveryPointCheckpointFile])
	}
}
