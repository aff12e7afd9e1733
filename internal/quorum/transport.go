package quorum

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsahq/samsa/internal/config"
)

// Transport carries raft messages between the voters. Implementations are
// safe for concurrent use.
type Transport interface {
	// Start begins passing messages addressed to this voter to receive
	// (called from the transport's goroutines; it does not block) and
	// reporting a voter that could not be reached to unreachable.
	Start(receive func(*raftpb.Message), unreachable func(voter int32)) error
	// Send queues m for the voter whose raft id is m.To. It never blocks:
	// a message for a voter that is down, or whose queue is full, is
	// dropped (raft retries).
	Send(m *raftpb.Message)
	// Close stops the transport and waits for its goroutines.
	Close() error
}

// Preamble opens every raft connection. Read as a Kafka request size it
// is 1397900884, above any socket.request.max.bytes, so a listener can
// tell raft connections from Kafka ones by their first four bytes.
var Preamble = [4]byte{'S', 'R', 'F', 'T'}

// Protocol constants; see the package doc, "Raft protocol".
const (
	protocolVersion = 0
	handshakeSize   = 4 + 1 + 4 + 4
	// MaxFrameBytes bounds one framed raft message: an append carries up
	// to 1 MiB of entries (MaxSizePerMsg) or one entry of up to
	// MaxEntryBytes.
	MaxFrameBytes = 32 << 20
)

// Transport errors.
var (
	// ErrHandshake: a connection did not open with a valid handshake for
	// this voter.
	ErrHandshake = errors.New("quorum: bad raft handshake")
	// ErrFrame: a frame length of zero or above MaxFrameBytes, a message
	// that does not decode, or one not from the handshake's voter to this
	// one.
	ErrFrame = errors.New("quorum: bad raft frame")
)

// appendHandshake appends the handshake of a connection from voter from
// to voter to.
func appendHandshake(dst []byte, from, to int32) []byte {
	dst = append(dst, Preamble[:]...)
	dst = append(dst, protocolVersion)
	dst = binary.BigEndian.AppendUint32(dst, uint32(from))
	return binary.BigEndian.AppendUint32(dst, uint32(to))
}

// parseHandshake decodes a handshake (handshakeSize bytes). Errors wrap
// ErrHandshake.
func parseHandshake(b []byte) (from, to int32, err error) {
	if len(b) != handshakeSize || [4]byte(b[:4]) != Preamble {
		return 0, 0, fmt.Errorf("%w: no preamble", ErrHandshake)
	}
	if b[4] != protocolVersion {
		return 0, 0, fmt.Errorf("%w: version %d", ErrHandshake, b[4])
	}
	return int32(binary.BigEndian.Uint32(b[5:])), int32(binary.BigEndian.Uint32(b[9:])), nil
}

// appendFrame appends m framed: uint32 length, then the message.
func appendFrame(dst []byte, m *raftpb.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return nil, err
	}
	n := len(dst) - start - 4
	if n > MaxFrameBytes {
		return nil, fmt.Errorf("%w: message of %d bytes", ErrFrame, n)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

// readFrame reads one framed message. Errors: io.EOF at a frame boundary,
// io.ErrUnexpectedEOF, ErrFrame (wrapped), read errors.
func readFrame(r io.Reader) (*raftpb.Message, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n == 0 || n > MaxFrameBytes {
		return nil, fmt.Errorf("%w: length %d", ErrFrame, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	return m, nil
}

// TCPConfig configures a TCPTransport. Zero durations mean the defaults.
type TCPConfig struct {
	// NodeID is this voter's node.id.
	NodeID int32
	// Voters are controller.quorum.voters; NodeID must be one.
	Voters []config.Voter
	// Listener, when set, is served by the transport (accepting raft
	// connections only) and closed by Close. Without it, connections reach
	// the transport through ServeConn.
	Listener net.Listener
	// DialTimeout bounds a connection attempt (default 1 s).
	DialTimeout time.Duration
	// Dial, when set, opens connections to peers (TLS and SASL of a
	// secured controller listener, see auth.Dialer); nil dials plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// WriteTimeout bounds writing queued messages to a peer (default 5 s);
	// past it the connection is dropped.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before redialing a peer
	// that failed, doubling from one to the other (defaults 50 ms, 1 s).
	// Messages for the peer are dropped meanwhile.
	MinBackoff, MaxBackoff time.Duration
	// QueueSize is the number of messages queued per peer (default 1024).
	QueueSize int
	// Logger nil discards.
	Logger *slog.Logger
}

// TCPTransport is the Transport over TCP: one outbound connection per
// peer, dialed on the first message and redialed with backoff, and the
// inbound connections of the peers. Safe for concurrent use.
type TCPTransport struct {
	cfg    TCPConfig
	logger *slog.Logger
	peers  map[uint64]*peer // by raft id
	voters map[int32]bool

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex // guards the fields below
	started     bool
	closed      bool
	conns       map[net.Conn]struct{} // inbound (ServeConn) and outbound
	receive     func(*raftpb.Message)
	unreachable func(int32)

	stats TransportStats
}

// TransportStats count a transport's traffic: bytes read from and
// written to raft connections (handshakes and frames) and messages
// received and sent. Kafka's raft-channel-metrics (incoming-byte-total,
// outgoing-byte-total, response-total, request-total) count the same
// traffic of its KRaft client, whose messages are requests and responses.
type TransportStats struct {
	BytesIn, BytesOut, MessagesIn, MessagesOut atomic.Int64
}

// Stats are the transport's traffic counters.
func (t *TCPTransport) Stats() *TransportStats { return &t.stats }

// countingReader adds the bytes read to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

type peer struct {
	id   int32
	addr string
	q    chan *raftpb.Message
}

// NewTCPTransport returns a transport for cfg; Start starts it. Errors:
// NodeID not among the voters.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &TCPTransport{
		cfg:    cfg,
		logger: logger,
		peers:  map[uint64]*peer{},
		voters: map[int32]bool{},
		conns:  map[net.Conn]struct{}{},
	}
	for _, v := range cfg.Voters {
		t.voters[v.ID] = true
		if v.ID != cfg.NodeID {
			t.peers[raftID(v.ID)] = &peer{id: v.ID, addr: v.Addr(), q: make(chan *raftpb.Message, cfg.QueueSize)}
		}
	}
	if !t.voters[cfg.NodeID] {
		return nil, fmt.Errorf("quorum: node %d is not among the voters %v", cfg.NodeID, cfg.Voters)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// Start implements Transport.
func (t *TCPTransport) Start(receive func(*raftpb.Message), unreachable func(int32)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if t.started {
		return errors.New("quorum: transport started twice")
	}
	t.started, t.receive, t.unreachable = true, receive, unreachable
	for _, p := range t.peers {
		t.wg.Add(1)
		go t.runPeer(p)
	}
	if t.cfg.Listener != nil {
		t.wg.Add(1)
		go t.accept()
	}
	return nil
}

// Send implements Transport.
func (t *TCPTransport) Send(m *raftpb.Message) {
	p := t.peers[m.GetTo()]
	if p == nil {
		return
	}
	select {
	case p.q <- m:
	default:
	}
}

// Close implements Transport: it closes the listener and every
// connection and waits for the goroutines (and ServeConn calls) to end.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.cancel()
	var err error
	if t.cfg.Listener != nil {
		err = t.cfg.Listener.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	t.wg.Wait()
	return err
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				t.logger.Error("raft listener stopped", "err", err)
			}
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.ServeConn(c)
		}()
	}
}

// track adds c to the connections Close closes; false once closed.
func (t *TCPTransport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.started {
		return false
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1) // Close waits for ServeConn too
	return true
}

func (t *TCPTransport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
	t.wg.Done()
}

// addOutbound adds a dialed connection to those Close closes (so that a
// write blocked on a stuck peer ends); false once closed.
func (t *TCPTransport) addOutbound(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCPTransport) removeOutbound(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

// ServeConn reads raft messages from c, an inbound connection from
// another voter starting with its handshake (Preamble first), until c
// fails, carries a message not from that voter (a read-index request
// it forwards excepted, see forwardedRead) or not for this one, or the
// transport closes; it then closes c. It runs on the
// caller's goroutine: a listener that also serves Kafka requests peeks at
// the first four bytes and, seeing Preamble, hands the connection (with
// those bytes still to be read) to ServeConn.
func (t *TCPTransport) ServeConn(c net.Conn) {
	if !t.track(c) {
		c.Close()
		return
	}
	defer t.untrack(c)
	logger := t.logger.With("remote", c.RemoteAddr().String())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hs [handshakeSize]byte
	if _, err := io.ReadFull(c, hs[:]); err != nil {
		logger.Debug("raft connection closed before its handshake", "err", err)
		return
	}
	from, to, err := parseHandshake(hs[:])
	if err == nil && (to != t.cfg.NodeID || from == to || !t.voters[from]) {
		err = fmt.Errorf("%w: from %d to %d at node %d", ErrHandshake, from, to, t.cfg.NodeID)
	}
	if err != nil {
		logger.Warn("refusing raft connection", "err", err)
		return
	}
	c.SetReadDeadline(time.Time{})
	logger = logger.With("peer", from)
	t.stats.BytesIn.Add(handshakeSize)
	r := bufio.NewReaderSize(countingReader{c, &t.stats.BytesIn}, 64<<10)
	for {
		m, err := readFrame(r)
		if err == nil && (m.GetFrom() != raftID(from) && !t.forwardedRead(m) || m.GetTo() != raftID(t.cfg.NodeID)) {
			err = fmt.Errorf("%w: message from node %d to node %d on the connection from node %d", ErrFrame, nodeID(m.GetFrom()), nodeID(m.GetTo()), from)
		}
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				logger.Warn("raft connection closed", "err", err)
			}
			return
		}
		t.stats.MessagesIn.Add(1)
		t.receive(m)
	}
}

// forwardedRead reports whether m is a read-index request another voter
// made (raft's MsgReadIndex, sent by a voter catching up after a restart,
// see Raft.WaitCaughtUp) that a voter it took for the leader forwards, as
// raft does, with its From unchanged: the requester's, not the
// connection's. The leader answers the requester directly.
func (t *TCPTransport) forwardedRead(m *raftpb.Message) bool {
	from := nodeID(m.GetFrom())
	return m.GetType() == raftpb.MsgReadIndex && from != t.cfg.NodeID && t.voters[from] && raftID(from) == m.GetFrom()
}

// runPeer sends the queued messages of p over one connection.
func (t *TCPTransport) runPeer(p *peer) {
	defer t.wg.Done()
	logger := t.logger.With("peer", p.id, "addr", p.addr)
	var (
		c       net.Conn
		w       *bufio.Writer
		buf     []byte
		backoff time.Duration
		retryAt time.Time
	)
	fail := func(err error) {
		if c != nil {
			t.removeOutbound(c)
			c, w = nil, nil
		}
		backoff = min(max(2*backoff, t.cfg.MinBackoff), t.cfg.MaxBackoff)
		retryAt = time.Now().Add(backoff)
		logger.Debug("raft peer unreachable", "err", err, "retry_in", backoff)
		t.unreachable(p.id)
	}
	defer func() {
		if c != nil {
			t.removeOutbound(c)
		}
	}()
	for {
		var m *raftpb.Message
		select {
		case <-t.ctx.Done():
			return
		case m = <-p.q:
		}
		if c == nil {
			if time.Now().Before(retryAt) {
				continue // the peer is down: drop
			}
			conn, err := t.dialPeer(p.addr)
			if err != nil {
				fail(err)
				continue
			}
			if !t.addOutbound(conn) {
				conn.Close()
				return
			}
			c, w = conn, bufio.NewWriterSize(conn, 64<<10)
			if _, err := w.Write(appendHandshake(nil, t.cfg.NodeID, p.id)); err != nil {
				fail(err)
				continue
			}
			t.stats.BytesOut.Add(handshakeSize)
		}
		c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		var err error
		for m != nil && err == nil {
			if buf, err = appendFrame(buf[:0], m); err != nil {
				logger.Error("dropping raft message", "type", m.GetType().String(), "err", err)
				err = nil
			} else if _, err = w.Write(buf); err == nil {
				t.stats.BytesOut.Add(int64(len(buf)))
				t.stats.MessagesOut.Add(1)
			}
			m = nil
			select {
			case m = <-p.q:
			default:
			}
		}
		if err == nil {
			err = w.Flush()
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
		if err != nil {
			fail(err)
			continue
		}
		backoff = 0
	}
}

// dialPeer connects to a peer's controller listener within DialTimeout.
func (t *TCPTransport) dialPeer(addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	if t.cfg.Dial != nil {
		return t.cfg.Dial(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
