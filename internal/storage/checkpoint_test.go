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
