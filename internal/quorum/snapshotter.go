package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// SnapshotConfig says when a node writes snapshots of its metadata image
// (KIP-630). Zero values mean the defaults.
type SnapshotConfig struct {
	// MaxRecordBytes is metadata.log.max.record.bytes.between.snapshots:
	// a snapshot is written once the metadata log grew by this many bytes
	// of batches since the last one (or since the start, counting the
	// batches replayed after the snapshot loaded). Default 20 MiB, as
	// Kafka's.
	MaxRecordBytes int64
	// MaxInterval is metadata.log.max.snapshot.interval.ms: a snapshot is
	// also written when a commit comes this long after the last snapshot
	// (or the start). Default 1 h, as Kafka's; negative disables it
	// (Kafka's 0).
	MaxInterval time.Duration
	// Retain is how many snapshots are kept, newest first (default 2: a
	// corrupt newest one leaves the one before it). Kafka keeps those
	// above the log start offset; Samsa does not compact the log yet.
	Retain int
	// Logger nil discards.
	Logger *slog.Logger
}

// Defaults of SnapshotConfig.
const (
	DefaultSnapshotMaxRecordBytes = 20 << 20
	DefaultSnapshotMaxInterval    = time.Hour
	defaultSnapshotRetain         = 2
)

// snapshotter loads the newest valid snapshot at replay and writes new
// ones from the images offered to it, on its own goroutine (started by
// start, stopped by close). Images are immutable, so a snapshot is
// written while commits go on.
type snapshotter struct {
	log    *storage.Log
	fsys   vfs.FS
	dir    string
	now    func() time.Time
	logger *slog.Logger
	// committed is the committed end of the log (dispatcher.committed):
	// it only grows, and no offset below it is ever truncated.
	committed func() int64

	latest atomic.Pointer[metadata.Image]
	wake   chan struct{} // capacity 1
	stop   chan struct{}
	done   chan struct{} // closed when run ends; nil before start

	mu       sync.Mutex // guards the fields below
	cfg      SnapshotConfig
	started  bool
	last     SnapshotID // newest snapshot written or loaded; EndOffset 0 for none
	lastTime time.Time  // when last was written or loaded (or the start)
	// applied is the bytes of the log's batches in [last.EndOffset,
	// counted): applied to the image since the last snapshot.
	applied, counted int64
	lastBytes        int64 // size of last's file
	loads            int64 // snapshots loaded by Replay
}

// newSnapshotter removes the .checkpoint.part files a crash left in the
// log's dir: no snapshot is being written yet.
func newSnapshotter(l *storage.Log, committed func() int64, logger *slog.Logger) *snapshotter {
	fsys := l.FS()
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := removePartFiles(fsys, l.Dir()); err != nil {
		logger.Warn("removing unfinished metadata snapshots failed", "err", err)
	}
	return &snapshotter{
		log: l, fsys: fsys, dir: l.Dir(), now: time.Now, logger: logger, committed: committed,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), lastTime: time.Now(),
	}
}

// load returns the records of the newest snapshot that loads whole and
// fits the log: its end offset in [from, to] (to: the committed end) and,
// above from, the batch ending there in the log with the snapshot's
// epoch. Snapshots that do not fit or are corrupt are logged and skipped;
// ok is false when none is left (the log is replayed from from).
func (s *snapshotter) load(from, to int64) (id SnapshotID, recs []metadata.Record, ok bool) {
	ids, err := listSnapshots(s.fsys, s.dir)
	if err != nil {
		s.logger.Warn("listing metadata snapshots failed; replaying the whole log", "err", err)
		return id, nil, false
	}
	for _, id := range ids {
		if id.EndOffset <= from || id.EndOffset > to {
			s.logger.Info("skipping metadata snapshot outside the committed log", "snapshot", id.FileName(), "log_start_offset", from, "high_watermark", to)
			continue
		}
		if !s.endsBatch(id) {
			s.logger.Warn("skipping metadata snapshot that does not end at a batch of its epoch in the log", "snapshot", id.FileName())
			continue
		}
		recs, size, err := readSnapshot(s.fsys, s.dir, id)
		if err != nil {
			s.logger.Warn("skipping unreadable metadata snapshot", "snapshot", id.FileName(), "err", err)
			continue
		}
		s.mu.Lock()
		s.lastBytes = size
		s.loads++
		s.mu.Unlock()
		return id, recs, true
	}
	return id, nil, false
}

// endsBatch reports whether the log holds a batch of epoch id.Epoch that
// ends at id.EndOffset.
func (s *snapshotter) endsBatch(id SnapshotID) bool {
	found := false
	err := readBatches(s.log, id.EndOffset-1, id.EndOffset, func(_ []byte, h record.Header) error {
		found = h.NextOffset() == id.EndOffset && h.PartitionLeaderEpoch == id.Epoch
		return nil
	})
	return err == nil && found
}

// replayed records that the image was rebuilt from snapshot id (EndOffset
// 0: none) and replayedBytes of batches after it, up to end.
func (s *snapshotter) replayed(id SnapshotID, replayedBytes, end int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id.EndOffset >= s.last.EndOffset {
		s.last, s.lastTime = id, s.now()
		s.applied, s.counted = replayedBytes, end
	}
}

// start starts the goroutine writing snapshots under cfg; later calls
// change nothing.
func (s *snapshotter) start(cfg SnapshotConfig) {
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = DefaultSnapshotMaxRecordBytes
	}
	if cfg.MaxInterval == 0 {
		cfg.MaxInterval = DefaultSnapshotMaxInterval
	}
	if cfg.Retain <= 0 {
		cfg.Retain = defaultSnapshotRetain
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return // closed
	default:
	}
	if s.started {
		return
	}
	s.started, s.cfg = true, cfg
	if cfg.Logger != nil {
		s.logger = cfg.Logger
	}
	s.done = make(chan struct{})
	go s.run()
}

// offer hands im, a committed image, to the writer, without blocking.
func (s *snapshotter) offer(im *metadata.Image) {
	s.latest.Store(im)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close stops the writer (after the snapshot in progress) and waits.
func (s *snapshotter) close() {
	s.mu.Lock()
	done := s.done
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (s *snapshotter) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		im := s.latest.Load()
		if !s.due(im) {
			continue
		}
		if err := s.write(im); err != nil {
			s.logger.Warn("writing a metadata snapshot failed", "end_offset", im.Offset+1, "err", err)
		}
	}
}

// due counts the bytes of the batches applied up to im (reading their
// headers from the log: each batch is read once) and reports whether a
// snapshot of im is due.
func (s *snapshotter) due(im *metadata.Image) bool {
	if im == nil {
		return false
	}
	end := im.Offset + 1
	s.mu.Lock()
	from := s.counted
	s.mu.Unlock()
	var n int64
	if end > from {
		err := readBatches(s.log, from, end, func(b []byte, h record.Header) error {
			if h.NextOffset() > from {
				n += int64(len(b))
			}
			return nil
		})
		if err != nil {
			s.logger.Warn("reading the metadata log for snapshots failed", "err", err)
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if end > s.counted {
		s.applied += n
		s.counted = end
	}
	if end <= s.last.EndOffset {
		return false
	}
	if s.applied >= s.cfg.MaxRecordBytes {
		return true
	}
	return s.cfg.MaxInterval > 0 && s.now().Sub(s.lastTime) >= s.cfg.MaxInterval
}

// write writes the snapshot of im (after due said so) and removes the
// snapshots beyond Retain. The bytes counted towards the next one start
// at im, even when this one fails (a full disk is not retried on every
// commit).
//
// im must be committed: a snapshot of entries a new raft leader could
// still overwrite would outlive them. The images offered come from the
// batches Replay and the listeners deliver, all below the committed end,
// and write checks it again: an image past the committed end is an error
// and no snapshot. (Load checks it once more: a snapshot must end at or
// below the committed end, at a batch of the log with its epoch, and one
// (offset, epoch) names one raft entry and the log before it.)
func (s *snapshotter) write(im *metadata.Image) error {
	if end, committed := im.Offset+1, s.committed(); end > committed {
		return fmt.Errorf("quorum: image at offset %d is past the committed end %d of the metadata log: not snapshotted", im.Offset, committed)
	}
	start := s.now()
	s.mu.Lock()
	s.applied, s.lastTime = 0, start
	retain := s.cfg.Retain
	s.mu.Unlock()
	end := im.Offset + 1
	id := SnapshotID{EndOffset: end, Epoch: -1}
	lastTimestamp := int64(-1)
	err := readBatches(s.log, end-1, end, func(_ []byte, h record.Header) error {
		if h.NextOffset() == end {
			id.Epoch, lastTimestamp = h.PartitionLeaderEpoch, h.MaxTimestamp
		}
		return nil
	})
	if err != nil {
		return err
	}
	if id.Epoch < 0 {
		return errors.New("quorum: no batch of the log ends at the image's offset")
	}
	recs := im.Records()
	if len(recs) == 0 {
		return nil
	}
	data, err := encodeSnapshot(id, lastTimestamp, start.UnixMilli(), recs)
	if err != nil {
		return err
	}
	if err := writeSnapshot(s.fsys, s.dir, id, data); err != nil {
		return err
	}
	s.mu.Lock()
	s.last, s.lastBytes, s.lastTime = id, int64(len(data)), s.now()
	s.mu.Unlock()
	s.logger.Info("wrote metadata snapshot", "snapshot", id.FileName(), "records", len(recs), "bytes", len(data), "duration", s.now().Sub(start))
	ids, err := listSnapshots(s.fsys, s.dir)
	if err != nil {
		return err
	}
	// Keep id and the retain-1 newest below it; snapshots above it were
	// skipped at load (past the committed log after a crash): drop them.
	kept := 1
	for _, old := range ids {
		if old == id {
			continue
		}
		if old.EndOffset < id.EndOffset && kept < retain {
			kept++
			continue
		}
		if err := s.fsys.Remove(filepath.Join(s.dir, old.FileName())); err != nil {
			s.logger.Warn("removing an old metadata snapshot failed", "snapshot", old.FileName(), "err", err)
		}
	}
	return nil
}

// latestID is the newest snapshot this node wrote or loaded; ok is false
// when none.
func (s *snapshotter) latestID() (id SnapshotID, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.last.EndOffset > 0
}

// SnapshotStats are the metadata snapshot metrics of a node, as Kafka's
// SnapshotEmitter and MetadataLoader report them.
type SnapshotStats struct {
	// Latest is the newest snapshot written or loaded (EndOffset 0: none).
	Latest SnapshotID
	// Bytes is its file size, 0 for none (LatestSnapshotGeneratedBytes).
	Bytes int64
	// Time is when it was written or loaded, or when the log opened when
	// there is none (LatestSnapshotGeneratedAgeMs is the time since).
	Time time.Time
	// Loads counts the snapshots Replay loaded (HandleLoadSnapshotCount).
	Loads int64
}

func (s *snapshotter) stats() SnapshotStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SnapshotStats{Latest: s.last, Bytes: s.lastBytes, Time: s.lastTime, Loads: s.loads}
}

// Snapshots is implemented by Local, Raft and Observer: the node's image
// source hands each committed image to the function StartSnapshots
// returns.
type Snapshots interface {
	// StartSnapshots starts writing a snapshot of the metadata image
	// (KIP-630) to the __cluster_metadata-0 directory whenever cfg says
	// one is due, from the images given to offer: committed images
	// (metadata.Image, immutable), in commit order. offer never blocks;
	// it may be called from a Listener. Close stops the writer. Calling
	// StartSnapshots again returns the same offer and changes nothing.
	StartSnapshots(cfg SnapshotConfig) (offer func(*metadata.Image))
	// LatestSnapshot is the newest snapshot this node loaded or wrote;
	// ok is false when none.
	LatestSnapshot() (id SnapshotID, ok bool)
	// SnapshotStats are the snapshot metrics. Safe for concurrent use.
	SnapshotStats() SnapshotStats
}

// StartSnapshots implements Snapshots.
func (l *Local) StartSnapshots(cfg SnapshotConfig) func(*metadata.Image) {
	l.d.snap.start(cfg)
	return l.d.snap.offer
}

// LatestSnapshot implements Snapshots.
func (l *Local) LatestSnapshot() (SnapshotID, bool) { return l.d.snap.latestID() }

// StartSnapshots implements Snapshots.
func (r *Raft) StartSnapshots(cfg SnapshotConfig) func(*metadata.Image) {
	r.d.snap.start(cfg)
	return r.d.snap.offer
}

// LatestSnapshot implements Snapshots.
func (r *Raft) LatestSnapshot() (SnapshotID, bool) { return r.d.snap.latestID() }

// StartSnapshots implements Snapshots.
func (o *Observer) StartSnapshots(cfg SnapshotConfig) func(*metadata.Image) {
	o.d.snap.start(cfg)
	return o.d.snap.offer
}

// LatestSnapshot implements Snapshots.
func (o *Observer) LatestSnapshot() (SnapshotID, bool) { return o.d.snap.latestID() }

// SnapshotStats implements Snapshots.
func (l *Local) SnapshotStats() SnapshotStats { return l.d.snap.stats() }

// SnapshotStats implements Snapshots.
func (r *Raft) SnapshotStats() SnapshotStats { return r.d.snap.stats() }

// SnapshotStats implements Snapshots.
func (o *Observer) SnapshotStats() SnapshotStats { return o.d.snap.stats() }
