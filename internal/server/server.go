// Package server accepts Kafka connections on a listener and runs each
// connection's request loop: read a frame, decode it, hand it to the
// Handler, write the response. Responses go back in request order, as
// clients require; a connection reads ahead a few requests while the
// current one is handled. A request larger than socket.request.max.bytes or
// a malformed frame closes that connection only, and a panic in a handler
// is recovered, logged and closes the connection.
//
// A failed accept (out of file descriptors, EMFILE/ENFILE, and any other
// error) is retried after a backoff, 5 ms doubling to 1 s as net/http's
// Server.Serve, and logged at most once a second. Quotas enforce Kafka's
// max.connections and max.connections.per.ip across the listeners that
// share them.
package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/wire"
)

// Conn describes the client side of a connection, for handlers.
type Conn struct {
	Listener   string // listener name, e.g. PLAINTEXT
	RemoteAddr string
	// Principal is the Kafka principal of the connection, "User:NAME"
	// (KafkaPrincipal's type:name form): AnonymousPrincipal until a SASL
	// exchange or a client certificate names another. Written only by the
	// connection's own goroutine.
	Principal string

	// throttle is how long to mute the connection once the current
	// response is sent (Throttle).
	throttle time.Duration

	mu      sync.Mutex                  // guards onClose
	onClose []func(ctx context.Context) // run once the connection is closed
}

// OnClose registers f to run once the connection is closed, on the
// connection's goroutine after its last request was answered, with a
// context cancelled when the server stops (or after 10 s). Used to
// release what a connection holds (a share session's acquired records,
// KIP-932).
func (c *Conn) OnClose(f func(ctx context.Context)) {
	c.mu.Lock()
	c.onClose = append(c.onClose, f)
	c.mu.Unlock()
}

// closed runs the OnClose functions.
func (c *Conn) closed(ctx context.Context) {
	c.mu.Lock()
	fs := c.onClose
	c.onClose = nil
	c.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, f := range fs {
		f(ctx)
	}
}

// Throttle mutes the connection for d once the current response is sent:
// no further request is read or handled until d has passed, as Kafka's
// socket server mutes a throttled channel (KIP-219). Called by the
// handler, from the connection's goroutine; the longest d of a request
// applies.
func (c *Conn) Throttle(d time.Duration) {
	if d > c.throttle {
		c.throttle = d
	}
}

// AnonymousPrincipal is Kafka's principal of an unauthenticated
// connection (KafkaPrincipal.ANONYMOUS).
const AnonymousPrincipal = "User:ANONYMOUS"

// Handler answers requests. It is called from one goroutine per connection,
// for that connection's requests in order; it must be safe for concurrent
// use across connections.
type Handler interface {
	// Handle answers req. A nil response with a nil error sends nothing
	// (Produce with acks=0). An error closes the connection. req.Body is
	// nil when the key or version is unsupported.
	Handle(ctx context.Context, c *Conn, req *wire.Request) (kmsg.Response, error)
}

// Config of a Server.
type Config struct {
	Name string // listener name
	Addr string // host:port to bind
	// Listener, when set, is an already bound listener to serve instead
	// of binding Addr; the Server closes it.
	Listener net.Listener
	Handler  Handler
	Versions *wire.Versions
	// MaxRequestBytes is socket.request.max.bytes: the largest request
	// accepted, in bytes after the 4-byte size; a connection sending a
	// larger one is closed. Zero means DefaultMaxRequestBytes; negative
	// is invalid.
	MaxRequestBytes int32
	// IdleTimeout is connections.max.idle.ms: a Kafka connection on
	// which nothing was read or written for this long is closed (a
	// silent client, a request that stopped arriving halfway, or a
	// client that no longer reads its responses: one to two times this
	// after its last read). Handling a request does not count, nor does
	// writing a response the client keeps reading. Zero or negative
	// keeps idle connections open.
	IdleTimeout time.Duration
	// Divert, when set, sees the first four bytes of each connection
	// (on a SASL listener, of its first frame after authentication) and
	// the connection's principal, and may take the connection over (the
	// metadata quorum's raft connections share the controller listener):
	// a non-nil result is run on the connection's goroutine with those
	// bytes still unread.
	Divert func(first [4]byte, c *Conn) func(net.Conn)
	// ConnectionRate, when set, records each accepted connection against
	// the connection_creation_rate of its IP address (KIP-612) and
	// returns how long to throttle it: a connection over the rate is held
	// that long without being read, then closed, as Kafka's acceptor
	// delays closing throttled connections. ip has no port.
	ConnectionRate func(ip string) time.Duration
	// Quotas, when set, are the connection limits (max.connections,
	// max.connections.per.ip) this listener shares with the others of
	// its socket server; nil means no limits.
	Quotas *Quotas
	// TLS, when set, makes this an SSL or SASL_SSL listener: each
	// connection starts with a TLS handshake (bounded by IdleTimeout, else
	// 10 s), and Fetch responses are written through the buffered writer
	// (sendfile cannot encrypt).
	TLS *tls.Config
	// CertificatePrincipal maps a verified client certificate to the
	// connection's principal (ssl.client.auth, ssl.principal.mapping.rules);
	// an error closes the connection. Nil leaves AnonymousPrincipal.
	CertificatePrincipal certificatePrincipal
	// SASL, when set, makes this a SASL_PLAINTEXT or SASL_SSL listener: a
	// connection may send only ApiVersions, SaslHandshake and
	// SaslAuthenticate until it authenticates; anything else closes it.
	SASL *SASL
	// Requests, when set, times every request (queue, local, remote,
	// send) and counts the busy time of handlers and of the network side.
	Requests *metrics.Requests
	Logger   *slog.Logger // nil discards
}

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes,
// 100 MiB.
const DefaultMaxRequestBytes = 100 << 20

// Validate reports a Config that Listen refuses.
func (c *Config) Validate() error {
	if c.MaxRequestBytes < 0 {
		return fmt.Errorf("listener %s: MaxRequestBytes (socket.request.max.bytes) %d is negative", c.Name, c.MaxRequestBytes)
	}
	return nil
}

// Server is one listener and its connections.
type Server struct {
	cfg    Config
	ln     net.Listener
	logger *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen binds cfg.Addr and starts accepting connections. It returns
// cfg.Validate's error without binding.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listener %s: %w", cfg.Name, err)
		}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ln: ln, logger: logger.With("listener", cfg.Name), ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	if cfg.Quotas != nil {
		cfg.Quotas.register(cfg.Name)
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Name is the listener's name.
func (s *Server) Name() string { return s.cfg.Name }

// Addr is the bound address (with the real port when 0 was asked).
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// Connections is the number of open connections (Kafka's
// connection-count of the listener).
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// Accept backoff after a failed accept (EMFILE, ENFILE, ECONNABORTED, ...),
// as Go's net/http Server.Serve: 5 ms, doubling up to 1 s, back to none
// after an accept succeeds. Failures are logged at most once per
// logInterval, with how many there were.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
	logInterval    = time.Second
)

func (s *Server) accept() {
	defer s.wg.Done()
	var (
		delay    time.Duration
		failures int // since the last accept
		// Not reset by an accept: out of descriptors, accepts alternate
		// with failures as each connection takes the one freed.
		failLog, okLog, quotaLog, fullLog limiter
	)
	q := s.cfg.Quotas
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
			failures++
			if ok, skipped := failLog.allow(time.Now()); ok {
				s.logger.Warn("accept failed, backing off", "err", err, "failures", failures, "not_logged", skipped, "delay", delay)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if failures > 0 {
			if ok, skipped := okLog.allow(time.Now()); ok {
				s.logger.Info("accepting again", "failures", failures, "not_logged", skipped)
			}
			delay, failures = 0, 0
		}
		var tc *tracked
		if q != nil {
			// At max.connections this waits, holding c, as Kafka's
			// acceptor does; later connections wait in the backlog.
			tc, err = q.admit(s.ctx, s.cfg.Name, c.RemoteAddr(), func() { c.Close() }, func(total int) {
				if ok, skipped := fullLog.allow(time.Now()); ok {
					s.logger.Info("max.connections reached: not accepting until a connection closes", "connections", total, "not_logged", skipped)
				}
			})
			if err != nil {
				c.Close()
				if s.ctx.Err() != nil {
					return
				}
				if ok, skipped := quotaLog.allow(time.Now()); ok {
					s.logger.Info("rejected connection", "remote", c.RemoteAddr().String(), "reason", clip.String(err.Error()), "not_logged", skipped)
				}
				continue
			}
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			if tc != nil {
				q.done(tc)
			}
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c, tc)
	}
}

// limiter lets a repeated log line through at most once per logInterval;
// not safe for concurrent use.
type limiter struct {
	last    time.Time
	skipped int
}

// allow reports whether to log now, and how many were held back since the
// last one logged.
func (l *limiter) allow(now time.Time) (ok bool, skipped int) {
	if !l.last.IsZero() && now.Sub(l.last) < logInterval {
		l.skipped++
		return false, 0
	}
	skipped, l.last, l.skipped = l.skipped, now, 0
	return true, skipped
}

// readAhead is how many decoded requests wait while one is handled.
const readAhead = 4

// serve runs the connection nc; tc, when not nil, is its place in the
// quotas, given back when it closes.
func (s *Server) serve(nc net.Conn, tc *tracked) {
	defer s.wg.Done()
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		if tc != nil {
			s.cfg.Quotas.done(tc)
		}
	}()
	if s.cfg.ConnectionRate != nil {
		if ip, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
			if d := s.cfg.ConnectionRate(ip); d > 0 {
				s.logger.Debug("connection_creation_rate exceeded: closing after the throttle", "remote", nc.RemoteAddr().String(), "throttle", d)
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
				}
				return
			}
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	conn := &Conn{Listener: s.cfg.Name, RemoteAddr: nc.RemoteAddr().String(), Principal: AnonymousPrincipal}
	defer conn.closed(s.ctx)
	if s.cfg.TLS != nil {
		tc, err := s.startTLS(nc, conn)
		if err != nil {
			s.logger.Info("closing connection", "remote", conn.RemoteAddr, "err", err)
			return
		}
		nc = tc // closed by the deferred nc.Close: the raw one closes too
	}
	// connections.max.idle.ms: each read pushes the read deadline back
	// by the idle timeout, so a client that sends nothing for that long is
	// cut off. While a request is handled (a JoinGroup may wait for its
	// rebalance timeout) and its response written there is no read
	// deadline; the response's write has a deadline of its own, pushed
	// back whenever the client took some of its bytes, so a client that
	// stops reading is cut off one to two idle timeouts after its last
	// read, and one that reads slowly is not.
	var idle struct {
		sync.Mutex
		busy     bool // a request is handled or its response written
		diverted bool // the taker keeps its own deadlines
	}
	touch := func() {}
	setBusy := func(bool) {}
	writeDeadline := func() {}
	if s.cfg.IdleTimeout > 0 {
		touch = func() {
			idle.Lock()
			defer idle.Unlock()
			if !idle.busy && !idle.diverted {
				nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
			}
		}
		setBusy = func(busy bool) {
			idle.Lock()
			defer idle.Unlock()
			idle.busy = busy
			if busy {
				nc.SetReadDeadline(time.Time{})
			} else {
				nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
			}
		}
		writeDeadline = func() { nc.SetWriteDeadline(time.Now().Add(s.cfg.IdleTimeout)) }
	}
	touch()
	var rd io.Reader = nc
	if s.cfg.IdleTimeout > 0 {
		rd = touchReader{nc, touch}
	}
	br := bufio.NewReaderSize(rd, 64<<10)
	divert := func(h func(net.Conn)) {
		idle.Lock()
		idle.diverted = true
		idle.Unlock()
		nc.SetDeadline(time.Time{})
		h(&peekedConn{Conn: nc, r: br})
	}
	if s.cfg.Divert != nil && s.cfg.SASL == nil {
		first, err := br.Peek(4)
		if err != nil {
			return
		}
		if h := s.cfg.Divert([4]byte(first), conn); h != nil {
			divert(h)
			return
		}
	}
	log := s.logger.With("remote", conn.RemoteAddr)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var timing metrics.Timing
	if s.cfg.Requests != nil {
		ctx = metrics.WithTiming(ctx, &timing)
	}

	reqs := make(chan request, readAhead)
	// Produce frames are read into buffers that come back once their
	// request is answered: their records are copied to the log before the
	// handler returns, so nothing keeps them. Other requests keep their
	// frame (decoded bodies alias it, and a coordinator may hold on to
	// byte fields such as group member metadata).
	frames := make(chan []byte, pooledFrames)
	readerDone := make(chan struct{})
	// On a SASL listener a connection is diverted (raft on the controller
	// listener) only once authenticated: the reader looks at the first
	// bytes of each frame after authentication, which the client sends
	// only after it read the SaslAuthenticate response.
	var authenticated atomic.Bool
	// rawSASL: the next frames are raw SASL tokens (after a SaslHandshake
	// v0), set before the handshake's response is written.
	var rawSASL atomic.Bool
	var divertTo func(net.Conn) // set by the reader before it closes reqs
	go func() {
		defer close(readerDone)
		defer close(reqs)
		for {
			if s.cfg.Divert != nil && s.cfg.SASL != nil {
				first, err := br.Peek(4)
				if err == nil && authenticated.Load() {
					if h := s.cfg.Divert([4]byte(first), conn); h != nil {
						divertTo = h
						return
					}
				}
			}
			var buf []byte
			select {
			case buf = <-frames:
			default:
			}
			maxBytes := s.cfg.MaxRequestBytes
			if s.cfg.SASL != nil {
				// The limit is chosen once the frame's size has arrived: the
				// client sends its first request after authenticating only
				// once it has read the answer, written after authenticated
				// is set.
				if _, err := br.Peek(4); err == nil && !authenticated.Load() {
					maxBytes = min(maxBytes, s.cfg.SASL.maxReceiveBytes())
				}
			}
			frame, err := wire.ReadFrame(br, buf, maxBytes)
			if err != nil {
				switch {
				case errors.Is(err, os.ErrDeadlineExceeded):
					log.Debug("closing idle connection", "connections.max.idle.ms", s.cfg.IdleTimeout.Milliseconds())
				case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil:
					log.Info("closing connection", "err", err)
				}
				return
			}
			if rawSASL.Load() {
				select {
				case reqs <- request{raw: frame}:
				case <-ctx.Done():
					return
				}
				continue
			}
			parseStart := time.Now()
			req, err := wire.ParseRequest(frame, s.cfg.Versions)
			if err != nil {
				log.Info("closing connection", "err", err)
				return
			}
			r := request{Request: req, decoded: time.Now()}
			r.parse = r.decoded.Sub(parseStart)
			if req.Key == int16(kmsg.Produce) {
				r.frame = frame
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	// pending are the answered requests whose responses are not written
	// yet, oldest first: Deferred ones waiting for replication, and
	// those handled after them (see Deferred).
	var pending []answer
	defer func() {
		nc.Close()
		cancel()
		for _, a := range pending {
			if a.d != nil {
				<-a.d.done // the waits end with ctx
			}
		}
		<-readerDone
	}()

	var out []byte
	var auth saslState
	// send writes a's response; false means the connection closes.
	send := func(a answer) bool {
		req, resp, t, handled := a.r.Request, a.resp, &timing, a.handled
		if a.d != nil {
			resp, handled = a.d.Response, time.Now()
			if a.d.Finish != nil {
				resp = a.d.Finish(resp)
			}
			// Its own remote time: the connection's Timing belongs to
			// the request handled last.
			t = new(metrics.Timing)
			metrics.AddRemote(metrics.WithTiming(context.Background(), t), a.d.remote)
			if a.r.frame != nil && cap(a.r.frame) <= maxPooledFrame {
				select {
				case frames <- a.r.frame[:0]:
				default:
				}
			}
		}
		writeDeadline()
		if fw, ok := resp.(framedWriter); ok {
			// Responses that splice file regions write themselves.
			if err := fw.WriteFramed(nc, req.CorrelationID, writeDeadline); err != nil {
				log.Debug("writing response failed", "api", kmsg.NameForKey(req.Key), "err", err)
				return false
			}
			s.cfg.Requests.Observe(req.Key, t, a.r.parse, a.r.decoded, a.started, handled, time.Now())
			return true
		}
		out = wire.AppendResponse(out[:0], req.CorrelationID, resp)
		if _, err := (wire.ProgressWriter{Conn: nc, Progress: writeDeadline}).Write(out); err != nil {
			log.Debug("writing response failed", "api", kmsg.NameForKey(req.Key), "err", err)
			return false
		}
		s.cfg.Requests.Observe(req.Key, t, a.r.parse, a.r.decoded, a.started, handled, time.Now())
		if a.closeAfter {
			log.Debug("closing connection after SASL failure", "api", kmsg.NameForKey(req.Key))
			return false
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin large buffers on idle connections
		}
		return true
	}
	// sendReady writes the pending responses that are complete, oldest
	// first, or all of them, waiting, when all is set; false means the
	// connection closes.
	sendReady := func(all bool) bool {
		for len(pending) > 0 {
			if d := pending[0].d; d != nil {
				if all {
					<-d.done
				} else if !isDone(d) {
					return true
				}
			}
			a := pending[0]
			pending[0] = answer{}
			pending = pending[1:]
			if !send(a) {
				return false
			}
			if len(pending) == 0 {
				setBusy(false)
			}
		}
		return true
	}
	// next returns the next request, writing pending responses as they
	// complete; while some are pending, a Produce is handled at once and
	// any other request once they are all written. stop means the
	// connection closes.
	next := func() (r request, ok, stop bool) {
		for {
			if !sendReady(false) {
				return r, false, true
			}
			if len(pending) == 0 {
				r, ok = <-reqs
				return r, ok, false
			}
			head := pending[0].d.done // not done: sendReady stopped there
			if len(pending) >= maxDeferred {
				<-head
				continue
			}
			select {
			case <-head:
				continue
			case r, ok = <-reqs:
			}
			if ok && r.raw == nil && r.Key == int16(kmsg.Produce) {
				return r, true, false
			}
			return r, ok, !sendReady(true)
		}
	}
	for {
		if d := conn.throttle; d > 0 {
			conn.throttle = 0
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		r, ok, stop := next()
		if stop {
			return
		}
		if !ok {
			break // the reader stopped, or diverts the connection
		}
		if r.raw != nil {
			tok, err := s.saslRaw(conn, &auth, r.raw)
			if err != nil {
				return
			}
			rawSASL.Store(auth.raw)
			authenticated.Store(auth.authenticated && auth.ex == nil)
			out = binary.BigEndian.AppendUint32(out[:0], uint32(len(tok)))
			out = append(out, tok...)
			writeDeadline()
			if _, err := (wire.ProgressWriter{Conn: nc, Progress: writeDeadline}).Write(out); err != nil {
				return
			}
			continue
		}
		req := r.Request
		if tc != nil {
			tc.touch()
		}
		setBusy(true)
		timing.Reset()
		started := time.Now()
		var (
			resp       kmsg.Response
			answered   bool // by the SASL gate
			closeAfter bool
			err        error
		)
		if s.cfg.SASL != nil {
			resp, answered, closeAfter, err = s.sasl(conn, &auth, req)
			authenticated.Store(auth.authenticated && auth.ex == nil)
			rawSASL.Store(auth.raw && !closeAfter)
		}
		if !answered && err == nil {
			resp, err = s.handle(ctx, conn, req)
		}
		if f, ok := resp.(*wire.FetchResponse); ok && s.cfg.TLS != nil {
			f.Sendfile = false
		}
		handled := time.Now()
		d, deferred := resp.(*Deferred)
		if r.frame != nil && cap(r.frame) <= maxPooledFrame && !deferred {
			// Answered (acks=0 included) or failed: the frame is free.
			// A Deferred gives it back once written (its request is
			// used until then).
			select {
			case frames <- r.frame[:0]:
			default:
			}
		}
		if err != nil {
			log.Info("closing connection", "api", kmsg.NameForKey(req.Key), "version", req.Version, "err", err)
			return
		}
		if resp == nil {
			s.cfg.Requests.Observe(req.Key, &timing, r.parse, r.decoded, started, handled, handled)
			if len(pending) == 0 {
				setBusy(false)
			}
			continue
		}
		a := answer{r: r, started: started, handled: handled, resp: resp, d: d, closeAfter: closeAfter}
		if deferred || len(pending) > 0 {
			pending = append(pending, a) // written in order by next
			continue
		}
		if !send(a) {
			return
		}
		setBusy(false)
	}
	if !sendReady(true) {
		return
	}
	<-readerDone
	if divertTo != nil {
		divert(divertTo)
	}
}

// answer is a handled request whose response is to be written: resp,
// or, for a Deferred d, d's once complete.
type answer struct {
	r                request
	started, handled time.Time
	resp             kmsg.Response
	d                *Deferred
	closeAfter       bool
}

func isDone(d *Deferred) bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// request is a decoded request and, for Produce, the frame buffer to give
// back to the reader once it is answered.
type request struct {
	*wire.Request
	frame   []byte
	decoded time.Time     // when decoding finished
	parse   time.Duration // decoding time
	raw     []byte        // a raw SASL token (after SaslHandshake v0), Request nil
}

// A connection keeps at most pooledFrames frame buffers of at most
// maxPooledFrame bytes each for reuse; more in flight at once are
// allocated and left to the garbage collector.
const (
	pooledFrames   = 2
	maxPooledFrame = 16 << 20
)

// framedWriter is a response that writes its own frame (wire.FetchResponse),
// calling progress each time some bytes were written, as
// wire.ProgressWriter does.
type framedWriter interface {
	WriteFramed(c net.Conn, correlationID int32, progress func()) error
}

// touchReader calls touch after each read that got bytes: a request
// arriving slowly keeps its connection from being idle.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// peekedConn is a connection whose first bytes were buffered by a peek.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (s *Server) handle(ctx context.Context, c *Conn, req *wire.Request) (resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("panic in handler", "api", kmsg.NameForKey(req.Key), "version", req.Version, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return s.cfg.Handler.Handle(ctx, c, req)
}
