package group

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// memStore is an in-memory Store with fault injection: appends fail with
// failErr while it is set, and block on gate while it is non-nil.
type memStore struct {
	mu       sync.Mutex
	logs     map[int32][]Record
	failErr  error
	failOnce error         // fails the next append only
	gate     chan struct{} // appends wait for it to close when non-nil
	loadGate chan struct{} // loads wait for it to close when non-nil
	appends  int
}

func newMemStore() *memStore { return &memStore{logs: map[int32][]Record{}} }

func (s *memStore) Append(ctx context.Context, p int32, recs []Record) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appends++
	if s.failErr != nil {
		return s.failErr
	}
	if err := s.failOnce; err != nil {
		s.failOnce = nil
		return err
	}
	for _, r := range recs {
		c := Record{Key: bytes.Clone(r.Key), Txn: r.Txn}
		if r.Value != nil {
			c.Value = bytes.Clone(r.Value)
		}
		s.logs[p] = append(s.logs[p], c)
	}
	return nil
}

func (s *memStore) Load(ctx context.Context, p int32, fn func(Record) error) error {
	s.mu.Lock()
	gate := s.loadGate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	recs := slices.Clone(s.logs[p])
	s.mu.Unlock()
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) records(p int32) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs[p])
}

func (s *memStore) setGate(c chan struct{}) {
	s.mu.Lock()
	s.gate = c
	s.mu.Unlock()
}

func (s *memStore) setLoadGate(c chan struct{}) {
	s.mu.Lock()
	s.loadGate = c
	s.mu.Unlock()
}

func (s *memStore) setFailOnce(err error) {
	s.mu.Lock()
	s.failOnce = err
	s.mu.Unlock()
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	s.failErr = err
	s.mu.Unlock()
}

// testLogger logs to t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
