package testutil

import (
	"strings"
	"testing"
)

// fakeTB records how a helper ended the test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, format
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, format
}

// TestMissingFailsUnderCI: a missing data set skips a local run and fails
// a CI run, so that a broken path cannot turn the tests into skips.
func TestMissingFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		skip, fail bool
	}{{"", true, false}, {"false", true, false}, {"true", false, true}, {"1", false, true}} {
		t.Setenv("CI", tc.ci)
		f := &fakeTB{}
		Missing(f, "data set %s absent", "x")
		if f.skipped != tc.skip || f.failed != tc.fail {
			t.Errorf("CI=%q: skipped %v failed %v, want %v %v", tc.ci, f.skipped, f.failed, tc.skip, tc.fail)
		}
		if tc.fail && !strings.HasPrefix(f.msg, "CI: ") {
			t.Errorf("CI=%q: message %q does not say CI", tc.ci, f.msg)
		}
	}
}

// TestDebianLines reads the data set's first lines with their keys.
func TestDebianLines(t *testing.T) {
	lines := DebianLines(t, 3)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	for _, l := range lines {
		if l.Package == "" || !strings.Contains(string(l.Line), `"package"`) {
			t.Errorf("line %q has package %q", l.Line, l.Package)
		}
	}
}

// TestKV: SplitKV gives back what AppendKV framed, nil values included,
// and stops at a length that runs past the end.
func TestKV(t *testing.T) {
	type kv struct{ k, v []byte }
	want := []kv{{[]byte("a"), []byte("1")}, {[]byte("b"), nil}, {nil, []byte{}}, {[]byte("c"), []byte("333")}}
	var b []byte
	for _, p := range want {
		b = AppendKV(b, p.k, p.v)
	}
	var got []kv
	SplitKV(b[:len(b)-1], func(k, v []byte) { got = append(got, kv{k, v}) })
	if len(got) != len(want)-1 {
		t.Fatalf("got %d pairs of a cut input, want %d", len(got), len(want)-1)
	}
	for i, p := range got {
		if string(p.k) != string(want[i].k) || string(p.v) != string(want[i].v) || (p.v == nil) != (want[i].v == nil) {
			t.Fatalf("pair %d: %q=%q (nil %v), want %q=%q", i, p.k, p.v, p.v == nil, want[i].k, want[i].v)
		}
	}
}
