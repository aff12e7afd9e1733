package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// pipeListener is a net.Listener whose connections are net.Pipe ends, so
// that a Server runs inside a synctest bubble (real sockets would keep the
// bubble's clock from moving).
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial returns the client end of a new connection.
func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// closedAt waits until the server closes c and returns when that was:
// a read of the client end returns io.EOF then. Bytes the server wrote
// before are discarded.
func closedAt(t *testing.T, c net.Conn) time.Time {
	t.Helper()
	_, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("reading until the server closed: %v", err)
	}
	return time.Now()
}

// TestIdleConnectionsClose follows connections.max.idle.ms: a connection
// that keeps making requests stays open past the timeout; one that is
// silent, stops halfway through a request, or no longer reads its
// responses is closed once the timeout passed since its last read or
// write, and no earlier.
func TestIdleConnectionsClose(t *testing.T) {
	const idle = 10 * time.Minute
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		h := handlerFunc(func(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
			return kmsg.NewPtrApiVersionsResponse(), nil
		})
		s, err := Listen(Config{Name: "PLAINTEXT", Listener: ln, Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20, IdleTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)

		// Busy: a request every 9 minutes for 45 minutes, each answered.
		busy := ln.dial()
		for i := range 5 {
			time.Sleep(idle - time.Minute)
			if _, err := busy.Write(frame); err != nil {
				t.Fatalf("request %d after %v: %v", i, (idle-time.Minute)*time.Duration(i+1), err)
			}
			if _, err := wire.ReadFrame(busy, nil, 1<<20); err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
		}
		last := time.Now()
		if got := closedAt(t, busy).Sub(last); got != idle {
			t.Errorf("busy connection closed %v after its last response, want %v", got, idle)
		}

		// Silent from the start.
		start := time.Now()
		silent := ln.dial()
		if got := closedAt(t, silent).Sub(start); got != idle {
			t.Errorf("silent connection closed after %v, want %v", got, idle)
		}

		// Half a request, then nothing.
		half := ln.dial()
		time.Sleep(time.Minute)
		if _, err := half.Write(frame[:len(frame)/2]); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		if got := closedAt(t, half).Sub(sent); got != idle {
			t.Errorf("half-sent request: closed %v after its last bytes, want %v", got, idle)
		}

		// A request whose response is never read: net.Pipe has no buffer,
		// so the server's write blocks from its first byte.
		deaf := ln.dial()
		if _, err := deaf.Write(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if n := s.open(); n != 1 {
			t.Fatalf("a second before the timeout: %d connections open, want the one not reading", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := s.open(); n != 0 {
			t.Errorf("a client that does not read its response: %d connections open %v after its request, want 0", n, idle)
		}
		if _, err := deaf.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("reading after the server closed: %v, want io.EOF", err)
		}
	})
}

// open is the number of connections being served.
func (s *Server) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// TestIdleTimeoutOff: with no idle timeout a silent connection stays.
func TestIdleTimeoutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		h := handlerFunc(func(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
			return kmsg.NewPtrApiVersionsResponse(), nil
		})
		s, err := Listen(Config{Name: "PLAINTEXT", Listener: ln, Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		c := ln.dial()
		time.Sleep(24 * time.Hour)
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
			t.Fatalf("after a day of silence: %v", err)
		}
		if _, err := wire.ReadFrame(c, nil, 1<<20); err != nil {
			t.Fatalf("after a day of silence: %v", err)
		}
		c.Close()
		s.Close()
	})
}

// TestIdleDivertedUntouched: a connection taken over by Divert (the
// metadata quorum's raft connections) keeps no idle deadline of the
// Server's, before or after its first bytes.
func TestIdleDivertedUntouched(t *testing.T) {
	const idle = time.Minute
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		got := make(chan error, 1)
		divert := func(first [4]byte, _ *Conn) func(net.Conn) {
			if string(first[:]) != "RAFT" {
				return nil
			}
			return func(c net.Conn) {
				buf := make([]byte, 8)
				_, err := io.ReadFull(c, buf) // "RAFT" again, "ab", silence, "cd"
				got <- err
			}
		}
		s, err := Listen(Config{Name: "CONTROLLER", Listener: ln, Versions: versions(), MaxRequestBytes: 1 << 20, IdleTimeout: idle, Divert: divert})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := ln.dial()
		defer c.Close()
		if _, err := c.Write([]byte("RAFT")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()                                  // diverted
		if _, err := c.Write([]byte("ab")); err != nil { // read by the taker
			t.Fatal(err)
		}
		time.Sleep(10 * idle)
		if _, err := c.Write([]byte("cd")); err != nil {
			t.Fatalf("after %v of silence: %v", 10*idle, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the taker's read: %v", err)
		}
	})
}

// TestIdleNotWhileHandling: a request its handler works on for longer than
// the idle timeout (a JoinGroup waiting for its rebalance) keeps the
// connection open, and the idle timeout starts again at its response.
func TestIdleNotWhileHandling(t *testing.T) {
	const idle = time.Minute
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		h := handlerFunc(func(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
			time.Sleep(5 * idle)
			return kmsg.NewPtrApiVersionsResponse(), nil
		})
		s, err := Listen(Config{Name: "PLAINTEXT", Listener: ln, Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20, IdleTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := ln.dial()
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := wire.ReadFrame(c, nil, 1<<20); err != nil {
			t.Fatalf("response after %v of handling: %v", time.Since(start), err)
		}
		answered := time.Now()
		if got := closedAt(t, c).Sub(answered); got != idle {
			t.Errorf("closed %v after the response, want %v", got, idle)
		}
	})
}

// TestIdleSlowReader: a response the client reads slowly, taking far
// longer than the idle timeout but some bytes within each, is written
// whole, and the connection then stays open for the idle timeout; a
// client that stops reading halfway is cut off one to two idle timeouts
// after its last read. The response's write had a single deadline, idle
// after it began, and the reader's deadline ran while the write went on:
// a consumer reading a large Fetch response slower than its size per
// connections.max.idle.ms was cut off at every try.
func TestIdleSlowReader(t *testing.T) {
	const idle = time.Minute
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		h := handlerFunc(func(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
			resp := kmsg.NewPtrApiVersionsResponse()
			for i := range 1000 { // about 6 KB
				k := kmsg.NewApiVersionsResponseApiKey()
				k.ApiKey, k.MaxVersion = int16(i), int16(i)
				resp.ApiKeys = append(resp.ApiKeys, k)
			}
			return resp, nil
		})
		s, err := Listen(Config{Name: "PLAINTEXT", Listener: ln, Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20, IdleTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)

		// 100 bytes every 40 seconds: over 40 minutes for the response.
		slow := ln.dial()
		if _, err := slow.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(slow, size[:]); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		for got := 0; got < len(body); {
			time.Sleep(40 * time.Second)
			n, err := slow.Read(body[got:min(got+100, len(body))])
			if err != nil {
				t.Fatalf("after %d of %d bytes, %v into the response: %v", got, len(body), time.Since(start), err)
			}
			got += n
		}
		last := time.Now()
		if last.Sub(start) < 30*idle {
			t.Fatalf("the response took %v, want far longer than %v", last.Sub(start), idle)
		}
		if got := closedAt(t, slow).Sub(last); got != idle {
			t.Errorf("closed %v after the slow response was read, want %v", got, idle)
		}

		// 100 bytes every 40 seconds, then nothing.
		stalled := ln.dial()
		if _, err := stalled.Write(frame); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			time.Sleep(40 * time.Second)
			if _, err := stalled.Read(body[:100]); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(idle)
		synctest.Wait()
		if n := s.open(); n != 1 {
			t.Fatalf("%v after the last read of a response: %d connections open, want 1", idle, n)
		}
		time.Sleep(idle)
		synctest.Wait()
		if n := s.open(); n != 0 {
			t.Errorf("%v after the last read of a response: %d connections open, want 0", 2*idle, n)
		}
		if _, err := io.Copy(io.Discard, stalled); err != nil {
			t.Errorf("reading after the server closed: %v", err)
		}
	})
}
