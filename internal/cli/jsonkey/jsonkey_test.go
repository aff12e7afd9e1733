package jsonkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// reference is Field written the slow, obvious way: decode into a map.
func reference(line []byte, field string) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, false, err
	}
	if obj == nil {
		return nil, false, ErrNotObject
	}
	raw, found := obj[field]
	if !found || string(raw) == "null" {
		return nil, false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, err
		}
		return []byte(s), true, nil
	}
	return raw, true, nil
}

func TestField(t *testing.T) {
	for _, tc := range []struct {
		line    string
		key     string
		ok      bool
		wantErr bool
	}{
		{`{"package":"bash","version":"5.2"}`, "bash", true, false},
		{`{"version":"5.2","package":"b\u00e4sh\"x"}`, "bäsh\"x", true, false},
		{` { "package" : "spaced" } `, "spaced", true, false},
		{"{\n\t\"package\":\r\n\"ws\"\n}\n", "ws", true, false},
		{`{"package":42}`, "42", true, false},
		{`{"package":-1.5e3,"x":1}`, "-1.5e3", true, false},
		{`{"package":{"a":[1, 2, "}]"]} ,"b":2}`, `{"a":[1, 2, "}]"]}`, true, false},
		{`{"package":[{"package":"inner"}]}`, `[{"package":"inner"}]`, true, false},
		{`{"package":true}`, "true", true, false},
		{`{"package":""}`, "", true, false},
		{`{"package":null}`, "", false, false},
		{`{"other":"x"}`, "", false, false},
		{`{}`, "", false, false},
		{`{"nested":{"package":"x"}}`, "", false, false},
		{`{"pack\u0061ge":"escaped name"}`, "escaped name", true, false},
		{`{"package":"first","package":"last"}`, "last", true, false},
		{`{"package":"x","package":null}`, "", false, false},
		{`{"a":"\"package\":\"fake\"","package":"real"}`, "real", true, false},
		{`{"Package":"case"}`, "", false, false},
		{`not json`, "", false, true},
		{`["package"]`, "", false, true},
		{`"package"`, "", false, true},
		{`null`, "", false, true},
		{`{"package":"x"`, "", false, true},
		{`{"package":"x"} {}`, "", false, true},
		{``, "", false, true},
	} {
		key, ok, err := Field([]byte(tc.line), "package")
		if (err != nil) != tc.wantErr || ok != tc.ok || string(key) != tc.key {
			t.Errorf("Field(%s) = %q, %v, %v; want %q, %v, error %v", tc.line, key, ok, err, tc.key, tc.ok, tc.wantErr)
		}
		if ok && key == nil {
			t.Errorf("Field(%s): nil value reported present", tc.line)
		}
		rkey, rok, rerr := reference([]byte(tc.line), "package")
		if (rerr != nil) != (err != nil) || rok != ok || !bytes.Equal(rkey, key) {
			t.Errorf("Field(%s) = %q, %v, %v; the map decoding gives %q, %v, %v", tc.line, key, ok, err, rkey, rok, rerr)
		}
	}
	if _, _, err := Field([]byte(`[1]`), "a"); !errors.Is(err, ErrNotObject) {
		t.Errorf("array: err %v, want ErrNotObject", err)
	}
	if _, _, err := Field([]byte(`{"a":}`), "a"); !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "invalid character") {
		t.Errorf("bad JSON: err %v, want ErrSyntax with encoding/json's words", err)
	}
}

// TestFieldDepth checks the nesting limit against encoding/json's.
func TestFieldDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		line := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		_, _, err := Field(line, "a")
		_, _, rerr := reference(line, "a")
		if (err != nil) != (rerr != nil) {
			t.Errorf("depth %d: err %v, encoding/json %v", depth, err, rerr)
		}
		if (err != nil) != (depth > maxDepth) {
			t.Errorf("depth %d: err %v", depth, err)
		}
	}
}

// FuzzField checks Field against decoding into a map.
func FuzzField(f *testing.F) {
	for _, s := range []string{
		`{"package":"bash","version":"5.2"}`,
		`{"package":{"a":[1,"}"]},"b":"\\"}`,
		`{"pack\u0061ge":"e\u00e9","package":1}`,
		`{"package":"\xff"}`,
		`[{"package":1}]`,
		`{"package":"x"`,
		`{"a":-0.5e+7,"b":[true,false,null,{}],"c":"\u00e9\ud83d\ude00","package":"\t"}`,
		`{"package":01}`,
		`{"package":1.}`,
	} {
		f.Add([]byte(s), "package")
	}
	f.Fuzz(func(t *testing.T, line []byte, field string) {
		key, ok, err := Field(line, field)
		rkey, rok, rerr := reference(line, field)
		if (rerr != nil) != (err != nil) || rok != ok || !bytes.Equal(rkey, key) {
			t.Fatalf("Field(%q, %q) = %q, %v, %v; the map decoding gives %q, %v, %v", line, field, key, ok, err, rkey, rok, rerr)
		}
	})
}

func BenchmarkField(b *testing.B) {
	line := []byte(`{"suite":"bookworm","package":"0ad","version":"0.0.26-3","architecture":"amd64","section":"games","priority":"optional","installed_size":"28591","depends":"0ad-data (>= 0.0.26), 0ad-data (<= 0.0.26-3), 0ad-data-common (>= 0.0.26), 0ad-data-common (<= 0.0.26-3), libboost-filesystem1.74.0 (>= 1.74.0), libc6 (>= 2.34)","description":"Real-time strategy game of ancient warfare","homepage":"https://play0ad.com/","size":"7891488","sha256":"610e9f9c41be18af516dd64a6dc1316dbfe1bb8989c52bafa556de9e381d3e29"}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, ok, err := Field(line, "package"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkMapDecoding(b *testing.B) {
	line := []byte(`{"suite":"bookworm","package":"0ad","version":"0.0.26-3","architecture":"amd64","section":"games","priority":"optional","installed_size":"28591","depends":"0ad-data (>= 0.0.26), 0ad-data (<= 0.0.26-3), 0ad-data-common (>= 0.0.26), 0ad-data-common (<= 0.0.26-3), libboost-filesystem1.74.0 (>= 1.74.0), libc6 (>= 2.34)","description":"Real-time strategy game of ancient warfare","homepage":"https://play0ad.com/","size":"7891488","sha256":"610e9f9c41be18af516dd64a6dc1316dbfe1bb8989c52bafa556de9e381d3e29"}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, ok, err := reference(line, "package"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
