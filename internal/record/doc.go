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
// # Records
//
// After the header come recordCount records (see Record for their layout,
// zigzag varints), compressed as one block with the codec of attributes
// bits 0-2: 0 none, 1 gzip, 2 snappy (a raw block, or xerial framing as
// Java clients write it: magic 82 53 4E 41 50 50 59 00, int32 version,
// int32 compatible version, then int32-length-prefixed blocks), 3 lz4
// (frame format), 4 zstd. Records decodes them with every length checked
// against the bytes left and the decompressed size bounded; Build encodes
// them.
//
// # Control records
//
// A control batch (attribute bit 5) holds records whose key is int16
// version, int16 type (ControlType); a transaction marker (ABORT 0,
// COMMIT 1) has the value int16 version, int32 coordinator epoch.
//
// Source: Kafka's DefaultRecordBatch, DefaultRecord, ControlRecordType,
// EndTransactionMarker, and KIP-98 (the v2 format).
package record
