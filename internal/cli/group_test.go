package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestGroupCommands(t *testing.T) { eachBackend(t, testGroupCommands) }

func testGroupCommands(t *testing.T, addr string) {
	b := "--brokers=" + addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustRun(t, nil, "topic", "create", "orders", b, "--partitions", "3")

	// Ten records per partition, timestamped a second apart from a known
	// time, so that --to-datetime has something to find.
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for p := range int32(3) {
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A consumer of group "billing" reads part of the topic and commits:
	// 4 records of partition 0, 7 of partition 1, none of partition 2.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("billing-app"), kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for {
		if _, gen := cons.GroupMetadata(); gen > 0 {
			break
		}
		fs := cons.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		_ = fs
	}
	adm := kadm.NewClient(prod)
	memberID, gen := cons.GroupMetadata()
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 7}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && commitErr == nil {
						commitErr = err
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("commit: %v (member %s generation %d)", commitErr, memberID, gen)
	}

	r := mustRun(t, nil, "group", "list", b)
	if r.stdout != "billing\n" {
		t.Errorf("list: %q", r.stdout)
	}
	r = mustRun(t, nil, "group", "list", b, "--long", "--state", "Stable")
	if !regexp.MustCompile(`(?m)^billing\s+classic\s+Stable\s+consumer\s+\d+$`).MatchString(r.stdout) {
		t.Errorf("list --long --state stable:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "group", "list", b, "--state", "Empty")
	if r.stdout != "" {
		t.Errorf("list --state Empty: %q", r.stdout)
	}

	r = mustRun(t, nil, "group", "describe", "billing", b)
	for _, re := range []string{
		`(?m)^Group: billing\tState: Stable\tProtocol: consumer/\S+\tCoordinator: \d+\tMembers: 1$`,
		`(?m)^orders\s+0\s+4\s+10\s+6\s+` + regexp.QuoteMeta(memberID) + `\s+\S*127\.0\.0\.1\S*\s+billing-app$`,
		`(?m)^orders\s+1\s+7\s+10\s+3\s+`,
		`(?m)^orders\s+2\s+-\s+10\s+10\s+`, // nothing committed: lag from the log start
		`(?m)^Total lag: 19$`,
		`(?m)^` + regexp.QuoteMeta(memberID) + `\s+-\s+billing-app\s+\S*127\.0\.0\.1\S*\s+orders\[0,1,2\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("describe: output does not match %s:\n%s", re, r.stdout)
		}
	}
	r = run(t, nil, "group", "describe", "nobody", b)
	if r.err == nil || !strings.Contains(r.err.Error(), "does not exist") {
		t.Errorf("describe of an unknown group: %v", r.err)
	}

	// Offsets are reset only while the group is inactive.
	r = run(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders", "--to-earliest")
	if r.err == nil || !strings.Contains(r.err.Error(), "inactive") {
		t.Errorf("reset of a live group: %v", r.err)
	}
	r = run(t, nil, "group", "delete", "billing", b)
	if r.err == nil || !strings.Contains(r.err.Error(), "not empty") {
		t.Errorf("delete of a live group: %v", r.err)
	}
	cons.Close() // returns once LeaveGroup is answered: the group is Empty
	if r := mustRun(t, nil, "group", "describe", "billing", b); !strings.Contains(r.stdout, "State: Empty\t") {
		t.Fatalf("after the consumer left:\n%s", r.stdout)
	}

	committed := func() map[int32]int64 {
		t.Helper()
		os, err := adm.FetchOffsets(ctx, "billing")
		if errors.Is(err, kerr.GroupIDNotFound) { // kfake, once deleted
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		os.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return out
	}
	resetTable := func(stdout string) map[int32]int64 {
		out := map[int32]int64{}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
			var g, topic string
			var p int32
			var o int64
			if _, err := fmt.Sscan(line, &g, &topic, &p, &o); err != nil || (g != "billing" && g != "fresh") || topic != "orders" {
				t.Fatalf("reset-offsets line %q: %v", line, err)
			}
			out[p] = o
		}
		return out
	}
	check := func(what string, got, want map[int32]int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}

	// Dry run by default: shown, not committed.
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders", "--to-earliest")
	check("dry run table", resetTable(r.stdout), map[int32]int64{0: 0, 1: 0, 2: 0})
	if !strings.Contains(r.stderr, "Dry run") {
		t.Errorf("dry run stderr: %q", r.stderr)
	}
	check("after the dry run", committed(), map[int32]int64{0: 4, 1: 7})

	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders", "--to-earliest", "--execute")
	check("to-earliest", committed(), map[int32]int64{0: 0, 1: 0, 2: 0})
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders:1", "--to-offset", "5", "--execute")
	check("to-offset on partition 1", committed(), map[int32]int64{0: 0, 1: 5, 2: 0})
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders:1,2", "--to-offset", "99", "--execute")
	check("to-offset past the end is clamped", committed(), map[int32]int64{0: 0, 1: 10, 2: 10})
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--all-topics", "--shift-by", "-3", "--execute")
	check("shift-by -3", committed(), map[int32]int64{0: 0, 1: 7, 2: 7})
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders", "--to-latest", "--execute")
	check("to-latest", committed(), map[int32]int64{0: 10, 1: 10, 2: 10})
	at := base.Add(6 * time.Second).UTC().Format(time.RFC3339)
	r = mustRun(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders", "--to-datetime", at, "--execute")
	check("to-datetime", committed(), map[int32]int64{0: 6, 1: 6, 2: 6})
	r = mustRun(t, nil, "group", "describe", "billing", b)
	if !regexp.MustCompile(`(?m)^Total lag: 12$`).MatchString(r.stdout) || !strings.Contains(r.stdout, "State: Empty") {
		t.Errorf("describe after the resets:\n%s", r.stdout)
	}

	// A group that does not exist yet can be given offsets, as with
	// kafka-consumer-groups (DescribeGroups v6 answers GROUP_ID_NOT_FOUND).
	r = mustRun(t, nil, "group", "reset-offsets", "fresh", b, "--topic", "orders", "--to-offset", "3", "--execute")
	if got := resetTable(r.stdout); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 3, 1: 3, 2: 3}) {
		t.Errorf("reset-offsets of a new group: %v\n%s", got, r.stdout)
	}

	for _, bad := range [][]string{
		{"--topic", "orders"}, // no mode
		{"--topic", "orders", "--to-earliest", "--to-latest"}, // two modes
		{"--to-earliest"},                                   // no topics
		{"--topic", "orders:x", "--to-earliest"},            // bad partition
		{"--topic", "orders", "--to-datetime", "yesterday"}, // bad time
		{"--topic", "missing", "--to-earliest"},             // unknown topic
	} {
		args := append([]string{"group", "reset-offsets", "billing", b}, bad...)
		if r := run(t, nil, args...); r.err == nil {
			t.Errorf("reset-offsets %v: no error", bad)
		}
	}
	// A partition the topic lacks is named as such (it was "no start or
	// end offset: <nil> <nil>").
	if r := run(t, nil, "group", "reset-offsets", "billing", b, "--topic", "orders:99", "--to-earliest"); r.err == nil || r.err.Error() != "topic orders has no partition 99" {
		t.Errorf("reset-offsets of orders:99: %v, want topic orders has no partition 99", r.err)
	}

	r = mustRun(t, nil, "group", "delete", "billing", b)
	if r.stdout != "Deleted group billing.\n" {
		t.Errorf("delete: %q", r.stdout)
	}
	r = run(t, nil, "group", "delete", "billing", b)
	if r.err == nil || !strings.Contains(r.err.Error(), "does not exist") {
		t.Errorf("delete twice: %v", r.err)
	}
	if os := committed(); len(os) != 0 {
		t.Errorf("offsets after delete: %v", os)
	}
}
