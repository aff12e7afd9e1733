package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// failingListener fails its first n accepts with EMFILE, as a process out
// of file descriptors does, then blocks until closed.
type failingListener struct {
	mu     sync.Mutex
	n      int
	calls  []time.Time
	closed chan struct{}
	once   sync.Once
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	fail := len(l.calls) <= l.n
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *failingListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *failingListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
}

// recordHandler counts slog records by message.
type recordHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// TestAcceptBackoff: failed accepts (EMFILE) are retried after 5 ms,
// doubling up to 1 s, as net/http's Server.Serve, and logged at most once
// a second: 1,000 failures made 1,000 warnings before (870,000 in 5 s on a
// real process).
func TestAcceptBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 1000
		ln := &failingListener{n: failures, closed: make(chan struct{})}
		logs := &recordHandler{}
		start := time.Now()
		s, err := Listen(Config{Name: "PLAINTEXT", Listener: ln, Handler: handlerFunc(nil), Versions: versions(), Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		// Every failure has been retried once the bubble is idle past the
		// last backoff.
		for {
			synctest.Wait()
			ln.mu.Lock()
			n := len(ln.calls)
			ln.mu.Unlock()
			if n > failures {
				break
			}
			time.Sleep(maxAcceptDelay)
		}
		elapsed := time.Since(start)
		s.Close()

		ln.mu.Lock()
		calls := ln.calls
		ln.mu.Unlock()
		want := minAcceptDelay
		for i := 1; i < 12; i++ {
			if got := calls[i].Sub(calls[i-1]); got != want {
				t.Fatalf("retry %d after %v, want %v", i, got, want)
			}
			want = min(2*want, maxAcceptDelay)
		}
		// 5+10+...+640 ms, then 1 s per failure.
		if min := time.Duration(failures-9) * time.Second; elapsed < min {
			t.Fatalf("%d failures in %v, want at least %v", failures, elapsed, min)
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		warnings := 0
		for _, m := range logs.msgs {
			if m == "accept failed, backing off" {
				warnings++
			}
		}
		if limit := int(elapsed/logInterval) + 1; warnings == 0 || warnings > limit {
			t.Fatalf("%d warnings for %d failures in %v, want 1 to %d", warnings, failures, elapsed, limit)
		}
	})
}

// apiVersions sends an ApiVersions request on c and reads the answer.
func apiVersions(t *testing.T, c net.Conn) error {
	t.Helper()
	_, err := send(t, c, kmsg.NewPtrApiVersionsRequest(), 1)
	return err
}

func quotaServer(t *testing.T, q *Quotas, name string) *Server {
	t.Helper()
	h := handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
		return req.Body.ResponseKind(), nil
	})
	s, err := Listen(Config{Name: name, Addr: "127.0.0.1:0", Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20, Quotas: q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMaxConnectionsPerIP: past max.connections.per.ip (or its override
// for the address) a new connection is closed as soon as it is accepted,
// as Kafka's ConnectionQuotas does; one closing makes room again.
func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   QuotaConfig
		limit int
	}{
		{"per ip", QuotaConfig{MaxConnections: -1, MaxConnectionsPerIP: 2}, 2},
		{"override", QuotaConfig{MaxConnections: -1, MaxConnectionsPerIP: 2, PerIPOverrides: map[string]int{"127.0.0.1": 3}}, 3},
		{"override by name", QuotaConfig{MaxConnections: -1, MaxConnectionsPerIP: 0, PerIPOverrides: map[string]int{"localhost": 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := NewQuotas(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := quotaServer(t, q, "PLAINTEXT")
			var conns []net.Conn
			for i := range tc.limit {
				c := dial(t, s)
				if err := apiVersions(t, c); err != nil {
					t.Fatalf("connection %d within the limit: %v", i, err)
				}
				conns = append(conns, c)
			}
			if err := apiVersions(t, dial(t, s)); err == nil {
				t.Fatalf("connection %d past the limit of %d was served", tc.limit+1, tc.limit)
			}
			conns[0].Close()
			waitConnections(q, tc.limit-1)
			if err := apiVersions(t, dial(t, s)); err != nil {
				t.Fatalf("after one closed: %v", err)
			}
		})
	}
}

// waitConnections waits until q counts at most n connections.
func waitConnections(q *Quotas, n int) {
	for {
		q.mu.Lock()
		total, ch := q.total, q.changed
		q.mu.Unlock()
		if total <= n {
			return
		}
		<-ch
	}
}

// TestMaxConnections: at max.connections a listener stops accepting, as
// Kafka's acceptor blocks, and serves the waiting connection once another
// closes; the protected (inter-broker) listener still accepts, closing the
// least recently active connection of another listener.
func TestMaxConnections(t *testing.T) {
	q, err := NewQuotas(context.Background(), QuotaConfig{MaxConnections: 2, MaxConnectionsPerIP: -1, Protected: "INTERNAL"})
	if err != nil {
		t.Fatal(err)
	}
	ext := quotaServer(t, q, "EXTERNAL")
	internal := quotaServer(t, q, "INTERNAL")
	a, b := dial(t, ext), dial(t, ext)
	for _, c := range []net.Conn{a, b} {
		if err := apiVersions(t, c); err != nil {
			t.Fatal(err)
		}
	}
	// The third waits in the kernel's backlog: its request is not read.
	c := dial(t, ext)
	expectWaiting(t, c)
	if total, _ := q.Connections(netip.MustParseAddr("127.0.0.1")); total != 2 {
		t.Fatalf("%d connections counted, want 2", total)
	}
	b.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := wire.ReadFrame(c, nil, 1<<20); err != nil {
		t.Fatalf("waiting connection after one closed: %v", err)
	}
	// a is now the least recently active: the inter-broker listener's
	// connection closes it.
	if err := apiVersions(t, c); err != nil {
		t.Fatal(err)
	}
	i := dial(t, internal)
	if err := apiVersions(t, i); err != nil {
		t.Fatalf("inter-broker listener at max.connections: %v", err)
	}
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("least recently active connection: read %v, want it closed", err)
	}
	if err := apiVersions(t, c); err != nil {
		t.Fatalf("most recently active connection: %v", err)
	}
}

// TestQuotasUpdate raises max.connections on quotas in use (a dynamic
// broker config): the listener waiting at the old limit serves the
// waiting connection at once; a lowered limit closes nothing already open.
func TestQuotasUpdate(t *testing.T) {
	q, err := NewQuotas(context.Background(), QuotaConfig{MaxConnections: 1, MaxConnectionsPerIP: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := quotaServer(t, q, "PLAINTEXT")
	a := dial(t, s)
	if err := apiVersions(t, a); err != nil {
		t.Fatal(err)
	}
	b := dial(t, s)
	expectWaiting(t, b)
	if err := q.Update(context.Background(), QuotaConfig{MaxConnections: 2, MaxConnectionsPerIP: -1}); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := wire.ReadFrame(b, nil, 1<<20); err != nil {
		t.Fatalf("waiting connection after max.connections became 2: %v", err)
	}
	if err := q.Update(context.Background(), QuotaConfig{MaxConnections: 1, MaxConnectionsPerIP: -1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{a, b} {
		if err := apiVersions(t, c); err != nil {
			t.Fatalf("open connection after max.connections was lowered: %v", err)
		}
	}
}

// expectWaiting sends an ApiVersions request on c, a connection past
// max.connections, and checks it gets no answer within 200 ms.
func expectWaiting(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := wire.ReadFrame(c, nil, 1<<20); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection past max.connections answered: %v", err)
	}
}
