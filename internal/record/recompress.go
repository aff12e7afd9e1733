package record

import "fmt"

// ParseCodec maps a compression.type topic config value to a codec:
// "uncompressed" (or "none"), "gzip", "snappy", "lz4", "zstd". It reports
// false for "producer" (batches keep the producer's codec) and for any
// other value.
func ParseCodec(compressionType string) (Codec, bool) {
	switch compressionType {
	case "uncompressed", "none":
		return CodecNone, true
	case "gzip":
		return CodecGzip, true
	case "snappy":
		return CodecSnappy, true
	case "lz4":
		return CodecLZ4, true
	case "zstd":
		return CodecZstd, true
	}
	return 0, false
}

// Recompress returns the batch b (one whole v2 batch, validated) with its
// records compressed with codec instead of the producer's, as a broker does
// for a topic whose compression.type names a codec. Everything else is
// kept: base offset, partition leader epoch, producer id, epoch and base
// sequence, the transactional and timestamp-type attributes, the base
// timestamp (the max timestamp is recomputed from the records under
// CreateTime, as Kafka does, and kept under LogAppendTime), the last offset
// delta and each record's deltas, key,
// value and headers; the CRC is computed anew. A batch already in codec, a
// control batch and a batch without records are returned as they are
// (b itself). The records decompress to at most maxBytes (zero or negative
// means DefaultMaxDecompressedBytes).
//
// The new batch is appended to dst. Errors: those of RecordsMax
// (ErrCorrupt, ErrTruncated, ErrTooLarge) for records that do not decode,
// and ErrCorrupt when the record count does not match the header's.
func Recompress(dst, b []byte, codec Codec, maxBytes int) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Codec() == codec || h.IsControl() || h.NumRecords == 0 {
		return append(dst, b...), nil
	}
	recs := make([]Record, 0, h.NumRecords)
	// Keys, values and header values alias b or the decompressed buffer,
	// which live until AppendBatch has copied them.
	err = RecordsMax(b, maxBytes, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	spec := Spec{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Codec:                codec,
		LogAppendTime:        h.IsLogAppendTime(),
		Transactional:        h.IsTransactional(),
		BaseTimestamp:        h.BaseTimestamp,
		MaxTimestamp:         h.MaxTimestamp,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		LastOffsetDelta:      h.LastOffsetDelta,
		DeleteHorizon:        h.Attributes&DeleteHorizonBit != 0,
	}
	start := len(dst)
	if dst, err = AppendBatch(dst, spec, recs); err != nil {
		return nil, err
	}
	out := dst[start:]
	if _, err := Validate(out); err != nil {
		return nil, fmt.Errorf("record: recompressed batch: %w", err)
	}
	return dst, nil
}
