package group

import (
	"math"
	"unicode/utf16"
)

// PartitionFor returns the partition of __consumer_offsets that stores, and
// whose leader coordinates, groupID: Kafka's
// Utils.abs(groupId.hashCode) % offsets.topic.num.partitions, where
// hashCode is Java's String.hashCode over UTF-16 code units and Utils.abs
// maps math.MinInt32 to 0. numPartitions must be positive; PartitionFor
// returns 0 otherwise.
func PartitionFor(groupID string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return javaAbs(javaStringHash(groupID)) % numPartitions
}

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + … + s[n-1]
// over UTF-16 code units, with int32 wrap-around. Invalid UTF-8 decodes to
// U+FFFD, as Java's UTF-8 decoder does.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// javaAbs is org.apache.kafka.common.utils.Utils.abs.
func javaAbs(n int32) int32 {
	if n == math.MinInt32 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
