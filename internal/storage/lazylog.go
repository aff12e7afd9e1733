package storage

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// lazyHandler is a slog.Handler that adds attrs to parent when it first
// has a record to handle (or is asked for a child): a restart sets up
// every log with a logger of its own (topic, partition, dir), and most
// logs never write a line, where parent.WithAttrs would format the
// attributes of each (two calls a log, 100,000 logs). Attributes that
// decide Enabled (loglevel's "component") must not be among attrs:
// Enabled asks parent.
type lazyHandler struct {
	parent slog.Handler
	attrs  []slog.Attr
	once   sync.Once
	h      slog.Handler
}

// lazyWith is l.With(attrs...), paying for the attributes at l's first
// record.
func lazyWith(l *slog.Logger, attrs ...slog.Attr) *slog.Logger {
	if lh, ok := l.Handler().(*lazyHandler); ok {
		return slog.New(&lazyHandler{parent: lh.parent, attrs: append(slices.Clip(lh.attrs), attrs...)})
	}
	return slog.New(&lazyHandler{parent: l.Handler(), attrs: attrs})
}

func (h *lazyHandler) handler() slog.Handler {
	h.once.Do(func() { h.h = h.parent.WithAttrs(h.attrs) })
	return h.h
}

func (h *lazyHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.parent.Enabled(ctx, level)
}

func (h *lazyHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *lazyHandler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.handler().WithAttrs(attrs) }

func (h *lazyHandler) WithGroup(name string) slog.Handler { return h.handler().WithGroup(name) }
