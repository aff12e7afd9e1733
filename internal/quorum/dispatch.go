package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// Leadership names the leader of the metadata quorum in an epoch.
type Leadership struct {
	// Epoch is the raft term: the partition leader epoch of the batches the
	// leader writes (Kafka's leader epoch of __cluster_metadata-0). It only
	// grows; Local is always in epoch 0.
	Epoch int64
	// LeaderID is the node id of the leader, -1 while none is known (an
	// election is running or this voter cannot reach the leader).
	LeaderID int32
}

// Listener receives the committed metadata log and leadership changes.
// Its functions are called from one goroutine owned by the log, never
// concurrently; either may be nil. They must not call Append and wait for
// it (Append does not wait for listeners, so calling it without waiting is
// fine).
type Listener struct {
	// Commit is called with each committed batch of records, in offset
	// order, starting with the first batch at or after the offset given to
	// Register. Batches without metadata records (LEADER_CHANGE control
	// batches) are skipped. recs belong to the callee. If a batch cannot be
	// decoded, delivery stops and the error is logged.
	Commit func(offset int64, recs []metadata.Record)
	// LeaderChange is called with the current leadership when first
	// registered and whenever it changes; intermediate values may be
	// skipped. That this node is the leader is delivered only once its
	// first entry of the epoch is committed and every batch before it was
	// given to Commit: from then on the listener has the whole committed
	// log and may act as the active controller. Any other value is
	// delivered after the batches committed when it was observed.
	LeaderChange func(Leadership)
	// Delivered, when set, is called after Commit was given every batch
	// below next that is committed (LEADER_CHANGE control batches
	// included, which Commit never sees): a listener waiting for a
	// committed offset (Raft.WaitCaughtUp's high-watermark) compares it
	// with next, not with the offsets Commit saw.
	Delivered func(next int64)
}

// dispatcher publishes the committed end of the log and the leadership to
// listeners, each served by its own goroutine that reads committed batches
// from the log itself (nothing is buffered in memory).
type dispatcher struct {
	log    *storage.Log
	self   int32 // node id of this voter
	logger *slog.Logger
	snap   *snapshotter

	mu         sync.Mutex // guards the fields below
	committed  int64      // offsets below it are committed (the high-watermark)
	leader     Leadership
	epochStart int64 // when leader is self: offset of its first entry of the epoch
	closed     bool
	subs       map[*subscription]struct{}
	// changed is closed, and replaced, whenever committed or leader
	// changes or the dispatcher closes (see watch).
	changed chan struct{}

	wg sync.WaitGroup
}

type subscription struct {
	l    Listener
	wake chan struct{} // capacity 1
	stop chan struct{}
	once sync.Once
}

func newDispatcher(l *storage.Log, self int32, committed int64, leader Leadership, logger *slog.Logger) *dispatcher {
	d := &dispatcher{
		log:        l,
		self:       self,
		logger:     logger,
		committed:  committed,
		leader:     leader,
		epochStart: -1,
		subs:       map[*subscription]struct{}{},
		changed:    make(chan struct{}),
	}
	d.snap = newSnapshotter(l, func() int64 { c, _, _ := d.state(); return c }, logger)
	return d
}

// wakeLocked nudges every listener goroutine and the watchers.
func (d *dispatcher) wakeLocked() {
	if !d.closed {
		close(d.changed)
		d.changed = make(chan struct{})
	}
	for s := range d.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// setCommitted raises the committed end to offset.
func (d *dispatcher) setCommitted(offset int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if offset > d.committed {
		d.committed = offset
		d.wakeLocked()
	}
}

// setLeader records the leadership; epochStart is the offset of the
// leader's first entry of the epoch when the leader is this node.
func (d *dispatcher) setLeader(l Leadership, epochStart int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l != d.leader || epochStart != d.epochStart {
		d.leader, d.epochStart = l, epochStart
		d.wakeLocked()
	}
}

// watch returns the committed end and the leadership with a channel
// closed at their next change or when the dispatcher closes (closed then
// reports it, and the channel stays closed).
func (d *dispatcher) watch() (committed int64, leader Leadership, changed <-chan struct{}, closed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.committed, d.leader, d.changed, d.closed
}

func (d *dispatcher) state() (committed int64, leader Leadership, epochStart int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.committed, d.leader, d.epochStart
}

// replay calls fn with the records of the newest valid snapshot within
// the committed log, if any, as one batch ending at the snapshot's end
// offset (see Log.Replay), then for each committed batch after it with
// metadata records.
func (d *dispatcher) replay(fn func(offset int64, recs []metadata.Record) error) error {
	committed, _, _ := d.state()
	from := d.log.LogStartOffset()
	id, recs, ok := d.snap.load(from, committed)
	if ok {
		d.logger.Info("loaded metadata snapshot", "snapshot", id.FileName(), "records", len(recs))
		if err := fn(id.EndOffset-int64(len(recs)), recs); err != nil {
			return err
		}
		from = id.EndOffset
	}
	var replayed int64
	err := readBatches(d.log, from, committed, func(b []byte, h record.Header) error {
		if h.IsControl() || h.NextOffset() <= from {
			return nil
		}
		replayed += int64(len(b))
		recs, err := decodeBatch(b)
		if err != nil {
			return fmt.Errorf("metadata log at offset %d: %w", h.BaseOffset, err)
		}
		return fn(h.BaseOffset, recs)
	})
	if err == nil {
		d.snap.replayed(id, replayed, committed)
	}
	return err
}

// register starts a goroutine delivering to l from offset from.
func (d *dispatcher) register(from int64, l Listener) (unregister func()) {
	s := &subscription{l: l, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return func() {}
	}
	d.subs[s] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	go d.serve(s, from)
	return func() {
		s.once.Do(func() { close(s.stop) })
		d.mu.Lock()
		delete(d.subs, s)
		d.mu.Unlock()
	}
}

func (d *dispatcher) serve(s *subscription, next int64) {
	defer d.wg.Done()
	var delivered *Leadership
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		committed, leader, epochStart := d.state()
		if next < committed {
			err := readBatches(d.log, next, committed, func(b []byte, h record.Header) error {
				select {
				case <-s.stop:
					return errStop
				default:
				}
				if h.BaseOffset >= next && !h.IsControl() {
					recs, err := decodeBatch(b)
					if err != nil {
						return fmt.Errorf("metadata log at offset %d: %w", h.BaseOffset, err)
					}
					if s.l.Commit != nil {
						s.l.Commit(h.BaseOffset, recs)
					}
				}
				next = max(next, h.NextOffset())
				return nil
			})
			if err != nil {
				if !errors.Is(err, storage.ErrClosed) {
					d.logger.Error("metadata listener stopped", "offset", next, "err", err)
				}
				<-s.stop
				return
			}
			if s.l.Delivered != nil {
				s.l.Delivered(next)
			}
		}
		if delivered == nil || *delivered != leader {
			if leader.LeaderID != d.self || next > epochStart {
				if s.l.LeaderChange != nil {
					s.l.LeaderChange(leader)
				}
				delivered = &leader
			}
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}

// close stops every listener goroutine and waits for them.
func (d *dispatcher) close() {
	d.mu.Lock()
	if !d.closed {
		close(d.changed)
	}
	d.closed = true
	for s := range d.subs {
		s.once.Do(func() { close(s.stop) })
	}
	d.subs = map[*subscription]struct{}{}
	d.mu.Unlock()
	d.wg.Wait()
	d.snap.close()
}
