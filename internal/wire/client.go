package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// Client is one Kafka-protocol connection from this node to another
// (follower fetches, broker-to-controller requests). Requests are sent one
// at a time; the caller sets each request's version. Safe for concurrent
// use (requests are serialized).
type Client struct {
	addr     string
	clientID string
	maxBytes int32
	dial     DialFunc

	mu   sync.Mutex // serializes requests and guards the fields below
	conn net.Conn
	rd   *bufio.Reader
	corr int32
	buf  []byte
	// recv is the frame buffer RequestReusing reads responses into,
	// kept for the next one (its capacity, the largest response so far,
	// at most maxBytes).
	recv []byte
}

// NewClient returns a client that dials addr lazily. maxResponseBytes
// bounds a response frame.
func NewClient(addr, clientID string, maxResponseBytes int32) *Client {
	return &Client{addr: addr, clientID: clientID, maxBytes: maxResponseBytes}
}

// DialFunc opens a connection to addr ready for Kafka requests: a plain
// TCP connection, or one secured with TLS and authenticated with SASL
// (auth.Dialer) for a secured listener.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// WithDial makes the client open its connections with dial (nil: plain
// TCP); call it before the first request. It returns c.
func (c *Client) WithDial(dial DialFunc) *Client {
	c.dial = dial
	return c
}

// Addr is the address the client dials.
func (c *Client) Addr() string { return c.addr }

// Request sends req and returns its response. Any error closes the
// connection; the next request dials again. The context bounds the whole
// exchange.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.request(ctx, req, false)
}

// RequestReusing is Request for a caller that is done with each response
// before its next request, as a follower appending what it fetched: the
// response is read into a buffer the client keeps and reuses, so its byte
// fields (a fetch's RecordBatches) are valid only until the next
// RequestReusing on c. The buffer is as large as the largest response so
// far (at most maxResponseBytes); a new zeroed buffer per response, grown
// by doubling, cost a follower about a fifth of its CPU.
func (c *Client) RequestReusing(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.request(ctx, req, true)
}

func (c *Client) request(ctx context.Context, req kmsg.Request, reuse bool) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && closedByPeer(c.conn, c.rd) {
		// The other broker closed it while it was idle
		// (connections.max.idle.ms): dial again rather than fail this
		// request on the dead connection.
		c.conn.Close()
		c.conn = nil
	}
	if c.conn == nil {
		dial := c.dial
		if dial == nil {
			dial = func(ctx context.Context, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
		}
		conn, err := dial(ctx, c.addr)
		if err != nil {
			return nil, err
		}
		c.conn, c.rd = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	c.conn.SetDeadline(deadline)
	// The callback may run after a failed exchange cleared c.conn: it
	// holds the connection of this exchange.
	conn := c.conn
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.corr++
	c.buf = kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID)).AppendRequest(c.buf[:0], req, c.corr)
	resp, err := c.exchange(req, reuse)
	if err != nil {
		c.conn.Close()
		c.conn = nil
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return resp, nil
}

func (c *Client) exchange(req kmsg.Request, reuse bool) (kmsg.Response, error) {
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, err
	}
	var buf []byte
	if reuse {
		buf = c.recv
	}
	body, err := ReadFrame(c.rd, buf, c.maxBytes)
	if err != nil {
		return nil, err
	}
	if reuse {
		c.recv = body[:0]
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return nil, fmt.Errorf("wire: correlation id %d, want %d", got, c.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, fmt.Errorf("%w: response header tags", ErrMalformed)
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s response: %v", ErrMalformed, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && closedByPeer(c.conn, c.rd) {
		// The other broker closed it while it was idle
		// (connections.max.idle.ms): dial again rather than fail this
		// request on the dead connection.
		c.conn.Close()
		c.conn = nil
	}
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// closedByPeer reports whether the idle connection conn can no longer
// carry a request: the peer closed it (a read would return end of file),
// reset it, or sent bytes nobody asked for. It peeks at the socket without
// blocking and without consuming anything; false when it cannot tell.
func closedByPeer(conn net.Conn, rd *bufio.Reader) bool {
	if rd.Buffered() > 0 {
		return true
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	if err := raw.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = n > 0 || (n == 0 && err == nil) || (err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR))
		return true // never wait for readiness
	}); err != nil {
		return true
	}
	return closed
}
