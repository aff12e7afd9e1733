package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: "0123456789abcdef0123", GoVersion: "go1.26.0"}, "v1.2.3 (commit 0123456789ab) go1.26.0"},
		{Info{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.26.0"}, "(devel) (commit abc, modified) go1.26.0"},
		{Info{Version: "(devel)", GoVersion: "go1.26.0"}, "(devel) go1.26.0"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
	if v := Version(); !strings.HasSuffix(v, " "+runtime.Version()) {
		t.Fatalf("Version() = %q, want the Go version %s at the end", v, runtime.Version())
	}
}
