package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFencedForVersion(t *testing.T) {
	for _, tc := range []struct {
		code, version, from, want int16
	}{
		{kerr.ProducerFenced.Code, 1, 2, kerr.InvalidProducerEpoch.Code},
		{kerr.ProducerFenced.Code, 2, 2, kerr.ProducerFenced.Code},
		{kerr.ProducerFenced.Code, 3, 4, kerr.InvalidProducerEpoch.Code},
		{kerr.ProducerFenced.Code, 4, 4, kerr.ProducerFenced.Code},
		{kerr.InvalidProducerIDMapping.Code, 0, 2, kerr.InvalidProducerIDMapping.Code},
		{0, 0, 2, 0},
	} {
		if got := fencedForVersion(tc.code, tc.version, tc.from); got != tc.want {
			t.Errorf("fencedForVersion(%d, v%d, from v%d) = %d, want %d", tc.code, tc.version, tc.from, got, tc.want)
		}
	}
}
