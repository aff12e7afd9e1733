package cli

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// Consumer groups with clients of other languages (issue 3): kcat's
// balanced consumer (librdkafka) and kafka-python join a group, consume
// part of a topic, commit and leave; `samsa group describe` shows the lag
// they left, and the next member of the group resumes from their commits.
// The tests skip when the client is not installed (CI installs both: kcat,
// and Debian's python3-kafka for /usr/bin/python3).

// startGroupNode starts a node whose groups rebalance without the initial
// delay, with a topic of 3 partitions holding 100 records each, and
// returns its address.
func startGroupNode(t *testing.T, topic string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), Properties: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	mustRun(t, nil, "topic", "create", topic, "--brokers="+n.Addr(), "--partitions", "3")
	// Uncompressed: kafka-python reads snappy only with python3-snappy,
	// which CI installs after these tests run.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range int32(3) {
		for i := range 100 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return n.Addr()
}

// consumedPositions parses "partition:offset" lines and returns, per
// partition, the offsets seen, failing on duplicates.
func consumedPositions(t *testing.T, out string, seen map[int32]map[int64]bool) int {
	t.Helper()
	n := 0
	for _, line := range strings.Fields(out) {
		ps, os, ok := strings.Cut(line, ":")
		p, err1 := strconv.Atoi(ps)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("consumer output line %q", line)
		}
		if seen[int32(p)] == nil {
			seen[int32(p)] = map[int64]bool{}
		}
		if seen[int32(p)][o] {
			t.Errorf("record %d/%d consumed twice", p, o)
		}
		seen[int32(p)][o] = true
		n++
	}
	return n
}

// checkLag runs samsa group describe and checks the group is Empty with
// total lag want, the committed offsets being the next offset after the
// records consumed.
func checkLag(t *testing.T, addr, group string, seen map[int32]map[int64]bool, want int) {
	t.Helper()
	r := mustRun(t, nil, "group", "describe", group, "--brokers="+addr)
	if !strings.Contains(r.stdout, "State: Empty\t") || !regexp.MustCompile(fmt.Sprintf(`(?m)^Total lag: %d$`, want)).MatchString(r.stdout) {
		t.Fatalf("describe: want Empty with total lag %d:\n%s", want, r.stdout)
	}
	for p := range int32(3) {
		next := int64(len(seen[p]))
		for o := range next {
			if !seen[p][o] {
				t.Fatalf("partition %d: offset %d not consumed but %d were", p, o, next)
			}
		}
		cur := strconv.FormatInt(next, 10)
		if next == 0 {
			cur = `(-|0)`
		}
		re := fmt.Sprintf(`(?m)^\S+\s+%d\s+%s\s+100\s+`, p, cur)
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("partition %d: want committed %s:\n%s", p, cur, r.stdout)
		}
	}
}

func TestGroupKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	addr := startGroupNode(t, "kc")
	seen := map[int32]map[int64]bool{}
	consume := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		base := []string{"-b", addr, "-G", "kcat-group", "-q", "-f", `%p:%o\n`,
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"}
		out, err := exec.CommandContext(ctx, kcat, append(append(base, args...), "kc")...).CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// Part-way: 120 records, then kcat leaves, committing what it output.
	if n := consumedPositions(t, consume("-c", "120"), seen); n != 120 {
		t.Fatalf("kcat consumed %d records, want 120", n)
	}
	checkLag(t, addr, "kcat-group", seen, 180)
	// The next member resumes from the commits and reads the rest.
	if n := consumedPositions(t, consume("-c", "180"), seen); n != 180 {
		t.Fatalf("second kcat consumed %d records, want 180", n)
	}
	checkLag(t, addr, "kcat-group", seen, 0)
}

// kafkaPython consumes up to max records of topic in group with
// kafka-python, committing synchronously, and prints partition:offset
// lines.
const kafkaPython = `
import sys
from kafka import KafkaConsumer
addr, group, topic, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, bootstrap_servers=addr, group_id=group, client_id="kafka-python-test",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=6000, heartbeat_interval_ms=500, consumer_timeout_ms=30000)
n = 0
while n < want:
    batch = c.poll(timeout_ms=1000, max_records=want - n)
    for tp, msgs in batch.items():
        for m in msgs:
            print("%d:%d" % (m.partition, m.offset))
            n += 1
    if batch:
        c.commit()
c.close(autocommit=False)
`

func TestGroupKafkaPython(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import kafka").Run(); err != nil {
		t.Skip("kafka-python (Debian python3-kafka) not installed for /usr/bin/python3")
	}
	addr := startGroupNode(t, "kp")
	seen := map[int32]map[int64]bool{}
	consume := func(n int) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", kafkaPython, addr, "py-group", "kp", strconv.Itoa(n)).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("kafka-python: %v\n%s\n%s", err, out, ee.Stderr)
			}
			t.Fatalf("kafka-python: %v", err)
		}
		return string(out)
	}
	if n := consumedPositions(t, consume(120), seen); n != 120 {
		t.Fatalf("kafka-python consumed %d records, want 120", n)
	}
	checkLag(t, addr, "py-group", seen, 180)
	if n := consumedPositions(t, consume(180), seen); n != 180 {
		t.Fatalf("second kafka-python consumed %d records, want 180", n)
	}
	checkLag(t, addr, "py-group", seen, 0)
}
