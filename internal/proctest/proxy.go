package proctest

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target address,
// so that a test can cut, slow down or break the link between two
// processes. Safe for concurrent use.
//
// Cut is a blackhole, as a network partition is: connections stay open and
// nothing passes in either direction (bytes read meanwhile are held, not
// lost) until Heal, when everything held is delivered in order. New
// connections are accepted during a cut but reach the target only after
// Heal.
//
// A Kafka proxy (NewKafkaProxy) reads whole Kafka frames (a 4-byte
// big-endian size, then the request or response) instead of bytes, so it
// can also cut only the connections of one node (CutFrom: the node is told
// by the client.id of its requests, samsa-<role>-<node id>) and fail or
// delay the responses of one API (SetResponseFault).
type Proxy struct {
	target string
	ln     net.Listener
	kafka  bool

	mu      sync.Mutex // guards the fields below; cond signals their changes
	cond    *sync.Cond
	cut     bool
	cutFrom map[int32]bool // node ids whose connections are cut
	slow    Slowness
	flaky   float64 // probability that a frame (or chunk) closes its connection
	fault   func(apiKey, version int16) ResponseFault
	rnd     *rand.Rand
	closed  bool
	conns   map[net.Conn]struct{}

	wg sync.WaitGroup
}

// Slowness is what a slow link adds to every frame (or chunk of bytes) in
// each direction: Latency plus a uniform random part of Jitter, frames
// keeping their order; and a cap of BytesPerSecond (0: none).
type Slowness struct {
	Latency, Jitter time.Duration
	BytesPerSecond  int
}

// ResponseFault is what a Kafka proxy does with one response: Drop closes
// the connection instead of delivering it (the request may have taken
// effect, the client cannot know), Delay holds it (and the responses
// behind it on that connection) this long.
type ResponseFault struct {
	Drop  bool
	Delay time.Duration
}

// NewProxy listens on a free loopback port and forwards bytes to target;
// it is closed at test cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	return newProxy(t, target, false)
}

// NewKafkaProxy is NewProxy reading Kafka frames: CutFrom and
// SetResponseFault work on it. Bytes that are not Kafka frames (a frame
// size above 1 GiB or below 8 bytes) close the connection.
func NewKafkaProxy(t testing.TB, target string) *Proxy {
	return newProxy(t, target, true)
}

func newProxy(t testing.TB, target string, kafka bool) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, kafka: kafka, conns: map[net.Conn]struct{}{}, cutFrom: map[int32]bool{},
		rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut stops all traffic through the proxy until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal lets traffic through again, held bytes first. It does not undo
// CutFrom, SetSlow or SetFlaky (Reset does).
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// CutFrom cuts (cut true) or heals the connections of node id only, told
// by the client.id of their first request (a Kafka proxy only; on a byte
// proxy it does nothing). Connections of clients that are no node pass.
func (p *Proxy) CutFrom(id int32, cut bool) {
	p.mu.Lock()
	if cut {
		p.cutFrom[id] = true
	} else {
		delete(p.cutFrom, id)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// SetSlow makes the link slow (the zero Slowness: normal again). Frames
// already queued keep the time they were given.
func (p *Proxy) SetSlow(s Slowness) {
	p.mu.Lock()
	p.slow = s
	p.mu.Unlock()
}

// SetFlaky closes each connection, with probability prob at every frame
// (or chunk of bytes) it forwards, instead of forwarding it; 0 stops it.
func (p *Proxy) SetFlaky(prob float64) {
	p.mu.Lock()
	p.flaky = prob
	p.mu.Unlock()
}

// SetResponseFault calls fn with the API key and version of every request
// whose response is about to pass (a Kafka proxy only), and does what it
// answers; nil delivers every response. fn must be safe for concurrent
// use.
func (p *Proxy) SetResponseFault(fn func(apiKey, version int16) ResponseFault) {
	p.mu.Lock()
	p.fault = fn
	p.mu.Unlock()
}

// SetSeed seeds the proxy's random choices (jitter, flaky closes).
func (p *Proxy) SetSeed(seed uint64) {
	p.mu.Lock()
	p.rnd = rand.New(rand.NewPCG(seed, 7))
	p.mu.Unlock()
}

// Reset heals the proxy and undoes CutFrom, SetSlow, SetFlaky and
// SetResponseFault.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.cut = false
	clear(p.cutFrom)
	p.slow = Slowness{}
	p.flaky = 0
	p.fault = nil
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, or closes it and reports false when the proxy is
// closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
	p.mu.Unlock()
}

// link is one proxied connection.
type link struct {
	client, server net.Conn

	mu      sync.Mutex // guards the fields below
	origin  int32      // node id of the client; 0 none, -1 not known yet
	pending map[int32][2]int16
}

// blockedLocked reports whether l may not pass now; p.mu held.
func (p *Proxy) blockedLocked(l *link) bool {
	if p.cut {
		return true
	}
	if len(p.cutFrom) == 0 {
		return false
	}
	l.mu.Lock()
	o := l.origin
	l.mu.Unlock()
	return o > 0 && p.cutFrom[o] // o is known once the first request was read
}

// waitOpen waits while l is cut; it reports false once closed.
func (p *Proxy) waitOpen(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blockedLocked(l) && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client, origin: -1, pending: map[int32][2]int16{}}
	if !p.kafka {
		l.origin = 0
	}
	if !p.waitOpen(&link{}) { // a full Cut holds new connections
		p.untrack(client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(client)
		return
	}
	l.server = server
	if !p.track(server) {
		p.untrack(client)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(l, server, client, true) }()
	go func() { defer wg.Done(); p.copy(l, client, server, false) }()
	wg.Wait()
	p.untrack(client, server)
}

// item is a frame (or chunk) on its way, due at a time.
type item struct {
	data []byte
	due  time.Time
}

// copy forwards src to dst (requests when toServer), holding what it read
// while the link is cut and delaying it while slow; when either side ends
// it closes both so that the other copy ends too.
func (p *Proxy) copy(l *link, dst, src net.Conn, toServer bool) {
	q := make(chan item, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.write(l, dst, q)
	}()
	defer func() { close(q); <-done }()
	defer dst.Close()
	defer src.Close()
	var last time.Time
	for {
		data, err := p.read(src)
		if len(data) > 0 {
			due, ok := p.admit(l, data, toServer)
			if !ok {
				return
			}
			if due.Before(last) {
				due = last
			}
			last = due
			select {
			case q <- item{data, due}:
			case <-done:
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection
		}
	}
}

// read reads the next frame of a Kafka proxy, or the next chunk.
func (p *Proxy) read(src net.Conn) ([]byte, error) {
	if !p.kafka {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		return buf[:n], err
	}
	var size [4]byte
	if _, err := io.ReadFull(src, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<30 {
		return nil, io.ErrUnexpectedEOF
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	if _, err := io.ReadFull(src, buf[4:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// admit decides what happens to one frame: the time it is due, or false
// when the connection is to be closed instead.
func (p *Proxy) admit(l *link, data []byte, toServer bool) (time.Time, bool) {
	var delay time.Duration
	if p.kafka {
		if toServer {
			l.note(data)
		} else if key, ver, ok := l.answered(data); ok {
			p.mu.Lock()
			fn := p.fault
			p.mu.Unlock()
			if fn != nil {
				f := fn(key, ver)
				if f.Drop {
					return time.Time{}, false
				}
				delay = f.Delay
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flaky > 0 && p.rnd.Float64() < p.flaky {
		return time.Time{}, false
	}
	delay += p.slow.Latency
	if p.slow.Jitter > 0 {
		delay += time.Duration(p.rnd.Int64N(int64(p.slow.Jitter)))
	}
	return time.Now().Add(delay), true
}

// write delivers the items of q when due and the link is open, at most at
// the link's byte rate.
func (p *Proxy) write(l *link, dst net.Conn, q <-chan item) {
	failed := false
	for it := range q {
		if failed {
			continue // drain, so that copy does not block
		}
		if d := time.Until(it.due); d > 0 {
			time.Sleep(d)
		}
		if !p.waitOpen(l) {
			failed = true
			continue
		}
		p.mu.Lock()
		rate := p.slow.BytesPerSecond
		p.mu.Unlock()
		if rate > 0 {
			// The time the frame takes on a link of that rate.
			time.Sleep(time.Duration(len(it.data)) * time.Second / time.Duration(rate))
		}
		if _, err := dst.Write(it.data); err != nil {
			failed = true
			dst.Close()
			continue
		}
	}
}

// note parses a request frame (size, api key, version, correlation id,
// client.id) and remembers which API its response answers; the first
// request tells the origin node.
func (l *link) note(frame []byte) {
	if len(frame) < 14 {
		return
	}
	key := int16(binary.BigEndian.Uint16(frame[4:]))
	ver := int16(binary.BigEndian.Uint16(frame[6:]))
	corr := int32(binary.BigEndian.Uint32(frame[8:]))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) < 1<<16 {
		l.pending[corr] = [2]int16{key, ver}
	}
	if l.origin < 0 {
		l.origin = 0
		if n := int16(binary.BigEndian.Uint16(frame[12:])); n > 0 && 14+int(n) <= len(frame) {
			l.origin = nodeOf(string(frame[14 : 14+int(n)]))
		}
	}
}

// answered is the API key and version of the request a response frame
// answers.
func (l *link) answered(frame []byte) (int16, int16, bool) {
	if len(frame) < 8 {
		return 0, 0, false
	}
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	l.mu.Lock()
	defer l.mu.Unlock()
	kv, ok := l.pending[corr]
	delete(l.pending, corr)
	return kv[0], kv[1], ok
}

// nodeOf is the node id in a samsa node's client.id
// (samsa-<role>-<node id>), else 0.
func nodeOf(clientID string) int32 {
	if !strings.HasPrefix(clientID, "samsa-") {
		return 0
	}
	i := strings.LastIndexByte(clientID, '-')
	id, err := strconv.ParseInt(clientID[i+1:], 10, 32)
	if err != nil || id <= 0 {
		return 0
	}
	return int32(id)
}
