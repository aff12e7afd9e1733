package replica

import (
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/record"
)

// ErrInvalidRecord: a record a topic's configs forbid, such as a record
// without a key on a compacted topic (Kafka's INVALID_RECORD); nothing of
// the request is written.
var ErrInvalidRecord = errors.New("replica: invalid record")

// requireKeys checks that every record of batch has a key, as a compacted
// topic (cleanup.policy with compact) demands. Errors: ErrInvalidRecord,
// or the record package's decoding errors.
func requireKeys(batch []byte) error {
	return record.Records(batch, func(r record.Record) error {
		if r.Key == nil {
			return fmt.Errorf("%w: compacted topic cannot accept a record without a key (offset delta %d)", ErrInvalidRecord, r.OffsetDelta)
		}
		return nil
	})
}
