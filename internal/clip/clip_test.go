package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "member-1", "member-1"},
		{"max", strings.Repeat("a", Max), strings.Repeat("a", Max)},
		{"one over", strings.Repeat("a", Max+1), strings.Repeat("a", Max) + "...(+1 bytes)"},
		{"1 MiB", strings.Repeat("a", 1<<20), strings.Repeat("a", Max) + "...(+1048320 bytes)"},
		// A 3-byte rune straddling the cut is left out whole.
		{"utf8", strings.Repeat("a", Max-1) + "€" + "b", strings.Repeat("a", Max-1) + "...(+4 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Fatalf("String(%d bytes) = %q (%d bytes), want %q", len(tc.in), got[:min(len(got), 40)], len(got), tc.want[:min(len(tc.want), 40)])
			}
			if !utf8.ValidString(got) {
				t.Fatalf("String(%d bytes) is not valid UTF-8", len(tc.in))
			}
		})
	}
}
