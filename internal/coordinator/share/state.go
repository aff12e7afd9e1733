package share

import (
	"fmt"
	"unicode/utf16"
)

// StateTopic is the internal topic of durable share-partition state
// (KIP-932's share coordinator).
const StateTopic = "__share_group_state"

// Defaults of the share coordinator's topic (Kafka's
// share.coordinator.state.topic.num.partitions and
// share.coordinator.state.topic.replication.factor).
const (
	StateTopicPartitions        = 50
	StateTopicReplicationFactor = 3
)

// The DeliveryState values of ReadShareGroupState/WriteShareGroupState
// state batches (Kafka's RecordState ids).
const (
	deliveryAvailable    int8 = 0
	deliveryAcknowledged int8 = 2
	deliveryArchived     int8 = 4
)

// DeliveryState returns the wire id of a record state in a state batch
// (Acquired is written as Available: a lock does not survive a failover).
func DeliveryState(s RecordState) int8 {
	switch s {
	case Acknowledged:
		return deliveryAcknowledged
	case Archived:
		return deliveryArchived
	}
	return deliveryAvailable
}

// RecordStateOf is the inverse of DeliveryState; ok false for an id it does
// not know.
func RecordStateOf(id int8) (RecordState, bool) {
	switch id {
	case deliveryAvailable:
		return Available, true
	case deliveryAcknowledged:
		return Acknowledged, true
	case deliveryArchived:
		return Archived, true
	}
	return 0, false
}

// StateKey names the durable state of one share-partition.
type StateKey struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// StatePartition returns the partition of __share_group_state holding k's
// state: abs(hash("group:topicId:partition")) % partitions, the string hash
// being Java's String.hashCode as Kafka's SharePartitionKey uses (the topic
// id in Kafka's base64 form).
func StatePartition(k StateKey, partitions int32) int32 {
	s := fmt.Sprintf("%s:%s:%d", k.Group, kafkaUUID(k.TopicID), k.Partition)
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	}
	if h < 0 {
		h = -h
	}
	return h % partitions
}

func kafkaUUID(id [16]byte) string {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// URL-safe base64 without padding, as Kafka's Uuid.toString.
	out := make([]byte, 0, 22)
	var buf uint32
	bits := 0
	for _, b := range id {
		buf = buf<<8 | uint32(b)
		bits += 8
		for bits >= 6 {
			bits -= 6
			out = append(out, enc[(buf>>uint(bits))&0x3f])
		}
	}
	if bits > 0 {
		out = append(out, enc[(buf<<uint(6-bits))&0x3f])
	}
	return string(out)
}
