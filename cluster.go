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
)

// ClusterConfig configures StartCluster.
type ClusterConfig struct {
	// Nodes is the number of nodes, each a broker and a controller (a
	// voter of the metadata quorum); default 3.
	Nodes int
	// Dir holds one data directory per node (node-<id>). Required.
	Dir string
	// Properties are Kafka server properties applied to every node
	// (default.replication.factor, min.insync.replicas, ...).
	Properties map[string]string
	// Logger receives every node's logs (with a node attribute); nil
	// discards them.
	Logger *slog.Logger
}

// Cluster is a set of nodes on loopback started by StartCluster. Nodes
// keep their ports across StopNode and StartNode, so clients' bootstrap
// addresses stay valid.
type Cluster struct {
	cfg ClusterConfig

	mu    sync.Mutex // guards nodes
	nodes map[int32]*Node
	ports map[int32][2]int // broker, controller port by node id
}

// StartCluster starts cfg.Nodes combined nodes (ids 1..N) forming one
// cluster with a raft metadata quorum, and returns once every node has
// registered with the active controller.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Dir == "" {
		return nil, errors.New("samsa: ClusterConfig.Dir is required")
	}
	c := &Cluster{cfg: cfg, nodes: map[int32]*Node{}, ports: map[int32][2]int{}}
	bound := map[int32]map[string]net.Listener{}
	var voters []string
	for id := int32(1); id <= int32(cfg.Nodes); id++ {
		b, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ctl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Close()
			return nil, err
		}
		bound[id] = map[string]net.Listener{"PLAINTEXT": b, "CONTROLLER": ctl}
		c.ports[id] = [2]int{b.Addr().(*net.TCPAddr).Port, ctl.Addr().(*net.TCPAddr).Port}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", id, c.ports[id][1]))
	}
	closeBound := func() {
		for _, m := range bound {
			for _, l := range m {
				l.Close()
			}
		}
	}
	clusterID := "samsa-" + strconv.Itoa(cfg.Nodes) + "-" + filepath.Base(cfg.Dir)
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
	results := make(chan result, cfg.Nodes)
	for id := int32(1); id <= int32(cfg.Nodes); id++ {
		nc, err := c.nodeConfig(id)
		if err != nil {
			closeBound()
			return nil, err
		}
		go func(id int32, nc *config.Node, l map[string]net.Listener) {
			n, err := startNode(ctx, nc, cfg.Logger, l)
			results <- result{id, n, err}
		}(id, nc, bound[id])
	}
	var errs []error
	for range cfg.Nodes {
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
	p := c.ports[id]
	props["node.id"] = strconv.Itoa(int(id))
	props["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", p[0], p[1])
	props["log.dirs"] = filepath.Join(c.cfg.Dir, "node-"+strconv.Itoa(int(id)))
	return config.Parse(props)
}

// Addrs are the broker addresses of every node (running or not), for
// clients' bootstrap servers.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := int32(1); id <= int32(len(c.ports)); id++ {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[id][0])))
	}
	return out
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

// StartNode starts node id again on its data directory and ports.
func (c *Cluster) StartNode(ctx context.Context, id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[id] != nil {
		return fmt.Errorf("samsa: node %d is running", id)
	}
	if _, ok := c.ports[id]; !ok {
		return fmt.Errorf("samsa: no node %d", id)
	}
	nc, err := c.nodeConfig(id)
	if err != nil {
		return err
	}
	n, err := startNode(ctx, nc, c.cfg.Logger, nil)
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
