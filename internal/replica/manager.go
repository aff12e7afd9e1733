package replica

import (
	"log/slog"
	"sync"

	"github.com/samsahq/samsa/internal/storage"
)

// Manager owns the hosted partitions. Safe for concurrent use.
type Manager struct {
	logs   *storage.Manager
	logger *slog.Logger

	mu    sync.RWMutex // guards parts
	parts map[TopicPartition]*Partition
}

// NewManager returns a Manager over the log manager's logs.
func NewManager(logs *storage.Manager, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{logs: logs, logger: logger, parts: map[TopicPartition]*Partition{}}
}

// Get returns the hosted partition or nil.
func (m *Manager) Get(topic string, partition int32) *Partition {
	m.mu.RLock()
	p := m.parts[TopicPartition{topic, partition}]
	m.mu.RUnlock()
	return p
}

// BecomeLeader hosts tp as its leader with epoch and in-sync replicas isr,
// opening or creating its log, or updates the epoch, ISR and config of an
// already hosted partition.
func (m *Manager) BecomeLeader(tp TopicPartition, topicID [16]byte, epoch int32, isr []int32, cfg LogConfig) (*Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parts[tp]; p != nil {
		p.mu.Lock()
		p.leaderEpoch.Store(epoch)
		p.isr.Store(&isr)
		p.mu.Unlock()
		p.SetConfig(cfg)
		return p, nil
	}
	stp := storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	log := m.logs.Get(stp)
	if log == nil {
		var err error
		if log, err = m.logs.Create(stp, cfg.Storage); err != nil {
			return nil, err
		}
	} else {
		log.SetConfig(cfg.Storage)
	}
	p := newPartition(tp, topicID, log, epoch, isr, cfg)
	m.parts[tp] = p
	return p, nil
}

// Remove stops hosting tp and deletes its log (topic deletion).
func (m *Manager) Remove(tp TopicPartition) error {
	m.mu.Lock()
	p := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	if p != nil {
		p.notify() // wake fetches so they see the partition gone
	}
	return m.logs.Delete(storage.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
}

// Partitions returns the hosted partitions.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}
