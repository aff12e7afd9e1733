package samsa

import (
	"context"
	"sync"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// MetadataImage is the metadata image n's controller holds.
func MetadataImage(n *Node) *metadata.Image { return n.ctrl.Image() }

// MetadataSnapshotStats are n's metadata snapshot figures: the newest
// snapshot written or loaded, and how many were loaded.
func MetadataSnapshotStats(n *Node) quorum.SnapshotStats {
	return n.quorum.(quorum.Snapshots).SnapshotStats()
}

// ConsumerBytesOut is the record bytes n's broker has served to consumers
// (KIP-392 tests: which replica a consumer reads from).
func ConsumerBytesOut(n *Node) int64 { return n.broker.ConsumerBytesOut() }

// StopWithoutControlledShutdown stops node id of c as a crash would, its
// leaderships left for the controller to move once its session expires
// (the disk-fault tests crash its filesystem first).
func StopWithoutControlledShutdown(c *Cluster, id int32) error {
	if n := c.Node(id); n != nil {
		n.noControlledShutdown.Store(true)
	}
	return c.StopNode(id)
}

// DirReportsSent is how many AssignReplicasToDirs n's broker sent.
func DirReportsSent(n *Node) int64 { return n.broker.DirReportsSent() }

// FetchSessions is the number of fetch sessions n's broker caches.
func FetchSessions(n *Node) int { return n.broker.FetchSessions() }

// FetchPartitionsSent is how many partitions n's follower fetches named.
func FetchPartitionsSent(n *Node) int64 { return n.broker.FetchPartitionsSent() }

// ConsumerPartitionsRead is how many partitions consumers' fetches read
// on n's broker.
func ConsumerPartitionsRead(n *Node) int64 { return n.broker.ConsumerPartitionsRead() }

// ControllerActive reports whether n's controller is the active one.
func ControllerActive(n *Node) bool { return n.ctrl.Active() }

// HoldMetadataApply holds n's metadata listeners (its broker's apply to
// its logs) on the first commit whose image satisfies cond, until release
// is called; held closes once that commit is held. A stand-in for an
// apply that takes seconds (the deletion of thousands of partitions).
func HoldMetadataApply(n *Node, cond func(*metadata.Image) bool) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once, armed sync.Once
	n.ctrl.OnImage(func(old, next *metadata.Image) {
		if old == nil || !cond(next) {
			return
		}
		armed.Do(func() {
			close(h)
			<-r
		})
	})
	return h, func() { once.Do(func() { close(r) }) }
}

// MetadataCommitted is the committed end of single node n's metadata log
// (its high-watermark): the records below it are in the log, fsynced.
func MetadataCommitted(n *Node) int64 {
	info, _ := n.local.Describe(context.Background()) // never fails
	return info.HighWatermark
}
