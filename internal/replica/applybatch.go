package replica

// ApplyItem is one partition of ApplyBatch: Apply's arguments.
type ApplyItem struct {
	TopicPartition
	TopicID [16]byte
	State   State
	Config  LogConfig
}

// applyChunk bounds the partitions ApplyBatch applies under one hold of
// the Manager's lock: fetches and produces look partitions up under it,
// and a chunk that creates logs holds it for their file creations.
const applyChunk = 512

// ApplyBatch is Apply for each item, in order, taking the Manager's lock
// once per chunk of applyChunk partitions instead of once per partition:
// a metadata commit that moves 10,000 leaderships (a controlled shutdown,
// a fenced broker) took 10,000 turns of the lock, each waiting for the
// fetch handlers holding it for reading, seconds on a loaded machine. It
// returns one error per item (nil when hosted); a partition whose log
// cannot be opened is offline, as with Apply. Safe for concurrent use.
func (m *Manager) ApplyBatch(items []ApplyItem) []error {
	errs := make([]error, len(items))
	for lo := 0; lo < len(items); lo += applyChunk {
		hi := min(lo+applyChunk, len(items))
		m.mu.Lock()
		for i := lo; i < hi; i++ {
			it := &items[i]
			_, errs[i] = m.applyLocked(it.TopicPartition, it.TopicID, it.State, it.Config)
		}
		m.mu.Unlock()
	}
	return errs
}
