package loglevel

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	lv, logger := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	replica := logger.With("node", 1).With("component", "replica")
	storage := logger.With("component", "storage")
	logged := func(l *slog.Logger, level slog.Level) bool {
		buf.Reset()
		l.Log(t.Context(), level, "m")
		return buf.Len() > 0
	}
	loggers := func() map[string]string {
		m := map[string]string{}
		for _, l := range lv.Loggers() {
			m[l[0]] = l[1]
		}
		return m
	}
	// Nothing set: the wrapped handler decides.
	if logged(replica, slog.LevelDebug) || !logged(replica, slog.LevelInfo) {
		t.Error("before any level is set, the handler's INFO should hold")
	}
	if got := loggers(); got["root"] != "INFO" || got["replica"] != "INFO" || len(got) != len(Components)+1 {
		t.Errorf("loggers %v", got)
	}
	if err := lv.Set("replica", "TRACE"); err != nil {
		t.Fatal(err)
	}
	if !logged(replica, slog.LevelDebug-4) || logged(storage, slog.LevelDebug) {
		t.Error("replica at TRACE: its trace records pass, storage's debug ones do not")
	}
	if err := lv.Set(Root, "ERROR"); err != nil {
		t.Fatal(err)
	}
	if logged(storage, slog.LevelWarn) || !logged(storage, slog.LevelError) || !logged(replica, slog.LevelDebug) {
		t.Error("root at ERROR: storage follows it, replica keeps TRACE")
	}
	if err := lv.Unset("replica"); err != nil {
		t.Fatal(err)
	}
	if logged(replica, slog.LevelWarn) {
		t.Error("replica unset: it follows root's ERROR")
	}
	if got := loggers(); got["root"] != "ERROR" || got["replica"] != "ERROR" {
		t.Errorf("loggers %v", got)
	}
	if !strings.Contains(func() string { logged(replica, slog.LevelError); return buf.String() }(), "component=replica") {
		t.Errorf("attributes lost: %q", buf.String())
	}
	for _, err := range []error{lv.Set("nope", "INFO"), lv.Unset("nope")} {
		if !errors.Is(err, ErrUnknownLogger) {
			t.Errorf("unknown logger: %v", err)
		}
	}
	if err := lv.Set("replica", "info"); !errors.Is(err, ErrInvalidLevel) {
		t.Errorf("lower-case level: %v", err)
	}
	if err := lv.Unset(Root); err == nil {
		t.Error("unsetting root accepted")
	}
}
