package samsa_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// heldFS holds the creation of the log directories of topic "held" until
// release.
type heldFS struct {
	vfs.FS
	gate chan struct{}
	once sync.Once
}

func (h *heldFS) MkdirAll(path string, perm fs.FileMode) error {
	if strings.HasPrefix(filepath.Base(path), "held-") {
		<-h.gate
	}
	return h.FS.MkdirAll(path, perm)
}

func (h *heldFS) release() { h.once.Do(func() { close(h.gate) }) }

// samsa_replica_pending_log_creations counts the partitions assigned to
// the broker whose logs its creators have not made yet: it shows a new
// topic's partitions while their creation is held, and falls to 0 once
// the logs are made.
func TestPendingLogCreationsMetric(t *testing.T) {
	const parts = 5
	held := &heldFS{FS: vfs.Default, gate: make(chan struct{})}
	t.Cleanup(held.release) // before the node's Close (cleanups run last first)
	n := startConfig(t, samsa.Config{Dir: t.TempDir(), FS: held, HTTPListener: "127.0.0.1:0"})
	metric := "samsa_replica_pending_log_creations"
	if v := scrapeGauge(t, n.HTTPAddr(), metric); v != "0" {
		t.Fatalf("%s = %q at start, want 0", metric, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, n))
	if r, err := adm.CreateTopic(ctx, parts, 1, nil, "held"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	waitFor(t, time.Minute, metric+" = 5 while the logs are held", func() bool {
		return scrapeGauge(t, n.HTTPAddr(), metric) == "5"
	})
	held.release()
	waitFor(t, time.Minute, metric+" = 0 once the logs are made", func() bool {
		return scrapeGauge(t, n.HTTPAddr(), metric) == "0"
	})
}
