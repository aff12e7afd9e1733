package storage

import (
	"cmp"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
