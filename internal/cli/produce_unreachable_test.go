package cli

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestProduceUnreachable: samsa produce to a broker that cannot be reached
// says why and exits non-zero before reading its input, instead of
// printing "0 records acked" every second until --delivery-timeout (two
// minutes).
func TestProduceUnreachable(t *testing.T) {
	addr := closedPort(t)
	r := run(t, strings.NewReader("a\nb\n"), "produce", "t", "-b", addr)
	if r.err == nil || !strings.Contains(r.err.Error(), "connection refused") || !strings.Contains(r.err.Error(), addr) {
		t.Fatalf("err %v, want one naming %s and the refused connection\nstderr: %s", r.err, addr, r.stderr)
	}
	if strings.Contains(r.stderr, "records acked") {
		t.Fatalf("progress printed while no broker answers:\n%s", r.stderr)
	}
}

// stopOnRead stops node at its first Read (samsa produce reads standard
// input only after a broker answered), then gives one line.
type stopOnRead struct {
	once sync.Once
	stop func()
	done bool
}

func (s *stopOnRead) Read(p []byte) (int, error) {
	s.once.Do(s.stop)
	if s.done {
		return 0, io.EOF
	}
	s.done = true
	return copy(p, "lost\n"), nil
}

// TestProduceBrokerLost: a broker that goes away while records wait is
// reported ("cannot connect to broker") while they are retried, and the
// records fail at --delivery-timeout.
func TestProduceBrokerLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addr := n.Addr()
	in := &stopOnRead{stop: func() { n.Close() }}
	r := run(t, in, "produce", "t", "-b", addr, "--delivery-timeout", "3s")
	if r.err == nil || !strings.Contains(r.stderr, "cannot connect to broker") {
		t.Fatalf("err %v, stderr:\n%s", r.err, r.stderr)
	}
}
