package storage

import (
	"fmt"
	"math"
	"time"
)

// Kafka's defaults for Config fields left zero.
const (
	DefaultSegmentBytes       = 1 << 30            // log.segment.bytes
	DefaultSegmentAge         = 7 * 24 * time.Hour // log.roll.hours = 168
	DefaultIndexIntervalBytes = 4096               // log.index.interval.bytes
	DefaultSegmentIndexBytes  = 10 << 20           // log.index.size.max.bytes
)

// minSegmentBytes is Kafka's lower bound for segment.bytes (a legacy record
// overhead); smaller values are rejected by Validate.
const minSegmentBytes = 14

// WithDefaults returns c with every zero field set to Kafka's default.
func (c Config) WithDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = DefaultSegmentIndexBytes
	}
	if c.ProducerIDExpiration <= 0 {
		c.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	return c
}

// Validate reports a field out of Kafka's range: SegmentBytes in
// [14, MaxInt32] (index positions are int32), SegmentAge at least 1ms,
// IndexIntervalBytes, FlushIntervalMessages and FlushInterval not negative,
// SegmentIndexBytes at least 12 (one time index entry). Zero fields are
// valid (they mean the default).
func (c Config) Validate() error {
	d := c.WithDefaults()
	switch {
	case d.SegmentBytes < minSegmentBytes || d.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("storage: segment.bytes %d not in [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case d.SegmentAge < time.Millisecond:
		return fmt.Errorf("storage: segment.ms %v below 1ms", c.SegmentAge)
	case d.IndexIntervalBytes < 0:
		return fmt.Errorf("storage: index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case d.SegmentIndexBytes < timeEntrySize:
		return fmt.Errorf("storage: segment.index.bytes %d below %d", c.SegmentIndexBytes, timeEntrySize)
	case d.FlushIntervalMessages < 0:
		return fmt.Errorf("storage: flush.messages %d is negative", c.FlushIntervalMessages)
	case d.FlushInterval < 0:
		return fmt.Errorf("storage: flush.ms %v is negative", c.FlushInterval)
	}
	return c.Cleanup.Validate()
}

// maxIndexEntries is the number of entries of entrySize bytes an index may
// hold before the segment rolls.
func (c Config) maxIndexEntries(entrySize int) int {
	return int(c.SegmentIndexBytes) / entrySize
}

// Inherit returns c with each zero field taken from parent (a topic config
// over the broker's defaults).
func (c Config) Inherit(parent Config) Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = parent.SegmentBytes
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = parent.SegmentAge
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = parent.IndexIntervalBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = parent.SegmentIndexBytes
	}
	if c.FlushIntervalMessages == 0 {
		c.FlushIntervalMessages = parent.FlushIntervalMessages
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = parent.FlushInterval
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = parent.ProducerIDExpiration
	}
	if c.Cleanup == (Cleanup{}) {
		c.Cleanup = parent.Cleanup
	}
	return c
}

// Cleanup is a log's retention and compaction configuration (Kafka's
// cleanup.policy and the topic configs that go with it). The zero value
// deletes and compacts nothing. Durations are Kafka's millisecond configs;
// NoLimit (or any negative value) stands for Kafka's -1 and for
// Long.MAX_VALUE milliseconds.
type Cleanup struct {
	// Delete is cleanup.policy containing delete: segments go by age
	// (RetentionAge) and by total size (RetentionBytes).
	Delete bool
	// Compact is cleanup.policy containing compact: the log cleaner keeps
	// the latest record of each key.
	Compact bool
	// RetentionAge is retention.ms: a closed segment whose largest
	// timestamp is older than this is deleted. Negative: no limit.
	RetentionAge time.Duration
	// RetentionBytes is retention.bytes: the oldest segments are deleted
	// while the log is larger than this. Negative: no limit.
	RetentionBytes int64
	// FileDeleteDelay is file.delete.delay.ms: files of deleted or
	// replaced segments are renamed to .deleted and removed this much
	// later.
	FileDeleteDelay time.Duration
	// DeleteRetention is delete.retention.ms: how long the cleaner keeps
	// tombstones and transaction markers after it first sees them (the
	// batch's delete horizon, KIP-534).
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner
	// picks a log once its uncleaned bytes are at least this fraction of
	// its cleanable bytes, in [0, 1].
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms: a segment holding a
	// record younger than this is not cleaned.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a log whose oldest
	// uncleaned record is older than this is cleaned whatever its dirty
	// ratio, and its active segment rolls at this age if sooner than
	// segment.ms. Negative: no limit.
	MaxCompactionLag time.Duration
}

// NoLimit is the Cleanup value of a duration or size without a limit
// (Kafka's -1 or Long.MAX_VALUE).
const NoLimit = -1

// DefaultCleanup returns Kafka's default topic configs: cleanup.policy
// delete, retention.ms 7 days, retention.bytes -1, file.delete.delay.ms
// 60000, delete.retention.ms 1 day, min.cleanable.dirty.ratio 0.5,
// min.compaction.lag.ms 0, max.compaction.lag.ms Long.MAX_VALUE.
func DefaultCleanup() Cleanup {
	return Cleanup{
		Delete:                 true,
		RetentionAge:           7 * 24 * time.Hour,
		RetentionBytes:         NoLimit,
		FileDeleteDelay:        time.Minute,
		DeleteRetention:        24 * time.Hour,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLag:       NoLimit,
	}
}

// Validate reports a field out of Kafka's range: FileDeleteDelay,
// DeleteRetention or MinCompactionLag negative, MinCleanableDirtyRatio
// outside [0, 1], MaxCompactionLag zero.
func (c Cleanup) Validate() error {
	switch {
	case c.FileDeleteDelay < 0:
		return fmt.Errorf("storage: file.delete.delay.ms %v is negative", c.FileDeleteDelay)
	case c.DeleteRetention < 0:
		return fmt.Errorf("storage: delete.retention.ms %v is negative", c.DeleteRetention)
	case c.MinCompactionLag < 0:
		return fmt.Errorf("storage: min.compaction.lag.ms %v is negative", c.MinCompactionLag)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("storage: min.cleanable.dirty.ratio %v not in [0, 1]", c.MinCleanableDirtyRatio)
	case c.Compact && c.MaxCompactionLag == 0:
		return fmt.Errorf("storage: max.compaction.lag.ms is zero")
	}
	return nil
}

// maxSegmentAge is how old the active segment may get before it rolls:
// segment.ms, or max.compaction.lag.ms when compacting and sooner (as
// Kafka's LogConfig.maxSegmentMs).
func (c Config) maxSegmentAge() time.Duration {
	if c.Cleanup.Compact && c.Cleanup.MaxCompactionLag > 0 && c.Cleanup.MaxCompactionLag < c.SegmentAge {
		return c.Cleanup.MaxCompactionLag
	}
	return c.SegmentAge
}
