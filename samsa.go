// Package samsa starts real Samsa nodes inside a Go program or test: a
// Kafka-compatible broker and controller in one process, listening on
// loopback, storing its data in Kafka's segment format.
//
//	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir()})
//	...
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
//	defer n.Close()
package samsa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/broker"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
)

// Config of a node started with Start.
type Config struct {
	// Dir is the data directory (log.dirs). Required unless Properties
	// sets log.dirs or log.dir.
	Dir string
	// Properties are Kafka server properties (node.id, listeners,
	// log.segment.bytes, ...), as in server.properties. When listeners is
	// not set, the node listens on 127.0.0.1 with free ports.
	Properties map[string]string
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// Node is a running Samsa node (broker and controller).
type Node struct {
	cfg       Config
	node      *config.Node
	logger    *slog.Logger
	logs      *storage.Manager
	broker    *broker.Broker
	listeners []*server.Server
	addr      string

	stop     chan struct{}
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	closed   bool
	closeErr error
}

// Start starts a node and returns once it accepts connections. The context
// bounds startup only.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	props := map[string]string{}
	for k, v := range cfg.Properties {
		props[k] = v
	}
	if _, ok := props["listeners"]; !ok {
		props["listeners"] = "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
	}
	if cfg.Dir != "" {
		props["log.dirs"] = cfg.Dir
	}
	nc, err := config.Parse(props)
	if err != nil {
		return nil, err
	}
	return StartNode(ctx, nc, cfg.Logger)
}

// StartNode starts a node from a parsed configuration (the samsa server
// command uses it).
func StartNode(ctx context.Context, nc *config.Node, logger *slog.Logger) (_ *Node, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{node: nc, logger: logger, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	n.logs, err = storage.OpenManager(storage.ManagerOptions{
		Dirs:      nc.LogDirs,
		NodeID:    nc.NodeID,
		ClusterID: nc.ClusterID,
		Default:   storage.Config{},
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	mlog, err := quorum.OpenLocal(n.logs)
	if err != nil {
		return nil, err
	}
	ctrl, err := controller.New(nc, mlog, n.logs.ClusterID(), logger.With("component", "controller"))
	if err != nil {
		return nil, err
	}
	n.broker, err = broker.New(broker.Config{Node: nc, Controller: ctrl, Logs: n.logs, Logger: logger})
	if err != nil {
		return nil, err
	}
	// Bind the listeners, then register the advertised endpoints with the
	// real ports.
	var endpoints []metadata.Endpoint
	for _, l := range nc.Listeners {
		// The controller listener is bound too, so its port is held; on
		// one node it answers the same APIs until the quorum lands.
		srv, err := server.Listen(server.Config{
			Name:            l.Name,
			Addr:            l.Addr(),
			Handler:         n.broker,
			Versions:        n.broker.Versions(),
			MaxRequestBytes: nc.SocketRequestMaxBytes,
			Logger:          logger,
		})
		if err != nil {
			return nil, err
		}
		n.listeners = append(n.listeners, srv)
		logger.Info("listening", "listener", l.Name, "addr", srv.Addr().String())
		if nc.IsControllerListener(l.Name) {
			continue
		}
		host := l.Host
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "localhost"
		}
		ep := metadata.Endpoint{Name: l.Name, Host: host, Port: int32(srv.Addr().Port)}
		for _, a := range nc.AdvertisedListeners {
			if a.Name == l.Name {
				ep.Host, ep.Port = a.Host, int32(a.Port)
			}
		}
		if n.addr == "" {
			n.addr = net.JoinHostPort(srv.Addr().IP.String(), strconv.Itoa(srv.Addr().Port))
			if l.Host != "" && l.Host != "0.0.0.0" && l.Host != "::" {
				n.addr = net.JoinHostPort(l.Host, strconv.Itoa(srv.Addr().Port))
			}
		}
		endpoints = append(endpoints, ep)
	}
	if err := ctrl.RegisterBroker(ctx, nc.NodeID, endpoints, nil); err != nil {
		return nil, fmt.Errorf("registering broker: %w", err)
	}
	n.wg.Add(1)
	go n.background()
	return n, nil
}

// Addr is the host:port of the node's first broker listener, for clients'
// bootstrap servers.
func (n *Node) Addr() string { return n.addr }

// ClusterID is the cluster id from meta.properties.
func (n *Node) ClusterID() string { return n.logs.ClusterID() }

// background runs periodic work: segment rolls by age and recovery-point
// checkpoints (log.flush.offset.checkpoint.interval.ms).
func (n *Node) background() {
	defer n.wg.Done()
	interval := time.Duration(n.node.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = time.Minute
	}
	roll := time.NewTicker(time.Second)
	defer roll.Stop()
	ckpt := time.NewTicker(interval)
	defer ckpt.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-roll.C:
			for _, p := range n.broker.Replicas().Partitions() {
				if err := p.Log().MaybeRoll(); err != nil {
					n.logger.Warn("rolling segment failed", "topic", p.Topic, "partition", p.Partition, "err", err)
				}
			}
		case <-ckpt.C:
			if err := n.logs.Checkpoint(); err != nil {
				n.logger.Warn("writing checkpoints failed", "err", err)
			}
		}
	}
}

// Close stops the node cleanly: listeners first, then the logs are flushed
// and the checkpoints written. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	close(n.stop)
	var errs []error
	if n.broker != nil {
		n.broker.Close()
	}
	for _, l := range n.listeners {
		errs = append(errs, l.Close())
	}
	n.wg.Wait()
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	n.closeErr = errors.Join(errs...)
	return n.closeErr
}
