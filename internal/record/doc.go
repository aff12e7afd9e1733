// Package record reads and checks Kafka record batches (message format v2,
// magic 2), the unit that producers send, the log stores and consumers fetch.
//
// # Batch layout (all integers big-endian)
//
//	offset  size  field
//	     0     8  baseOffset            stamped by the broker on append
//	     8     4  batchLength           bytes after this field
//	    12     4  partitionLeaderEpoch  stamped by the broker on append
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21, end)
//	    21     2  attributes            bits 0-2 codec, 3 timestamp type,
//	                                     4 transactional, 5 control
//	    23     4  lastOffsetDelta
//	    27     8  baseTimestamp         milliseconds since the epoch
//	    35     8  maxTimestamp          milliseconds since the epoch
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//	    61     …  records, compressed with the codec as a whole
//
// Because the CRC starts at the attributes, the broker can stamp the base
// offset and the partition leader epoch in place without recomputing it.
//
// Source: Kafka's DefaultRecordBatch and KIP-98 (the v2 format).
package record
