package storage

import (
	"fmt"
	"math"
	"time"
)

// Kafka's defaults for Config fields left zero.
const (
	DefaultSegmentBytes       = 1 << 30            // log.segment.bytes
	DefaultSegmentMs          = 7 * 24 * time.Hour // log.roll.hours = 168
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
	if c.SegmentMs == 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = DefaultSegmentIndexBytes
	}
	return c
}

// Validate reports a field out of Kafka's range: SegmentBytes in
// [14, MaxInt32] (index positions are int32), SegmentMs at least 1ms,
// IndexIntervalBytes and FlushIntervalMessages not negative,
// SegmentIndexBytes at least 12 (one time index entry). Zero fields are
// valid (they mean the default).
func (c Config) Validate() error {
	d := c.WithDefaults()
	switch {
	case d.SegmentBytes < minSegmentBytes || d.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("storage: segment.bytes %d not in [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case d.SegmentMs < time.Millisecond:
		return fmt.Errorf("storage: segment.ms %v below 1ms", c.SegmentMs)
	case d.IndexIntervalBytes < 0:
		return fmt.Errorf("storage: index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case d.SegmentIndexBytes < timeEntrySize:
		return fmt.Errorf("storage: segment.index.bytes %d below %d", c.SegmentIndexBytes, timeEntrySize)
	case d.FlushIntervalMessages < 0:
		return fmt.Errorf("storage: flush.messages %d is negative", c.FlushIntervalMessages)
	}
	return nil
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
	if c.SegmentMs == 0 {
		c.SegmentMs = parent.SegmentMs
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
	return c
}
