package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopicDeleteRecords: samsa topic delete-records moves low watermarks
// as kafka-delete-records does, from flags or Kafka's offset JSON file,
// prints each partition's new low watermark or error, and exits non-zero
// when one failed; consumers then start at the low watermark.
func TestTopicDeleteRecords(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	mustRun(t, nil, "topic", "create", "logs", "--partitions", "2", b)
	for p := range 2 {
		mustRun(t, strings.NewReader(strings.Repeat("x\n", 10)), "produce", "logs", "-q", "--partition", string(rune('0'+p)), b)
	}

	r := mustRun(t, nil, "topic", "delete-records", "--topic", "logs", "--partition", "0", "--offset", "4", b)
	if want := "partition: logs-0\tlow_watermark: 4\n"; r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
	plan := filepath.Join(t.TempDir(), "offsets.json")
	os.WriteFile(plan, []byte(`{"partitions":[{"topic":"logs","partition":1,"offset":-1},{"topic":"logs","partition":0,"offset":6}],"version":1}`), 0o644)
	r = mustRun(t, nil, "topic", "delete-records", "--offset-json-file", plan, b)
	if want := "partition: logs-0\tlow_watermark: 6\npartition: logs-1\tlow_watermark: 10\n"; r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
	r = mustRun(t, nil, "consume", "logs", "--partition", "0", "--from-beginning", "--until-end", "--format", "%o\n", b)
	if r.stdout != "6\n7\n8\n9\n" {
		t.Fatalf("consumed offsets %q after deleting below 6", r.stdout)
	}

	// Errors: past the high watermark, an unknown topic (each printed,
	// exit non-zero), and bad input refused before any request.
	r = run(t, nil, "topic", "delete-records", "--topic", "logs", "--partition", "0,1", "--offset", "11", b)
	if r.err == nil || strings.Count(r.stdout, "OFFSET_OUT_OF_RANGE") != 2 {
		t.Fatalf("past the high watermark: %v %q", r.err, r.stdout)
	}
	r = run(t, nil, "topic", "delete-records", "--topic", "nosuch", "--partition", "0", b)
	if r.err == nil || !strings.Contains(r.stdout, "partition: nosuch-0\terror: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: %v %q", r.err, r.stdout)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"partitions":[{"topic":"logs","partition":0,"offset":1},{"topic":"logs","partition":0,"offset":2}]}`, "duplicate topic partitions: logs-0"},
		{`{"partitions":[],"version":2}`, "not supported version field value 2"},
		{`{"version":1}`, "missing partitions field"},
		{`{"partitions":[{"topic":"logs","offset":1}]}`, "partitions[0]: topic, partition and offset are required"},
		{`nope`, "not valid JSON"},
	} {
		os.WriteFile(plan, []byte(tc.json), 0o644)
		if r := run(t, nil, "topic", "delete-records", "--offset-json-file", plan, b); r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, r.err, tc.want)
		}
	}
	if r := run(t, nil, "topic", "delete-records", "--topic", "logs", b); r.err == nil || !strings.Contains(r.err.Error(), "--partition") {
		t.Errorf("no partition: %v", r.err)
	}
}
