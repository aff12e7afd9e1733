package samsa_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa"
)

// lockedBuffer is a bytes.Buffer safe for the node's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

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
