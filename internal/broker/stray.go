package broker

import (
	"slices"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/parallel"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
)

// removeStrayReplicas deletes every log of the log dirs that im, the first
// image caught up with the quorum after this process started, does not
// assign this broker: logs of topics deleted, and of replicas moved away,
// whose deletion a crash cut short after it was committed (the image the
// node replays at start already lacks them, so no image change ever
// names them again), and logs whose partition.metadata names a topic id
// other than the image's for their name (a topic deleted, then created
// again under the same name). Kafka's broker does the same on its first
// metadata publish (BrokerMetadataPublisher, LogManager.findStrayReplicas).
// A log without partition.metadata (an older data dir) takes the image's
// topic id. A stray log that was hosted (of another topic id, while the
// image assigns the partition) is hosted again on a new, empty log. The
// metadata log (__cluster_metadata) is never a stray. Called by Start, as
// an OnImage listener would be (Controller.Exclusive); it logs how many
// logs it deleted.
func (b *Broker) removeStrayReplicas(im *metadata.Image) {
	self := b.node.NodeID
	type check struct {
		tp  storage.TopicPartition
		log *storage.Log
		t   *metadata.Topic
		err error
		// other: the log names another topic id.
		other bool
	}
	var checks []*check
	var gone []replica.TopicPartition
	for tp, l := range b.logs.Logs() {
		if tp.Topic == quorum.MetadataTopic {
			continue
		}
		t := im.Topic(tp.Topic)
		if t == nil || int(tp.Partition) >= len(t.Partitions) || !slices.Contains(t.Partitions[tp.Partition].Replicas, self) {
			gone = append(gone, replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			continue
		}
		checks = append(checks, &check{tp: tp, log: l, t: t})
	}
	// Each log's partition.metadata is read once (the loaded logs have
	// not read it), on the workers that load the logs.
	workers := int(b.node.NumRecoveryThreadsPerDataDir) * max(1, len(b.node.LogDirs))
	parallel.For(workers, len(checks), func(i int) {
		c := checks[i]
		id, ok, err := c.log.TopicID()
		switch {
		case err != nil:
			c.err = err
		case !ok:
			c.err = c.log.SetTopicID(c.t.ID)
		default:
			c.other = id != c.t.ID
		}
	})
	var rehost []*check
	for _, c := range checks {
		if c.err != nil {
			// Left as it is: hosted under the image's topic id.
			b.logger.Warn("reading or writing partition.metadata failed", "topic", c.tp.Topic, "partition", c.tp.Partition, "err", c.err)
			continue
		}
		if c.other {
			gone = append(gone, replica.TopicPartition{Topic: c.tp.Topic, Partition: c.tp.Partition})
			rehost = append(rehost, c)
		}
	}
	if len(gone) == 0 {
		return
	}
	b.logger.Info("deleting stray logs: partitions this broker no longer replicates, or of another topic id (deleted or moved while it was down)",
		"logs", len(gone), "other_topic_id", len(rehost))
	for i, err := range b.replicas.RemoveBatch(gone) {
		if err != nil {
			b.logger.Error("deleting stray log failed", "topic", gone[i].Topic, "partition", gone[i].Partition, "err", err)
		}
	}
	// The checkpoints drop them now, once a start, not at their next
	// interval (RemoveBatch leaves the storage checkpoints to it).
	if err := b.logs.Checkpoint(); err != nil {
		b.logger.Warn("writing the log dirs' checkpoints failed", "err", err)
	}
	if err := b.replicas.Checkpoint(); err != nil {
		b.logger.Warn("writing replication-offset-checkpoint failed", "err", err)
	}
	var batch []replica.ApplyItem
	for _, c := range rehost {
		b.applyPartition(&batch, c.t, nil, c.tp.Partition, b.logConfig(c.t))
	}
	b.applyPartitions(batch)
}
