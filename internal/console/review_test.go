package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEmptyLists checks that a list with nothing in it is [] in the API's
// JSON, never null.
func TestEmptyLists(t *testing.T) {
	_, a := startNode(t, false)
	for _, path := range []string{"/api/topics?q=nothing-matches", "/api/topics?page=99", "/api/groups", "/api/dlt"} {
		req, _ := http.NewRequest("GET", a.base+path, nil)
		code, body := a.do(req, nil)
		if code != http.StatusOK || strings.Contains(body, "null") {
			t.Errorf("GET %s: %d %s, want 200 without null", path, code, body)
		}
	}
}

// TestReviewStatuses: a replay of a malformed dead letter is the
// request's fault (400, nothing produced), and the messages page of a
// topic that does not exist is 404.
func TestReviewStatuses(t *testing.T) {
	n, a := startNode(t, false)
	ctx := context.Background()
	cl := mustClient(t, n.Addr())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "bad.DLT"); err != nil {
		t.Fatal(err)
	}
	bad := &kgo.Record{Topic: "bad.DLT", Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
		{Key: "kafka_dlt-original-partition", Value: []byte{0, 1, 2}}, // 3 bytes, not 4
		{Key: "kafka_dlt-original-offset", Value: make([]byte, 8)},
	}}
	if err := cl.ProduceSync(ctx, bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// /api/dlt?topic= has the shape docs/console.md gives.
	var dlt struct {
		Topics []struct{ Name string }
		Topic  string
		Record struct {
			Topic    string
			Messages []struct {
				Offset     int64
				DeadLetter struct {
					Format        string
					OriginalTopic string
					Error         string
				}
			}
			NextOffset     *int64
			LogStartOffset *int64
			LogEndOffset   *int64
		} `json:"records"`
	}
	if code := a.get("/api/dlt?topic=bad.DLT&partition=0&offset=0", &dlt); code != 200 || len(dlt.Topics) != 1 || dlt.Topics[0].Name != "bad.DLT" || dlt.Topic != "bad.DLT" ||
		len(dlt.Record.Messages) != 1 || dlt.Record.NextOffset == nil || dlt.Record.LogStartOffset == nil || dlt.Record.LogEndOffset == nil ||
		dlt.Record.Messages[0].DeadLetter.OriginalTopic != "orders" || dlt.Record.Messages[0].DeadLetter.Format != "spring" || dlt.Record.Messages[0].DeadLetter.Error == "" {
		t.Errorf("/api/dlt?topic=bad.DLT: %d %+v", code, dlt)
	}
	form := url.Values{"topic": {"bad.DLT"}, "partition": {"0"}, "offset": {"0"}}
	if code, body := a.post("/api/do/replay", form, true, nil); code != http.StatusBadRequest {
		t.Errorf("replay of a malformed dead letter: %d %s, want 400", code, body)
	}
	for _, path := range []string{"/topics/nope/messages", "/api/topics/nope/messages"} {
		req, _ := http.NewRequest("GET", a.base+path, nil)
		if code, body := a.do(req, nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, code, body)
		}
	}
}
