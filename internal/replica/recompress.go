package replica

import (
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/record"
)

// recompressBatch returns batch (one whole batch, checked) with its
// records recompressed into cfg.Compression (record.Recompress), for a
// topic whose compression.type names a codec. A batch whose records
// decompress past record.DefaultMaxDecompressedBytes, or that is larger
// than max.message.bytes once recompressed, gives ErrMessageTooLarge.
func recompressBatch(batch []byte, cfg *LogConfig) ([]byte, error) {
	out, err := record.Recompress(nil, batch, cfg.Compression, 0)
	if err != nil {
		if errors.Is(err, record.ErrTooLarge) {
			return nil, fmt.Errorf("%w: %w", ErrMessageTooLarge, err)
		}
		return nil, err
	}
	if cfg.MaxMessageBytes > 0 && len(out) > int(cfg.MaxMessageBytes) {
		return nil, fmt.Errorf("%w: %d bytes as %v", ErrMessageTooLarge, len(out), cfg.Compression)
	}
	return out, nil
}
