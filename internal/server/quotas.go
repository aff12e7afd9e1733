package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// QuotaConfig is the connection limits of the listeners of one socket
// server, as Kafka's ConnectionQuotas: the broker's listeners share one,
// the controller listeners another (Kafka's controller runs a socket
// server of its own, with the same limits and its own counts).
type QuotaConfig struct {
	// MaxConnections is max.connections: the connections open at once on
	// these listeners; negative means no limit, zero accepts none (but
	// on Protected). At the limit a listener stops accepting (new
	// connections wait in the kernel's backlog) until one closes, except
	// Protected.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: the connections open
	// at once from one IP address; negative means Integer.MAX_VALUE, zero
	// refuses every address without an override. A connection past it is
	// closed as soon as it is accepted.
	MaxConnectionsPerIP int
	// PerIPOverrides is max.connections.per.ip.overrides: host name or IP
	// address to its own limit. Host names are resolved by NewQuotas, each
	// of their addresses getting the limit.
	PerIPOverrides map[string]int
	// Protected is the inter-broker listener's name: when more than one
	// listener shares the quotas, it accepts past MaxConnections, and
	// each such connection closes the least recently active connection of
	// another listener (Kafka's protectedListener). Empty: none.
	Protected string
}

// Quotas counts the connections of the listeners that share it; safe for
// concurrent use. Give the same Quotas to each Server of a socket server.
type Quotas struct {
	protected string

	mu        sync.Mutex // guards the fields below
	maxConns  int        // max.connections; Update changes the limits
	perIP     int
	overrides map[netip.Addr]int
	total     int
	listeners map[string]int // listener name to connections, every listener that registered
	perAddr   map[netip.Addr]int
	conns     map[*tracked]struct{}
	changed   chan struct{} // closed and replaced when a connection closes
}

// tracked is one counted connection.
type tracked struct {
	listener string
	addr     netip.Addr
	hasAddr  bool
	active   atomic.Int64 // unix nanoseconds of the last request
	closing  atomic.Bool  // closed to make room on the protected listener
	close    func()
}

func (tc *tracked) touch() { tc.active.Store(time.Now().UnixNano()) }

// NewQuotas resolves the host names of cfg.PerIPOverrides (an error names
// one that does not resolve, as Kafka's InetAddress.getByName fails) and
// returns the quotas.
func NewQuotas(ctx context.Context, cfg QuotaConfig) (*Quotas, error) {
	q := &Quotas{
		protected: cfg.Protected,
		listeners: map[string]int{},
		perAddr:   map[netip.Addr]int{},
		conns:     map[*tracked]struct{}{},
		changed:   make(chan struct{}),
	}
	var err error
	q.maxConns, q.perIP, q.overrides, err = quotaLimits(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// Update applies new limits at once (max.connections,
// max.connections.per.ip and its overrides updated as dynamic broker
// configs, Kafka's ConnectionQuotas reconfiguration): a listener waiting
// at max.connections checks again; connections already open stay, even
// past a lowered limit, as in Kafka. cfg.Protected is ignored. On an
// error (a host name of the overrides that does not resolve) nothing
// changes.
func (q *Quotas) Update(ctx context.Context, cfg QuotaConfig) error {
	maxConns, perIP, overrides, err := quotaLimits(ctx, cfg)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.maxConns, q.perIP, q.overrides = maxConns, perIP, overrides
	q.wakeLocked()
	return nil
}

// quotaLimits normalises cfg's limits and resolves its overrides.
func quotaLimits(ctx context.Context, cfg QuotaConfig) (maxConns, perIP int, overrides map[netip.Addr]int, err error) {
	maxConns, perIP, overrides = cfg.MaxConnections, cfg.MaxConnectionsPerIP, map[netip.Addr]int{}
	if maxConns < 0 {
		maxConns = math.MaxInt32
	}
	if perIP < 0 {
		perIP = math.MaxInt32
	}
	for host, n := range cfg.PerIPOverrides {
		if a, err := netip.ParseAddr(host); err == nil {
			overrides[a.Unmap()] = n
			continue
		}
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("max.connections.per.ip.overrides: host %s: %w", host, err)
		}
		for _, a := range addrs {
			overrides[a.Unmap()] = n
		}
	}
	return maxConns, perIP, overrides, nil
}

// register makes listener known: the inter-broker listener is protected
// only while another listener shares the quotas.
func (q *Quotas) register(listener string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.listeners[listener]; !ok {
		q.listeners[listener] = 0
	}
}

func (q *Quotas) protectedLocked(listener string) bool {
	return listener == q.protected && len(q.listeners) > 1
}

func (q *Quotas) wakeLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// errTooManyFromAddr is admit's refusal (Kafka's TooManyConnectionsException).
type errTooManyFromAddr struct {
	addr netip.Addr
	max  int
}

func (e errTooManyFromAddr) Error() string {
	return fmt.Sprintf("address %s already has the configured maximum of %d connections", e.addr, e.max)
}

// admit counts a connection accepted on listener from remote, as Kafka's
// ConnectionQuotas.inc: it waits while max.connections are open (except on
// the protected listener), calling blocked once if it has to, then checks
// remote's address against its limit; past it the connection is not
// counted and an errTooManyFromAddr is returned, for the caller to close
// it. Accepted on the protected listener past max.connections, it closes
// the least recently active connection of another listener. closeConn
// closes the connection. It returns ctx's error when ctx ends first.
func (q *Quotas) admit(ctx context.Context, listener string, remote net.Addr, closeConn func(), blocked func(total int)) (*tracked, error) {
	tc := &tracked{listener: listener, close: closeConn}
	tc.touch()
	if ap, err := netip.ParseAddrPort(remote.String()); err == nil {
		tc.addr, tc.hasAddr = ap.Addr().Unmap(), true
	}
	q.mu.Lock()
	for first := true; !q.protectedLocked(listener) && q.total >= q.maxConns; first = false {
		ch, total := q.changed, q.total
		q.mu.Unlock()
		if first {
			blocked(total)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	if tc.hasAddr {
		n := q.perAddr[tc.addr]
		limit, ok := q.overrides[tc.addr]
		if !ok {
			limit = q.perIP
		}
		if n >= limit {
			return nil, errTooManyFromAddr{tc.addr, limit}
		}
		q.perAddr[tc.addr] = n + 1
	}
	q.total++
	q.listeners[listener]++
	q.conns[tc] = struct{}{}
	if q.total > q.maxConns && q.protectedLocked(listener) {
		var lru *tracked
		for o := range q.conns {
			if o.listener != listener && !o.closing.Load() && (lru == nil || o.active.Load() < lru.active.Load()) {
				lru = o
			}
		}
		if lru != nil {
			// Closing the socket ends its goroutine, which calls done.
			lru.closing.Store(true)
			lru.close()
		}
	}
	return tc, nil
}

// done uncounts a connection that admit counted.
func (q *Quotas) done(tc *tracked) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.conns[tc]; !ok {
		return
	}
	delete(q.conns, tc)
	q.total--
	q.listeners[tc.listener]--
	if tc.hasAddr {
		if n := q.perAddr[tc.addr]; n <= 1 {
			delete(q.perAddr, tc.addr)
		} else {
			q.perAddr[tc.addr] = n - 1
		}
	}
	q.wakeLocked()
}

// Connections returns the connections counted now: in all, and from addr.
func (q *Quotas) Connections(addr netip.Addr) (total, fromAddr int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total, q.perAddr[addr.Unmap()]
}
