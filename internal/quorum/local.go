package quorum

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// Log is the metadata log as the controller sees it. Implementations are
// safe for concurrent use.
type Log interface {
	// Append makes recs durable and committed, as one atomic batch of one
	// offset per record, and returns the offset of the first. Errors: ErrNotLeader (Raft on a
	// follower, or leadership lost before the commit), ErrDropped,
	// ErrEntryTooLarge, ErrClosed, ctx.Err(), storage errors.
	Append(ctx context.Context, recs []metadata.Record) (int64, error)
	// Replay calls fn for every committed batch of records in order, up to
	// the commit point when called; it stops at fn's first error and
	// returns it. When a metadata snapshot covers the start of the log
	// (see StartSnapshots), the first call carries the snapshot's records
	// (metadata.Image.Records) as one batch ending at the snapshot's end
	// offset E: offset E-len(recs), so that applying it to an empty image
	// gives the image at offset E-1; the batches from E follow.
	Replay(fn func(offset int64, recs []metadata.Record) error) error
	// Register delivers to l, from a goroutine of the log, the committed
	// batches whose offset is at or after from (the offset of Replay's last
	// batch plus its number of records, or plus one, continues a replay
	// without gap or repeat) and the leadership changes; see Listener.
	// unregister stops the delivery (without waiting for a call in
	// progress); closing the log stops it too.
	Register(from int64, l Listener) (unregister func())
	// Leader is the leadership this voter knows now (not gated as
	// Listener.LeaderChange is).
	Leader() Leadership
}

// MetadataTopic is the metadata log's partition directory name stem.
const MetadataTopic = "__cluster_metadata"

// MetadataLog returns __cluster_metadata-0 of logs, creating it when
// missing. The Manager owns it (and closes it).
func MetadataLog(logs *storage.Manager) (*storage.Log, error) {
	tp := storage.TopicPartition{Topic: MetadataTopic, Partition: 0}
	if l := logs.Get(tp); l != nil {
		return l, nil
	}
	return logs.Create(tp, storage.Config{})
}

// Local is a single-voter metadata log: an entry is committed once it is
// fsynced, and this node is always the leader, of epoch 0. Safe for
// concurrent use.
type Local struct {
	mu    sync.Mutex // serializes appends
	log   *storage.Log
	d     *dispatcher
	fetch *fetchServer
}

// OpenLocal opens (creating when missing) __cluster_metadata-0 in logs,
// logging nothing (see OpenLocalLogger).
func OpenLocal(logs *storage.Manager) (*Local, error) { return OpenLocalLogger(logs, nil) }

// OpenLocalLogger is OpenLocal logging to logger (nil discards): the
// snapshot loaded by Replay, those skipped.
func OpenLocalLogger(logs *storage.Manager, logger *slog.Logger) (*Local, error) {
	l, err := MetadataLog(logs)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	self := logs.NodeID()
	d := newDispatcher(l, self, l.LogEndOffset(), Leadership{Epoch: 0, LeaderID: self}, logger)
	return &Local{log: l, d: d, fetch: newFetchServer(l, d, self, logs.ClusterID())}, nil
}

// HandleFetch answers an observer's Fetch of __cluster_metadata-0 as
// Raft.HandleFetch does; this node always leads, in epoch 0.
func (l *Local) HandleFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	return l.fetch.handle(ctx, req)
}

// Describe returns the quorum's state (DescribeQuorum): this node leads
// alone, in epoch 0, with its observers. It never fails.
func (l *Local) Describe(context.Context) (QuorumInfo, error) {
	committed, ld, _ := l.d.state()
	now := time.Now().UnixMilli()
	return QuorumInfo{
		Leadership:    ld,
		HighWatermark: committed,
		Voters:        []VoterState{{ID: ld.LeaderID, LogEndOffset: l.log.LogEndOffset(), LastFetchTimestamp: now, LastCaughtUpTimestamp: now}},
		Observers:     l.fetch.observerStates(),
	}, nil
}

// Append implements Log.
func (l *Local) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	if len(recs) == 0 {
		return l.log.LogEndOffset(), nil
	}
	batch, err := encodeBatch(recs, time.Now().UnixMilli())
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res, err := l.log.Append(batch, 0)
	if err != nil {
		return 0, err
	}
	if err := l.log.Flush(); err != nil {
		return 0, err
	}
	l.d.setCommitted(l.log.LogEndOffset())
	return res.BaseOffset, nil
}

// Replay implements Log.
func (l *Local) Replay(fn func(offset int64, recs []metadata.Record) error) error {
	return l.d.replay(fn)
}

// Register implements Log.
func (l *Local) Register(from int64, ls Listener) (unregister func()) {
	return l.d.register(from, ls)
}

// Leader implements Log: always this node, epoch 0.
func (l *Local) Leader() Leadership {
	_, ld, _ := l.d.state()
	return ld
}

// Close stops the listeners and waits for them; the log itself belongs to
// the Manager. Append after Close still works.
func (l *Local) Close() error {
	l.d.close()
	return nil
}

// encodeBatch builds an uncompressed v2 batch of recs.
func encodeBatch(recs []metadata.Record, now int64) ([]byte, error) {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		k, v, err := metadata.Encode(r)
		if err != nil {
			return nil, err
		}
		rs[i] = record.Record{OffsetDelta: int32(i), Key: k, Value: v}
	}
	return buildBatch(0, -1, false, now, rs)
}
