package proctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ClusterConfig configures StartCluster.
type ClusterConfig struct {
	// Nodes is the number of combined nodes (broker and controller, ids
	// 1..Nodes); default 3 when Controllers and Brokers are 0.
	Nodes int
	// Controllers and Brokers, when either is set, start separate roles
	// instead (Nodes must be 0): controller-only nodes (the voters, ids
	// 1..Controllers, default 3) and broker-only nodes (observers of the
	// quorum, the ids after them, default 3).
	Controllers, Brokers int
	// Dir holds node-<id> data directories; default a new temporary
	// directory removed at test cleanup. It must not contain a comma.
	Dir string
	// Overrides are key=value server properties given to every node
	// (replica.lag.time.max.ms=2000, ...).
	Overrides []string
	// Proxied routes every link between two nodes through a Proxy the
	// test controls: each node advertises its broker listener at a proxy
	// (so followers fetch through it) and reaches every other node's
	// controller listener through a proxy of its own (raft, heartbeats,
	// AlterPartition). Clients must then dial with Cluster.Dial, which
	// goes around the proxies.
	Proxied bool
	// StartTimeout bounds the start of every node; default 60 s.
	StartTimeout time.Duration
	// LogLevel is the servers' --log-level (debug, info, ...); default
	// $PROCTEST_LOG_LEVEL, else info.
	LogLevel string
	// Pprof gives every node `--pprof 127.0.0.1:<Node.PprofPort>` (Go's
	// /debug/pprof/ handlers, for profiling a run; see Node.Profile).
	Pprof bool
	// Command, when set, gives the program and leading arguments of a
	// node's process, run with "server ..." after them, instead of the
	// binary of Binary: the fault harness runs its build of the command
	// (e2e/chaos/faultfs) with a control socket per node. It is called at
	// every start of the node.
	Command func(n *Node) []string
}

// Cluster is a set of samsa server processes on loopback forming one
// cluster (one metadata quorum of every node). Nodes keep their ports and
// directories across Kill and Restart. Every process is killed at test
// cleanup.
type Cluster struct {
	t   testing.TB
	bin string
	cfg ClusterConfig
	// ID is the cluster.id every node was formatted with.
	ID string
	// Nodes by index id-1.
	Nodes []*Node
}

// Node is one member of a Cluster.
type Node struct {
	c  *Cluster
	ID int32
	// Broker and Controller tell the node's process.roles.
	Broker, Controller bool
	// Dir is the node's log.dirs.
	Dir string
	// BrokerPort and ControllerPort are the node's own listeners (0 for
	// a role it does not have).
	BrokerPort, ControllerPort int
	// PprofPort serves /debug/pprof/ on 127.0.0.1 (ClusterConfig.Pprof
	// only, else 0).
	PprofPort int
	// BrokerProxy (Proxied only) is where the other nodes, and clients
	// following metadata, reach this node's broker listener.
	BrokerProxy *Proxy
	// ControllerProxies (Proxied only) are the links to this node's
	// controller listener, by the id of the node that uses them.
	ControllerProxies map[int32]*Proxy

	args []string

	mu   sync.Mutex // guards srv and past
	srv  *Server
	past strings.Builder // logs of earlier processes
}

// StartCluster starts cfg.Nodes combined nodes and returns once every one
// has registered with the active controller (each logged its bootstrap
// address). Failures are fatal to the test, with the nodes' logs.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	switch {
	case cfg.Controllers > 0 || cfg.Brokers > 0:
		if cfg.Nodes > 0 {
			t.Fatal("proctest: ClusterConfig sets Nodes and Controllers or Brokers")
		}
		if cfg.Controllers <= 0 {
			cfg.Controllers = 3
		}
		if cfg.Brokers <= 0 {
			cfg.Brokers = 3
		}
	case cfg.Nodes <= 0:
		cfg.Nodes = 3
	}
	if cfg.Dir == "" {
		// Not t.TempDir: a subtest name may put a comma in it, and
		// log.dirs is a comma-separated list.
		dir, err := os.MkdirTemp("", "proctest-cluster-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		cfg.Dir = dir
	}
	if strings.Contains(cfg.Dir, ",") {
		t.Fatalf("proctest: cluster directory %q holds a comma (log.dirs separator)", cfg.Dir)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	c := &Cluster{t: t, cfg: cfg, ID: "proctest-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if cfg.Command == nil {
		c.bin = Binary(t)
	}
	t.Cleanup(c.cleanup)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.layout(); err != nil {
			t.Fatal(err)
		}
		if err = c.startAll(); err == nil {
			return c
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		// Another test took a port between our probe and the bind.
		c.killAll()
		for _, n := range c.Nodes {
			os.RemoveAll(n.Dir)
		}
	}
	t.Fatalf("starting cluster: %v", err)
	return nil
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// layout picks ports, makes the proxies and the command line of every node.
func (c *Cluster) layout() error {
	for _, n := range c.Nodes {
		if n.BrokerProxy != nil {
			n.BrokerProxy.Close()
		}
		for _, p := range n.ControllerProxies {
			p.Close()
		}
	}
	total := c.cfg.Nodes + c.cfg.Controllers + c.cfg.Brokers
	ports, err := freePorts(3 * total)
	if err != nil {
		return err
	}
	c.Nodes = nil
	for i := range total {
		n := &Node{c: c, ID: int32(i + 1), Dir: filepath.Join(c.cfg.Dir, "node-"+strconv.Itoa(i+1)),
			Broker: c.cfg.Nodes > 0 || i >= c.cfg.Controllers, Controller: c.cfg.Nodes > 0 || i < c.cfg.Controllers}
		if n.Broker {
			n.BrokerPort = ports[2*i]
		}
		if n.Controller {
			n.ControllerPort = ports[2*i+1]
		}
		if c.cfg.Pprof {
			n.PprofPort = ports[2*total+i]
		}
		if c.cfg.Proxied {
			if n.Broker {
				n.BrokerProxy = NewKafkaProxy(c.t, n.brokerAddr())
			}
			n.ControllerProxies = map[int32]*Proxy{}
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		var voters []string
		for _, v := range c.Nodes {
			if !v.Controller {
				continue
			}
			addr := "127.0.0.1:" + strconv.Itoa(v.ControllerPort)
			if c.cfg.Proxied && v != n {
				p := NewProxy(c.t, addr)
				v.ControllerProxies[n.ID] = p
				addr = p.Addr()
			}
			voters = append(voters, fmt.Sprintf("%d@%s", v.ID, addr))
		}
		var listeners, roles []string
		if n.Broker {
			listeners = append(listeners, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.BrokerPort))
			roles = append(roles, "broker")
		}
		if n.Controller {
			listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", n.ControllerPort))
			roles = append(roles, "controller")
		}
		props := []string{
			"node.id=" + strconv.Itoa(int(n.ID)),
			"process.roles=" + strings.Join(roles, ","),
			"cluster.id=" + c.ID,
			"log.dirs=" + n.Dir,
			"listeners=" + strings.Join(listeners, ","),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"http.listener=", // none: tests run in parallel
		}
		if n.BrokerProxy != nil {
			props = append(props, "advertised.listeners=PLAINTEXT://"+n.BrokerProxy.Addr())
		}
		props = append(props, c.cfg.Overrides...)
		level := c.cfg.LogLevel
		if level == "" {
			level = os.Getenv("PROCTEST_LOG_LEVEL")
		}
		n.args = []string{"server"}
		if level != "" {
			n.args = append(n.args, "--log-level", level)
		}
		if n.PprofPort != 0 {
			n.args = append(n.args, "--pprof", "127.0.0.1:"+strconv.Itoa(n.PprofPort))
		}
		for _, p := range props {
			n.args = append(n.args, "--override", p)
		}
	}
	return nil
}

// startAll starts every node at once: each waits for a quorum to register.
func (c *Cluster) startAll() error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.start()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *Node) brokerAddr() string { return "127.0.0.1:" + strconv.Itoa(n.BrokerPort) }

func (n *Node) start() error {
	bin, args := n.c.bin, n.args
	if n.c.cfg.Command != nil {
		cmd := n.c.cfg.Command(n)
		bin, args = cmd[0], append(cmd[1:len(cmd):len(cmd)], n.args...)
	}
	s, err := StartProcess(bin, n.Dir, n.c.cfg.StartTimeout, args...)
	n.mu.Lock()
	defer n.mu.Unlock()
	if s != nil {
		n.srv = s
	}
	if err != nil {
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	return nil
}

func (c *Cluster) killAll() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// cleanup kills every process; after a failure it shows the end of every
// node's log, and the whole logs go to $SAMSA_TEST_LOGS/<test>/node-<id>.log
// when that variable names a directory. With PROCTEST_QUIT_ON_FAILURE set,
// a failed test first sends SIGQUIT, so that the logs end with the
// goroutine stacks of every process.
func (c *Cluster) cleanup() {
	if c.t.Failed() && os.Getenv("PROCTEST_QUIT_ON_FAILURE") != "" {
		// Go's SIGQUIT handler writes every goroutine's stack to stderr.
		for _, n := range c.Nodes {
			if s := n.server(); s != nil && !s.Exited() {
				s.Resume()
				s.cmd.Process.Signal(syscall.SIGQUIT)
				timer := time.NewTimer(5 * time.Second)
				select {
				case <-s.done:
				case <-timer.C:
				}
				timer.Stop()
			}
		}
	}
	c.killAll()
	if !c.t.Failed() {
		return
	}
	keep := os.Getenv("SAMSA_TEST_LOGS")
	for _, n := range c.Nodes {
		logs := n.Logs()
		if keep != "" {
			dir := filepath.Join(keep, strings.ReplaceAll(c.t.Name(), "/", "_"))
			if err := os.MkdirAll(dir, 0o755); err == nil {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", n.ID)), []byte(logs), 0o644)
			}
		}
		lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		c.t.Logf("node %d, last log lines:\n%s", n.ID, strings.Join(lines, "\n"))
	}
}

// Node returns the node with id (1-based).
func (c *Cluster) Node(id int32) *Node { return c.Nodes[id-1] }

// Addrs are the broker nodes' own addresses, for clients' seed brokers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		if n.Broker {
			out = append(out, n.brokerAddr())
		}
	}
	return out
}

// Brokers are the ids of the nodes with the broker role.
func (c *Cluster) Brokers() []int32 {
	var out []int32
	for _, n := range c.Nodes {
		if n.Broker {
			out = append(out, n.ID)
		}
	}
	return out
}

// Controllers are the ids of the nodes with the controller role (the
// voters).
func (c *Cluster) Controllers() []int32 {
	var out []int32
	for _, n := range c.Nodes {
		if n.Controller {
			out = append(out, n.ID)
		}
	}
	return out
}

// Dial dials like net.Dialer but maps the nodes' broker proxies to their
// own listeners, so that a client of a Proxied cluster is never cut off
// (use it as kgo.Dialer). Other addresses are dialed as they are.
func (c *Cluster) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, n := range c.Nodes {
		if n.BrokerProxy != nil && n.BrokerProxy.Addr() == addr {
			addr = n.brokerAddr()
			break
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Isolate cuts every proxied link to and from node id: its broker proxy
// and the controller links both ways. The node still reaches the other
// brokers' listeners through their broker proxies (Partition cuts those
// too).
func (c *Cluster) Isolate(id int32) {
	c.links(id, (*Proxy).Cut)
}

// Heal undoes Isolate.
func (c *Cluster) Heal(id int32) {
	c.links(id, (*Proxy).Heal)
}

// CutLink cuts (cut true) or heals the links between nodes a and b in
// both directions, and only those: a's connections to b's broker listener
// and b's to a's (the broker proxies tell them by client.id), and the
// controller links between them. Cutting the links of A and C only is
// Jepsen's bridge: B still talks to both.
func (c *Cluster) CutLink(a, b int32, cut bool) {
	if !c.cfg.Proxied {
		c.t.Fatal("proctest: CutLink needs ClusterConfig.Proxied")
	}
	na, nb := c.Node(a), c.Node(b)
	for _, x := range [][2]*Node{{na, nb}, {nb, na}} {
		if p := x[0].BrokerProxy; p != nil {
			p.CutFrom(x[1].ID, cut)
		}
		if p := x[0].ControllerProxies[x[1].ID]; p != nil {
			if cut {
				p.Cut()
			} else {
				p.Heal()
			}
		}
	}
}

// Partition cuts every link between the nodes of side and the others
// (CutLink): a minority of one node with the leader of a partition, say.
func (c *Cluster) Partition(side ...int32) {
	for _, a := range side {
		for _, n := range c.Nodes {
			if !slices.Contains(side, n.ID) {
				c.CutLink(a, n.ID, true)
			}
		}
	}
}

// Slow makes every proxied link of the nodes ids slow (their broker
// proxy, and the controller links to and from them); the zero Slowness
// undoes it. A node's own fetches from others' brokers stay fast unless
// those are slow too.
func (c *Cluster) Slow(s Slowness, ids ...int32) {
	for _, id := range ids {
		c.links(id, func(p *Proxy) { p.SetSlow(s) })
	}
}

// Flaky makes every proxied link of the nodes ids close each connection
// with probability prob at every frame or chunk it forwards (0 stops it).
func (c *Cluster) Flaky(prob float64, ids ...int32) {
	for _, id := range ids {
		c.links(id, func(p *Proxy) { p.SetFlaky(prob) })
	}
}

// HealAll resets every proxy of the cluster (Proxy.Reset): no cut, no
// slow or flaky link.
func (c *Cluster) HealAll() {
	for _, n := range c.Nodes {
		if n.BrokerProxy != nil {
			n.BrokerProxy.Reset()
		}
		for _, p := range n.ControllerProxies {
			p.Reset()
		}
	}
}

func (c *Cluster) links(id int32, fn func(*Proxy)) {
	if !c.cfg.Proxied {
		c.t.Fatal("proctest: Isolate and Heal need ClusterConfig.Proxied")
	}
	n := c.Node(id)
	if n.BrokerProxy != nil {
		fn(n.BrokerProxy)
	}
	for _, p := range n.ControllerProxies {
		fn(p)
	}
	for _, o := range c.Nodes {
		if p := o.ControllerProxies[id]; p != nil {
			fn(p)
		}
	}
}

// Addr is the node's own broker address, "" for a controller-only node.
func (n *Node) Addr() string {
	if !n.Broker {
		return ""
	}
	return n.brokerAddr()
}

func (n *Node) server() *Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// CPU is the user plus system CPU time the node's current process used
// so far (/proc/PID/stat, in clock ticks of 10 ms), 0 when it is not
// running or /proc cannot tell.
func (n *Node) CPU() time.Duration {
	s := n.server()
	if s == nil || s.Exited() {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
	if err != nil {
		return 0
	}
	// utime and stime are fields 14 and 15 of the line, the 12th and
	// 13th after the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Running reports whether the node's process is running (or paused).
func (n *Node) Running() bool {
	s := n.server()
	return s != nil && !s.Exited()
}

// Kill sends SIGKILL and waits for the process to exit; a node not
// running is left alone.
func (n *Node) Kill() {
	if s := n.server(); s != nil {
		s.Kill()
	}
}

// Wait waits up to timeout for the node's process to exit and returns
// its exit status (-1 when a signal ended it); an error when it is still
// running after timeout or was never started.
func (n *Node) Wait(timeout time.Duration) (int, error) {
	s := n.server()
	if s == nil {
		return 0, fmt.Errorf("node %d: not started", n.ID)
	}
	return s.Wait(timeout)
}

// Pause sends SIGSTOP.
func (n *Node) Pause() {
	if s := n.server(); s != nil {
		s.Pause()
	}
}

// Resume sends SIGCONT.
func (n *Node) Resume() {
	if s := n.server(); s != nil {
		s.Resume()
	}
}

// Restart kills the node if it runs and starts it again on its directory
// and ports; it returns once the node registered. Failure is fatal to the
// test.
func (n *Node) Restart() {
	n.c.t.Helper()
	if err := n.TryRestart(); err != nil {
		n.c.t.Fatal(err)
	}
}

// TryRestart is Restart returning its error, for goroutines other than
// the test's (a nemesis), which must not call t.Fatal.
func (n *Node) TryRestart() error {
	n.Kill()
	n.mu.Lock()
	if n.srv != nil {
		n.past.WriteString(n.srv.Logs())
		n.past.WriteString("--- restarted ---\n")
		n.srv = nil
	}
	n.mu.Unlock()
	return n.start()
}

// Stop sends SIGTERM (a controlled shutdown) and waits up to timeout for
// the process to exit; it returns the exit error, or an error when it
// had to be killed. A node not running is left alone. Start starts it
// again.
func (n *Node) Stop(timeout time.Duration) error {
	s := n.server()
	if s == nil || s.Exited() {
		return nil
	}
	return s.Stop(timeout)
}

// Start starts a stopped or killed node again on its directory and ports
// and returns once it registered (its earlier logs are kept).
func (n *Node) Start() error {
	n.mu.Lock()
	if n.srv != nil {
		if !n.srv.Exited() {
			n.mu.Unlock()
			return fmt.Errorf("node %d: already running", n.ID)
		}
		n.past.WriteString(n.srv.Logs())
		n.past.WriteString("--- restarted ---\n")
		n.srv = nil
	}
	n.mu.Unlock()
	return n.start()
}

// Logs returns everything the node's processes wrote to stderr so far,
// earlier processes first.
func (n *Node) Logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.past.String()
	if n.srv != nil {
		out += n.srv.Logs()
	}
	return out
}

// Profile writes a CPU profile of the node's process over d to path
// (ClusterConfig.Pprof only), e.g. `go tool pprof -top path`. It blocks
// for d; a node not running or not profiled returns an error.
func (n *Node) Profile(ctx context.Context, d time.Duration, path string) error {
	if n.PprofPort == 0 {
		return fmt.Errorf("node %d: no pprof port (ClusterConfig.Pprof)", n.ID)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", n.PprofPort, max(1, int(d/time.Second)))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d: profile: %s", n.ID, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
