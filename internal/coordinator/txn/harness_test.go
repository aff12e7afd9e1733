package txn

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory Store: one record list per partition.
type memStore struct {
	mu    sync.Mutex
	parts map[int32][]Record
	// fail, when set, fails Append with its error.
	fail error
}

func newMemStore() *memStore { return &memStore{parts: map[int32][]Record{}} }

func (s *memStore) Append(ctx context.Context, p int32, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.parts[p] = append(s.parts[p], recs...)
	return nil
}

func (s *memStore) Load(ctx context.Context, p int32, fn func(Record) error) error {
	s.mu.Lock()
	recs := slices.Clone(s.parts[p])
	s.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// states returns the states written for id, in order ("-" a tombstone).
func (s *memStore) states(t *testing.T, id string) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, recs := range s.parts {
		for _, r := range recs {
			d, err := Decode(r)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d.Key.TransactionalID != id {
				continue
			}
			if d.Value == nil {
				out = append(out, "-")
				continue
			}
			out = append(out, d.Value.State.String())
		}
	}
	return out
}

// markerLog is a MarkerWriter that records the markers written, failing
// some partitions a number of times first.
type markerLog struct {
	mu      sync.Mutex
	written map[TopicPartition][]Marker
	failFor map[TopicPartition]int // times to fail each partition
	block   chan struct{}          // when set, WriteMarkers waits for it
}

func newMarkerLog() *markerLog {
	return &markerLog{written: map[TopicPartition][]Marker{}, failFor: map[TopicPartition]int{}}
}

func (w *markerLog) WriteMarkers(ctx context.Context, m Marker) []TopicPartition {
	w.mu.Lock()
	block := w.block
	w.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return m.Partitions
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var retry []TopicPartition
	for _, tp := range m.Partitions {
		if w.failFor[tp] > 0 {
			w.failFor[tp]--
			retry = append(retry, tp)
			continue
		}
		one := m
		one.Partitions = []TopicPartition{tp}
		w.written[tp] = append(w.written[tp], one)
	}
	return retry
}

func (w *markerLog) markers(tp TopicPartition) []Marker {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.written[tp])
}

// harness runs a Coordinator with one __transaction_state partition over a
// memStore and a markerLog, inside a synctest bubble.
type harness struct {
	t       *testing.T
	c       *Coordinator
	store   *memStore
	markers *markerLog
	cfg     Config
	nextPID int64
	mu      sync.Mutex
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.NumPartitions == 0 {
		cfg.NumPartitions = 1
	}
	h := &harness{t: t, store: newMemStore(), markers: newMarkerLog(), cfg: cfg, nextPID: 1000}
	h.start(0)
	return h
}

func (h *harness) start(epoch int32) {
	h.t.Helper()
	h.c = New(h.cfg, Deps{Store: h.store, Markers: h.markers, NewProducerID: h.newPID,
		Logger: slog.New(slog.NewTextHandler(testWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for p := range h.cfg.NumPartitions {
		if err := h.c.LoadPartition(h.t.Context(), p, epoch); err != nil {
			h.t.Fatalf("LoadPartition(%d): %v", p, err)
		}
	}
}

// restart closes the Coordinator and loads the same store in a new one at
// coordinator epoch epoch.
func (h *harness) restart(epoch int32) {
	h.t.Helper()
	h.c.Close()
	h.start(epoch)
}

func (h *harness) newPID(context.Context) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextPID++
	return h.nextPID, nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func (h *harness) init(id string, timeoutMs int32) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = timeoutMs
	return h.c.InitProducerID(h.t.Context(), req)
}

func (h *harness) initOK(id string) (int64, int16) {
	h.t.Helper()
	r := h.init(id, 60000)
	if r.ErrorCode != 0 {
		h.t.Fatalf("InitProducerId(%s): %d", id, r.ErrorCode)
	}
	return r.ProducerID, r.ProducerEpoch
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...TopicPartition) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, tp := range tps {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic = tp.Topic
		t.Partitions = []int32{tp.Partition}
		req.Topics = append(req.Topics, t)
	}
	resp := h.c.AddPartitionsToTxn(h.t.Context(), req)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return h.c.EndTxn(h.t.Context(), req).ErrorCode
}

// endV5 sends EndTxn v5 (transaction version 2) and returns its response.
func (h *harness) endV5(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 5
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return h.c.EndTxn(h.t.Context(), req)
}

// addImplicit adds tps as a partition leader does for Produce v12
// (AddPartitionsToTxn v5 without verify_only).
func (h *harness) addImplicit(id string, pid int64, epoch int16, tps ...TopicPartition) int16 {
	code, per := h.c.AddPartitions(h.t.Context(), id, pid, epoch, tps, AddImplicit)
	if code == 0 {
		for _, c := range per {
			if c != 0 {
				return c
			}
		}
	}
	return code
}

func (h *harness) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return h.c.DescribeTransactions(h.t.Context(), req).TransactionStates[0]
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }
