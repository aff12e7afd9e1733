// Package loglevel holds a node's log levels per component, changeable at
// runtime: the BROKER_LOGGER resources of DescribeConfigs and
// IncrementalAlterConfigs (KIP-412).
//
// A component is the value of the "component" attribute a logger carries
// (logger.With("component", "replica")); "root" covers every record, and
// a component without a level of its own follows it. Levels wraps a
// slog.Handler: records below the level of their component are dropped;
// where no level was ever set, the wrapped handler decides as before.
//
// Level names are Kafka's (log4j's): TRACE, DEBUG, INFO, WARN, ERROR,
// FATAL, mapped to slog.LevelDebug-4, Debug, Info, Warn, Error and
// Error+4.
package loglevel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Root is the name of the logger every component inherits from (Kafka's
// root logger).
const Root = "root"

// Components are the loggers of a Samsa node besides Root, one per
// "component" attribute the code sets.
var Components = []string{
	"broker", "controller", "group-coordinator", "quorum", "quorum-observer",
	"raft", "replica", "server", "storage", "txn-coordinator",
}

// Errors of Set and Unset.
var (
	ErrUnknownLogger = errors.New("unknown logger")
	ErrInvalidLevel  = errors.New("invalid log level")
)

// ValidLevels lists Kafka's log level names, sorted as Kafka's message
// lists them.
var ValidLevels = []string{"DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"}

var levelsByName = map[string]slog.Level{
	"TRACE": slog.LevelDebug - 4,
	"DEBUG": slog.LevelDebug,
	"INFO":  slog.LevelInfo,
	"WARN":  slog.LevelWarn,
	"ERROR": slog.LevelError,
	"FATAL": slog.LevelError + 4,
}

// ParseLevel parses a Kafka level name (case-sensitive, as Kafka).
func ParseLevel(s string) (slog.Level, error) {
	l, ok := levelsByName[s]
	if !ok {
		return 0, fmt.Errorf("%w %q: valid log levels are %s", ErrInvalidLevel, s, strings.Join(ValidLevels, ", "))
	}
	return l, nil
}

// Name is the Kafka name of l: the highest level name at or below l.
func Name(l slog.Level) string {
	switch {
	case l >= slog.LevelError+4:
		return "FATAL"
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	case l >= slog.LevelDebug:
		return "DEBUG"
	}
	return "TRACE"
}

// Levels are a node's log levels. The zero value is not usable; call New.
// Safe for concurrent use.
type Levels struct {
	inner slog.Handler
	mu    sync.Mutex                            // serializes Set and Unset
	set   atomic.Pointer[map[string]slog.Level] // levels set, by logger; never modified once stored
}

// New returns levels over inner, the handler records go to, and the
// logger to use in its place.
func New(inner slog.Handler) (*Levels, *slog.Logger) {
	lv := &Levels{inner: inner}
	lv.set.Store(&map[string]slog.Level{})
	return lv, slog.New(&handler{inner: inner, lv: lv, name: Root})
}

// Loggers returns each logger's level name, Root first, then the
// components sorted: the level set for it, else root's, else the lowest
// level the wrapped handler lets through.
func (lv *Levels) Loggers() [][2]string {
	out := [][2]string{{Root, Name(lv.level(Root))}}
	for _, c := range slices.Sorted(slices.Values(Components)) {
		out = append(out, [2]string{c, Name(lv.level(c))})
	}
	return out
}

// Known reports whether name is a logger (Root or a component).
func Known(name string) bool { return name == Root || slices.Contains(Components, name) }

// Set sets logger name's level; ErrUnknownLogger or ErrInvalidLevel.
func (lv *Levels) Set(name, level string) error {
	if !Known(name) {
		return fmt.Errorf("%w %s", ErrUnknownLogger, name)
	}
	l, err := ParseLevel(level)
	if err != nil {
		return err
	}
	lv.update(func(m map[string]slog.Level) { m[name] = l })
	return nil
}

// Unset removes logger name's own level: it follows root again (Kafka's
// unsetLogLevel). For Root itself it is an error, as in Kafka.
func (lv *Levels) Unset(name string) error {
	if !Known(name) {
		return fmt.Errorf("%w %s", ErrUnknownLogger, name)
	}
	if name == Root {
		return fmt.Errorf("removing the log level of the %s logger is not allowed", Root)
	}
	lv.update(func(m map[string]slog.Level) { delete(m, name) })
	return nil
}

func (lv *Levels) update(fn func(map[string]slog.Level)) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	m := maps.Clone(*lv.set.Load())
	fn(m)
	lv.set.Store(&m)
}

// level is the effective level of logger name.
func (lv *Levels) level(name string) slog.Level {
	if l, ok := lv.explicit(name); ok {
		return l
	}
	for _, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if lv.inner.Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.LevelError + 4
}

// explicit is the level set for name or, failing that, for Root.
func (lv *Levels) explicit(name string) (slog.Level, bool) {
	m := *lv.set.Load()
	if l, ok := m[name]; ok {
		return l, true
	}
	l, ok := m[Root]
	return l, ok
}

// handler drops records below its component's level.
type handler struct {
	inner slog.Handler
	lv    *Levels
	name  string // the component, Root when none
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	if lvl, ok := h.lv.explicit(h.name); ok {
		return l >= lvl
	}
	return h.inner.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.inner.Handle(ctx, r) }

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	name := h.name
	for _, a := range attrs {
		if a.Key == "component" {
			name = a.Value.String()
		}
	}
	return &handler{inner: h.inner.WithAttrs(attrs), lv: h.lv, name: name}
}

func (h *handler) WithGroup(g string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(g), lv: h.lv, name: h.name}
}
