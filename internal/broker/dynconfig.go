package broker

import (
	"context"
	"maps"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
)

// config is the configuration in effect: the static properties with the
// dynamic broker configs of the metadata image applied (Kafka's
// precedence: this broker's DYNAMIC_BROKER_CONFIG, the cluster-wide
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG).
func (b *Broker) config() *config.Node {
	if n := b.dyn.Load(); n != nil {
		return n
	}
	return b.node // a Broker built by a test without New
}

// brokerResource is this broker's BROKER resource name, its id.
func (b *Broker) brokerResource() string { return strconv.Itoa(int(b.node.NodeID)) }

// applyDynamicConfigs recomputes the configuration in effect when next
// changes the dynamic configs of this broker or the cluster-wide defaults,
// and applies what is not resolved per partition at once: the replication
// throttle rates and the log cleaner's settings. It reports whether the
// configuration changed (partitions then take their log configs again).
// Configs that do not parse together (each was checked when set) are
// logged and the previous configuration stays, as Kafka keeps its config
// when a dynamic update fails.
func (b *Broker) applyDynamicConfigs(old, next *metadata.Image) bool {
	self := b.brokerResource()
	def, own := next.BrokerConfigs(""), next.BrokerConfigs(self)
	if old != nil && maps.Equal(old.BrokerConfigs(""), def) && maps.Equal(old.BrokerConfigs(self), own) {
		return false
	}
	n, err := b.node.WithDynamic(def, own)
	if err != nil {
		b.logger.Error("dynamic broker configs not applied", "err", err)
		return false
	}
	prev := b.dyn.Swap(n)
	if prev == n {
		return false
	}
	b.leaderThrottle.SetRate(n.LeaderReplicationThrottledRate)
	b.followerThrottle.SetRate(n.FollowerReplicationThrottledRate)
	if b.logs != nil {
		b.logs.SetCleaner(storage.CleanerOptions{
			Backoff:             n.LogCleanerBackoff,
			DedupeBufferSize:    n.LogCleanerDedupeBufferSize,
			IOMaxBytesPerSecond: n.LogCleanerIOMaxBytesPerSecond,
		})
	}
	if prev.MaxConnections != n.MaxConnections || prev.MaxConnectionsPerIP != n.MaxConnectionsPerIP ||
		!maps.Equal(prev.MaxConnectionsPerIPOverrides, n.MaxConnectionsPerIPOverrides) {
		b.updateQuotas(QuotaConfig(n))
	}
	if old != nil {
		b.logger.Info("dynamic broker configs applied", "default", len(def), "broker", len(own))
	}
	return true
}

// updateQuotas applies qc to the connection quotas of the node's
// listeners. Host names of the overrides are resolved then, as Kafka does
// when it reconfigures its ConnectionQuotas, but on a goroutine of the
// broker's: image listeners must not wait on the network. Updates apply in
// order: each goroutine applies the latest qc.
func (b *Broker) updateQuotas(qc server.QuotaConfig) {
	b.quotaMu.Lock()
	b.quotaNext = &qc
	b.quotaMu.Unlock()
	if b.closed.Load() {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		b.quotaMu.Lock()
		defer b.quotaMu.Unlock()
		if b.quotaNext == nil {
			return // a later goroutine applied it
		}
		qc := *b.quotaNext
		b.quotaNext = nil
		for _, q := range b.quotas {
			if q == nil {
				continue
			}
			if err := q.Update(ctx, qc); err != nil {
				b.logger.Error("connection quotas not updated", "err", err)
			}
		}
	}()
}

// QuotaConfig is the connection limits of n (max.connections,
// max.connections.per.ip and its overrides) for server.NewQuotas and
// Quotas.Update; Protected is left empty. max.connections at Kafka's
// default (Integer.MAX_VALUE) becomes storage.DefaultMaxConnections: what
// the descriptor limit leaves once the logs have their files.
func QuotaConfig(n *config.Node) server.QuotaConfig {
	maxConns := int(n.MaxConnections)
	if n.MaxConnections == math.MaxInt32 {
		maxConns = storage.DefaultMaxConnections(int(n.LogOpenFilesMax))
	}
	qc := server.QuotaConfig{
		MaxConnections:      maxConns,
		MaxConnectionsPerIP: int(n.MaxConnectionsPerIP),
		PerIPOverrides:      map[string]int{},
	}
	for h, c := range n.MaxConnectionsPerIPOverrides {
		qc.PerIPOverrides[h] = int(c)
	}
	return qc
}

// reconfigure gives the hosted partitions of t its log config again.
func (b *Broker) reconfigure(name string, t *metadata.Topic) {
	var cfg *replica.LogConfig
	for i := range t.Partitions {
		p := b.replicas.Get(name, int32(i))
		if p == nil {
			continue
		}
		if cfg == nil {
			c := b.logConfig(t)
			cfg = &c
		}
		p.SetConfig(*cfg)
	}
}

// brokerSource is the DescribeConfigs source of broker property name as
// set somewhere (config.Node.BrokerSource): the highest level that sets it.
func (b *Broker) brokerSource(name string) kmsg.ConfigSource {
	if b.ctrl == nil {
		return kmsg.ConfigSourceStaticBrokerConfig // a Broker built by a test without New
	}
	im := b.image()
	if _, ok := im.BrokerConfigs(b.brokerResource())[name]; ok {
		return kmsg.ConfigSourceDynamicBrokerConfig
	}
	if _, ok := im.BrokerConfigs("")[name]; ok {
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceStaticBrokerConfig
}

// GroupConfig is the configuration in effect for group id: the broker's
// group.consumer.* and group.share.* properties (with the dynamic broker
// configs applied) overridden by the group's configs in the metadata
// image (IncrementalAlterConfigs on GROUP resources), values outside the
// broker's current bounds capped to them (config.Node.GroupConfig). It
// reads the latest image this node applied, so every node answers the
// same once the change reached it. Safe for concurrent use; cheap (two
// map lookups and a struct).
func (b *Broker) GroupConfig(id string) config.Group {
	var own map[string]string
	if b.ctrl != nil {
		own = b.image().GroupConfigs(id)
	}
	return b.config().GroupConfig(own)
}
