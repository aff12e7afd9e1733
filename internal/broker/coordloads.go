package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
)

// coordinatorLoads follows which partitions of a coordinator's internal
// topic (__consumer_offsets for groups, __transaction_state for
// transactions) this broker leads: it loads them into the coordinator in
// the background when the broker becomes their leader and unloads them
// when it no longer is, as Kafka's coordinators do on leadership changes.
type coordinatorLoads struct {
	topic         string
	numPartitions int32 // the coordinator's; partitions above are never loaded
	// load and unload are the coordinator's; load's error unloaded means
	// an unload overtook it.
	load     func(ctx context.Context, partition, leaderEpoch int32) error
	unload   func(partition int32)
	unloaded error

	ctx    context.Context // canceled by cancel: loads in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // partition loads

	mu     sync.Mutex      // guards loaded
	loaded map[int32]int32 // partition -> leader epoch it was loaded at

	createMu sync.Mutex // one creation of the topic at a time
}

func newCoordinatorLoads(topic string, numPartitions int32, load func(ctx context.Context, partition, leaderEpoch int32) error, unload func(int32), unloaded error) *coordinatorLoads {
	ctx, cancel := context.WithCancel(context.Background())
	return &coordinatorLoads{topic: topic, numPartitions: numPartitions, load: load, unload: unload, unloaded: unloaded,
		ctx: ctx, cancel: cancel, loaded: map[int32]int32{}}
}

// apply unloads the partitions this broker no longer leads at the epoch
// they were loaded at and starts loading those it newly leads. Called from
// applyImage, with the controller's lock held: it never blocks on the log.
func (c *coordinatorLoads) apply(b *Broker, next *metadata.Image) {
	t := next.Topic(c.topic)
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, epoch := range c.loaded {
		if t == nil || int(p) >= len(t.Partitions) || t.Partitions[p].Leader != b.node.NodeID || t.Partitions[p].LeaderEpoch != epoch {
			delete(c.loaded, p)
			c.unload(p)
		}
	}
	if t == nil {
		return
	}
	for i, pm := range t.Partitions {
		p := int32(i)
		if pm.Leader != b.node.NodeID || p >= c.numPartitions {
			continue
		}
		if _, ok := c.loaded[p]; ok {
			continue
		}
		c.loaded[p] = pm.LeaderEpoch
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := c.load(c.ctx, p, pm.LeaderEpoch); err != nil && c.ctx.Err() == nil && !errors.Is(err, c.unloaded) {
				b.logger.Error("loading coordinator partition failed", "topic", c.topic, "partition", p, "err", err)
				c.mu.Lock()
				if c.loaded[p] == pm.LeaderEpoch {
					delete(c.loaded, p) // retried on the next image
				}
				c.mu.Unlock()
			}
		}()
	}
}

// ensureTopic returns the internal topic, creating it when missing with
// partitions partitions and replicationFactor replicas capped by the
// brokers registered (all of them when not positive), with the configs
// that configs gives for the replication factor used.
func (c *coordinatorLoads) ensureTopic(ctx context.Context, b *Broker, partitions int32, replicationFactor int16, configs func(rf int16) map[string]string) (*metadata.Topic, error) {
	if t := b.image().Topic(c.topic); t != nil {
		return t, nil
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	im := b.image()
	if t := im.Topic(c.topic); t != nil {
		return t, nil
	}
	rf := replicationFactor
	if n := int16(len(im.Brokers())); rf > n || rf <= 0 {
		rf = n
	}
	errs, err := b.createTopics(ctx, []controller.CreateTopic{{
		Name:              c.topic,
		Partitions:        partitions,
		ReplicationFactor: rf,
		Configs:           configs(rf),
	}})
	if err == nil && len(errs) == 1 && errs[0] != nil && !errors.Is(errs[0], controller.ErrTopicExists) {
		err = errs[0]
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", c.topic, err)
	}
	b.logger.Info("created internal topic", "topic", c.topic, "partitions", partitions, "replication_factor", rf)
	// The topic is committed (or was being created by another broker:
	// TOPIC_ALREADY_EXISTS) but this node may not have applied it yet,
	// CreateTopics answering once committed: wait until this node's
	// broker applied it (internal topics' logs are made in the apply),
	// else the caller fails (a share acknowledgement applied in
	// memory but never written to __share_group_state).
	wctx, cancel := context.WithTimeout(ctx, topicVisibleTimeout)
	defer cancel()
	var t *metadata.Topic
	if b.ctrl.WaitApplied(wctx, func(im *metadata.Image) bool { t = im.Topic(c.topic); return t != nil }) {
		return t, nil
	}
	return nil, fmt.Errorf("%s not in the metadata after creation", c.topic)
}

// topicVisibleTimeout bounds ensureTopic's wait for a created internal
// topic to reach this node's metadata image.
const topicVisibleTimeout = 10 * time.Second
