package console

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/dlq"
)

func TestDeadLetter(t *testing.T) {
	be32 := binary.BigEndian.AppendUint32(nil, 7)
	be64 := binary.BigEndian.AppendUint64(nil, 1<<40)
	for _, tc := range []struct {
		name string
		hs   []kgo.RecordHeader
		want *DeadLetter
	}{
		{"none", nil, nil},
		{"spring", []kgo.RecordHeader{{Key: dlq.SpringTopic, Value: []byte("orders")}, {Key: dlq.SpringPartition, Value: be32}, {Key: dlq.SpringOffset, Value: be64},
			{Key: dlq.SpringExceptionFQCN, Value: []byte("java.lang.RuntimeException")}, {Key: dlq.SpringExceptionMsg, Value: []byte("boom")}},
			&DeadLetter{Format: "spring", Topic: "orders", Partition: 7, Offset: 1 << 40, DeliveryCount: -1, Exception: "java.lang.RuntimeException", Message: "boom"}},
		{"share group", dlq.Headers("orders", 3, 99, "sg", 5, dlq.ReasonDeliveryLimited),
			&DeadLetter{Format: "kip-1191", Topic: "orders", Partition: 3, Offset: 99, Group: "sg", DeliveryCount: 5, Message: dlq.ReasonDeliveryLimited}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := deadLetter(tc.hs)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// A partition header that is not 4 bytes is reported, not guessed.
	if d := deadLetter([]kgo.RecordHeader{{Key: dlq.SpringTopic, Value: []byte("o")}, {Key: dlq.SpringPartition, Value: be64}}); d == nil || d.Error == "" {
		t.Fatalf("malformed partition: %+v", d)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct{ in, enc, want string }{
		{`{"a":1}`, "json", "{\n  \"a\": 1\n}"},
		{`not json`, "json", "not json"},
		{"\xff", "utf8", "\uFFFD"},
		{"hi", "hex", "6869"},
		{"hi", "base64", "aGk="},
	} {
		if got := *decode([]byte(tc.in), tc.enc); got != tc.want {
			t.Errorf("decode(%q, %s) = %q, want %q", tc.in, tc.enc, got, tc.want)
		}
	}
	if decode(nil, "utf8") != nil {
		t.Error("a null value decoded to a string")
	}
}

// TestInvalidUTF8: a key or value that is not valid UTF-8, asked for as
// utf8 or json, is shown as hex and marked so, like headers; valid ones
// and the other encodings are unchanged.
func TestInvalidUTF8(t *testing.T) {
	r := &kgo.Record{Key: []byte("\xff\x00k"), Value: []byte("fine"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0xfe}}}}
	for _, enc := range []string{"utf8", "json"} {
		m := message(r, enc)
		if *m.Key != "ff006b" || m.KeyEnc != "hex" || *m.Value != "fine" || m.ValueEnc != "" || m.Headers[0].Value != "fe" {
			t.Errorf("%s: key %q (%s), value %q (%s), header %q", enc, *m.Key, m.KeyEnc, *m.Value, m.ValueEnc, m.Headers[0].Value)
		}
	}
	if m := message(r, "base64"); *m.Key != "/wBr" || m.KeyEnc != "" {
		t.Errorf("base64: key %q (%s)", *m.Key, m.KeyEnc)
	}
	if m := message(&kgo.Record{}, "utf8"); m.Key != nil || m.KeyEnc != "" {
		t.Errorf("null key: %v (%s)", m.Key, m.KeyEnc)
	}
}

func TestFilter(t *testing.T) {
	r := &kgo.Record{Key: []byte("user-42"), Value: []byte(`{"a":{"b":"x"},"n":3}`)}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{KeyContains: "42"}, true},
		{Filter{KeyContains: "43"}, false},
		{Filter{ValueContains: `"n":3`}, true},
		{Filter{JSONField: "a.b", JSONEquals: "x"}, true},
		{Filter{JSONField: "a.b", JSONEquals: "y"}, false},
		{Filter{JSONField: "n", JSONEquals: "3"}, true},
		{Filter{JSONField: "a.c", JSONEquals: "x"}, false},
		{Filter{JSONField: "n.x", JSONEquals: "3"}, false},
	} {
		if got := tc.f.match(r); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.f, got, tc.want)
		}
	}
}

// FuzzDecoders: the decoders of record bytes and of request parameters
// (dead-letter headers through internal/dlq) never panic and give valid UTF-8 for the page.
func FuzzDecoders(f *testing.F) {
	f.Add([]byte("orders"), binary.BigEndian.AppendUint32(nil, 3), []byte(`{"a":[1,2]}`), "0:5,1:7", "k=v\nx=y")
	f.Add([]byte{}, []byte{1, 2, 3}, []byte{0xff, 0xfe}, "1:", "novalue")
	f.Fuzz(func(t *testing.T, topic, num, value []byte, starts, headers string) {
		deadLetter([]kgo.RecordHeader{{Key: dlq.SpringTopic, Value: topic}, {Key: dlq.SpringPartition, Value: num}, {Key: dlq.SpringOffset, Value: num}})
		for _, enc := range encodings {
			if s := decode(value, enc); s == nil || !utf8.ValidString(*s) {
				t.Fatalf("decode(%q, %s) = %v", value, enc, s)
			}
		}
		if m, err := parseStarts(starts); err == nil && starts != "" && len(m) == 0 {
			t.Fatalf("parseStarts(%q) = empty", starts)
		}
		if hs, err := headersParam(headers); err == nil {
			for _, h := range hs {
				if strings.Contains(h.Key, "\n") {
					t.Fatalf("header key %q", h.Key)
				}
			}
		}
		Filter{JSONField: "a.b", JSONEquals: "1"}.match(&kgo.Record{Value: value})
	})
}
