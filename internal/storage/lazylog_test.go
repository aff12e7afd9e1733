package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLazyWith: a logger of lazyWith writes the attributes With would,
// nested lazyWith calls included, and asks its parent whether a level is
// enabled.
func TestLazyWith(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "storage")
	l := lazyWith(lazyWith(base, slog.String("topic", "t"), slog.Int("partition", 3)), slog.String("dir", "/d/t-3"))
	l.Debug("dropped")
	l.Info("kept", "n", 1)
	l.With("k", "v").Warn("child")
	want := []string{
		`level=INFO msg=kept component=storage topic=t partition=3 dir=/d/t-3 n=1`,
		`level=WARN msg=child component=storage topic=t partition=3 dir=/d/t-3 k=v`,
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		if _, rest, _ := strings.Cut(line, " "); rest != want[i] { // past the time
			t.Errorf("line %d: %q, want %q", i, rest, want[i])
		}
	}
}

// TestSegmentPaths: segment.paths are segment.path's, with or without a
// trailing separator in the dir.
func TestSegmentPaths(t *testing.T) {
	for _, dir := range []string{"/data/t-0", "/data/t-0/", "rel", ""} {
		s := &segment{dir: dir, baseOffset: 42}
		l, i, ti := s.paths()
		if l != s.path(logSuffix) || i != s.path(indexSuffix) || ti != s.path(timeIndexSuffix) {
			t.Errorf("dir %q: paths %q %q %q, want %q %q %q", dir, l, i, ti, s.path(logSuffix), s.path(indexSuffix), s.path(timeIndexSuffix))
		}
	}
}
