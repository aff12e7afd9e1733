package samsa_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// lockedBuffer is safe for the node's goroutines.
type lockedBuffer = testutil.SyncBuffer

// TestSingleNodeRegistersLocally: a fresh single node (no
// controller.quorum.voters) registers with its own controller, never over
// the network, where it has no voter to dial and waited out a 5 s timeout
// in about one start of three when its controller became active during
// the first attempt.
func TestSingleNodeRegistersLocally(t *testing.T) {
	for i := range 6 {
		logs := new(lockedBuffer)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		cancel()
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		n.Close()
		if out := logs.String(); strings.Contains(out, "broker registration failed") {
			t.Fatalf("start %d: registration went over the network:\n%s", i, out)
		}
	}
}
