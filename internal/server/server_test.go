package server

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// handlerFunc adapts a function to Handler.
type handlerFunc func(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error)

func (f handlerFunc) Handle(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
	return f(ctx, c, req)
}

func versions() *wire.Versions {
	v := wire.NewVersions()
	v.Add(kmsg.ApiVersions, 0, 3)
	v.Add(kmsg.Metadata, 0, 12)
	return v
}

func listen(t *testing.T, h Handler) *Server {
	t.Helper()
	s, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Handler: h, Versions: versions(), MaxRequestBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func send(t *testing.T, c net.Conn, req kmsg.Request, id int32) (kmsg.Response, error) {
	t.Helper()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, id)); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := wire.ReadFrame(c, nil, 1<<20)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	off := 4
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		off = 5
	}
	return resp, resp.ReadFrom(body[off:])
}

// TestPanicClosesOnlyThatConnection: a handler panic is recovered, closes
// the connection that caused it, and the server goes on serving others.
func TestPanicClosesOnlyThatConnection(t *testing.T) {
	s := listen(t, handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
		if req.Key == int16(kmsg.Metadata) {
			panic("boom")
		}
		r := req.Body.ResponseKind()
		return r, nil
	}))
	bad, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	if _, err := send(t, bad, m, 1); !errors.Is(err, io.EOF) {
		t.Fatalf("after panic: %v, want closed connection", err)
	}
	good, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	if _, err := send(t, good, av, 2); err != nil {
		t.Fatalf("other connection: %v", err)
	}
}

// TestResponsesInOrder: pipelined requests are answered in request order.
func TestResponsesInOrder(t *testing.T) {
	s := listen(t, handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
		return req.Body.ResponseKind(), nil
	}))
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	for id := int32(1); id <= 5; id++ {
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(0)
		out = append(out, kmsg.NewRequestFormatter().AppendRequest(nil, av, id)...)
	}
	c.Write(out)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for id := int32(1); id <= 5; id++ {
		body, err := wire.ReadFrame(c, nil, 1<<20)
		if err != nil {
			t.Fatalf("response %d: %v", id, err)
		}
		if got := int32(body[0])<<24 | int32(body[1])<<16 | int32(body[2])<<8 | int32(body[3]); got != id {
			t.Fatalf("response %d has correlation id %d", id, got)
		}
	}
}

// TestCloseStopsConnections: Close returns only after every connection
// goroutine ended, including ones blocked in a handler.
func TestCloseStopsConnections(t *testing.T) {
	entered := make(chan struct{})
	s, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Versions: versions(), MaxRequestBytes: 1 << 20,
		Handler: handlerFunc(func(ctx context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
			close(entered)
			<-ctx.Done()
			return nil, ctx.Err()
		})})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, av, 1))
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMaxRequestBytesDefault: a Config without MaxRequestBytes serves
// requests up to Kafka's default socket.request.max.bytes (it rejected
// every request before), and a negative one is refused.
func TestMaxRequestBytesDefault(t *testing.T) {
	s, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Versions: versions(),
		Handler: handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
			return req.Body.ResponseKind(), nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	if _, err := send(t, c, av, 1); err != nil {
		t.Fatalf("ApiVersions with the default MaxRequestBytes: %v", err)
	}

	if _, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Versions: versions(), MaxRequestBytes: -1}); err == nil {
		t.Fatal("Listen with MaxRequestBytes -1: no error")
	}
}
