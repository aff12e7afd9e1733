package replica

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// LogConfig are the topic configs a partition applies on append.
type LogConfig struct {
	// MaxMessageBytes is max.message.bytes: the largest batch accepted.
	MaxMessageBytes int32
	// SegmentBytes is segment.bytes; a produce larger than it is rejected.
	SegmentBytes int64
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime bool
	// MinInsyncReplicas is min.insync.replicas.
	MinInsyncReplicas int32
	// Compact is cleanup.policy containing compact: records need keys.
	Compact bool
	// Storage is the log's own configuration.
	Storage storage.Config
}

// Errors of Partition methods, mapped to Kafka codes by the broker.
var (
	ErrNotLeader       = errors.New("replica: not the leader")
	ErrFencedEpoch     = errors.New("replica: fenced leader epoch")
	ErrUnknownEpoch    = errors.New("replica: unknown leader epoch")
	ErrMessageTooLarge = errors.New("replica: batch larger than max.message.bytes")
	ErrRecordListLarge = errors.New("replica: records larger than segment.bytes")
	// ErrNotEnoughReplicas: acks=all with fewer in-sync replicas than
	// min.insync.replicas (NOT_ENOUGH_REPLICAS); nothing is written.
	ErrNotEnoughReplicas = errors.New("replica: fewer in-sync replicas than min.insync.replicas")
)

// Partition is one hosted partition. Safe for concurrent use.
type Partition struct {
	TopicPartition
	TopicID [16]byte
	log     *storage.Log

	mu          sync.Mutex // serializes Append and high-watermark changes
	leaderEpoch atomic.Int32
	hw          atomic.Int64
	cfg         atomic.Pointer[LogConfig]
	isr         atomic.Pointer[[]int32] // in-sync replica ids, leader included

	waitMu  sync.Mutex // guards waiters
	waiters map[chan<- struct{}]struct{}
}

func newPartition(tp TopicPartition, id [16]byte, log *storage.Log, epoch int32, isr []int32, cfg LogConfig) *Partition {
	p := &Partition{TopicPartition: tp, TopicID: id, log: log, waiters: map[chan<- struct{}]struct{}{}}
	p.leaderEpoch.Store(epoch)
	p.isr.Store(&isr)
	p.cfg.Store(&cfg)
	// A single replica's high-watermark is its log end offset.
	p.hw.Store(log.LogEndOffset())
	return p
}

// Log is the partition's log.
func (p *Partition) Log() *storage.Log { return p.log }

// Config is the partition's current log config.
func (p *Partition) Config() *LogConfig { return p.cfg.Load() }

// SetConfig applies changed topic configs at once.
func (p *Partition) SetConfig(cfg LogConfig) {
	p.cfg.Store(&cfg)
	p.log.SetConfig(cfg.Storage)
}

// ISR is the in-sync replica set, the leader included. Do not modify.
func (p *Partition) ISR() []int32 { return *p.isr.Load() }

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// HighWatermark is the offset below which records are committed and visible
// to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LastStableOffset is the offset below which no transaction is open; with
// no transactions yet it equals the high-watermark.
func (p *Partition) LastStableOffset() int64 { return p.hw.Load() }

// LogEndOffset is the offset of the next record appended.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LogStartOffset is the first offset the partition holds.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// CheckEpoch compares a request's current leader epoch (KIP-320; -1 means
// none given) with the partition's.
func (p *Partition) CheckEpoch(current int32) error {
	if current < 0 {
		return nil
	}
	switch e := p.leaderEpoch.Load(); {
	case current < e:
		return ErrFencedEpoch
	case current > e:
		return ErrUnknownEpoch
	}
	return nil
}

// Append validates batches (a Produce partition's records) and appends them
// at the log end, stamping offsets and the leader epoch in place. It returns
// record.ErrCorrupt (and friends) for a bad batch, ErrMessageTooLarge or
// ErrRecordListLarge for oversized input; nothing is written then.
// nowMillis stamps LogAppendTime topics.
//
// With acks=-1 (all), fewer in-sync replicas than min.insync.replicas give
// ErrNotEnoughReplicas before anything is written.
func (p *Partition) Append(batches []byte, acks int16, nowMillis int64) (storage.AppendResult, error) {
	cfg := p.cfg.Load()
	if acks == -1 && int32(len(p.ISR())) < cfg.MinInsyncReplicas {
		return storage.AppendResult{}, ErrNotEnoughReplicas
	}
	if cfg.SegmentBytes > 0 && int64(len(batches)) > cfg.SegmentBytes {
		return storage.AppendResult{}, ErrRecordListLarge
	}
	n := 0
	consumed, err := record.Batches(batches, func(b []byte, h record.Header) error {
		if cfg.MaxMessageBytes > 0 && len(b) > int(cfg.MaxMessageBytes) {
			return ErrMessageTooLarge
		}
		if _, err := record.Validate(b); err != nil {
			return err
		}
		if h.IsControl() {
			// Only the transaction coordinator writes control batches.
			return record.ErrCorrupt
		}
		if cfg.LogAppendTime {
			record.SetMaxTimestampLogAppendTime(b, nowMillis)
		}
		n++
		return nil
	})
	if err != nil {
		return storage.AppendResult{}, err
	}
	if consumed != len(batches) || n == 0 {
		return storage.AppendResult{}, record.ErrCorrupt
	}
	return p.appendLocked(batches)
}

// AppendInternal appends batches built by the broker itself (coordinators'
// records, control batches) without the client-facing checks.
func (p *Partition) AppendInternal(batches []byte) (storage.AppendResult, error) {
	return p.appendLocked(batches)
}

func (p *Partition) appendLocked(batches []byte) (storage.AppendResult, error) {
	p.mu.Lock()
	res, err := p.log.Append(batches, p.leaderEpoch.Load())
	if err == nil {
		p.hw.Store(p.log.LogEndOffset())
	}
	p.mu.Unlock()
	if err == nil {
		p.notify()
	}
	return res, err
}

// Watch registers ch to receive a non-blocking send after every append;
// Unwatch removes it. A fetch waiting for data watches its partitions.
func (p *Partition) Watch(ch chan<- struct{}) {
	p.waitMu.Lock()
	p.waiters[ch] = struct{}{}
	p.waitMu.Unlock()
}

// Unwatch removes ch registered by Watch.
func (p *Partition) Unwatch(ch chan<- struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

func (p *Partition) notify() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// ReadResult is what Read returns.
type ReadResult struct {
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// Read returns batches from offset up to maxBytes, bounded by the
// high-watermark for consumers (untilLogEnd false) or the log end
// (followers). minOne returns the first batch whole even when it is larger
// than maxBytes (KIP-74). Offsets outside [log start, log end] give
// storage.ErrOffsetOutOfRange.
func (p *Partition) Read(offset int64, maxBytes int32, untilLogEnd, minOne bool) (ReadResult, error) {
	hw := p.hw.Load()
	limit := hw
	if untilLogEnd {
		limit = p.log.LogEndOffset()
	}
	res := ReadResult{HighWatermark: hw, LastStableOffset: hw}
	r, err := p.log.Read(offset, maxBytes, limit, minOne)
	res.LogStartOffset = r.LogStartOffset
	if err != nil {
		res.LogStartOffset = p.log.LogStartOffset()
		return res, err
	}
	res.Records = r.Records
	return res, nil
}
