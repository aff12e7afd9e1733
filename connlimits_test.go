package samsa_test

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/proctest"
	"github.com/samsahq/samsa/internal/testutil"
	"github.com/samsahq/samsa/internal/wire"
)

// TestAcceptBackoffLowFileLimit runs a samsa process, lowers its
// RLIMIT_NOFILE (prlimit(2)) to a few descriptors above what it has open
// and opens more connections than that: the accept loop backs off (5 ms
// doubling to 1 s) and logs once a second instead of per failure (a node
// with a low limit wrote 870,000 warnings, 130 MB, in 5 s); once the
// connections close, the node accepts again and serves a client.
func TestAcceptBackoffLowFileLimit(t *testing.T) {
	s, cl := startWithRecord(t)
	from := lowerFileLimit(t, s, 8)
	conns := dialMany(t, s.Addr, 40)
	// The backoff reaches its cap after 5+10+...+640 ms of failures.
	logs, err := s.WaitLog(regexp.MustCompile(`accept failed, backing off.*delay=1s`), from, 20*time.Second)
	if err != nil {
		t.Fatalf("%v:\n%s", err, tail(s.Logs(), 4000))
	}
	logs = logs[from:]
	if n := strings.Count(logs, "accept failed"); n == 0 || n > 4 || len(logs) > 16<<10 {
		t.Fatalf("%d accept warnings, %d bytes of logs while out of descriptors:\n%s", n, len(logs), tail(logs, 4000))
	}
	if !strings.Contains(logs, "too many open files") {
		t.Fatalf("no EMFILE in the warnings:\n%s", tail(logs, 4000))
	}
	for _, c := range conns {
		c.Close()
	}
	cl.Close()
	start := time.Now()
	checkServes(t, s)
	t.Logf("served %v after the connections closed; logs since the limit:\n%s", time.Since(start), tail(s.Logs()[from:], 3000))
}

// TestMaxConnectionsLowFileLimit: the same process, with max.connections
// below its descriptor limit, never runs out of descriptors: the listener
// stops accepting at the limit (logged once), no accept fails, and the
// node serves again once connections close.
func TestMaxConnectionsLowFileLimit(t *testing.T) {
	s, cl := startWithRecord(t, "max.connections=6")
	cl.Close() // its connections are counted until the node sees them close
	from := lowerFileLimit(t, s, 16)
	conns := dialMany(t, s.Addr, 40)
	if _, err := s.WaitLog(regexp.MustCompile(`max.connections reached`), from, 20*time.Second); err != nil {
		t.Fatalf("%v:\n%s", err, tail(s.Logs(), 4000))
	}
	for _, c := range conns {
		c.Close()
	}
	checkServes(t, s)
	// One line a second at most, with how many waits were not logged.
	logs := s.Logs()[from:]
	if strings.Contains(logs, "accept failed") || strings.Count(logs, "max.connections reached") > 3 {
		t.Fatalf("logs since the descriptor limit:\n%s", tail(logs, 4000))
	}
}

// startWithRecord starts a samsa process with overrides and produces
// "before" to topic fds; the client is still open.
func startWithRecord(t *testing.T, overrides ...string) (*proctest.Server, *kgo.Client) {
	t.Helper()
	s := proctest.Start(t, t.TempDir(), overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.DefaultProduceTopic("fds"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return s, cl
}

// lowerFileLimit sets s's RLIMIT_NOFILE (soft and hard) to spare
// descriptors above those it has open, and returns the length of its logs
// then.
func lowerFileLimit(t *testing.T, s *proctest.Server, spare int) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(s.Pid()) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(len(fds) + spare)
	if err := unix.Prlimit(s.Pid(), unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	return len(s.Logs())
}

// dialMany opens n connections to addr, closed at the test's end.
func dialMany(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, addr)
	}
	return conns
}

// checkServes produces "after" to topic fds with a new client and reads
// back "before" and "after".
func checkServes(t *testing.T, s *proctest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.DefaultProduceTopic("fds"), kgo.ConsumeTopics("fds"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after descriptors freed up: %v", err)
	}
	var got []string
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %v: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "before" || got[1] != "after" {
		t.Fatalf("consumed %v", got)
	}
}

// TestConnectionLimits: max.connections.per.ip closes a connection past
// the limit at once; max.connections stops the broker listener accepting
// until one closes (Kafka's acceptor blocks), while the controller
// listener, counted apart as Kafka's controller socket server is, still
// answers.
func TestConnectionLimits(t *testing.T) {
	t.Run("per ip", func(t *testing.T) {
		n := startNode(t, t.TempDir(), map[string]string{"max.connections.per.ip": "2"})
		a, b := dial(t, n.Addr()), dial(t, n.Addr())
		for _, c := range []net.Conn{a, b} {
			if err := apiVersions(c, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := apiVersions(dial(t, n.Addr()), 5*time.Second); err == nil {
			t.Fatal("third connection from 127.0.0.1 served with max.connections.per.ip=2")
		}
	})
	t.Run("max.connections", func(t *testing.T) {
		n := startNode(t, t.TempDir(), map[string]string{"max.connections": "2"})
		a, b := dial(t, n.Addr()), dial(t, n.Addr())
		for _, c := range []net.Conn{a, b} {
			if err := apiVersions(c, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		c := dial(t, n.Addr())
		if err := apiVersions(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("third connection with max.connections=2: %v, want no answer while two are open", err)
		}
		if err := apiVersions(dial(t, n.ListenerAddr("CONTROLLER")), 5*time.Second); err != nil {
			t.Fatalf("controller listener at the broker listeners' max.connections: %v", err)
		}
		a.Close()
		// The waiting connection's request, sent above, is answered now.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := wire.ReadFrame(c, nil, 1<<20); err != nil {
			t.Fatalf("waiting connection after one closed: %v", err)
		}
	})
}

// TestConnectionLimitsInterBroker: with two broker listeners, the first
// (which other brokers replicate from: Kafka's inter-broker listener)
// still accepts at max.connections and closes the least recently active
// connection of the other listener, as Kafka's ConnectionQuotas does.
func TestConnectionLimitsInterBroker(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"max.connections":                "2",
	})
	ext := n.ListenerAddr("EXTERNAL")
	a, b := dial(t, ext), dial(t, ext)
	for _, c := range []net.Conn{a, b} {
		if err := apiVersions(c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := apiVersions(b, 5*time.Second); err != nil { // b is now the most recently active
		t.Fatal(err)
	}
	if err := apiVersions(dial(t, n.ListenerAddr("PLAINTEXT")), 5*time.Second); err != nil {
		t.Fatalf("inter-broker listener at max.connections: %v", err)
	}
	expectClosed(t, a) // the least recently active
	if err := apiVersions(b, 5*time.Second); err != nil {
		t.Fatalf("most recently active EXTERNAL connection: %v", err)
	}
}

// apiVersions sends ApiVersions v0 on c and waits up to timeout for the
// answer.
func apiVersions(c net.Conn, timeout time.Duration) error {
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	_, err := wire.ReadFrame(c, nil, 1<<20)
	return err
}

// TestConnectionLimitsPerIPCountsPeers: max.connections.per.ip counts
// every connection from an address on the broker listeners, those of the
// other brokers included, as Kafka's ConnectionQuotas.inc does (one count
// per InetAddress over the socket server's listeners, no exemption for
// the inter-broker listener). On one host every node connects from
// 127.0.0.1, so a client of the leader of a partition that two followers
// replicate gets the limit less their two fetch connections (the 48 of 50
// seen in a review), and a client of a follower gets the whole limit. The
// node's own connections do not count: it reaches its own partitions
// without the network, and its controller connections go to the
// controller listeners, counted apart.
func TestConnectionLimitsPerIPCountsPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const limit = 6
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(), HTTPListeners: true,
		Properties: map[string]string{"max.connections.per.ip": strconv.Itoa(limit)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	createAssigned(t, ctx, cl, "peers", []int32{1, 2, 3}, nil) // led by 1, fetched by 2 and 3
	// Acknowledged by all three: both followers have fetched from node 1.
	testutil.WaitFor(t, 30*time.Second, "a record acknowledged by every replica", func() bool {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "peers", Value: []byte("v")}).FirstErr() == nil
	})
	cl.Close()
	conns := `kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}`
	testutil.WaitFor(t, 30*time.Second, "node 1's connections to be the two followers' and node 2's none", func() bool {
		return scrapeGauge(t, c.HTTPAddr(1), conns) == "2" && scrapeGauge(t, c.HTTPAddr(2), conns) == "0"
	})
	for _, tc := range []struct {
		node int32
		want int
	}{{1, limit - 2}, {2, limit}} {
		if got := admitted(t, c.Node(tc.node).Addr(), limit+1); got != tc.want {
			t.Errorf("node %d admitted %d connections from 127.0.0.1 at max.connections.per.ip=%d, want %d", tc.node, got, limit, tc.want)
		}
	}
}

// admitted opens connections to addr, at most up to, until one is not
// served, and returns how many were; it closes them all.
func admitted(t *testing.T, addr string, upTo int) int {
	t.Helper()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range upTo {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if apiVersions(c, 5*time.Second) != nil {
			return len(conns) - 1
		}
	}
	return len(conns)
}
