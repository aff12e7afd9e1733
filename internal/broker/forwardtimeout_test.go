package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A forwarded request that got no answer in time is answered
// REQUEST_TIMED_OUT for each of its entries (Kafka's ForwardingManager on
// timeout), and waits for the request's own timeout_ms when longer.
func TestForwardTimedOutAnswer(t *testing.T) {
	del5 := kmsg.NewPtrDeleteTopicsRequest()
	del5.Version, del5.TopicNames, del5.TimeoutMillis = 5, []string{"a", "b"}, 60_000
	del6 := kmsg.NewPtrDeleteTopicsRequest()
	del6.Version = 6
	for _, n := range []string{"a", "b", "c"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		del6.Topics = append(del6.Topics, rt)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 1000
	for _, n := range []string{"a"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = n
		create.Topics = append(create.Topics, rt)
	}
	parts := kmsg.NewPtrCreatePartitionsRequest()
	parts.TimeoutMillis = -1
	for _, n := range []string{"a", "b"} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = n
		parts.Topics = append(parts.Topics, rt)
	}
	for _, tc := range []struct {
		name    string
		req     kmsg.Request
		timeout time.Duration
		codes   func(kmsg.Response) []int16
		n       int
	}{
		{"DeleteTopics v5", del5, time.Minute, deleteCodes, 2},
		{"DeleteTopics v6", del6, 15 * time.Second, deleteCodes, 3}, // kmsg's default timeout_ms,
		{"CreateTopics", create, time.Second, func(r kmsg.Response) []int16 {
			var out []int16
			for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}, 1},
		{"CreatePartitions", parts, 0, func(r kmsg.Response) []int16 {
			var out []int16
			for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := requestTimeout(tc.req); got != tc.timeout || !ok {
				t.Errorf("requestTimeout %v %v, want %v true", got, ok, tc.timeout)
			}
			resp := timedOut(tc.req)
			if resp == nil {
				t.Fatal("no answer")
			}
			codes := tc.codes(resp)
			if len(codes) != tc.n {
				t.Fatalf("%d entries, want %d", len(codes), tc.n)
			}
			for _, c := range codes {
				if c != kerr.RequestTimedOut.Code {
					t.Fatalf("code %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(c))
				}
			}
		})
	}
	if _, ok := requestTimeout(kmsg.NewPtrAlterClientQuotasRequest()); ok {
		t.Error("AlterClientQuotas has no timeout_ms")
	}
	if timedOut(kmsg.NewPtrAlterClientQuotasRequest()) != nil {
		t.Fatal("an answer built for an API timedOut does not cover")
	}
}

func deleteCodes(r kmsg.Response) []int16 {
	var out []int16
	for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
		out = append(out, t.ErrorCode)
	}
	return out
}
