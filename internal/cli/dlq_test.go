package cli

import (
	"context"
	"encoding/binary"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/dlq"
)

// TestDLQ writes a share group's and a Spring dead-letter record to a
// dead-letter topic, lists, inspects and replays it, and reads the replayed
// records back from their source partitions.
func TestDLQ(t *testing.T) { eachBackend(t, testDLQ) }

func testDLQ(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "orders", b, "--partitions", "3")
	mustRun(t, nil, "topic", "create", "orders.DLT", b, "--partitions", "1")
	mustRun(t, nil, "topic", "create", "plain", b, "--partitions", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	spring := []kgo.RecordHeader{
		{Key: dlq.SpringTopic, Value: []byte("orders")},
		{Key: dlq.SpringPartition, Value: binary.BigEndian.AppendUint32(nil, 1)},
		{Key: dlq.SpringOffset, Value: binary.BigEndian.AppendUint64(nil, 17)},
		{Key: dlq.SpringExceptionFQCN, Value: []byte("java.lang.IllegalStateException")},
		{Key: dlq.SpringExceptionMsg, Value: []byte("no such customer")},
		{Key: "app", Value: []byte("billing")},
	}
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: "orders.DLT", Key: []byte("a"), Value: []byte("va"),
			Headers: dlq.Headers("orders", 2, 41, "workers", 5, dlq.ReasonDeliveryLimited)},
		&kgo.Record{Topic: "orders.DLT", Key: []byte("b"), Value: []byte("vb"), Headers: spring},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, nil, "dlq", "list", b)
	if re := `(?m)^orders\.DLT\s+1\s+2\s+false$`; !regexp.MustCompile(re).MatchString(r.stdout) {
		t.Errorf("list: no match for %s:\n%s", re, r.stdout)
	}
	if strings.Contains(r.stdout, "plain") {
		t.Errorf("list shows a topic that is no dead-letter topic:\n%s", r.stdout)
	}

	r = mustRun(t, nil, "dlq", "inspect", "orders.DLT", b)
	for _, re := range []string{
		`(?m)^0\s+0\s+orders\[2\]@41\s+kip-1191\s+workers\s+5\s+Offset delivery count exceeded the threshold\.\s+a$`,
		`(?m)^0\s+1\s+orders\[1\]@17\s+spring\s+-\s+-\s+java\.lang\.IllegalStateException: no such customer\s+b$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("inspect: no match for %s:\n%s", re, r.stdout)
		}
	}
	r = mustRun(t, nil, "dlq", "replay", "orders.DLT", b, "--dry-run")
	if !strings.Contains(r.stdout, "would replay 2 records to orders") {
		t.Errorf("replay --dry-run:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "dlq", "replay", "orders.DLT", b)
	if !strings.Contains(r.stdout, "replayed 2 records to orders") {
		t.Errorf("replay:\n%s", r.stdout)
	}
	for _, want := range []struct {
		p      string
		key    string
		header string
	}{{"2", "a", ""}, {"1", "b", "app"}} {
		r = mustRun(t, nil, "consume", "orders", b, "-p", want.p, "--from-beginning", "-e", "-q", "-f", `%k %v %h\n`)
		if !strings.HasPrefix(r.stdout, want.key+" v"+want.key) || strings.Contains(r.stdout, "dlq") || strings.Contains(r.stdout, "kafka_dlt") {
			t.Errorf("partition %s after replay: %q", want.p, r.stdout)
		}
		if want.header != "" && !strings.Contains(r.stdout, want.header) {
			t.Errorf("partition %s lost header %s: %q", want.p, want.header, r.stdout)
		}
	}

	// A record without origin headers: inspect says so, replay refuses.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders.DLT", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, nil, "dlq", "inspect", "orders.DLT", b)
	if !strings.Contains(r.stdout, "not a dead-letter record") {
		t.Errorf("inspect of a plain record:\n%s", r.stdout)
	}
	if r := run(t, nil, "dlq", "replay", "orders.DLT", b); r.err == nil || !strings.Contains(r.err.Error(), "not a dead-letter record") {
		t.Errorf("replay with a plain record: %v", r.err)
	}
	// --source-topic skips it.
	r = mustRun(t, nil, "dlq", "replay", "orders.DLT", b, "--source-topic", "orders", "--dry-run")
	if !strings.Contains(r.stdout, "would replay 2 records to orders") {
		t.Errorf("replay --source-topic:\n%s", r.stdout)
	}
}
