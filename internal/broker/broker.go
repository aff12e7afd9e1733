// Package broker answers the Kafka APIs: one file per API, wiring the
// metadata image, the hosted partitions (replica), the controller and the
// coordinators together. It also applies each new metadata image to the
// hosted partitions (create, delete, reconfigure).
package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/loglevel"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// handlerFunc answers one decoded request.
type handlerFunc func(ctx context.Context, b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Response, error)

// api is one row of the table of supported APIs.
type api struct {
	key      kmsg.Key
	min, max int16
	handle   handlerFunc
	// controllerOnly APIs are served and advertised on controller
	// listeners only (broker-to-controller requests).
	controllerOnly bool
}

// apis lists the supported APIs; each handler file registers its row in an
// init function with register.
var apis = map[kmsg.Key]api{}

func register(key kmsg.Key, min, max int16, h handlerFunc) {
	apis[key] = api{key: key, min: min, max: max, handle: h}
}

func registerController(key kmsg.Key, min, max int16, h handlerFunc) {
	apis[key] = api{key: key, min: min, max: max, handle: h, controllerOnly: true}
}

// Config are the dependencies of a Broker.
type Config struct {
	Node       *config.Node
	Controller *controller.Controller
	Logs       *storage.Manager
	// Quorum is this node's voter of the metadata quorum (quorum.Raft or
	// quorum.Local), nil on a broker-only node: its controller listeners
	// answer observers' Fetch of __cluster_metadata and DescribeQuorum
	// from it.
	Quorum MetadataQuorum
	Logger *slog.Logger // nil discards
	// Advertised are the endpoints given to clients (advertised.listeners
	// with real ports).
	Advertised []metadata.Endpoint
	// Levels are the node's log levels, which BROKER_LOGGER resources
	// describe and change (KIP-412); nil: no loggers to describe.
	Levels *loglevel.Levels
	// ConnectionQuotas are the connection limits of the node's socket
	// servers (broker and controller listeners), updated when
	// max.connections, max.connections.per.ip or its overrides change as
	// dynamic broker configs; nil entries are skipped.
	ConnectionQuotas []*server.Quotas
	// DialBroker and DialController open connections to other brokers
	// (inter.broker.listener.name) and to controllers
	// (controller.listener.names) with those listeners' TLS and SASL
	// (auth.Dialer); nil dials plain TCP.
	DialBroker, DialController wire.DialFunc
	// Topics, when set, counts each hosted topic's traffic
	// (BrokerTopicMetrics).
	Topics *metrics.Topics
	// HostLater makes New apply no metadata image (host no partition,
	// load no coordinator, apply no dynamic config) until Host is
	// called: a node whose data logs are still being loaded after an
	// unclean shutdown answers its controller listeners' APIs meanwhile
	// (Kafka's broker in state RECOVERY: its LogManager loads the logs
	// while its controller and raft manager run).
	HostLater bool
}

// Broker handles requests. Safe for concurrent use.
type Broker struct {
	node *config.Node // the static properties
	// dyn is node with the dynamic broker configs of the metadata image
	// applied (this broker's, then the cluster-wide defaults): the
	// configuration in effect (dynconfig.go).
	dyn     atomic.Pointer[config.Node]
	logs    *storage.Manager
	levels  *loglevel.Levels
	quotas  []*server.Quotas // connection quotas of the node's listeners
	quotaMu sync.Mutex       // serializes quota updates; guards quotaNext
	// quotaNext is the connection limits to apply next (updateQuotas).
	quotaNext *server.QuotaConfig
	ctrl      *controller.Controller
	hosting   atomic.Bool // Host was called
	// hostFrom is, with Config.HostLater, the image when New ran (the
	// metadata log replayed at start, which the data logs were written
	// under): Host removes the logs of what it no longer assigns.
	hostFrom *metadata.Image
	quorum   MetadataQuorum // nil: not a voter
	replicas *replica.Manager
	logger   *slog.Logger
	versions *wire.Versions // advertised on broker listeners
	ctrlVers *wire.Versions // advertised on controller listeners

	leaderThrottle, followerThrottle *replica.Throttle

	// ctrlChan carries forwarded admin requests (CreateTopics, ...),
	// DescribeQuorum and AllocateProducerIds; alterChan carries
	// AlterPartition on a connection of its own, as Kafka's
	// AlterPartitionManager has its own channel: a forwarded request must
	// not wait behind the AlterPartitions of thousands of leaders
	// shrinking their ISRs after a broker died (a DescribeQuorum took
	// tens of seconds then).
	ctrlChan, alterChan controllerChannel
	// lifeChan carries registrations and heartbeats on connections of
	// their own, as Kafka's BrokerLifecycleManager has its own channel: a
	// connection answers its requests in order, and a heartbeat queued
	// behind a forwarded CreateTopics or an AlterPartition waiting for its
	// commit expired the broker's session on a loaded machine.
	lifeChan    controllerChannel
	alters      alterBatcher // AlterPartition batching (controllerchannel.go)
	incarnation [16]byte     // this process's incarnation id (BrokerRegistration)
	brokerEpoch atomic.Int64 // from the active controller's registration
	// shuttingDown is set once Shutdown began: heartbeats ask for it.
	shuttingDown atomic.Bool
	// previousEpoch is the broker epoch of the previous process, from the
	// logs' clean shutdown marker (KIP-966), until a registration has
	// carried it; -1 after that or without one.
	previousEpoch atomic.Int64
	endpoints     []metadata.Endpoint
	stop          chan struct{}
	dirOffline    chan struct{} // LogDirOffline's kick of the heartbeat loop, buffered 1
	dirs          dirReports    // AssignReplicasToDirs owed to the controller (dirassign.go)
	wg            sync.WaitGroup
	// dialBroker and dialController: see Config.
	dialBroker, dialController wire.DialFunc

	// producerIDs hands out producer ids from blocks the controller reserves.
	pidMu   sync.Mutex
	pidNext int64
	pidEnd  int64

	groups *groups      // the group coordinator and its wiring (groups.go)
	lag    lagClients   // connections of the consumer lag metrics (metrics.go)
	txns   *txns        // the transaction coordinator and its wiring (txn.go)
	share  *shareGroups // share groups, KIP-932 (sharegroups.go)

	usage *clientQuotas // usage against the client quotas (throttle.go)

	// authz decides requests: the ACLs of the latest image and the
	// static authorizer configs (authz.go).
	authz atomic.Pointer[acl.Authorizer]

	closed atomic.Bool

	sessions *fetchSessions // fetch sessions (KIP-227, fetchsession.go)

	// consumerBytesOut counts the bytes of records served to consumers
	// (not to followers) by Fetch, for tests of KIP-392.
	consumerBytesOut atomic.Int64
	// consumerPartitionsRead counts the partitions consumers' fetches
	// read (each read of a fetch that waited counts again), for tests
	// of fetch sessions' cost.
	consumerPartitionsRead atomic.Int64
}

// ConsumerPartitionsRead is how many partitions consumers' fetches
// (replica id -1) read since the broker started: an incremental fetch
// reads only what changed (fetchsession.go). Safe for concurrent use.
func (b *Broker) ConsumerPartitionsRead() int64 { return b.consumerPartitionsRead.Load() }

// ConsumerBytesOut is the total of record bytes this broker has served
// to consumers (Fetch with replica id -1) since it started. Safe for
// concurrent use.
func (b *Broker) ConsumerBytesOut() int64 { return b.consumerBytesOut.Load() }

// FetchSessions is the number of fetch sessions (KIP-227) cached. Safe
// for concurrent use.
func (b *Broker) FetchSessions() int { return b.sessions.Len() }

// FetchPartitionsSent is how many partitions this broker's follower
// fetches named (replica.Manager.FetchPartitionsSent). Safe for concurrent
// use.
func (b *Broker) FetchPartitionsSent() int64 { return b.replicas.FetchPartitionsSent() }

// New returns a broker that hosts the partitions the image assigns it.
func New(cfg Config) (*Broker, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Broker{
		sessions:   newFetchSessions(cfg.Node.MaxIncrementalFetchSessionCacheSlots),
		node:       cfg.Node,
		ctrl:       cfg.Controller,
		quorum:     cfg.Quorum,
		logger:     logger,
		logs:       cfg.Logs,
		levels:     cfg.Levels,
		quotas:     cfg.ConnectionQuotas,
		stop:       make(chan struct{}),
		dirOffline: make(chan struct{}, 1),
		dirs:       dirReports{kick: make(chan struct{}, 1)},
		usage:      newClientQuotas(cfg.Node),

		leaderThrottle:   replica.NewThrottle(cfg.Node.LeaderReplicationThrottledRate),
		followerThrottle: replica.NewThrottle(cfg.Node.FollowerReplicationThrottledRate),

		dialBroker:     cfg.DialBroker,
		dialController: cfg.DialController,
	}
	b.dyn.Store(cfg.Node)
	b.ctrlChan.b = b
	b.alterChan.b = b
	b.lifeChan.b = b
	rand.Read(b.incarnation[:])
	b.brokerEpoch.Store(-1)
	b.previousEpoch.Store(cfg.Logs.CleanShutdownBrokerEpoch())
	b.replicas = replica.NewManager(cfg.Logs, replica.Options{
		NodeID:         cfg.Node.NodeID,
		Dial:           cfg.DialBroker,
		ReplicaLagTime: cfg.Node.ReplicaLagTimeMax,
		Controller:     isrChanger{b},
		Eligible: func(id int32) bool {
			br := cfg.Controller.Image().Broker(id)
			return br != nil && !br.Fenced
		},
		LeaderAddr:                      b.brokerAddr,
		FetchMaxBytes:                   cfg.Node.ReplicaFetchResponseMaxBytes,
		HighWatermarkCheckpointInterval: cfg.Node.ReplicaHighWatermarkCheckpointInterval,
		LeaderThrottle:                  b.leaderThrottle,
		FollowerThrottle:                b.followerThrottle,
		Topics:                          cfg.Topics,
		CreateWorkers:                   int(cfg.Node.NumRecoveryThreadsPerDataDir) * len(cfg.Node.LogDirs),
		OnOffline:                       b.replicasOffline,
		Logger:                          logger.With("component", "replica"),
	})
	b.versions, b.ctrlVers = SupportedVersions()
	b.startGroups()
	b.startShareGroups()
	b.startTxns()
	if cfg.HostLater {
		b.hostFrom = cfg.Controller.Image()
	} else {
		b.Host()
	}
	return b, nil
}

// Host starts applying the metadata image: the broker hosts the partitions
// the image assigns it, in the logs of Config.Logs, and loads the
// coordinators of those it leads. New calls it unless Config.HostLater;
// later calls do nothing.
func (b *Broker) Host() {
	if b.hosting.Swap(true) {
		return
	}
	// A partition this broker cannot host (its log failed to load or be
	// created) is logged and offline (KAFKA_STORAGE_ERROR), never a reason
	// not to start: one bad log must not make a node unbootable.
	from := b.hostFrom
	b.ctrl.OnImage(func(old, next *metadata.Image) {
		if old == nil && from != nil {
			b.removeStray(from, next)
		}
		b.applyImage(old, next)
	})
}

// removeStray deletes the logs of the partitions this broker was a
// replica of in from but is not in next: topics deleted while its data
// logs loaded (their partitions unhosted), those deleted and created
// again under the same name (whose new partitions start on new logs, not
// on the deleted topic's records), and replicas moved away. The first
// image applied (applyImage with no previous one) sees none of these
// changes. Kafka's broker likewise deletes the stray logs its first
// metadata image no longer assigns it (LogManager.findStrayReplicas).
//
// Start's removeStrayReplicas, later, finds most of these too, but not
// all: a log without partition.metadata (an older data dir, or a file
// lost to the power loss that made the start unclean: it is written
// without an fsync) of a topic deleted and created again takes the new
// topic's id there and would serve the deleted topic's records
// (TestDeleteWhileLoadingNoPartitionMetadata); and until then the first
// apply would host the new topic on the deleted one's logs (their ids
// unread), a follower fetching into them.
func (b *Broker) removeStray(from, next *metadata.Image) {
	self := b.node.NodeID
	var gone []replica.TopicPartition
	for t := range from.Topics() {
		now := next.TopicByID(t.ID)
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, self) {
				continue
			}
			if now != nil && i < len(now.Partitions) && slices.Contains(now.Partitions[i].Replicas, self) {
				continue
			}
			l := b.logs.Get(storage.TopicPartition{Topic: t.Name, Partition: int32(i)})
			if l == nil {
				continue
			}
			if id, ok, err := l.TopicID(); err == nil && ok && id != t.ID {
				// Another topic's log under the same name: from is older
				// than that log (a raft voter's replayed image, before
				// it caught up), whose topic next may well hold; Start's
				// removeStrayReplicas judges it against the caught-up
				// image.
				continue
			}
			gone = append(gone, replica.TopicPartition{Topic: t.Name, Partition: int32(i)})
		}
	}
	// Topics next assigns this broker that from does not hold (by id):
	// created, or deleted and created again, after from (an old replayed
	// image of a raft voter). A log under such a name whose
	// partition.metadata names another topic id holds the deleted
	// topic's records: the first apply must not host the new topic on it
	// (a follower would fetch into it), so it goes now, not only at
	// Start's removeStrayReplicas.
	for t := range next.Topics() {
		if from.TopicByID(t.ID) != nil {
			continue
		}
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, self) {
				continue
			}
			tp := storage.TopicPartition{Topic: t.Name, Partition: int32(i)}
			l := b.logs.Get(tp)
			if l == nil {
				continue
			}
			if id, ok, err := l.TopicID(); err == nil && ok && id != t.ID {
				gone = append(gone, replica.TopicPartition{Topic: t.Name, Partition: int32(i)})
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	b.logger.Info("deleting the logs of partitions deleted or moved away while the logs loaded", "partitions", len(gone))
	for i, err := range b.replicas.RemoveBatch(gone) {
		if err != nil {
			b.logger.Error("deleting partition failed", "topic", gone[i].Topic, "partition", gone[i].Partition, "err", err)
		}
	}
}

// SupportedVersions returns the tables of supported APIs of broker
// listeners (all but the broker-to-controller APIs) and of controller
// listeners (the broker-to-controller APIs and controllerListenerAPIs, as
// Kafka's controllers serve). A request for an API not in a listener's
// table closes the connection.
func SupportedVersions() (brokerListener, controllerListener *wire.Versions) {
	brokerListener, controllerListener = wire.NewVersions(), wire.NewVersions()
	for _, a := range apis {
		if a.controllerOnly || controllerListenerAPIs[a.key] {
			controllerListener.Add(a.key, a.min, a.max)
		}
		if !a.controllerOnly {
			brokerListener.Add(a.key, a.min, a.max)
		}
	}
	return brokerListener, controllerListener
}

// Versions is the table of supported APIs of broker listeners.
func (b *Broker) Versions() *wire.Versions { return b.versions }

// ControllerVersions is the table of supported APIs of controller
// listeners (see SupportedVersions).
func (b *Broker) ControllerVersions() *wire.Versions { return b.ctrlVers }

// Replicas are the hosted partitions.
func (b *Broker) Replicas() *replica.Manager { return b.replicas }

// Close stops the heartbeats, the follower fetchers and the coordinators.
// Call Shutdown first for a controlled shutdown.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.stopShareTimers()
	close(b.stop)
	b.wg.Wait()
	b.closeTxns()
	b.closeShareGroups()
	b.closeGroups()
	b.replicas.Close()
	b.ctrlChan.close()
	b.alterChan.close()
	b.lifeChan.close()
	b.lag.close()
	// The logs' clean shutdown marker carries this process's broker
	// epoch, which the next one shows the controller (KIP-966); it is
	// written only if every log closes cleanly.
	b.logs.SetBrokerEpoch(b.brokerEpoch.Load())
}

// brokerAddr is the address other brokers reach broker id at.
func (b *Broker) brokerAddr(id int32) (string, bool) {
	br := b.image().Broker(id)
	if br == nil {
		return "", false
	}
	ep, ok := clientEndpoint(br, b.node.InterBrokerListener())
	if !ok {
		return "", false
	}
	return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), true
}

// isrChanger sends AlterPartition to the controller.
type isrChanger struct{ b *Broker }

func (c isrChanger) AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	return c.b.alterPartition(ctx, topicID, partition, leaderEpoch, partitionEpoch, isr)
}

// Handle implements server.Handler.
func (b *Broker) Handle(ctx context.Context, c *server.Conn, req *wire.Request) (kmsg.Response, error) {
	if req.Body == nil {
		if req.Key == int16(kmsg.ApiVersions) {
			return b.unsupportedApiVersions(c), nil
		}
		return nil, fmt.Errorf("unsupported API %s (key %d) version %d", kmsg.NameForKey(req.Key), req.Key, req.Version)
	}
	a, ok := apis[kmsg.Key(req.Key)]
	if !ok {
		return nil, fmt.Errorf("unsupported API key %d", req.Key)
	}
	body, finish := req.Body, func(r kmsg.Response) kmsg.Response { return r }
	if g := gates[a.key]; g != nil && b.authorizer().Enabled {
		body, finish = g(b, c, body)
		if body == nil {
			return finish(nil), nil
		}
	}
	if mutations[a.key] {
		// Topics denied above are not charged: the quota sees what remains.
		inner := *req
		inner.Body = body
		var quotaFinish func(kmsg.Response) kmsg.Response
		body, quotaFinish = b.mutationGate(c, &inner)
		authzFinish := finish
		finish = func(r kmsg.Response) kmsg.Response { return authzFinish(quotaFinish(r)) }
	}
	var resp kmsg.Response
	var err error
	start := time.Now()
	if forwarded[a.key] && !forwardsItself[a.key] && !b.ctrl.Active() && !b.node.IsControllerListener(c.Listener) {
		resp, err = b.forward(ctx, body)
	} else {
		resp, err = a.handle(withClientID(ctx, req.ClientID), b, c, body)
		if forwarded[a.key] && !forwardsItself[a.key] && errors.Is(err, controller.ErrNotController) && !b.node.IsControllerListener(c.Listener) {
			// This node's controller lost the leadership during the
			// write: the new active one answers (KIP-590), as when this
			// one was not active. The error closed the client's
			// connection before (a CreateTopics while the quorum
			// re-elected under load).
			resp, err = b.forward(ctx, body)
		} else if err == nil && forwarded[a.key] && !mutations[a.key] {
			b.awaitLocalApply(ctx)
		}
		if err == nil && resp != nil && (forwarded[a.key] || a.key == kmsg.DescribeQuorum) && b.onControllerListener(c) {
			// A forwarding broker waits for its image to hold the
			// write before it answers (forwardcommit.go): the
			// committed image holds it now. A DescribeQuorum is how
			// it asks after a write of a version without tags.
			replyCommitOffset(body, resp, b.ctrl.Image().Offset)
		}
	}
	if err != nil {
		return resp, err
	}
	if d, ok := resp.(*server.Deferred); ok {
		// Completed later (a Produce waiting for acks=all): the gates
		// and quotas apply once it is, on the connection's goroutine.
		d.Finish = func(r kmsg.Response) kmsg.Response {
			r = finish(r)
			b.throttle(c, req, r, time.Since(start))
			return r
		}
		return d, nil
	}
	if resp != nil {
		resp = finish(resp)
	}
	b.throttle(c, req, resp, time.Since(start))
	return resp, nil
}

// forwarded are the admin APIs a broker whose controller is not the active
// one forwards to the active controller (KIP-590).
var forwarded = map[kmsg.Key]bool{
	kmsg.CreateTopics:            true,
	kmsg.DeleteTopics:            true,
	kmsg.CreatePartitions:        true,
	kmsg.AlterConfigs:            true,
	kmsg.IncrementalAlterConfigs: true,
	kmsg.ElectLeaders:            true,
	// ListPartitionReassignments reads the active controller's image,
	// which a broker's own image may trail.
	kmsg.AlterPartitionAssignments:  true,
	kmsg.ListPartitionReassignments: true,
	kmsg.AlterUserSCRAMCredentials:  true,
	kmsg.CreateACLs:                 true,
	kmsg.DeleteACLs:                 true,
	kmsg.AlterClientQuotas:          true,
	kmsg.UpdateFeatures:             true,
}

// forwardsItself are the forwarded APIs whose handlers answer part of a
// request themselves and forward the rest (alterconfigs.go: BROKER and
// BROKER_LOGGER resources are checked by the broker that receives them).
var forwardsItself = map[kmsg.Key]bool{
	kmsg.AlterConfigs:            true,
	kmsg.IncrementalAlterConfigs: true,
}

// awaitLocalApply waits, at most until ctx ends, until this node's broker
// has applied the image committed now. The controller answers a write
// once committed, before its node's broker applied it; the writes other
// than creations and deletions of topics and partitions (mutations: their
// apply to logs takes seconds at thousands of partitions) are cheap to
// apply, and a client that changed a config, an ACL or a quota here sees
// it in force here once answered, as before.
func (b *Broker) awaitLocalApply(ctx context.Context) {
	off := b.ctrl.Image().Offset
	b.ctrl.WaitApplied(ctx, func(im *metadata.Image) bool { return im.Offset >= off })
}

// mutations are the APIs controller_mutation_rate applies to (KIP-599).
var mutations = map[kmsg.Key]bool{kmsg.CreateTopics: true, kmsg.CreatePartitions: true, kmsg.DeleteTopics: true}

// image is the current metadata image.
func (b *Broker) image() *metadata.Image { return b.ctrl.Image() }

// applyImage makes the hosted partitions match the image: it leads or
// follows the partitions whose replicas include this broker, stops hosting
// those it no longer replicates and deletes removed topics. When next was
// applied on old it follows next's Delta, at a cost of what changed;
// otherwise (the first image, or broker defaults changed) it walks every
// topic.
func (b *Broker) applyImage(old, next *metadata.Image) error {
	var firstErr error
	note := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	reconfigured := b.applyDynamicConfigs(old, next)
	var removed []*metadata.Topic
	var batch []replica.ApplyItem
	if d := next.Delta(); old != nil && d != nil && d.From == old.Offset && !reconfigured {
		for id, parts := range d.Partitions {
			t := next.TopicByID(id)
			if t == nil {
				continue
			}
			prev := old.TopicByID(id)
			cfg := b.logConfig(t)
			if prev == nil || d.Configs[id] {
				for i := range t.Partitions {
					b.applyPartition(&batch, t, prev, int32(i), cfg)
				}
				continue
			}
			slices.Sort(parts)
			for _, i := range slices.Compact(slices.Clone(parts)) {
				b.applyPartition(&batch, t, prev, i, cfg)
			}
		}
		for id := range d.Configs {
			if _, done := d.Partitions[id]; done {
				continue
			}
			if t := next.TopicByID(id); t != nil {
				cfg := b.logConfig(t)
				for i := range t.Partitions {
					b.applyPartition(&batch, t, old.TopicByID(id), int32(i), cfg)
				}
			}
		}
		removed = d.Removed
	} else {
		for t := range next.Topics() {
			var prev *metadata.Topic
			if old != nil {
				prev = old.TopicByID(t.ID)
			}
			if prev == t {
				if reconfigured {
					// Broker-level defaults changed: partitions of
					// topics without their own value follow them at
					// once.
					b.reconfigure(t.Name, t)
				}
				continue // unchanged (images share unchanged topics)
			}
			cfg := b.logConfig(t)
			for i := range t.Partitions {
				b.applyPartition(&batch, t, prev, int32(i), cfg)
			}
		}
		if old != nil {
			for t := range old.Topics() {
				if next.TopicByID(t.ID) == nil {
					removed = append(removed, t)
				}
			}
		}
	}
	note(b.applyPartitions(batch))
	b.reportHostedAgain(next, batch)
	var deleted []string
	var gone []replica.TopicPartition
	self := b.node.NodeID
	for _, t := range removed {
		deleted = append(deleted, t.Name)
		for i, p := range t.Partitions {
			if slices.Contains(p.Replicas, self) {
				gone = append(gone, replica.TopicPartition{Topic: t.Name, Partition: int32(i)})
			}
		}
	}
	// One batch: the logs' directories are renamed, each log dir
	// fsynced once, and the files removed in the background.
	for i, err := range b.replicas.RemoveBatch(gone) {
		if err != nil {
			b.logger.Error("deleting partition failed", "topic", gone[i].Topic, "partition", gone[i].Partition, "err", err)
		}
	}
	if b.groups != nil {
		// Kafka's onPartitionsDeleted: the groups forget the topics'
		// offsets (queued, never blocks).
		b.groups.coord.DeleteTopicOffsets(deleted)
	}
	b.updateAuthorizer(next)
	b.applyGroupImage(next)
	if b.share != nil {
		b.share.loads.apply(b, next)
	}
	b.applyTxnImage(next)
	return firstErr
}

// applyPartition queues partition i of t on batch when this broker is a
// replica of it (to lead or follow it as the image says), or stops hosting
// it when it no longer is; prev is the topic in the previous image (nil
// when new).
func (b *Broker) applyPartition(batch *[]replica.ApplyItem, t, prev *metadata.Topic, i int32, cfg replica.LogConfig) {
	self := b.node.NodeID
	if i < 0 || int(i) >= len(t.Partitions) {
		return
	}
	p := t.Partitions[i]
	tp := replica.TopicPartition{Topic: t.Name, Partition: i}
	if !slices.Contains(p.Replicas, self) {
		if prev != nil && int(i) < len(prev.Partitions) && slices.Contains(prev.Partitions[i].Replicas, self) {
			if err := b.replicas.Remove(tp); err != nil {
				b.logger.Error("removing partition failed", "topic", t.Name, "partition", i, "err", err)
			}
		}
		return
	}
	st := replica.State{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR}
	// The coordinators load their partitions as soon as the image names
	// this broker the leader: their logs are made at once.
	*batch = append(*batch, replica.ApplyItem{TopicPartition: tp, TopicID: t.ID, State: st, Config: cfg, Now: isInternalTopic(t.Name)})
}

// reportHostedAgain queues an AssignReplicasToDirs to an online directory
// for the partitions of batch that next lists as lost on this broker but
// that it hosts now (or is creating the log of): restarted after the
// operator fixed what kept it from hosting them, it follows again and
// rejoins their ISRs once caught up (KIP-858). A log whose creation fails
// after all is reported lost again (replicasOffline).
func (b *Broker) reportHostedAgain(next *metadata.Image, batch []replica.ApplyItem) {
	self := b.node.NodeID
	var keys []dirKey
	for _, it := range batch {
		t := next.TopicByID(it.TopicID)
		if t == nil || int(it.Partition) >= len(t.Partitions) || !slices.Contains(t.Partitions[it.Partition].LostReplicas, self) {
			continue
		}
		if b.replicas.Offline(it.Topic, it.Partition) == nil {
			keys = append(keys, dirKey{it.TopicID, it.Partition})
		}
	}
	if len(keys) > 0 {
		b.queueDirs(keys, b.onlineDir())
	}
}

// applyPartitions hosts the partitions of batch (replica.ApplyBatch: the
// replica manager's lock taken once per chunk, not once per partition;
// new logs are created by its workers, off the metadata listener) and
// returns the first error.
func (b *Broker) applyPartitions(batch []replica.ApplyItem) error {
	var first error
	for i, err := range b.replicas.ApplyBatch(batch) {
		if err != nil {
			b.logger.Error("hosting partition failed", "topic", batch[i].Topic, "partition", batch[i].Partition, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// topicConfig returns the effective value of a topic config and its
// DescribeConfigs source. flush.ms set neither on the topic nor by
// log.flush.interval.ms is log.flush.scheduler.interval.ms, as Kafka's
// KafkaConfig.logFlushIntervalMs, with source DEFAULT_CONFIG: Kafka lists
// no synonym then, since its synonym list for flush.ms starts at
// log.flush.interval.ms (ConfigHelper.configSynonyms drops the entries
// before it), as it does for segment.ms when only log.roll.hours is set.
func (b *Broker) topicConfig(t *metadata.Topic, name string) (string, kmsg.ConfigSource) {
	if t != nil {
		if v, ok := t.Configs[name]; ok {
			return v, kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	n := b.config()
	if src := n.BrokerSource(name); src != "" {
		return n.Topic[name], b.brokerSource(src)
	}
	if name == "flush.ms" && n.LogFlushSchedulerInterval > 0 {
		return strconv.FormatInt(n.LogFlushSchedulerInterval.Milliseconds(), 10), kmsg.ConfigSourceDefaultConfig
	}
	return n.Topic[name], kmsg.ConfigSourceDefaultConfig
}

// topicInt returns the effective value of an integer topic config, parsed
// by config.TopicInt. An invalid value (CreateTopics and AlterConfigs
// keep them out of the image) is logged, and the broker-level value
// applies.
func (b *Broker) topicInt(t *metadata.Topic, name string) int64 {
	v, _ := b.topicConfig(t, name)
	i, err := config.TopicInt(name, v)
	if err != nil {
		b.invalidTopicConfig(t, err)
		i, _ = config.TopicInt(name, b.config().Topic[name])
	}
	return i
}

// invalidTopicConfig logs a topic config value the broker cannot apply.
func (b *Broker) invalidTopicConfig(t *metadata.Topic, err error) {
	name := ""
	if t != nil {
		name = t.Name
	}
	b.logger.Warn("invalid topic config: using the broker's value", "topic", name, "err", err)
}

// logConfig resolves the configs a partition of t applies.
func (b *Broker) logConfig(t *metadata.Topic) replica.LogConfig {
	ts, _ := b.topicConfig(t, "message.timestamp.type")
	flush, flushInterval := b.flushConfig(t)
	leaderThrottled, _ := b.topicConfig(t, "leader.replication.throttled.replicas")
	followerThrottled, _ := b.topicConfig(t, "follower.replication.throttled.replicas")
	compression, _ := b.topicConfig(t, "compression.type")
	codec, recompress := record.ParseCodec(compression)
	return replica.LogConfig{
		Recompress:        recompress,
		Compression:       codec,
		MaxMessageBytes:   int32(b.topicInt(t, "max.message.bytes")),
		SegmentBytes:      b.topicInt(t, "segment.bytes"),
		LogAppendTime:     ts == "LogAppendTime",
		MinInsyncReplicas: int32(b.topicInt(t, "min.insync.replicas")),
		Compact:           b.cleanupPolicy(t).Compact,
		TimestampBounded:  true,
		// message.timestamp.before.max.ms, after.max.ms (KIP-937).
		TimestampBeforeMaxMs: b.topicInt(t, "message.timestamp.before.max.ms"),
		TimestampAfterMaxMs:  b.topicInt(t, "message.timestamp.after.max.ms"),
		LeaderThrottled:      replica.ThrottledReplicas(leaderThrottled),
		FollowerThrottled:    replica.ThrottledReplicas(followerThrottled),
		Storage: storage.Config{
			SegmentBytes:          b.topicInt(t, "segment.bytes"),
			SegmentAge:            time.Duration(b.topicInt(t, "segment.ms")) * time.Millisecond,
			IndexIntervalBytes:    int32(b.topicInt(t, "index.interval.bytes")),
			SegmentIndexBytes:     int32(b.topicInt(t, "segment.index.bytes")),
			FlushIntervalMessages: flush,
			FlushInterval:         flushInterval,
			ProducerIDExpiration:  b.config().ProducerIDExpiration,
			Cleanup:               b.cleanupConfig(t),
		},
	}
}

// flushConfig resolves flush.messages and flush.ms as storage takes them:
// Long.MAX_VALUE (the default) is never, storage's zero, and flush.ms=0,
// flush at every check, the smallest positive interval. As in Kafka,
// flush.ms set neither on the topic nor by log.flush.interval.ms is
// log.flush.scheduler.interval.ms.
func (b *Broker) flushConfig(t *metadata.Topic) (messages int64, interval time.Duration) {
	messages = b.topicInt(t, "flush.messages")
	if messages == math.MaxInt64 {
		messages = 0
	}
	ms := b.topicInt(t, "flush.ms") // log.flush.scheduler.interval.ms as fallback (topicConfig)
	switch {
	case ms == 0:
		interval = time.Nanosecond
	case ms > 0 && ms < math.MaxInt64:
		interval = configMillis(ms)
	}
	return messages, interval
}

// errCode maps an error from the layers below to a Kafka error code.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Code
	}
	for _, m := range errorCodes {
		if isErr(err, m.err) {
			return m.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the error's text for responses that carry one, or nil.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
