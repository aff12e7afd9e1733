// Package controller is the active controller: it turns admin requests
// (create and delete topics, create partitions, alter configs), broker
// registrations and producer-id requests into metadata records, appends
// them to the metadata log and publishes the resulting image.
//
// Writes run on one goroutine, the controller's loop (loop.go), and never
// hold a lock across a commit; readers take the current image without
// locking. On a single node the
// controller and broker share a process and the broker subscribes to
// images with OnImage.
package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// Errors the broker maps to Kafka error codes.
var (
	ErrTopicExists        = errors.New("topic already exists")         // TOPIC_ALREADY_EXISTS
	ErrUnknownTopic       = errors.New("unknown topic")                // UNKNOWN_TOPIC_OR_PARTITION
	ErrInvalidTopic       = errors.New("invalid topic name")           // INVALID_TOPIC_EXCEPTION
	ErrInvalidPartitions  = errors.New("invalid number of partitions") // INVALID_PARTITIONS
	ErrInvalidReplication = errors.New("invalid replication factor")   // INVALID_REPLICATION_FACTOR
	ErrInvalidConfig      = errors.New("invalid config")               // INVALID_CONFIG
	ErrDeleteDisabled     = errors.New("topic deletion is disabled")   // TOPIC_DELETION_DISABLED
	ErrInvalidRequest     = errors.New("invalid request")              // INVALID_REQUEST
	// ErrInvalidReplicaAssignment reports a manual assignment that does not
	// fit: a count other than the new partitions', an unknown or repeated
	// broker, a replication factor other than the topic's.
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment") // INVALID_REPLICA_ASSIGNMENT
)

// ProducerIDBlockSize is the size of a block of producer ids reserved at
// once (Kafka reserves 1000, KIP-730).
const ProducerIDBlockSize = 1000

// ErrNotController: this node's controller is not the active one
// (NOT_CONTROLLER); the caller retries on the active controller.
var ErrNotController = errors.New("not the active controller")

// Controller keeps the metadata image of this node and, while this node
// leads the metadata quorum, acts as the active controller. Safe for
// concurrent use.
type Controller struct {
	node   *config.Node
	log    quorum.Log
	logger *slog.Logger

	// reqc posts writes to the loop; kickc wakes it when the committed
	// image or the leadership changes; loopDone closes when it ends.
	reqc     chan *writeReq
	kickc    chan struct{}
	loopDone chan struct{}
	stopLoop context.CancelFunc
	loopCtx  context.Context // ends when Close stops the loop
	// fences are the goroutines completing fences (continueFence); none
	// starts once closed is set (fenceMu orders the two).
	fenceMu   sync.Mutex
	fences    sync.WaitGroup
	leaderGen atomic.Int64 // bumped on every leadership change

	image  atomic.Pointer[metadata.Image]
	active atomic.Bool // this node leads the quorum and has applied its whole log
	// lastLeader is the last quorum leader this node knew, -1 none; owned
	// by onLeaderChange (the log's delivery goroutine).
	lastLeader int32

	// applied is the latest image every OnImage listener has been called
	// with: image runs ahead of it while the listeners (the broker's
	// apply to its logs) work on a commit.
	applied atomic.Pointer[metadata.Image]
	// lisMu guards listeners and orders their calls: held by onCommit
	// from the image's apply to the last listener's return, and by
	// OnImage, so that a listener sees every image once, in order. It
	// comes before imgMu.
	lisMu     sync.Mutex
	listeners []func(old, next *metadata.Image)
	imgMu     sync.Mutex // guards imgCond's condition (image or applied advances)
	imgCond   *sync.Cond
	// delivered: every committed batch below it was applied and given to
	// the listeners (guarded by imgMu; WaitDelivered).
	delivered int64

	brokers *brokerTracker
	// brokerIncarnation is the incarnation id of each registered broker
	// process, owned by the loop: a broker that restarts registers anew.
	brokerIncarnation map[int32]metadata.UUID
	// shuttingDown are the brokers that asked for a controlled shutdown
	// (loop-owned, until they register again): they take no leadership
	// another broker can take, and do not count as a place leadership
	// can go (Kafka's BrokerHeartbeatManager.inControlledShutdown).
	shuttingDown map[int32]bool
	// otherShutdowns counts the controlled-shutdown heartbeats of other
	// brokers being answered (Heartbeat).
	otherShutdowns atomic.Int32
	// shutdownMoves counts the controlled-shutdown heartbeats (of any
	// broker) whose moves are being committed (Heartbeat).
	shutdownMoves atomic.Int32
	unregister    func()
	closed        atomic.Bool
	bootstrap     []metadata.Record // written once per cluster (see New)

	// UncleanElections counts the leaders this controller chose outside
	// the ISR (unclean.leader.election.enable, or ElectLeaders UNCLEAN);
	// Kafka's UncleanLeaderElectionsPerSec.
	UncleanElections atomic.Int64
}

// New replays the metadata log into an image, subscribes to its further
// commits and leadership, and returns the controller. Close unsubscribes.
// bootstrap are the records of `samsa storage format` (metadata.ReadBootstrap)
// that the first active controller of the cluster writes once.
func New(node *config.Node, log quorum.Log, clusterID string, bootstrap []metadata.Record, logger *slog.Logger) (*Controller, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{node: node, log: log, logger: logger, brokerIncarnation: map[int32]metadata.UUID{}, shuttingDown: map[int32]bool{}, bootstrap: bootstrap}
	c.imgCond = sync.NewCond(&c.imgMu)
	c.lastLeader = -1
	c.brokers = newBrokerTracker(c)
	im := metadata.Empty(clusterID)
	next := int64(0)
	err := log.Replay(func(offset int64, recs []metadata.Record) error {
		im = im.Apply(offset, recs)
		next = offset + int64(len(recs))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replaying metadata log: %w", err)
	}
	c.image.Store(im)
	c.applied.Store(im)
	c.reqc = make(chan *writeReq)
	c.kickc = make(chan struct{}, 1)
	c.loopDone = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	c.stopLoop, c.loopCtx = cancel, ctx
	go c.run(ctx)
	c.delivered = next
	c.unregister = log.Register(next, quorum.Listener{Commit: c.onCommit, LeaderChange: c.onLeaderChange, Delivered: c.onDelivered})
	return c, nil
}

// onDelivered records that every committed batch below next was applied
// and wakes WaitDelivered.
func (c *Controller) onDelivered(next int64) {
	c.imgMu.Lock()
	c.delivered = max(c.delivered, next)
	c.imgCond.Broadcast()
	c.imgMu.Unlock()
}

// WaitDelivered waits until every committed metadata batch below offset
// (a metadata log offset, as the quorum's HighWatermark) was applied to
// the image and given to every OnImage listener, or ctx ends; it reports
// whether that happened. Unlike WaitApplied it counts the LEADER_CHANGE
// control batches, which no image's Offset reaches.
func (c *Controller) WaitDelivered(ctx context.Context, offset int64) bool {
	return c.waitFor(ctx, &c.applied, func(*metadata.Image) bool { return c.delivered >= offset })
}

// Close stops following the metadata log, the loop and the broker session
// checks; writes in progress fail with ErrNotController.
func (c *Controller) Close() {
	c.fenceMu.Lock()
	c.closed.Store(true)
	c.fenceMu.Unlock()
	if c.unregister != nil {
		c.unregister()
	}
	c.stopLoop()
	<-c.loopDone
	c.fences.Wait()
	c.brokers.stop()
	c.imgMu.Lock()
	c.imgCond.Broadcast()
	c.imgMu.Unlock()
}

// StopFencing stops fencing brokers whose session expired, for the rest
// of this controller's activity: a single node calls it as it begins to
// close, since its broker stops heartbeating before its controller
// closes, and a stop longer than broker.session.timeout.ms (100,000
// partitions on a loaded machine) fenced the node's own broker, a write of
// every partition that the next start undid with another. Close stops it
// too. Safe for concurrent use.
func (c *Controller) StopFencing() { c.brokers.stop() }

// Image is the latest committed image.
func (c *Controller) Image() *metadata.Image { return c.image.Load() }

// Active reports whether this node is the active controller: it became
// active and its metadata quorum still names it the leader. The second
// part matters when the quorum leader stepped down (CheckQuorum) while
// its commits were still being applied: the leadership change reaches
// the controller only after them (quorum.Listener), 13-30 s at 10,000
// partitions and load 55, and meanwhile its own broker's heartbeats were
// answered by it, no longer the controller, so the new controller heard
// none and fenced that live broker once its session expired.
func (c *Controller) Active() bool {
	return c.active.Load() && c.log.Leader().LeaderID == c.node.NodeID
}

// Leader is the node id of the metadata quorum's leader, the active
// controller or about to be, as this node's quorum knows it now (not once
// the commits before the change are applied, see Active), -1 when
// unknown.
func (c *Controller) Leader() int32 { return c.log.Leader().LeaderID }

// OnImage registers fn to be called, in commit order, with every newly
// committed image, from the goroutine that delivers commits. fn is first
// called at once with (nil, current). Writes are answered once their
// image is committed, before fn is called with it (as Kafka's
// QuorumController completes a write independently of the brokers'
// metadata publishers): WaitApplied waits for fn. fn must not wait for a
// controller write.
func (c *Controller) OnImage(fn func(old, next *metadata.Image)) {
	c.lisMu.Lock()
	defer c.lisMu.Unlock()
	c.listeners = append(c.listeners, fn)
	fn(nil, c.image.Load())
}

// Exclusive calls fn with the image every OnImage listener has applied
// last, as a listener would be: no listener runs until fn returns, so fn
// may change what they maintain (this node's broker removing the logs
// that image no longer assigns it). fn must not call OnImage.
func (c *Controller) Exclusive(fn func(im *metadata.Image)) {
	c.lisMu.Lock()
	defer c.lisMu.Unlock()
	fn(c.image.Load())
}

// WaitImage waits until cond holds for the committed image or ctx ends;
// it reports whether cond held. The OnImage listeners (this node's
// broker) may not have applied that image yet: see WaitApplied.
func (c *Controller) WaitImage(ctx context.Context, cond func(*metadata.Image) bool) bool {
	return c.waitFor(ctx, &c.image, cond)
}

// WaitApplied waits until cond holds for the latest image every OnImage
// listener has returned from (this node's broker hosts, leads and deletes
// its partitions as it says, creations aside: the replica manager makes
// new logs afterwards) or ctx ends; it reports whether cond held.
func (c *Controller) WaitApplied(ctx context.Context, cond func(*metadata.Image) bool) bool {
	return c.waitFor(ctx, &c.applied, cond)
}

// Applied is the latest image every OnImage listener has returned from;
// its Offset is at most Image's.
func (c *Controller) Applied() *metadata.Image { return c.applied.Load() }

func (c *Controller) waitFor(ctx context.Context, im *atomic.Pointer[metadata.Image], cond func(*metadata.Image) bool) bool {
	stop := context.AfterFunc(ctx, func() {
		c.imgMu.Lock()
		c.imgCond.Broadcast()
		c.imgMu.Unlock()
	})
	defer stop()
	c.imgMu.Lock()
	defer c.imgMu.Unlock()
	for !cond(im.Load()) {
		if ctx.Err() != nil || c.closed.Load() {
			return false
		}
		c.imgCond.Wait()
	}
	return true
}

// publish stores next in p and wakes the waiters.
func (c *Controller) publish(p *atomic.Pointer[metadata.Image], next *metadata.Image) {
	c.imgMu.Lock()
	p.Store(next)
	c.imgCond.Broadcast()
	c.imgMu.Unlock()
}

// onCommit applies a committed batch to the image, completes the writes it
// holds (the loop's parked ones) and then tells the listeners: a write is
// answered once committed, not once this node's broker applied it to its
// logs, which took 10-25 s for a DeleteTopics of thousands of partitions
// (the forwarding broker's and the client's timeouts fired, and the
// re-sent request found the topics gone).
func (c *Controller) onCommit(offset int64, recs []metadata.Record) {
	c.lisMu.Lock()
	defer c.lisMu.Unlock()
	start := time.Now()
	old := c.image.Load()
	next := old.Apply(offset, recs)
	c.publish(&c.image, next)
	c.kickLoop()
	applied := time.Now()
	for _, fn := range c.listeners {
		fn(old, next)
	}
	c.publish(&c.applied, next)
	if d := time.Since(start); d > slowApply {
		// The next commit, and a new controller's activation, wait for
		// this one (the log delivers commits on one goroutine).
		c.logger.Info("slow metadata apply", "offset", offset, "records", len(recs),
			"image", applied.Sub(start).Round(time.Millisecond), "listeners", time.Since(applied).Round(time.Millisecond))
	}
}

// Thresholds past which the controller logs a metadata commit (its
// append, until the quorum committed it) or its apply (the image and the
// listeners: the broker's partitions) as slow, as etcd logs a slow
// fdatasync.
const (
	slowAppend = time.Second
	slowApply  = 500 * time.Millisecond
)

func (c *Controller) onLeaderChange(l quorum.Leadership) {
	c.leaderGen.Add(1)
	defer c.kickLoop()
	former := c.lastLeader
	if l.LeaderID >= 0 {
		c.lastLeader = l.LeaderID
	}
	was := c.active.Swap(l.LeaderID == c.node.NodeID)
	now := c.active.Load()
	if now && !was {
		if former == c.node.NodeID {
			former = -1
		}
		c.logger.Info("became the active controller", "epoch", l.Epoch, "former_leader", former)
		c.brokers.start(former)
	} else if was && !now {
		c.logger.Info("no longer the active controller", "leader", l.LeaderID, "epoch", l.Epoch)
		c.brokers.stop()
	}
}

// ValidTopicName checks a topic name as Kafka does: 1-249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return ErrInvalidTopic
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return ErrInvalidTopic
		}
	}
	return nil
}

func equalEndpoints(a, b []metadata.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CreateTopic is one topic of CreateTopics. Partitions -1 and
// ReplicationFactor -1 mean the broker defaults (num.partitions,
// default.replication.factor).
type CreateTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Assignments, when given, are the replicas of each partition.
	Assignments [][]int32
	Configs     map[string]string
}

// CreateTopics creates topics, each independently; the result holds one
// error (nil on success) per topic. With validateOnly nothing is written.
func (c *Controller) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) ([]error, error) {
	errs := make([]error, len(topics))
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		seen := map[string]bool{}
		load := newReplicaLoad(im)
		for i, t := range topics {
			trecs, err := c.createTopicRecords(im, load, t)
			if err == nil && seen[t.Name] {
				err = fmt.Errorf("%w: %s listed twice", ErrInvalidRequest, t.Name)
			}
			if err == nil {
				err = c.reserveReplicas(load, trecs)
			}
			seen[t.Name] = true
			errs[i] = err
			if err == nil {
				recs = append(recs, trecs...)
			}
		}
		if validateOnly {
			return nil, nil
		}
		return recs, nil
	})
	return errs, err
}

func (c *Controller) createTopicRecords(im *metadata.Image, load *replicaLoad, t CreateTopic) ([]metadata.Record, error) {
	if err := ValidTopicName(t.Name); err != nil {
		return nil, err
	}
	if im.Topic(t.Name) != nil {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, t.Name)
	}
	if collides(im, t.Name) {
		return nil, fmt.Errorf("%w: %s collides with an existing topic ('.' and '_' are alike in metric names)", ErrInvalidTopic, t.Name)
	}
	brokers := unfencedBrokers(im)
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: no registered broker", ErrInvalidReplication)
	}
	parts, rf := t.Partitions, t.ReplicationFactor
	if len(t.Assignments) > 0 {
		parts, rf = int32(len(t.Assignments)), int16(len(t.Assignments[0]))
	}
	if parts == -1 {
		parts = c.node.NumPartitions
	}
	if rf == -1 {
		rf = c.node.DefaultReplicationFactor
	}
	if parts <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPartitions, parts)
	}
	if rf <= 0 {
		return nil, fmt.Errorf("%w: %d, it must be at least 1", ErrInvalidReplication, rf)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: %d larger than available brokers: %d", ErrInvalidReplication, rf, len(brokers))
	}
	for k, v := range t.Configs {
		if err := config.ValidateTopicConfig(k, v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	if err := config.ValidateTopicConfigs(t.Configs, c.topicDefaults(im)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := c.checkRoom(load, brokers, parts, rf); err != nil {
		return nil, err
	}
	var id metadata.UUID
	rand.Read(id[:])
	recs := []metadata.Record{metadata.TopicRecord{Name: t.Name, ID: id}}
	keys := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := t.Configs[k]
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
	}
	for p := int32(0); p < parts; p++ {
		replicas := placeReplicas(brokers, p, rf)
		if len(t.Assignments) > 0 {
			replicas = t.Assignments[p]
		}
		recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: replicas, ISR: replicas, Leader: replicas[0], LeaderEpoch: 0})
	}
	return recs, nil
}

// collides reports a topic that differs from name only in '.' vs '_'.
func collides(im *metadata.Image, name string) bool {
	if !strings.ContainsAny(name, "._") {
		return false // only a name with '.' or '_' has a twin
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for t := range im.Topics() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == norm {
			return true
		}
	}
	return false
}

// unfencedBrokers are the brokers that can take new replicas.
func unfencedBrokers(im *metadata.Image) []*metadata.Broker {
	var out []*metadata.Broker
	for _, b := range im.Brokers() {
		if !b.Fenced {
			out = append(out, b)
		}
	}
	return out
}

// placeReplicas assigns rf brokers to partition p round-robin over a
// rack-alternating order of the brokers (Kafka's rack-aware assignment:
// with broker.rack set, consecutive replicas land on different racks when
// there are enough racks). Brokers without a rack form one rack.
func placeReplicas(brokers []*metadata.Broker, p int32, rf int16) []int32 {
	order := rackAlternating(brokers)
	out := make([]int32, rf)
	for i := range out {
		out[i] = order[(int(p)+i)%len(order)]
	}
	return out
}

// rackAlternating lists broker ids taking one broker of each rack in turn
// (racks and brokers in id order).
func rackAlternating(brokers []*metadata.Broker) []int32 {
	byRack := map[string][]int32{}
	var racks []string
	for _, b := range brokers {
		r := ""
		if b.Rack != nil {
			r = *b.Rack
		}
		if _, ok := byRack[r]; !ok {
			racks = append(racks, r)
		}
		byRack[r] = append(byRack[r], b.ID)
	}
	sort.Strings(racks)
	out := make([]int32, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// DeleteTopics deletes topics by name; one error per topic.
func (c *Controller) DeleteTopics(ctx context.Context, names []string) ([]error, error) {
	errs := make([]error, len(names))
	if !c.node.DeleteTopicEnable {
		for i := range errs {
			errs[i] = ErrDeleteDisabled
		}
		return errs, nil
	}
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		seen := map[string]bool{}
		for i, n := range names {
			t := im.Topic(n)
			if t == nil || seen[n] {
				errs[i] = fmt.Errorf("%w: %s", ErrUnknownTopic, n)
				continue
			}
			seen[n] = true
			recs = append(recs, metadata.RemoveTopicRecord{ID: t.ID})
		}
		return recs, nil
	})
	return errs, err
}

// CreatePartitions grows topic to count partitions.
func (c *Controller) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	return c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return c.createPartitionRecords(im, topic, count, assignments, validateOnly)
	})
}

func (c *Controller) createPartitionRecords(im *metadata.Image, topic string, count int32, assignments [][]int32, validateOnly bool) ([]metadata.Record, error) {
	t := im.Topic(topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	have := int32(len(t.Partitions))
	switch {
	case count == have:
		return nil, fmt.Errorf("%w: topic %s already has %d partitions", ErrInvalidPartitions, topic, have)
	case count < have:
		return nil, fmt.Errorf("%w: topic %s has %d partitions; %d would not be an increase", ErrInvalidPartitions, topic, have, count)
	}
	if assignments != nil && len(assignments) != int(count-have) {
		return nil, fmt.Errorf("%w: %d assignments for %d new partitions", ErrInvalidReplicaAssignment, len(assignments), count-have)
	}
	rf := int16(len(t.Partitions[0].Replicas))
	for _, a := range assignments {
		if err := validReplicas(im, a); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidReplicaAssignment, err)
		}
		if len(a) != int(rf) {
			return nil, fmt.Errorf("%w: %d replicas, the topic has %d", ErrInvalidReplicaAssignment, len(a), rf)
		}
	}
	brokers := unfencedBrokers(im)
	if assignments == nil {
		if len(brokers) == 0 {
			return nil, fmt.Errorf("%w: no registered broker", ErrInvalidReplication)
		}
		if int(rf) > len(brokers) {
			return nil, fmt.Errorf("%w: %d larger than available brokers: %d", ErrInvalidReplication, rf, len(brokers))
		}
	}
	load := newReplicaLoad(im)
	if err := c.checkRoom(load, brokers, count-have, rf); err != nil {
		return nil, err
	}
	var recs []metadata.Record
	for p := have; p < count; p++ {
		replicas := placeReplicas(brokers, p, rf)
		if assignments != nil {
			replicas = assignments[p-have]
		}
		recs = append(recs, metadata.PartitionRecord{TopicID: t.ID, Partition: p, Replicas: replicas, ISR: replicas, Leader: replicas[0]})
	}
	if err := c.reserveReplicas(load, recs); err != nil {
		return nil, err
	}
	if validateOnly {
		return nil, nil
	}
	return recs, nil
}

// ConfigChange sets (Value non-nil) or deletes one config.
type ConfigChange struct {
	Name  string
	Value *string
}

// AlterTopicConfigs applies changes to topic; with replace, configs not in
// changes are removed first (AlterConfigs semantics), otherwise only the
// listed ones change (IncrementalAlterConfigs).
func (c *Controller) AlterTopicConfigs(ctx context.Context, topic string, changes []ConfigChange, replace, validateOnly bool) error {
	return c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return c.alterTopicConfigRecords(im, topic, changes, replace, validateOnly)
	})
}

func (c *Controller) alterTopicConfigRecords(im *metadata.Image, topic string, changes []ConfigChange, replace, validateOnly bool) ([]metadata.Record, error) {
	t := im.Topic(topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	var recs []metadata.Record
	listed := map[string]bool{}
	for _, ch := range changes {
		if _, ok := config.LookupTopicConfig(ch.Name); !ok {
			if _, set := t.Configs[ch.Name]; ch.Value == nil && !set {
				continue // deleting what is not there changes nothing, as in Kafka
			}
			return nil, fmt.Errorf("%w: unknown topic config %s", ErrInvalidConfig, ch.Name)
		}
		if ch.Value != nil {
			if err := config.ValidateTopicConfig(ch.Name, *ch.Value); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
			}
		}
		listed[ch.Name] = true
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: topic, Name: ch.Name, Value: ch.Value})
	}
	if replace {
		for k := range t.Configs {
			if !listed[k] {
				recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: topic, Name: k})
			}
		}
	}
	// The configs as they would be, checked together (Kafka validates the
	// merged config).
	merged := map[string]string{}
	if !replace {
		maps.Copy(merged, t.Configs)
	}
	for _, ch := range changes {
		if ch.Value != nil {
			merged[ch.Name] = *ch.Value
		} else {
			delete(merged, ch.Name)
		}
	}
	if err := config.ValidateTopicConfigs(merged, c.topicDefaults(im)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if validateOnly {
		return nil, nil
	}
	recs = append(recs, c.uncleanAfterConfig(im, recs, topic)...)
	return recs, nil
}

// AllocateProducerIDs reserves a block of producer ids for broker and
// returns its first id (AllocateProducerIds, KIP-730).
func (c *Controller) AllocateProducerIDs(ctx context.Context, broker int32) (first int64, size int, err error) {
	err = c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		first = im.NextProducerID
		return []metadata.Record{metadata.ProducerIDsRecord{BrokerID: broker, NextProducerID: first + ProducerIDBlockSize}}, nil
	})
	return first, ProducerIDBlockSize, err
}

// ErrStaleBrokerEpoch: a heartbeat from a broker epoch that is not the
// registered one (STALE_BROKER_EPOCH); the broker registers again.
var ErrStaleBrokerEpoch = errors.New("stale broker epoch")

// ErrStaleEpoch: AlterPartition from a leader whose leader epoch is not
// current (FENCED_LEADER_EPOCH).
var ErrStaleEpoch = errors.New("stale leader epoch")

// ErrInvalidUpdateVersion: AlterPartition with a stale partition epoch
// (INVALID_UPDATE_VERSION).
var ErrInvalidUpdateVersion = errors.New("stale partition epoch")

// ErrIneligibleReplica: AlterPartition adding a replica that is not
// eligible (INELIGIBLE_REPLICA): not a replica of the partition or fenced.
var ErrIneligibleReplica = errors.New("ineligible replica")

// AlterPartition sets the ISR of a partition as its leader asks (KIP-497):
// the request must carry the current leader epoch and partition epoch; the
// new ISR must hold the leader and only unfenced replicas of the partition.
// It returns the committed ISR and partition epoch.
func (c *Controller) AlterPartition(ctx context.Context, brokerID int32, topicID metadata.UUID, partition, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	res, err := c.AlterPartitions(ctx, brokerID, []AlterPartitionItem{{TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr}})
	if err != nil {
		return nil, 0, err
	}
	return res[0].ISR, res[0].PartitionEpoch, res[0].Err
}

// AlterPartitionItem is one partition of AlterPartition (v2+: by topic id).
type AlterPartitionItem struct {
	TopicID                                metadata.UUID
	Partition, LeaderEpoch, PartitionEpoch int32
	ISR                                    []int32
}

// AlterPartitionResult is the answer for one AlterPartitionItem: the
// committed ISR and partition epoch, or Err (ErrStaleEpoch,
// ErrInvalidUpdateVersion, ErrIneligibleReplica, ErrUnknownTopic,
// ErrInvalidRequest).
type AlterPartitionResult struct {
	ISR            []int32
	PartitionEpoch int32
	Err            error
}

// AlterPartitions is AlterPartition for many partitions of one leader
// broker (a broker batches the ISR changes of its partitions, as Kafka's
// AlterPartitionManager), checked and committed in writes of at most
// chunkRecords partitions, each over the image the ones before make
// (Kafka's non-atomic controller result): the leaders of a killed broker's
// followers shrink thousands of ISRs at once, and one entry of 3,269
// records took 2.8 s to commit at 10,000 partitions. The error is a
// write's (ErrNotController, a commit failure), for every item, though
// the writes before it may have committed; otherwise each result carries
// its own.
func (c *Controller) AlterPartitions(ctx context.Context, brokerID int32, items []AlterPartitionItem) ([]AlterPartitionResult, error) {
	res := make([]AlterPartitionResult, len(items))
	var reqs []*writeReq
	for lo := 0; lo < len(items); lo += chunkRecords {
		hi := min(lo+chunkRecords, len(items))
		r := &writeReq{ctx: ctx, fn: alterPartitionsFn(brokerID, items[lo:hi], res[lo:hi])}
		if err := c.submit(ctx, r); err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	for _, r := range reqs {
		if err := c.await(ctx, r); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// alterPartitionsFn is the write of items, their results in res.
func alterPartitionsFn(brokerID int32, items []AlterPartitionItem, res []AlterPartitionResult) func(im *metadata.Image) ([]metadata.Record, error) {
	return func(im *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		for i, it := range items {
			rec, err := alterPartitionRecord(im, brokerID, it.TopicID, it.Partition, it.LeaderEpoch, it.PartitionEpoch, it.ISR)
			if err != nil {
				res[i] = AlterPartitionResult{Err: err}
				continue
			}
			// A partition named twice: the second sees the first.
			im = im.Apply(im.Offset+1, []metadata.Record{rec})
			res[i] = AlterPartitionResult{ISR: rec.ISR, PartitionEpoch: rec.PartitionEpoch}
			recs = append(recs, rec)
		}
		return recs, nil
	}
}

// alterPartitionRecord checks one partition of AlterPartition against im
// and returns its new record.
func alterPartitionRecord(im *metadata.Image, brokerID int32, topicID metadata.UUID, partition, leaderEpoch, partitionEpoch int32, isr []int32) (metadata.PartitionRecord, error) {
	var none metadata.PartitionRecord
	t := im.TopicByID(topicID)
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return none, ErrUnknownTopic
	}
	p := t.Partitions[partition]
	switch {
	case p.Leader != brokerID:
		return none, fmt.Errorf("%w: broker %d is not the leader (%d)", ErrStaleEpoch, brokerID, p.Leader)
	case leaderEpoch != p.LeaderEpoch:
		return none, fmt.Errorf("%w: %d, current %d", ErrStaleEpoch, leaderEpoch, p.LeaderEpoch)
	case partitionEpoch != p.PartitionEpoch:
		return none, fmt.Errorf("%w: %d, current %d", ErrInvalidUpdateVersion, partitionEpoch, p.PartitionEpoch)
	}
	hasLeader := false
	for _, r := range isr {
		if r == brokerID {
			hasLeader = true
		}
		found := false
		for _, rr := range p.Replicas {
			found = found || rr == r
		}
		b := im.Broker(r)
		if !found || b == nil || b.Fenced {
			return none, fmt.Errorf("%w: %d", ErrIneligibleReplica, r)
		}
		if slices.Contains(p.LostReplicas, r) && !slices.Contains(p.ISR, r) {
			// Its broker cannot host it (AssignReplicasToDirs to
			// DirectoryId.LOST, KIP-858) until it says otherwise.
			return none, fmt.Errorf("%w: %d (its broker reported it lost)", ErrIneligibleReplica, r)
		}
	}
	if !hasLeader {
		return none, fmt.Errorf("%w: the ISR must hold the leader", ErrInvalidRequest)
	}
	rec := metadata.PartitionRecord{TopicID: topicID, Partition: partition, Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, LostReplicas: p.LostReplicas, ISR: isr,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
	// A reassignment completes once every adding replica is in sync.
	maybeCompleteReassignment(im, &rec)
	rec.LostReplicas = lostAmong(p.LostReplicas, rec.Replicas)
	return rec, nil
}

// replicaLoad is the partition replicas each broker hosts: the image's
// counts (kept by Apply, O(1) to read) plus the reservations of this
// request.
type replicaLoad struct {
	im    *metadata.Image
	added map[int32]int
}

func newReplicaLoad(im *metadata.Image) *replicaLoad {
	return &replicaLoad{im: im, added: map[int32]int{}}
}

func (l *replicaLoad) count(b int32) int { return l.im.ReplicaCount(b) + l.added[b] }

// checkRoom refuses, before any record is built, parts new partitions of
// rf replicas that cannot fit on brokers under log.partitions.max even if
// spread perfectly: without it a CreateTopics or CreatePartitions asking
// for 2^31 partitions had the controller loop build 2^31 records (GBs,
// minutes) before reserveReplicas could refuse them.
func (c *Controller) checkRoom(load *replicaLoad, brokers []*metadata.Broker, parts int32, rf int16) error {
	limit := int64(c.node.LogPartitionsMax)
	if limit <= 0 {
		return nil
	}
	var room int64
	for _, b := range brokers {
		room += max(0, limit-int64(load.count(b.ID)))
	}
	if need := int64(parts) * int64(rf); need > room {
		return fmt.Errorf("%w: %d partitions of %d replicas need %d partition replicas, the %d available brokers have room for %d under their limit of %d each (log.partitions.max)", ErrInvalidPartitions, parts, rf, need, len(brokers), room, limit)
	}
	return nil
}

// reserveReplicas adds the replicas of recs' partitions to load, or
// changes nothing and returns ErrInvalidPartitions when that would put
// more than log.partitions.max on a broker: creation a node cannot host is
// refused up front, before any node tries to open the logs.
func (c *Controller) reserveReplicas(load *replicaLoad, recs []metadata.Record) error {
	limit := int(c.node.LogPartitionsMax)
	if limit <= 0 {
		return nil
	}
	add := map[int32]int{}
	for _, r := range recs {
		if p, ok := r.(metadata.PartitionRecord); ok {
			for _, b := range p.Replicas {
				add[b]++
			}
		}
	}
	for b, n := range add {
		if have := load.count(b); have+n > limit {
			return fmt.Errorf("%w: %d more partition replicas on broker %d, which hosts %d, would pass its limit of %d (log.partitions.max)", ErrInvalidPartitions, n, b, have, limit)
		}
	}
	for b, n := range add {
		load.added[b] += n
	}
	return nil
}
