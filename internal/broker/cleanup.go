package broker

import (
	"math"
	"time"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/storage"
)

// cleanupConfig resolves how records of t's partitions go: cleanup.policy,
// retention.ms, retention.bytes, file.delete.delay.ms,
// delete.retention.ms, min.cleanable.dirty.ratio, min.compaction.lag.ms
// and max.compaction.lag.ms, each from the topic, the broker or Kafka's
// default. A change arrives with the next metadata image and applies to
// the partitions at once (applyImage → Partition.SetConfig).
func (b *Broker) cleanupConfig(t *metadata.Topic) storage.Cleanup {
	c := b.cleanupPolicy(t)
	c.RetentionAge = configMillis(b.topicInt(t, "retention.ms"))
	c.RetentionBytes = b.topicInt(t, "retention.bytes")
	c.FileDeleteDelay = configMillis(b.topicInt(t, "file.delete.delay.ms"))
	c.DeleteRetention = configMillis(b.topicInt(t, "delete.retention.ms"))
	c.MinCompactionLag = configMillis(b.topicInt(t, "min.compaction.lag.ms"))
	c.MaxCompactionLag = configMillis(b.topicInt(t, "max.compaction.lag.ms"))
	ratio, _ := b.topicConfig(t, "min.cleanable.dirty.ratio")
	f, err := config.TopicRatio("min.cleanable.dirty.ratio", ratio)
	if err != nil {
		b.invalidTopicConfig(t, err)
		f, _ = config.TopicRatio("min.cleanable.dirty.ratio", b.config().Topic["min.cleanable.dirty.ratio"])
	}
	c.MinCleanableDirtyRatio = f
	return c
}

// cleanupPolicy is t's cleanup.policy as storage takes it (Delete and
// Compact set, the rest zero), parsed by config.CleanupPolicy.
func (b *Broker) cleanupPolicy(t *metadata.Topic) storage.Cleanup {
	policy, _ := b.topicConfig(t, "cleanup.policy")
	del, compact, err := config.CleanupPolicy(policy)
	if err != nil {
		b.invalidTopicConfig(t, err)
		del, compact, _ = config.CleanupPolicy(b.config().Topic["cleanup.policy"])
	}
	return storage.Cleanup{Delete: del, Compact: compact}
}

// configMillis converts a millisecond config to a duration: negative values
// (Kafka's -1) stay negative, and values past the range of time.Duration
// (Long.MAX_VALUE) become its maximum, about 292 years.
func configMillis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
