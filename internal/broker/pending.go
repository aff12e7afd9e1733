package broker

import (
	"context"
	"time"

	"github.com/samsahq/samsa/internal/replica"
)

// awaitPending waits until deadline at most for the logs of the
// partitions a request names that this broker was given but has not made
// yet (replica.Manager.AwaitPending), so that a Produce or Fetch right
// after a topic's creation is served rather than answered
// NOT_LEADER_OR_FOLLOWER, on which clients back off and refresh their
// metadata. names calls add for each partition of the request. One look at
// the Manager when nothing is pending, the usual case.
func (b *Broker) awaitPending(ctx context.Context, deadline time.Time, names func(add func(topic string, partition int32))) {
	if b.replicas.Pending() == 0 {
		return
	}
	var tps []replica.TopicPartition
	names(func(topic string, partition int32) {
		if b.replicas.Get(topic, partition) == nil {
			tps = append(tps, replica.TopicPartition{Topic: topic, Partition: partition})
		}
	})
	if len(tps) > 0 {
		b.replicas.AwaitPending(ctx, tps, deadline)
	}
}
