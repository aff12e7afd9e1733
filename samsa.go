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
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/broker"
	"github.com/samsahq/samsa/internal/buildinfo"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/console"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/loglevel"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/storage/vfs"
	"github.com/samsahq/samsa/internal/wire"
)

// Config of a node started with Start.
type Config struct {
	// Dir is the data directory (log.dirs), taken as one directory even
	// when its name holds a comma (t.TempDir in a subtest named "a, b").
	// Required unless Properties sets log.dirs or log.dir.
	Dir string
	// Properties are Kafka server properties (node.id, listeners,
	// log.segment.bytes, ...), as in server.properties. When listeners is
	// not set, the node listens on 127.0.0.1 with free ports: PLAINTEXT
	// and CONTROLLER, or only the one of its process.roles.
	Properties map[string]string
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// HTTPListener is the host:port of the operations HTTP listener
	// (/metrics, /healthz, /readyz; see http.listener), "127.0.0.1:0"
	// for a free port. Empty, the default, starts none unless Properties
	// sets http.listener (unlike samsa server, whose default is
	// localhost:9644, so that nodes started in tests do not collide).
	HTTPListener string
	// FS is the filesystem of the log dirs (partition logs, indexes,
	// checkpoints); nil is the operating system's. Tests pass the
	// fault-injecting filesystems of internal/storage/vfs/errorfs.
	FS vfs.FS
}

// Node is a running Samsa node: a broker, a controller or both
// (process.roles).
type Node struct {
	node      *config.Node
	logger    *slog.Logger
	logs      *storage.Manager
	quorum    quorum.Log
	raft      *quorum.Raft         // a voter of controller.quorum.voters
	transport *quorum.TCPTransport // raft's, with raft
	local     *quorum.Local        // a single node without voters
	observer  *quorum.Observer     // a broker-only node
	ctrl      *controller.Controller
	broker    *broker.Broker
	listeners []*server.Server
	addr      string
	mlog      *storage.Log     // __cluster_metadata-0
	http      *metrics.Server  // http.listener, nil when none
	console   *console.Console // served on http, nil when none

	// catchingUp is set while the node waits to catch up with the
	// metadata quorum (an Observer's WaitCaughtUp, a voter's catchUp),
	// for /readyz's reason.
	catchingUp atomic.Bool
	// noControlledShutdown skips moving leadership away in Close (the
	// whole cluster is stopping).
	noControlledShutdown atomic.Bool
	// halted is closed once every log dir is offline (haltOnce); the
	// node then closes itself once startNode has returned (startDone).
	halted   chan struct{}
	haltOnce sync.Once
	haltErr  error // why, set before halted is closed
	// haltDone is closed when halt's goroutine, if any (haltStarted),
	// has closed the node; Close waits for it, and haltCancel stops its
	// wait for the controller's answer.
	haltDone    chan struct{}
	haltStarted atomic.Bool
	haltCancel  atomic.Pointer[context.CancelFunc]
	startDone   chan struct{}
	// late dispatches the listeners' requests; its ready is closed once
	// the broker serves clients.
	late *lateHandler
	// bgCancel stops serveWhenLoaded (bg), which starts the broker once
	// the data logs are loaded after an unclean shutdown; nil when they
	// were loaded at start.
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	closeMu  sync.Mutex
	closed   bool
	closeErr error
}

// Halted is closed once an I/O error has taken every log dir of the node
// offline (a failed write, fsync, read, roll or checkpoint: see
// docs/reliability.md), or an error stopped its metadata quorum voter
// (the metadata log could not be written, a full disk included). Kafka
// halts the process at this point; the node closes itself (without a
// controlled shutdown: its heartbeat already had the controller move its
// leaderships), and the samsa command exits with status 1. HaltError
// says why. Start it again once the disk is healthy.
func (n *Node) Halted() <-chan struct{} { return n.halted }

// HaltError is why the node halted once Halted is closed, nil before.
func (n *Node) HaltError() error {
	select {
	case <-n.halted:
		return n.haltErr
	default:
		return nil
	}
}

// halt stops a node whose last log dir went offline or whose metadata
// quorum voter stopped (why), as Kafka halts the process
// (ReplicaManager.handleLogDirFailure, the controller's fatal fault
// handler): it closes Halted and then the node, without a controlled
// shutdown (the controller moved its leaderships when its heartbeat
// reported the dir). It is called from the goroutine that met the error,
// maybe with a log's lock held, so the node is closed in a goroutine of
// its own, once startNode returned.
func (n *Node) halt(why error) {
	n.logger.Error("the node halts (closes)", "err", why)
	n.haltErr = why
	close(n.halted)
	n.noControlledShutdown.Store(true)
	// A Close from elsewhere cuts the report short and waits for this
	// goroutine (haltDone).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	n.haltCancel.Store(&cancel)
	n.haltStarted.Store(true)
	go func() {
		defer close(n.haltDone)
		defer cancel()
		<-n.startDone
		if n.broker != nil && n.node.HasRole("broker") {
			// Kafka halts at once and the controller moves the
			// leaderships when the broker's session expires; reporting
			// the dir first moves them now.
			if err := n.broker.ReportOfflineDirs(ctx); err != nil {
				n.logger.Warn("reporting the offline log dirs to the controller failed: its session expiry will move the leaderships", "err", err)
			}
		}
		n.close()
	}()
}

// Start starts a node and returns once it accepts connections. The context
// bounds startup only. After an unclean shutdown it returns once the
// metadata quorum and controller run, before the data logs are recovered:
// the node serves clients (Serving) once they are, requests waiting until
// then.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	props := map[string]string{}
	for k, v := range cfg.Properties {
		props[k] = v
	}
	if _, ok := props["listeners"]; !ok {
		switch strings.ReplaceAll(props["process.roles"], " ", "") {
		case "broker":
			props["listeners"] = "PLAINTEXT://127.0.0.1:0"
		case "controller":
			props["listeners"] = "CONTROLLER://127.0.0.1:0"
		default:
			props["listeners"] = "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
		}
	}
	if cfg.Dir != "" {
		props["log.dirs"] = cfg.Dir
	}
	if cfg.HTTPListener != "" {
		props["http.listener"] = cfg.HTTPListener
	} else if _, ok := props["http.listener"]; !ok {
		props["http.listener"] = ""
	}
	nc, err := config.Parse(props)
	if err != nil {
		return nil, err
	}
	if cfg.Dir != "" {
		// Not split at commas as log.dirs is: a subtest's temporary
		// directory once became two dirs, one relative to the working
		// directory, and its segments were committed.
		nc.LogDirs = []string{cfg.Dir}
	}
	return startNode(ctx, nc, cfg.Logger, nil, cfg.FS)
}

// StartProperties starts a node from Kafka server properties as `samsa
// server` does: unlike Start, nothing is added to them, so unset
// properties keep their defaults (listeners
// PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093, log.dir
// ./samsa-data; see docs/configuration.md). An unknown property or an
// invalid value is an error. logger nil discards the node's logs.
func StartProperties(ctx context.Context, props map[string]string, logger *slog.Logger) (*Node, error) {
	return StartPropertiesFS(ctx, props, logger, nil)
}

// StartPropertiesFS is StartProperties with the log dirs on fsys (nil is
// the operating system's filesystem), as Config.FS: the fault harness's
// build of the samsa command (e2e/chaos/faultfs) runs the server on a
// fault-injecting filesystem.
func StartPropertiesFS(ctx context.Context, props map[string]string, logger *slog.Logger, fsys vfs.FS) (*Node, error) {
	nc, err := config.Parse(props)
	if err != nil {
		return nil, err
	}
	return startNode(ctx, nc, logger, nil, fsys)
}

// lateHandler lets listeners bind before the broker exists. Requests on
// client (non-controller) listeners wait until the broker serves: it has
// registered and its metadata image has caught up with its registration
// and holds the cluster's bootstrap records (broker.Start), so that a
// restarted node answers no client from a stale image, nor a new one
// without the finalized features it was formatted with.
type lateHandler struct {
	b     atomic.Pointer[broker.Broker]
	ctrl  atomic.Pointer[controller.Controller] // for SCRAM credentials
	node  *config.Node
	ready chan struct{} // closed once the broker serves clients
}

// raftAllowed reports whether c may carry the metadata quorum's raft
// messages: Kafka's ControllerApis authorize Vote, BeginQuorumEpoch,
// EndQuorumEpoch and FetchSnapshot with CLUSTER_ACTION on the cluster.
// Without an authorizer everyone may; with one, super.users may always
// (the ACLs live in the metadata log the quorum replicates, so before the
// broker runs only they are known, as Kafka's StandardAuthorizer allows
// only super users before its initial load), others by their ACLs.
func (h *lateHandler) raftAllowed(c *server.Conn) bool {
	if h.node.AuthorizerClassName == "" || slices.Contains(h.node.SuperUsers, c.Principal) {
		return true
	}
	b := h.b.Load()
	return b != nil && b.AuthorizedClusterAction(c)
}

func (h *lateHandler) Handle(ctx context.Context, c *server.Conn, req *wire.Request) (kmsg.Response, error) {
	if !h.node.IsControllerListener(c.Listener) {
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, errors.New("node starting")
		}
	}
	b := h.b.Load()
	if b == nil {
		return nil, errors.New("node starting")
	}
	return b.Handle(ctx, c, req)
}

// httpListener is the key of a bound http.listener in startNode's bound.
const httpListener = "http.listener"

// connectionThrottle is the broker's connection_creation_rate throttle,
// none before the broker serves.
func (h *lateHandler) connectionThrottle(ip string) time.Duration {
	if b := h.b.Load(); b != nil {
		return b.ConnectionThrottle(ip)
	}
	return 0
}

// startNode starts a node; bound holds listeners already bound by the
// caller, by listener name (StartCluster binds controller listeners first
// to learn their ports).
func startNode(ctx context.Context, nc *config.Node, logger *slog.Logger, bound map[string]net.Listener, fsys vfs.FS) (_ *Node, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	levels, logger := loglevel.New(logger.Handler())
	logger = logger.With("node", nc.NodeID)
	n := &Node{node: nc, logger: logger, halted: make(chan struct{}), haltDone: make(chan struct{}), startDone: make(chan struct{})}
	defer func() {
		// First: Close waits for a halt's goroutine, which waits for
		// startNode to return.
		close(n.startDone)
		if err != nil {
			for _, l := range bound {
				l.Close()
			}
			n.Close()
		}
	}()
	if len(nc.QuorumVoters) > 0 && nc.ClusterID == "" && !formatted(nc.LogDirs) {
		// Each node would make up its own cluster id (Kafka refuses to
		// start unformatted).
		return nil, fmt.Errorf("log dirs %s are not formatted: run samsa storage format --cluster-id ID on every node of the cluster (or set cluster.id)", strings.Join(nc.LogDirs, ","))
	}
	if nc.LogPartitionsMax == 0 {
		nc.LogPartitionsMax = int32(min(storage.DefaultPartitionsMax(int(nc.LogOpenFilesMax)), math.MaxInt32))
	}
	var om *nodeMetrics
	if nc.HTTPListener != "" {
		om = newNodeMetrics()
	}
	// The broker learns of a log dir going offline (it reports it to the
	// controller); it exists only once the logs are open.
	var dirBroker atomic.Pointer[broker.Broker]
	n.logs, err = storage.OpenManager(storage.ManagerOptions{
		Stats:     om.storageStats(),
		Dirs:      nc.LogDirs,
		NodeID:    nc.NodeID,
		ClusterID: nc.ClusterID,
		Default:   openConfig(nc),
		// Retention, flush.ms checks and the log cleaner
		// (log.retention.check.interval.ms, log.flush.scheduler.interval.ms,
		// log.cleaner.*); topic configs reach each log through the broker.
		RetentionCheckInterval: nc.LogRetentionCheckInterval,
		FlushCheckInterval:     nc.LogFlushSchedulerInterval,
		// Rolls by segment.ms, and the checkpoints
		// (log.flush.offset.checkpoint.interval.ms).
		CheckpointInterval: time.Duration(nc.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond,
		OpenFilesMax:       int(nc.LogOpenFilesMax),
		RecoveryThreads:    int(nc.NumRecoveryThreadsPerDataDir),
		Cleaner: storage.CleanerOptions{
			Disable:             !nc.LogCleanerEnable,
			Backoff:             nc.LogCleanerBackoff,
			DedupeBufferSize:    nc.LogCleanerDedupeBufferSize,
			IOMaxBytesPerSecond: nc.LogCleanerIOMaxBytesPerSecond,
		},
		Logger: logger.With("component", "storage"),
		FS:     fsys,
		// After an unclean shutdown only the metadata log is opened
		// (recovered) now; the data logs load in the background while
		// the quorum voter and the controller run (serveWhenLoaded).
		Background: true,
		First:      []storage.TopicPartition{{Topic: quorum.MetadataTopic, Partition: 0}},
		OnDirOffline: func(path, dirID string, all bool) {
			if b := dirBroker.Load(); b != nil {
				b.LogDirOffline()
			}
			if all {
				n.haltOnce.Do(func() {
					n.halt(fmt.Errorf("every log dir is offline after an I/O error (last: %s, directory.id %s)", path, dirID))
				})
			}
		},
	})
	if err != nil {
		return nil, err
	}

	// The metadata quorum: one local voter, raft over the controller
	// listeners of controller.quorum.voters, or (broker-only) an observer
	// fetching the log from them.
	dialBroker, dialController, err := nodeDialers(nc)
	if err != nil {
		// A node alone in its cluster dials no other: without the
		// client-side settings of a secured inter-node listener it still
		// serves, and says why it could not dial should it ever have to.
		if multiNode(nc) {
			return nil, err
		}
		logger.Warn("this node cannot dial other nodes over its secured listeners", "err", err)
		failed := err
		dialBroker = func(context.Context, string) (net.Conn, error) { return nil, failed }
		dialController = dialBroker
	}
	var transport *quorum.TCPTransport
	if len(nc.QuorumVoters) > 0 && nc.HasRole("controller") {
		transport, err = quorum.NewTCPTransport(quorum.TCPConfig{NodeID: nc.NodeID, Voters: nc.QuorumVoters, Dial: dialController, Logger: logger.With("component", "raft")})
		if err != nil {
			return nil, err
		}
	}

	// Bind every listener; requests wait for the broker below.
	h := &lateHandler{node: nc, ready: make(chan struct{})}
	var endpoints []metadata.Endpoint
	var consoleListener, consoleHost string // of n.addr, which the web console dials; its advertised host
	var versions, ctrlVersions *wire.Versions
	versions, ctrlVersions = broker.SupportedVersions()
	brokerQuotas, ctrlQuotas, err := connectionQuotas(ctx, nc)
	if err != nil {
		return nil, err
	}
	for _, l := range nc.Listeners {
		isCtrl := nc.IsControllerListener(l.Name)
		scfg := server.Config{
			Name:            l.Name,
			Addr:            l.Addr(),
			Listener:        bound[l.Name],
			Handler:         h,
			Versions:        versions,
			MaxRequestBytes: nc.SocketRequestMaxBytes,
			IdleTimeout:     nc.ConnectionsMaxIdle,
			Quotas:          brokerQuotas,
			Requests:        om.requestStats(),
			ConnectionRate:  h.connectionThrottle,
			Logger:          logger.With("component", "server"),
		}
		if isCtrl {
			scfg.Versions = ctrlVersions
			scfg.Quotas = ctrlQuotas
			scfg.ConnectionRate = nil // client quotas apply to broker listeners
			if transport != nil {
				raftLog := logger.With("component", "raft", "listener", l.Name)
				scfg.Divert = func(first [4]byte, c *server.Conn) func(net.Conn) {
					if first != quorum.Preamble {
						return nil
					}
					if !h.raftAllowed(c) {
						return func(nc net.Conn) {
							raftLog.Warn("refusing a raft connection: its principal may not CLUSTER_ACTION the cluster", "principal", c.Principal, "remote", c.RemoteAddr)
							nc.Close()
						}
					}
					return transport.ServeConn
				}
			}
		}
		if err := listenerSecurity(nc, l.Name, h, &scfg); err != nil {
			return nil, err
		}
		srv, err := server.Listen(scfg)
		if err != nil {
			return nil, err
		}
		delete(bound, l.Name)
		n.listeners = append(n.listeners, srv)
		logger.Info("listening", "listener", l.Name, "addr", srv.Addr().String())
		if isCtrl {
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
			consoleListener, consoleHost = l.Name, ep.Host
			n.addr = net.JoinHostPort(host, strconv.Itoa(srv.Addr().Port))
			if l.Host == "" || l.Host == "0.0.0.0" || l.Host == "::" {
				n.addr = net.JoinHostPort(srv.Addr().IP.String(), strconv.Itoa(srv.Addr().Port))
			}
		}
		endpoints = append(endpoints, ep)
	}

	mlog, err := quorum.MetadataLog(n.logs)
	if err != nil {
		return nil, err
	}
	n.mlog = mlog
	if om != nil {
		reg, err := n.registry(om, h.ready)
		if err != nil {
			return nil, err
		}
		if err := n.startConsole(nc, consoleListener, consoleHost, om); err != nil {
			return nil, err
		}
		var root http.Handler
		if n.console != nil {
			root = n.console
		}
		var tc *tls.Config
		if tc, err = httpTLS(nc); err != nil {
			return nil, err
		}
		n.http, err = metrics.Listen(nc.HTTPListener, bound[httpListener], tc, reg, func() error { return n.ready(h.ready) }, root, logger.With("component", "http"))
		delete(bound, httpListener)
		if err != nil {
			return nil, err
		}
		logger.Info("listening", "listener", "http", "addr", n.http.Addr().String())
	}
	var voter broker.MetadataQuorum
	switch {
	case transport != nil:
		n.raft, err = quorum.OpenRaft(quorum.RaftConfig{NodeID: nc.NodeID, Voters: nc.QuorumVoters, Log: mlog, Transport: transport, ClusterID: n.logs.ClusterID(), Logger: logger.With("component", "raft"),
			OnStop: func(err error) {
				n.haltOnce.Do(func() { n.halt(fmt.Errorf("the metadata quorum voter stopped: %w", err)) })
			}})
		if err != nil {
			transport.Close()
			return nil, err
		}
		n.quorum, voter = n.raft, n.raft
		n.transport = transport
	case len(nc.QuorumVoters) > 0:
		n.observer, err = quorum.OpenObserver(quorum.ObserverConfig{NodeID: nc.NodeID, Voters: nc.QuorumVoters, Dial: dialController, Log: mlog, ClusterID: n.logs.ClusterID(), Logger: logger})
		if err != nil {
			return nil, err
		}
		n.quorum = n.observer
		// Build the first image from the whole committed log, as Kafka's
		// brokers catch up before they start.
		logger.Info("catching up with the metadata quorum", "voters", len(nc.QuorumVoters))
		n.catchingUp.Store(true)
		err := n.observer.WaitCaughtUp(ctx)
		n.catchingUp.Store(false)
		if err != nil {
			return nil, fmt.Errorf("catching up with the metadata quorum: %w", err)
		}
	default:
		n.local, err = quorum.OpenLocalLogger(n.logs, logger.With("component", "quorum"))
		if err != nil {
			return nil, err
		}
		n.quorum, voter = n.local, n.local
	}
	ctrlLog := n.quorum
	if om != nil {
		ctrlLog = timedLog{n.quorum, &om.quorum}
	}
	bootstrap, err := metadata.ReadBootstrap(nc.LogDirs)
	if err != nil {
		return nil, err
	}
	n.ctrl, err = controller.New(nc, ctrlLog, n.logs.ClusterID(), bootstrap, logger.With("component", "controller"))
	if err != nil {
		return nil, err
	}
	if sn, ok := n.quorum.(quorum.Snapshots); ok {
		interval := time.Duration(nc.MetadataSnapshotMaxIntervalMs) * time.Millisecond
		if interval == 0 {
			interval = -1 // Kafka's 0: no time limit
		}
		offer := sn.StartSnapshots(quorum.SnapshotConfig{MaxRecordBytes: nc.MetadataSnapshotMaxRecordBytes, MaxInterval: interval, Logger: logger.With("component", "metadata-snapshots")})
		n.ctrl.OnImage(func(_, im *metadata.Image) { offer(im) })
	}
	h.ctrl.Store(n.ctrl)
	// A controller-only node has a Broker too, unregistered and hosting
	// nothing: it answers the controller listener's APIs. While the data
	// logs load (after an unclean shutdown) the Broker answers only
	// those: it hosts nothing and is not registered until they are
	// loaded (serveWhenLoaded).
	var loaded bool
	select {
	case <-n.logs.Loaded():
		loaded = true
	default:
	}
	// A raft voter's broker hosts nothing before the voter caught up
	// (catchUp); it answers the controller listener meanwhile (raft
	// connections are authorized by its ACLs, of the image replayed so
	// far).
	n.broker, err = broker.New(broker.Config{Node: nc, Controller: n.ctrl, Logs: n.logs, Quorum: voter, Topics: om.topicStats(), Logger: logger.With("component", "broker"), Levels: levels,
		ConnectionQuotas: []*server.Quotas{brokerQuotas, ctrlQuotas}, DialBroker: dialBroker, DialController: dialController, HostLater: !loaded || n.raft != nil})
	if err != nil {
		return nil, err
	}
	h.b.Store(n.broker)
	dirBroker.Store(n.broker)
	if len(n.logs.OfflineDirs()) > 0 {
		n.broker.LogDirOffline() // a dir failed while the broker was made
	}
	n.late = h
	if !loaded {
		bg, cancel := context.WithCancel(context.Background())
		n.bgCancel = cancel
		n.bg.Add(1)
		go n.serveWhenLoaded(bg, endpoints)
		return n, nil
	}
	if err := n.catchUp(ctx); err != nil {
		return nil, err
	}
	n.broker.Host()
	if nc.HasRole("broker") {
		if err := n.broker.Start(ctx, endpoints); err != nil {
			return nil, fmt.Errorf("registering broker: %w", err)
		}
	}
	close(h.ready)
	// The replicas write their replication-offset-checkpoint on their own
	// schedule (replica.high.watermark.checkpoint.interval.ms).
	return n, nil
}

// serveWhenLoaded waits for the data logs loading in the background after
// an unclean shutdown, then has the broker host its partitions, registers
// it and serves clients (closing the lateHandler's ready), as Kafka's
// broker leaves state RECOVERY once its LogManager loaded the logs. Until
// then client requests wait (as for any node starting), the readiness
// probe says the logs are loading, and the broker is not registered: the
// controller fences its previous registration when its session expires,
// and the registration moves it out of its ISRs and leaderships, as after
// any unclean shutdown. Close (ctx) stops it; a failed registration halts
// the node.
func (n *Node) serveWhenLoaded(ctx context.Context, endpoints []metadata.Endpoint) {
	defer n.bg.Done()
	start := time.Now()
	select {
	case <-n.logs.Loaded():
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return
	}
	n.logger.Info("logs loaded: the broker starts", "waited", time.Since(start).Round(time.Millisecond))
	if err := n.catchUp(ctx); err != nil {
		if ctx.Err() == nil {
			n.haltOnce.Do(func() { n.halt(err) })
		}
		return
	}
	n.broker.Host()
	if n.node.HasRole("broker") {
		if err := n.broker.Start(ctx, endpoints); err != nil {
			if ctx.Err() == nil {
				n.haltOnce.Do(func() { n.halt(fmt.Errorf("registering broker: %w", err)) })
			}
			return
		}
	}
	close(n.late.ready)
}

// catchUp waits, on a raft voter, until the controller applied the whole
// log the quorum had committed when this process started: the commit
// index the voter stored may trail the quorum's (it is written without an
// fsync of its own), and a broker hosting from the image replayed from it
// would act on an old view: host a topic deleted before a crash and
// delete, as a stray of another topic id, the log of the topic created
// again under its name, with acknowledged records in it. Kafka's
// controllers and brokers likewise catch up with the leader's
// high-watermark before they publish metadata. It needs a quorum of
// voters. Other quorums return at once (an Observer caught up before the
// controller was made; Local commits what it fsynced).
func (n *Node) catchUp(ctx context.Context) error {
	if n.raft == nil {
		return nil
	}
	start := time.Now()
	n.catchingUp.Store(true)
	defer n.catchingUp.Store(false)
	if err := n.raft.WaitCaughtUp(ctx); err != nil {
		return fmt.Errorf("catching up with the metadata quorum: %w", err)
	}
	hw := n.raft.HighWatermark()
	if !n.ctrl.WaitDelivered(ctx, hw) {
		err := context.Cause(ctx)
		if err == nil {
			err = errors.New("controller closed")
		}
		return fmt.Errorf("applying the metadata log to offset %d: %w", hw, err)
	}
	n.logger.Info("caught up with the metadata quorum", "high_watermark", hw, "waited", time.Since(start).Round(time.Millisecond))
	return nil
}

// Serving is closed once the node serves clients on its broker listeners:
// when Start returns, or, after an unclean shutdown, once its data logs
// are loaded (Start returns as soon as its controller runs) and its broker
// registered.
func (n *Node) Serving() <-chan struct{} { return n.late.ready }

// startConsole starts the web console (internal/console) for the
// http.listener: a Kafka client of this node's first broker listener
// (name, advertised as host), with a login when that listener needs SASL.
// On an SSL or SASL_SSL listener it dials TLS (consoleDialer). A node
// without a broker listener serves none.
func (n *Node) startConsole(nc *config.Node, name, host string, om *nodeMetrics) error {
	if name == "" {
		return nil
	}
	sec, err := nc.Security(name)
	if err != nil {
		return err
	}
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	if sec.TLS() {
		if dial, err = consoleDialer(sec, n.addr, host); err != nil {
			return fmt.Errorf("web console: %w", err)
		}
	}
	n.console, err = console.New(console.Config{
		Addr:     n.addr,
		SASL:     sec.SASLEnabled(),
		Dial:     dial,
		ReadOnly: nc.ConsoleReadOnly,
		Counters: om.topics.Totals,
		Version:  buildinfo.Version(),
		Logger:   n.logger.With("component", "console"),
	})
	return err
}

// consoleDialer dials the web console's connections to a TLS listener
// with sec's ssl.* properties (auth.ClientTLS): the truststore verifies
// the broker and, unless ssl.endpoint.identification.algorithm is empty,
// its name: host (the listener's advertised host) for seed, the node's own
// address, else the host dialed (another broker's advertised host). The
// keystore's certificate is presented only when the listener has
// ssl.client.auth=required, where no connection works without one: the
// console then acts as this node's certificate principal (on SSL; on
// SASL_SSL the principal is still the SASL user who logs in).
func consoleDialer(sec *config.ListenerSecurity, seed, host string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	tc, err := auth.ClientTLS(sec.SSL, "")
	if err != nil {
		return nil, fmt.Errorf("listener %s (client side): %w", sec.Listener, err)
	}
	if sec.SSL.ClientAuth != "required" {
		tc.GetClientCertificate = nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := tc.Clone()
		if addr == seed {
			c.ServerName = host
		} else {
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		d := tls.Dialer{Config: c}
		return d.DialContext(ctx, network, addr)
	}, nil
}

// connectionQuotas are the connection limits (max.connections,
// max.connections.per.ip, max.connections.per.ip.overrides) of the broker's
// listeners and of the controller listeners, counted apart as Kafka's
// broker and controller socket servers count them; the first broker
// listener, which other brokers replicate from, is the protected
// inter-broker listener. They exist even without limits, which dynamic
// broker configs may set later (broker.Config.ConnectionQuotas).
func connectionQuotas(ctx context.Context, nc *config.Node) (brokerQuotas, ctrlQuotas *server.Quotas, err error) {
	qc := broker.QuotaConfig(nc)
	if ctrlQuotas, err = server.NewQuotas(ctx, qc); err != nil {
		return nil, nil, err
	}
	if l, ok := nc.BrokerListener(); ok {
		qc.Protected = l.Name
	}
	brokerQuotas, err = server.NewQuotas(ctx, qc)
	return brokerQuotas, ctrlQuotas, err
}

// formatted reports whether one of dirs has a meta.properties.
func formatted(dirs []string) bool {
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, storage.MetaPropertiesFile)); err == nil {
			return true
		}
	}
	return false
}

// ListenerAddr is the bound host:port of the listener named name (upper
// case, as in listeners), "" when the node has none by that name.
func (n *Node) ListenerAddr(name string) string {
	for _, l := range n.listeners {
		if l.Name() == name {
			return l.Addr().String()
		}
	}
	return ""
}

// Addr is the host:port of the node's first broker listener, for clients'
// bootstrap servers; "" on a controller-only node.
func (n *Node) Addr() string { return n.addr }

// ClusterID is the cluster id from meta.properties.
func (n *Node) ClusterID() string { return n.logs.ClusterID() }

// Close stops the node cleanly: a controlled shutdown moves partition
// leadership to other replicas first (when there are any), then the
// listeners stop, the quorum and controller stop, and the logs are flushed
// and their checkpoints written. It is safe to call more than once.
func (n *Node) Close() error {
	if c := n.haltCancel.Load(); c != nil {
		(*c)()
	}
	err := n.close()
	if n.haltStarted.Load() {
		<-n.haltDone
	}
	return err
}

// serving reports whether the broker serves clients (Serving): one still
// loading its logs is not registered, and has no leadership to move.
func (n *Node) serving() bool {
	if n.late == nil {
		return false
	}
	select {
	case <-n.late.ready:
		return true
	default:
		return false
	}
}

// close is Close without waiting for a halt's goroutine (which calls it).
func (n *Node) close() error {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	if n.bgCancel != nil {
		n.bgCancel()
	}
	n.bg.Wait()
	var errs []error
	if n.broker != nil && n.local == nil && n.node.HasRole("broker") && !n.noControlledShutdown.Load() && n.serving() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.broker.Shutdown(ctx); err != nil {
			n.logger.Warn("controlled shutdown did not finish", "err", err)
		}
		cancel()
	}
	if n.ctrl != nil && n.ctrl.Active() {
		// Other brokers stopping at the same time need this controller
		// (and its quorum) for their controlled shutdowns.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := n.ctrl.AwaitPeersShutdown(ctx, n.node.NodeID); err != nil {
			n.logger.Info("stopping before every other stopping broker finished its controlled shutdown", "err", err)
		}
		cancel()
	}
	if n.local != nil && n.ctrl != nil {
		// A single node: the only broker is this one, whose heartbeats
		// stop with it before its controller closes.
		n.ctrl.StopFencing()
	}
	for _, l := range n.listeners {
		errs = append(errs, l.Close())
	}
	if n.http != nil {
		errs = append(errs, n.http.Close())
	}
	if n.console != nil {
		errs = append(errs, n.console.Close())
	}
	if n.broker != nil {
		n.broker.Close()
	}
	if n.ctrl != nil {
		n.ctrl.Close()
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Close())
	}
	if n.observer != nil {
		errs = append(errs, n.observer.Close())
	}
	if n.local != nil {
		errs = append(errs, n.local.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	n.closeErr = errors.Join(errs...)
	return n.closeErr
}

// openConfig is the storage configuration logs found on disk are opened
// and recovered with, before their topic's configs apply: the broker-level
// log.index.interval.bytes and log.index.size.max.bytes, so that an index
// rebuilt at start (a missing or damaged .index) is as dense as the one
// appends wrote. Topic-level overrides are not known yet (the metadata
// image loads after the logs); Kafka's KRaft LogManager has them.
func openConfig(nc *config.Node) storage.Config {
	var c storage.Config
	if v, err := config.TopicInt("index.interval.bytes", nc.Topic["index.interval.bytes"]); err == nil {
		c.IndexIntervalBytes = int32(min(v, math.MaxInt32))
	}
	if v, err := config.TopicInt("segment.index.bytes", nc.Topic["segment.index.bytes"]); err == nil {
		c.SegmentIndexBytes = int32(min(v, math.MaxInt32))
	}
	return c
}
