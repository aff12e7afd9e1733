package txn

import (
	"fmt"
	"time"
)

// Defaults of Config, Kafka's.
const (
	DefaultNumPartitions              = 50                 // transaction.state.log.num.partitions
	DefaultMaxTimeout                 = 15 * time.Minute   // transaction.max.timeout.ms
	DefaultTransactionalIDExpiration  = 7 * 24 * time.Hour // transactional.id.expiration.ms
	DefaultAbortTimedOutInterval      = 10 * time.Second   // transaction.abort.timed.out.transaction.cleanup.interval.ms
	DefaultRemoveExpiredIDInterval    = time.Hour          // transaction.remove.expired.transaction.cleanup.interval.ms
	DefaultWriteTimeout               = 30 * time.Second   // request.timeout.ms
	DefaultOffsetsTopicNumPartitions  = 50                 // offsets.topic.num.partitions
	DefaultMarkerRetryBackoff         = 100 * time.Millisecond
	maxMarkerRetryBackoff             = 2 * time.Second
	transactionStateTopic             = "__transaction_state"
	offsetsTopic                      = "__consumer_offsets"
	maxAppendBytes                    = 1 << 20
	maxTransactionalIDLength          = 1 << 15
	defaultTxnTimeoutMillisForLogging = 60000
)

// Config configures a Coordinator. The zero value of every field means
// Kafka's default, given with its property name.
type Config struct {
	// NumPartitions is the number of partitions of __transaction_state
	// (transaction.state.log.num.partitions; default 50). It decides which
	// partition, hence which broker, coordinates a transactional id, and
	// must not change once the topic exists.
	NumPartitions int32

	// MaxTimeout bounds the transaction.timeout.ms a producer may ask for
	// in InitProducerId; more gets INVALID_TRANSACTION_TIMEOUT
	// (transaction.max.timeout.ms; default 15m).
	MaxTimeout time.Duration

	// TransactionalIDExpiration is how long a transactional id with no
	// transaction open is kept without any request for it; then its state
	// is deleted with a tombstone (transactional.id.expiration.ms; default
	// 7 days).
	TransactionalIDExpiration time.Duration

	// AbortTimedOutInterval is the period of the check that aborts the
	// transactions open longer than their timeout
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms;
	// default 10s).
	AbortTimedOutInterval time.Duration

	// RemoveExpiredIDInterval is the period of the check for expired
	// transactional ids
	// (transaction.remove.expired.transaction.cleanup.interval.ms; default
	// 1h).
	RemoveExpiredIDInterval time.Duration

	// WriteTimeout bounds each Store.Append; past it the write fails as
	// REQUEST_TIMED_OUT, COORDINATOR_NOT_AVAILABLE for clients
	// (request.timeout.ms; default 30s).
	WriteTimeout time.Duration

	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (default
	// 50): AddOffsetsToTxn adds the partition of __consumer_offsets of the
	// group to the transaction.
	OffsetsTopicNumPartitions int32

	// MarkerRetryBackoff is the first wait before writing transaction
	// markers again to partitions whose leader could not take them,
	// doubling up to 2s (default 100ms; Kafka retries at
	// retry.backoff.ms).
	MarkerRetryBackoff time.Duration
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.TransactionalIDExpiration <= 0 {
		c.TransactionalIDExpiration = DefaultTransactionalIDExpiration
	}
	if c.AbortTimedOutInterval <= 0 {
		c.AbortTimedOutInterval = DefaultAbortTimedOutInterval
	}
	if c.RemoveExpiredIDInterval <= 0 {
		c.RemoveExpiredIDInterval = DefaultRemoveExpiredIDInterval
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.OffsetsTopicNumPartitions <= 0 {
		c.OffsetsTopicNumPartitions = DefaultOffsetsTopicNumPartitions
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = DefaultMarkerRetryBackoff
	}
	return c
}

// Validate reports negative durations or partition counts.
func (c Config) Validate() error {
	switch {
	case c.NumPartitions < 0:
		return fmt.Errorf("txn: transaction.state.log.num.partitions %d is negative", c.NumPartitions)
	case c.OffsetsTopicNumPartitions < 0:
		return fmt.Errorf("txn: offsets.topic.num.partitions %d is negative", c.OffsetsTopicNumPartitions)
	case c.MaxTimeout < 0, c.TransactionalIDExpiration < 0, c.AbortTimedOutInterval < 0,
		c.RemoveExpiredIDInterval < 0, c.WriteTimeout < 0, c.MarkerRetryBackoff < 0:
		return fmt.Errorf("txn: negative duration in %+v", c)
	}
	return nil
}
