package replica

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// checkpointedHWLocked returns the high-watermark recorded in the
// replication-offset-checkpoint of the partition's log dir, or 0: a
// restarted leader starts from it rather than from 0 while its followers
// reconnect. Requires m.mu.
func (m *Manager) checkpointedHWLocked(log *storage.Log, tp TopicPartition) int64 {
	dir := filepath.Dir(log.Dir())
	hws, ok := m.hwCheckpoints[dir]
	if !ok {
		var err error
		hws, err = storage.ReadOffsetCheckpoint(log.FS(), filepath.Join(dir, storage.ReplicationOffsetCheckpointFile))
		if err != nil {
			m.logger.Warn("reading replication-offset-checkpoint failed", "dir", dir, "err", err)
			hws = map[storage.TopicPartition]int64{}
		}
		m.hwCheckpoints[dir] = hws
	}
	return hws[storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}]
}

// Checkpoint writes every hosted partition's high-watermark to the
// replication-offset-checkpoint of its log dir, unless none moved and no
// partition went since the last one written (Kafka writes it at every
// interval; at 100,000 idle partitions that was 42-46 ms of encoding and
// a 2.6 MB file every 5 s to say the same). A dir whose write fails
// with an I/O error other than ENOSPC goes offline
// (storage.Manager.DirFailed), as Kafka's checkpointHighWatermarks
// reports it to LogDirFailureChannel; an offline dir's checkpoint is no
// longer written (the last good one is read at the next start).
func (m *Manager) Checkpoint() error {
	if !m.hwMoved.Swap(false) {
		return nil
	}
	byDir := map[string]map[storage.TopicPartition]int64{}
	fsys := map[string]vfs.FS{}
	m.mu.RLock()
	for tp, p := range m.parts {
		dir := filepath.Dir(p.log.Dir())
		if byDir[dir] == nil {
			byDir[dir] = map[storage.TopicPartition]int64{}
			fsys[dir] = p.log.FS()
		}
		byDir[dir][storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = p.HighWatermark()
	}
	m.mu.RUnlock()
	var errs []error
	for dir, hws := range byDir {
		if m.logs.DirFailed(dir, nil) {
			continue
		}
		err := storage.WriteOffsetCheckpoint(fsys[dir], filepath.Join(dir, storage.ReplicationOffsetCheckpointFile), hws)
		if err != nil {
			m.hwMoved.Store(true) // tried again at the next interval
			m.logs.DirFailed(dir, err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// hwCheckpointer writes the high-watermark checkpoint every
// HighWatermarkCheckpointInterval, as Kafka's ReplicaManager schedules
// checkpointHighWatermarks: a node killed without a clean shutdown restarts
// with high-watermarks at most that old.
func (m *Manager) hwCheckpointer() {
	t := time.NewTicker(m.opts.HighWatermarkCheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if err := m.Checkpoint(); err != nil {
				m.logger.Warn("writing replication-offset-checkpoint failed", "err", err)
			}
		}
	}
}
