package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `samsa group describe` shows a KIP-848 consumer group: its type, epochs
// and assignor, the lag of each partition with the member consuming it,
// and each member's epoch and current and target assignment.
func TestGroupDescribeConsumerGroup(t *testing.T) {
	addr := startSamsa(t, "")
	b := "--brokers=" + addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustRun(t, nil, "topic", "create", "events", b, "--partitions", "2")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "kip848", "member-one-000000000001", 30000
	hb.SubscribedTopicNames = []string{"events"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	for {
		if resp, err = hb.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err == nil {
			break
		} else if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	commit.Group, commit.MemberID, commit.Generation = "kip848", hb.MemberID, resp.MemberEpoch
	// kgo sends v10 (topics by id) to samsa, v9 (by name) elsewhere.
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "events", TopicID: tds["events"].ID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	cr, err := commit.RequestWith(ctx, cl)
	if err != nil || cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, cr)
	}

	out := mustRun(t, nil, "group", "describe", "kip848", b).stdout
	for _, want := range []string{
		`Group: kip848\s+Type: consumer\s+State: Stable\s+Epoch: 1\s+Assignment-Epoch: 1\s+Assignor: uniform\s+Coordinator: \d+\s+Members: 1`,
		`events\s+0\s+3\s+5\s+2\s+member-one-000000000001\s+/127.0.0.1\s+\S+`,
		`events\s+1\s+-\s+5\s+5\s+member-one-000000000001`,
		`Total lag: 7`,
		`member-one-000000000001\s+-\s+1\s+\S+\s+/127.0.0.1\s+events\[0,1\]\s+events\[0,1\]`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
	// ListGroups v5 gives the group's type: KIP-848's "consumer".
	out = mustRun(t, nil, "group", "list", b, "-l").stdout
	for _, re := range []string{`(?m)^GROUP\s+TYPE\s+STATE\s+PROTOCOL-TYPE\s+COORDINATOR$`, `(?m)^kip848\s+consumer\s+Stable\s+consumer\s+\d+$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("list -l: no match for %s:\n%s", re, out)
		}
	}
	for typ, want := range map[string]string{"consumer": "kip848\n", "Consumer": "kip848\n", "classic": "", "share": ""} {
		if out := mustRun(t, nil, "group", "list", b, "--type", typ).stdout; out != want {
			t.Errorf("list --type %s: %q, want %q", typ, out, want)
		}
	}
	r := run(t, nil, "group", "describe", "nosuchgroup", b)
	if r.err == nil || !strings.Contains(r.err.Error()+r.stderr, "does not exist") {
		t.Fatalf("unknown group: %v %s", r.err, r.stderr)
	}
}
