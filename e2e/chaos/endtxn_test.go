package chaos

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsahq/samsa/internal/proctest"
)

// endTxnFaults loses or delays the EndTxn responses of the transactional
// producers, under the schedule's seed: one in six is dropped with its
// connection (the transaction may have ended; the client cannot know and
// retries, or aborts and reloads its producer id), one in six arrives 1-5 s
// late. Safe for concurrent use.
type endTxnFaults struct {
	mu            sync.Mutex // guards the fields below
	rnd           *rand.Rand
	lost, delayed int
	byVersion     map[int16]int
	stopped       bool
}

func newEndTxnFaults(seed uint64) *endTxnFaults {
	return &endTxnFaults{rnd: rand.New(rand.NewPCG(seed, 4)), byVersion: map[int16]int{}}
}

// fault is the proxies' proctest.Proxy.SetResponseFault.
func (f *endTxnFaults) fault(key, version int16) proctest.ResponseFault {
	if key != int16(kmsg.EndTxn) {
		return proctest.ResponseFault{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byVersion[version]++
	if f.stopped {
		return proctest.ResponseFault{}
	}
	switch f.rnd.IntN(6) {
	case 0:
		f.lost++
		return proctest.ResponseFault{Drop: true}
	case 1:
		f.delayed++
		return proctest.ResponseFault{Delay: time.Duration(1000+f.rnd.IntN(4000)) * time.Millisecond}
	}
	return proctest.ResponseFault{}
}

// stop ends the faults.
func (f *endTxnFaults) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

// count adds the faults and the EndTxn requests by version to faults
// (endtxn-lost, endtxn-delayed, endtxn-v<N>).
func (f *endTxnFaults) count(faults map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	faults["endtxn-lost"] += f.lost
	faults["endtxn-delayed"] += f.delayed
	for v, n := range f.byVersion {
		faults["endtxn-v"+strconv.Itoa(int(v))] += n
	}
}

// dialer gives a kgo.Dialer that reaches each broker of c through a Kafka
// proxy of its own (loopback) whose EndTxn responses f fails.
func (f *endTxnFaults) dialer(t *testing.T, c *proctest.Cluster) func(ctx context.Context, network, addr string) (net.Conn, error) {
	via := map[string]string{}
	for _, n := range c.Nodes {
		if !n.Broker {
			continue
		}
		p := proctest.NewKafkaProxy(t, n.Addr())
		p.SetResponseFault(f.fault)
		via[n.Addr()] = p.Addr()
		if n.BrokerProxy != nil {
			via[n.BrokerProxy.Addr()] = p.Addr()
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := via[addr]; ok {
			addr = a
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// transactionsV1 caps EndTxn at v4: franz-go then runs transactions v1
// (no epoch bump at EndTxn) on a cluster at transaction.version 2.
func transactionsV1() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	return v
}
