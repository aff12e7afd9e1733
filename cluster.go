package samsa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// ClusterConfig configures StartCluster.
type ClusterConfig struct {
	// Nodes is the number of combined nodes, each a broker and a
	// controller (a voter of the metadata quorum); default 3 when
	// Controllers and Brokers are 0.
	Nodes int
	// Controllers and Brokers, when either is set, start separate roles
	// instead (Nodes must be 0): Controllers controller-only nodes
	// (process.roles=controller, the voters, ids 1..Controllers; default
	// 3) and Brokers broker-only nodes (process.roles=broker, observers of
	// the quorum, ids Controllers+1..Controllers+Brokers; default 3).
	Controllers, Brokers int
	// Dir holds one data directory per node (node-<id>). Required.
	Dir string
	// Properties are Kafka server properties applied to every node
	// (default.replication.factor, min.insync.replicas, ...).
	Properties map[string]string
	// NodeProperties are properties of single nodes, by node id, over
	// Properties (broker.rack, ...); nil for none.
	NodeProperties map[int32]map[string]string
	// Logger receives every node's logs (with a node attribute); nil
	// discards them.
	Logger *slog.Logger
	// HTTPListeners gives every node an http.listener (/metrics,
	// /healthz, /readyz) on 127.0.0.1 with a free port, kept across
	// StopNode and StartNode (Node.HTTPAddr, Cluster.HTTPAddr).
	HTTPListeners bool
	// FS, when set, gives the filesystem of node id's log dirs at each
	// start (StartCluster, StartNode): tests inject disk faults and
	// crashes with internal/storage/vfs/errorfs. Nil, or a nil result,
	// is the operating system's.
	FS func(id int32) vfs.FS
}

// fs is the filesystem node id starts on.
func (cfg ClusterConfig) fs(id int32) vfs.FS {
	if cfg.FS == nil {
		return nil
	}
	return cfg.FS(id)
}

// Cluster is a set of nodes on loopback started by StartCluster. Nodes
// keep their ports across StopNode and StartNode, so clients' bootstrap
// addresses stay valid.
type Cluster struct {
	cfg ClusterConfig

	mu       sync.Mutex // guards nodes and starting
	nodes    map[int32]*Node
	starting map[int32]bool   // StartNode in progress, by node id
	ports    map[int32][2]int // broker, controller port by node id (0: none)
	http     map[int32]int    // http.listener port by node id (HTTPListeners)
	roles    map[int32]string // process.roles by node id
	ids      []int32          // every node id, increasing
}

// StartCluster starts cfg.Nodes combined nodes (ids 1..N), or
// cfg.Controllers controllers and cfg.Brokers brokers, forming one cluster
// with a raft metadata quorum of the controllers, and returns once every
// broker has registered with the active controller.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("samsa: ClusterConfig.Dir is required")
	}
	c := &Cluster{cfg: cfg, nodes: map[int32]*Node{}, starting: map[int32]bool{}, ports: map[int32][2]int{}, http: map[int32]int{}, roles: map[int32]string{}}
	switch {
	case cfg.Controllers > 0 || cfg.Brokers > 0:
		if cfg.Nodes > 0 {
			return nil, errors.New("samsa: ClusterConfig sets Nodes and Controllers or Brokers")
		}
		if c.cfg.Controllers <= 0 {
			c.cfg.Controllers = 3
		}
		if c.cfg.Brokers <= 0 {
			c.cfg.Brokers = 3
		}
		for i := range c.cfg.Controllers + c.cfg.Brokers {
			id := int32(i + 1)
			c.ids = append(c.ids, id)
			c.roles[id] = "controller"
			if i >= c.cfg.Controllers {
				c.roles[id] = "broker"
			}
		}
	default:
		if c.cfg.Nodes <= 0 {
			c.cfg.Nodes = 3
		}
		for i := range c.cfg.Nodes {
			c.ids = append(c.ids, int32(i+1))
			c.roles[int32(i+1)] = "broker,controller"
		}
	}
	bound := map[int32]map[string]net.Listener{}
	closeBound := func() {
		for _, m := range bound {
			for _, l := range m {
				l.Close()
			}
		}
	}
	listen := func(id int32, name string) (int, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeBound()
			return 0, err
		}
		if bound[id] == nil {
			bound[id] = map[string]net.Listener{}
		}
		bound[id][name] = l
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var voters []string
	for _, id := range c.ids {
		var p [2]int
		var err error
		if strings.Contains(c.roles[id], "broker") {
			if p[0], err = listen(id, "PLAINTEXT"); err != nil {
				return nil, err
			}
		}
		if strings.Contains(c.roles[id], "controller") {
			if p[1], err = listen(id, "CONTROLLER"); err != nil {
				return nil, err
			}
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, p[1]))
		}
		c.ports[id] = p
		if cfg.HTTPListeners {
			if c.http[id], err = listen(id, httpListener); err != nil {
				return nil, err
			}
		}
	}
	clusterID := "samsa-" + strconv.Itoa(len(c.ids)) + "-" + filepath.Base(cfg.Dir)
	if id, ok := cfg.Properties["cluster.id"]; ok {
		clusterID = id
	}
	c.cfg.Properties = map[string]string{}
	for k, v := range cfg.Properties {
		c.cfg.Properties[k] = v
	}
	c.cfg.Properties["controller.quorum.voters"] = strings.Join(voters, ",")
	c.cfg.Properties["cluster.id"] = clusterID

	type result struct {
		id  int32
		n   *Node
		err error
	}
	results := make(chan result, len(c.ids))
	for _, id := range c.ids {
		nc, err := c.nodeConfig(id)
		if err != nil {
			closeBound()
			return nil, err
		}
		go func(id int32, nc *config.Node, l map[string]net.Listener) {
			n, err := startNode(ctx, nc, cfg.Logger, l, cfg.fs(id))
			results <- result{id, n, err}
		}(id, nc, bound[id])
	}
	var errs []error
	for range c.ids {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", r.id, r.err))
			continue
		}
		c.nodes[r.id] = r.n
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) nodeConfig(id int32) (*config.Node, error) {
	props := map[string]string{}
	for k, v := range c.cfg.Properties {
		props[k] = v
	}
	for k, v := range c.cfg.NodeProperties[id] {
		props[k] = v
	}
	p := c.ports[id]
	props["node.id"] = strconv.Itoa(int(id))
	props["process.roles"] = c.roles[id]
	var listeners []string
	if p[0] != 0 {
		listeners = append(listeners, fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", p[0]))
	}
	if p[1] != 0 {
		listeners = append(listeners, fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p[1]))
	}
	props["listeners"] = strings.Join(listeners, ",")
	dir := filepath.Join(c.cfg.Dir, "node-"+strconv.Itoa(int(id)))
	props["log.dirs"] = dir
	props["http.listener"] = ""
	if hp := c.http[id]; hp != 0 {
		props["http.listener"] = fmt.Sprintf("127.0.0.1:%d", hp)
	}
	nc, err := config.Parse(props)
	if err != nil {
		return nil, err
	}
	nc.LogDirs = []string{dir} // one directory, commas and all (see Config.Dir)
	return nc, nil
}

// Addrs are the broker addresses of every broker (running or not), for
// clients' bootstrap servers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.ids {
		if p := c.ports[id][0]; p != 0 {
			out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		}
	}
	return out
}

// ControllerAddr is the controller listener address of node id (running
// or not), "" for a broker-only node: what kafka-metadata-quorum
// --bootstrap-controller and controller.quorum.voters name.
func (c *Cluster) ControllerAddr(id int32) string {
	if p := c.ports[id][1]; p != 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return ""
}

// HTTPAddr is the http.listener address of node id (running or not), ""
// without ClusterConfig.HTTPListeners.
func (c *Cluster) HTTPAddr(id int32) string {
	if p := c.http[id]; p != 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return ""
}

// Brokers are the ids of the nodes with the broker role.
func (c *Cluster) Brokers() []int32 { return c.withRole("broker") }

// Controllers are the ids of the nodes with the controller role (the
// voters of the metadata quorum).
func (c *Cluster) Controllers() []int32 { return c.withRole("controller") }

func (c *Cluster) withRole(role string) []int32 {
	var out []int32
	for _, id := range c.ids {
		if strings.Contains(c.roles[id], role) {
			out = append(out, id)
		}
	}
	return out
}

// ActiveController is the id of the running node whose controller is the
// active one (the leader of the metadata quorum that has applied its whole
// log), or -1.
func (c *Cluster) ActiveController() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.ids {
		if n := c.nodes[id]; n != nil && n.ctrl != nil && n.ctrl.Active() {
			return id
		}
	}
	return -1
}

// Node returns the running node with id, or nil.
func (c *Cluster) Node(id int32) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// StopNode stops node id cleanly (controlled shutdown first).
func (c *Cluster) StopNode(id int32) error {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		return fmt.Errorf("samsa: node %d is not running", id)
	}
	return n.Close()
}

// StartNode starts node id again on its data directory and ports. It
// returns once the node has started: a broker once it registered, which
// needs an active controller, so a stopped majority of the voters must be
// started concurrently (StartNode is safe for concurrent use; it held the
// cluster's lock while starting, and a second voter's start waited for
// the first's, which waited for a quorum).
func (c *Cluster) StartNode(ctx context.Context, id int32) error {
	c.mu.Lock()
	if c.nodes[id] != nil || c.starting[id] {
		c.mu.Unlock()
		return fmt.Errorf("samsa: node %d is running", id)
	}
	if _, ok := c.ports[id]; !ok {
		c.mu.Unlock()
		return fmt.Errorf("samsa: no node %d", id)
	}
	c.starting[id] = true
	c.mu.Unlock()
	nc, err := c.nodeConfig(id)
	var n *Node
	if err == nil {
		n, err = startNode(ctx, nc, c.cfg.Logger, nil, c.cfg.fs(id))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.starting, id)
	if err != nil {
		return err
	}
	c.nodes[id] = n
	return nil
}

// Close stops every node.
func (c *Cluster) Close() error {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = map[int32]*Node{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(nodes))
	var mu sync.Mutex
	for _, n := range nodes {
		n.noControlledShutdown.Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := n.Close()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
