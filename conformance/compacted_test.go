package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestCompactedExpected(t *testing.T) {
	want := map[string]string{
		"k01": *compactedValue(8, "k01"),
		"k03": *compactedValue(6, "k03"),
		"k04": *compactedValue(5, "k04"),
		"k05": *compactedValue(9, "k05"),
		"k06": *compactedValue(6, "k06"),
		"k07": *compactedValue(5, "k07"),
		"k08": *compactedValue(5, "k08"),
		"k09": *compactedValue(6, "k09"),
		"k11": *compactedValue(5, "k11"),
		"k21": *compactedValue(10, "k21"),
	}
	for i := 12; i <= 20; i++ {
		k := fmt.Sprintf("k%02d", i)
		want[k] = *compactedValue(7, k)
	}
	if got := compactedExpected(); !maps.Equal(got, want) {
		t.Fatalf("expected map\n%v\nwant\n%v", got, want)
	}
	if n := compactedRecords(); n != 79 {
		t.Errorf("%d records, want 79", n)
	}
	bs := compactedBatches()
	if last := bs[len(bs)-1]; len(last) != 1 || last[0].Value == nil {
		t.Errorf("the last batch %v is not one live record: runners stop at the last offset", last)
	}
	for _, b := range bs {
		if len(b) > 3 {
			t.Errorf("batch %v has more than 3 records: it may not fit segment.bytes", b)
		}
	}
}

func TestCompareReported(t *testing.T) {
	want := compactedExpected()
	report := func(records int, edit func(map[string]*string)) string {
		vals := map[string]*string{}
		for k, v := range want {
			vals[k] = &v
		}
		if edit != nil {
			edit(vals)
		}
		b, _ := json.Marshal(map[string]any{"records": records, "values": vals})
		return string(b)
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name, data, err string
	}{
		{"exact", report(len(want), nil), ""},
		{"no line", "", "no DATA line"},
		{"not json", "{", "DATA line"},
		{"no values", `{"records": 19}`, "want records and values"},
		{"tombstone seen", report(len(want)+1, func(m map[string]*string) { m["k00"] = nil }), "k00: null (a tombstone"},
		{"null for a live key", report(len(want), func(m map[string]*string) { m["k03"] = nil }), "k03: null, want"},
		{"tombstoned key seen", report(len(want)+1, func(m map[string]*string) { m["k10"] = str("r5") }), `k10: "r5", want none`},
		{"stale value", report(len(want), func(m map[string]*string) { m["k03"] = compactedValue(5, "k03") }), "k03: \"r5-k03"},
		{"missing key", report(len(want)-1, func(m map[string]*string) { delete(m, "k11") }), "k11: missing"},
		{"duplicate delivery", report(len(want)+2, nil), "delivered 21 records for 19 keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compareReported(tc.data, want)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

func TestLogStateMatches(t *testing.T) {
	want := map[string]string{"a": "1", "b": "2"}
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		recs []logRecord
		err  string
	}{
		{"exact", []logRecord{{0, "a", v("1")}, {3, "b", v("2")}}, ""},
		{"tombstone", []logRecord{{0, "a", v("1")}, {2, "c", nil}, {3, "b", v("2")}}, "tombstone of c"},
		{"stale", []logRecord{{0, "a", v("0")}, {1, "a", v("1")}, {3, "b", v("2")}}, "superseded record a"},
		{"twice", []logRecord{{0, "a", v("1")}, {1, "a", v("1")}, {3, "b", v("2")}}, "key a twice"},
		{"missing", []logRecord{{0, "a", v("1")}}, "1 of 2 live keys"},
		{"extra", []logRecord{{0, "a", v("1")}, {1, "z", v("9")}, {3, "b", v("2")}}, "tombstoned key z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := logState{Records: tc.recs}.matches(want)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
