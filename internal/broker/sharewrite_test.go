package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestShareWriteError: the code a ShareAcknowledge gets when its write of
// __share_group_state fails, as docs/groups.md says: a commit wait timing
// out (waitCommitted's RequestTimedOut, or a context deadline on the way)
// is REQUEST_TIMED_OUT, never UNKNOWN_SERVER_ERROR.
func TestShareWriteError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{kerr.RequestTimedOut, kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{fmt.Errorf("waiting for the high-watermark: %w", context.DeadlineExceeded), kerr.RequestTimedOut},
		{context.Canceled, kerr.RequestTimedOut},
		{errShareStateUnloaded, kerr.CoordinatorNotAvailable},
		{kerr.NotCoordinator, kerr.CoordinatorNotAvailable},
		{kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition},
		{storeError(errors.New("disk full")), kerr.KafkaStorageError},
		{kerr.FencedStateEpoch, kerr.FencedStateEpoch},
		{errors.New("something else"), kerr.UnknownServerError},
	} {
		var ke *kerr.Error
		if got := shareWriteError(tc.err); !errors.As(got, &ke) || ke != tc.want {
			t.Errorf("shareWriteError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
