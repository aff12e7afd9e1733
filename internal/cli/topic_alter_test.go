package cli

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicAlterPartitions: topic alter raises the partition count, and a
// real producer then writes to the new partitions, which a consumer reads.
func TestTopicAlterPartitions(t *testing.T) { eachBackend(t, testTopicAlterPartitions) }

func testTopicAlterPartitions(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "grow", b, "-p", "1")

	r := mustRun(t, nil, "topic", "alter", "grow", b, "--partitions", "3")
	if want := "Topic grow now has 3 partitions.\n"; r.stdout != want {
		t.Errorf("alter: stdout %q, want %q", r.stdout, want)
	}
	r = mustRun(t, nil, "topic", "describe", "grow", b)
	if re := `(?m)^Topic: grow\tTopicId: \S+\tPartitionCount: 3\t`; !regexp.MustCompile(re).MatchString(r.stdout) {
		t.Errorf("describe after alter: no match for %s:\n%s", re, r.stdout)
	}

	// The same count is INVALID_PARTITIONS too in Kafka and Samsa, but kfake
	// accepts it: TestTopicAlterPartitionsSamsa checks it.
	r = run(t, nil, "topic", "alter", "grow", b, "--partitions", "2")
	if r.err == nil || !strings.Contains(r.err.Error(), "INVALID_PARTITIONS") {
		t.Errorf("alter to fewer partitions: err %v, want INVALID_PARTITIONS", r.err)
	}
	r = run(t, nil, "topic", "alter", "nope", b, "--partitions", "2")
	if r.err == nil || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter of a missing topic: err %v, want UNKNOWN_TOPIC_OR_PARTITION", r.err)
	}
	r = mustRun(t, nil, "topic", "alter", "nope", b, "--partitions", "2", "--if-exists")
	if want := "Topic nope does not exist.\n"; r.stdout != want {
		t.Errorf("alter --if-exists of a missing topic: stdout %q, want %q", r.stdout, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitPartitions(ctx, t, addr, "grow", 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("grow"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p, v := range []string{"p0", "p1", "p2"} {
		recs = append(recs, &kgo.Record{Partition: int32(p), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to the new partitions: %v", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if o, ok := ends.Lookup("grow", p); !ok || o.Err != nil || o.Offset != 1 {
			t.Errorf("end offset of grow-%d: %+v, want 1", p, o)
		}
	}
	r = mustRun(t, nil, "consume", "grow", "-q", b, "--from-beginning", "--until-end")
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(got)
	if !slices.Equal(got, []string{"p0", "p1", "p2"}) {
		t.Errorf("consume: %q, want p0, p1 and p2", r.stdout)
	}
}

// TestTopicAlterPartitionsSamsa: Samsa's own messages and --validate-only,
// which changes nothing.
func TestTopicAlterPartitionsSamsa(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	mustRun(t, nil, "topic", "create", "v", b, "-p", "2")

	r := mustRun(t, nil, "topic", "alter", "v", b, "--partitions", "4", "--validate-only")
	if want := "Topic v can have 4 partitions (validated only, nothing changed).\n"; r.stdout != want {
		t.Errorf("alter --validate-only: stdout %q, want %q", r.stdout, want)
	}
	r = mustRun(t, nil, "topic", "describe", "v", b)
	if !strings.Contains(r.stdout, "\tPartitionCount: 2\t") {
		t.Errorf("--validate-only changed the topic:\n%s", r.stdout)
	}
	r = run(t, nil, "topic", "alter", "v", b, "--partitions", "1", "--validate-only")
	if r.err == nil || !strings.Contains(r.err.Error(), "INVALID_PARTITIONS") {
		t.Errorf("alter --validate-only to fewer partitions: err %v, want INVALID_PARTITIONS", r.err)
	}

	for _, tc := range []struct{ n, want string }{
		{"2", "INVALID_PARTITIONS: invalid number of partitions: topic v already has 2 partitions"},
		{"1", "INVALID_PARTITIONS: invalid number of partitions: topic v has 2 partitions; 1 would not be an increase"},
	} {
		r = run(t, nil, "topic", "alter", "v", b, "--partitions", tc.n)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("alter to %s partitions: err %v, want %q", tc.n, r.err, tc.want)
		}
	}

	// Several topics: each changes or fails on its own.
	mustRun(t, nil, "topic", "create", "w", b, "-p", "3")
	r = run(t, nil, "topic", "alter", "v", "w", "missing", b, "--partitions", "3")
	if want := "Topic v now has 3 partitions.\n"; r.stdout != want {
		t.Errorf("alter of three topics: stdout %q, want %q", r.stdout, want)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "topic w: INVALID_PARTITIONS") ||
		!strings.Contains(r.err.Error(), "topic missing: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter of three topics: err %v", r.err)
	}
}

func TestTopicAlterPartitionsArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `required flag(s) "partitions" not set`},
		{[]string{"--partitions", "0"}, "at least 1"},
		{[]string{"--partitions", "-1"}, "at least 1"},
	} {
		r := run(t, nil, append([]string{"topic", "alter", "t", "--brokers=127.0.0.1:1"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, r.err, tc.want)
		}
	}
}

// waitPartitions waits until topic has n partitions, each with a leader.
func waitPartitions(ctx context.Context, t *testing.T, addr, topic string, n int) {
	t.Helper()
	pollAdmin(ctx, t, addr, fmt.Sprintf("topic %s having %d partitions with leaders", topic, n), func(adm *kadm.Client) bool {
		md, err := adm.Metadata(ctx, topic)
		return err == nil && len(md.Topics[topic].Partitions) == n && topicReady(md.Topics[topic])
	})
}
