package replica

import (
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/record"
)

// recompressBatches returns batches (a Produce partition's records, every
// batch validated) with each batch whose codec is not cfg.Compression
// recompressed into it (record.Recompress), for a topic whose
// compression.type names a codec. When every batch is in that codec
// already, batches itself is returned and nothing is copied. A batch whose
// records do not decode gives record.ErrCorrupt (wrapped); one whose
// records decompress past record.DefaultMaxDecompressedBytes, or that is
// larger than max.message.bytes once recompressed, ErrMessageTooLarge.
func recompressBatches(batches []byte, cfg *LogConfig) ([]byte, error) {
	need := false
	if _, err := record.Batches(batches, func(_ []byte, h record.Header) error {
		need = need || (h.Codec() != cfg.Compression && !h.IsControl() && h.NumRecords > 0)
		return nil
	}); err != nil || !need {
		return batches, err
	}
	out := make([]byte, 0, len(batches)+len(batches)/4)
	_, err := record.Batches(batches, func(b []byte, _ record.Header) error {
		start := len(out)
		var err error
		if out, err = record.Recompress(out, b, cfg.Compression, 0); err != nil {
			if errors.Is(err, record.ErrTooLarge) {
				return fmt.Errorf("%w: %w", ErrMessageTooLarge, err)
			}
			return err
		}
		if cfg.MaxMessageBytes > 0 && len(out)-start > int(cfg.MaxMessageBytes) {
			return fmt.Errorf("%w: %d bytes as %v", ErrMessageTooLarge, len(out)-start, cfg.Compression)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
