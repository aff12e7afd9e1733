// Package dlq reads dead-letter records and produces them back to where
// they came from.
//
// A dead-letter record is a copy of a record that could not be processed,
// written to a dead-letter topic with headers naming its origin. Two
// families of header names are understood:
//
//   - Kafka's share groups (KIP-1191, "dead-letter queues for share
//     groups"), which Samsa's share groups write: every value is a UTF-8
//     string, numbers in decimal.
//     __dlq.errors.topic           source topic
//     __dlq.errors.partition       source partition
//     __dlq.errors.offset          source offset
//     __dlq.errors.group           share group that gave up on the record
//     __dlq.errors.delivery.count  deliveries before it gave up (optional)
//     __dlq.errors.message         why: "Offset rejected by client." or
//     "Offset delivery count exceeded the threshold."
//   - Spring for Apache Kafka's DeadLetterPublishingRecoverer (the `.DLT`
//     topics of consumer-side retry):
//     kafka_dlt-original-topic      source topic, UTF-8
//     kafka_dlt-original-partition  source partition, 4-byte big-endian int
//     kafka_dlt-original-offset     source offset, 8-byte big-endian long
//     kafka_dlt-original-timestamp  source timestamp, 8-byte big-endian long, ms
//     kafka_dlt-original-consumer-group  consumer group, UTF-8
//     kafka_dlt-exception-fqcn      exception class, UTF-8
//     kafka_dlt-exception-message   exception message, UTF-8
//
// Every function here is safe for concurrent use.
package dlq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names of KIP-1191 dead-letter records (Kafka 4.4's
// ShareGroupDLQStateManager), written by Samsa's share groups.
const (
	HeaderTopic         = "__dlq.errors.topic"
	HeaderPartition     = "__dlq.errors.partition"
	HeaderOffset        = "__dlq.errors.offset"
	HeaderGroup         = "__dlq.errors.group"
	HeaderDeliveryCount = "__dlq.errors.delivery.count"
	HeaderMessage       = "__dlq.errors.message"

	// headerPrefix starts every KIP-1191 header.
	headerPrefix = "__dlq.errors."
)

// The values of HeaderMessage, as Kafka writes them (the messages of
// ShareGroupDLQManager's CLIENT_REJECT and DELIVERY_COUNT_EXCEEDED).
const (
	ReasonRejected        = "Offset rejected by client."
	ReasonDeliveryLimited = "Offset delivery count exceeded the threshold."
)

// Header names of Spring for Apache Kafka's DeadLetterPublishingRecoverer
// (KafkaHeaders.DLT_*).
const (
	SpringTopic          = "kafka_dlt-original-topic"
	SpringPartition      = "kafka_dlt-original-partition"
	SpringOffset         = "kafka_dlt-original-offset"
	SpringTimestamp      = "kafka_dlt-original-timestamp"
	SpringConsumerGroup  = "kafka_dlt-original-consumer-group"
	SpringExceptionFQCN  = "kafka_dlt-exception-fqcn"
	SpringExceptionMsg   = "kafka_dlt-exception-message"
	springHeaderPrefix   = "kafka_dlt-"
	springExceptionStack = "kafka_dlt-exception-stacktrace"
)

// Format names the family of headers a dead-letter record carries.
type Format string

// The formats Decode recognizes.
const (
	FormatShare  Format = "kip-1191" // Kafka's and Samsa's share groups
	FormatSpring Format = "spring"   // Spring's DeadLetterPublishingRecoverer
)

// ErrNotDeadLetter is returned by Decode for a record with neither family
// of headers.
var ErrNotDeadLetter = errors.New("dlq: not a dead-letter record (no __dlq.errors.* or kafka_dlt-* origin headers)")

// ErrBadHeader is wrapped by Decode for an origin header whose value does
// not parse (a Spring partition that is not 4 bytes, a decimal that is not
// a number).
var ErrBadHeader = errors.New("dlq: malformed dead-letter header")

// Origin is where a dead-letter record came from and why it was written.
type Origin struct {
	Format    Format
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp of the source record; zero when the headers do not say
	// (KIP-1191 records never do).
	Timestamp time.Time
	// Group is the share group (KIP-1191) or consumer group (Spring, when
	// the recoverer recorded it); "" when unknown.
	Group string
	// DeliveryCount is the number of deliveries before the group gave up;
	// -1 when unknown (Spring records, or KIP-1191 records without it).
	DeliveryCount int
	// Reason is the KIP-1191 message or Spring's exception message; "" when
	// absent.
	Reason string
	// Exception is Spring's exception class name; "" otherwise.
	Exception string
}

// Decode reads the origin headers of a dead-letter record. KIP-1191 headers
// win when a record has both families. It returns ErrNotDeadLetter when
// neither family names a source topic, and an error wrapping ErrBadHeader
// when a present header does not parse. It never panics on any input.
func Decode(headers []kgo.RecordHeader) (Origin, error) {
	o := Origin{DeliveryCount: -1}
	var share, spring bool
	for _, h := range headers {
		switch h.Key {
		case HeaderTopic, SpringTopic:
			share = share || h.Key == HeaderTopic
			spring = spring || h.Key == SpringTopic
		}
	}
	switch {
	case share:
		return decodeShare(o, headers)
	case spring:
		return decodeSpring(o, headers)
	}
	return o, ErrNotDeadLetter
}

func decodeShare(o Origin, headers []kgo.RecordHeader) (Origin, error) {
	o.Format = FormatShare
	var havePartition, haveOffset bool
	for _, h := range headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderTopic:
			o.Topic = v
		case HeaderPartition:
			p, err := strconv.ParseInt(v, 10, 32)
			if err != nil || p < 0 {
				return o, fmt.Errorf("%w: %s=%q", ErrBadHeader, h.Key, v)
			}
			o.Partition, havePartition = int32(p), true
		case HeaderOffset:
			off, err := strconv.ParseInt(v, 10, 64)
			if err != nil || off < 0 {
				return o, fmt.Errorf("%w: %s=%q", ErrBadHeader, h.Key, v)
			}
			o.Offset, haveOffset = off, true
		case HeaderGroup:
			o.Group = v
		case HeaderDeliveryCount:
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil || n < 0 {
				return o, fmt.Errorf("%w: %s=%q", ErrBadHeader, h.Key, v)
			}
			o.DeliveryCount = int(n)
		case HeaderMessage:
			o.Reason = v
		}
	}
	if o.Topic == "" || !havePartition || !haveOffset {
		return o, fmt.Errorf("%w: %s, %s and %s are all required", ErrBadHeader, HeaderTopic, HeaderPartition, HeaderOffset)
	}
	return o, nil
}

func decodeSpring(o Origin, headers []kgo.RecordHeader) (Origin, error) {
	o.Format = FormatSpring
	var havePartition, haveOffset bool
	for _, h := range headers {
		switch h.Key {
		case SpringTopic:
			o.Topic = string(h.Value)
		case SpringPartition:
			if len(h.Value) != 4 {
				return o, fmt.Errorf("%w: %s is %d bytes, want 4", ErrBadHeader, h.Key, len(h.Value))
			}
			o.Partition, havePartition = int32(binary.BigEndian.Uint32(h.Value)), true
			if o.Partition < 0 {
				return o, fmt.Errorf("%w: %s=%d", ErrBadHeader, h.Key, o.Partition)
			}
		case SpringOffset:
			if len(h.Value) != 8 {
				return o, fmt.Errorf("%w: %s is %d bytes, want 8", ErrBadHeader, h.Key, len(h.Value))
			}
			o.Offset, haveOffset = int64(binary.BigEndian.Uint64(h.Value)), true
			if o.Offset < 0 {
				return o, fmt.Errorf("%w: %s=%d", ErrBadHeader, h.Key, o.Offset)
			}
		case SpringTimestamp:
			if len(h.Value) != 8 {
				return o, fmt.Errorf("%w: %s is %d bytes, want 8", ErrBadHeader, h.Key, len(h.Value))
			}
			o.Timestamp = time.UnixMilli(int64(binary.BigEndian.Uint64(h.Value)))
		case SpringConsumerGroup:
			o.Group = string(h.Value)
		case SpringExceptionMsg:
			o.Reason = string(h.Value)
		case SpringExceptionFQCN:
			o.Exception = string(h.Value)
		}
	}
	if o.Topic == "" || !havePartition || !haveOffset {
		return o, fmt.Errorf("%w: %s, %s and %s are all required", ErrBadHeader, SpringTopic, SpringPartition, SpringOffset)
	}
	return o, nil
}

// IsDeadLetterHeader reports whether key is a header the dead-letter
// writers add (any __dlq.errors.* or kafka_dlt-* key), which Replay drops.
func IsDeadLetterHeader(key string) bool {
	return strings.HasPrefix(key, headerPrefix) || strings.HasPrefix(key, springHeaderPrefix)
}

// Headers returns the KIP-1191 headers for a record of topic/partition at
// offset that share group gave up on after deliveryCount deliveries
// (negative: left out), for reason (ReasonRejected or
// ReasonDeliveryLimited).
func Headers(topic string, partition int32, offset int64, group string, deliveryCount int, reason string) []kgo.RecordHeader {
	hs := []kgo.RecordHeader{
		{Key: HeaderTopic, Value: []byte(topic)},
		{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(partition), 10)},
		{Key: HeaderOffset, Value: strconv.AppendInt(nil, offset, 10)},
		{Key: HeaderGroup, Value: []byte(group)},
	}
	if deliveryCount >= 0 {
		hs = append(hs, kgo.RecordHeader{Key: HeaderDeliveryCount, Value: strconv.AppendInt(nil, int64(deliveryCount), 10)})
	}
	if reason != "" {
		hs = append(hs, kgo.RecordHeader{Key: HeaderMessage, Value: []byte(reason)})
	}
	return hs
}

// Restore returns the record to produce to replay dead-letter record r: to
// its origin's topic and partition, with r's key, value and timestamp and
// its headers minus the dead-letter ones. It returns Decode's errors.
func Restore(r *kgo.Record) (*kgo.Record, Origin, error) {
	o, err := Decode(r.Headers)
	if err != nil {
		return nil, o, err
	}
	out := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		if !IsDeadLetterHeader(h.Key) {
			out.Headers = append(out.Headers, h)
		}
	}
	return out, o, nil
}

// Replay produces each dead-letter record of recs back to its source
// partition (see Restore) through cl and waits for the acknowledgements.
// cl must be built with kgo.RecordPartitioner(kgo.ManualPartitioner()), or
// the partition is not honoured. It returns the number of records produced
// and the first error: a record Restore refuses stops the replay before
// anything is produced; a produce error is returned after the others were
// acknowledged or failed.
func Replay(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (int, error) {
	out := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		rr, _, err := Restore(r)
		if err != nil {
			return 0, fmt.Errorf("%s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		out = append(out, rr)
	}
	res := cl.ProduceSync(ctx, out...)
	n := 0
	for _, pr := range res {
		if pr.Err == nil {
			n++
		}
	}
	return n, res.FirstErr()
}
