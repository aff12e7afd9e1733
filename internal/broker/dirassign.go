package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/replica"
)

// dirOnline is the directory reported for a replica this broker hosts
// again when no log dir has a parsable directory.id: KIP-858's
// DirectoryId.MIGRATING (Uuid 0:2), which Kafka's controller counts as
// online. The controller only tells DirectoryId.LOST from the others.
var dirOnline = metadata.UUID{15: 2}

// dirKey names one partition of an assignment.
type dirKey struct {
	topicID   metadata.UUID
	partition int32
}

// dirReports gathers the AssignReplicasToDirs this broker owes the
// controller (KIP-858): the partitions whose log it cannot open or create
// (to DirectoryId.LOST) and those it hosts again that the image still
// lists as lost. One request carries all that is queued when it is sent,
// as Kafka's AssignmentsManager batches them: 1,000 partitions failing at
// start are one request, not 1,000.
type dirReports struct {
	mu      sync.Mutex               // guards pending
	pending map[dirKey]metadata.UUID // the latest directory of each partition
	kick    chan struct{}            // buffered 1: something is pending
	sent    atomic.Int64             // AssignReplicasToDirs sent (DirReportsSent)
}

// DirReportsSent is how many AssignReplicasToDirs this broker sent (or
// asked its own active controller directly), successful or not. Safe for
// concurrent use.
func (b *Broker) DirReportsSent() int64 { return b.dirs.sent.Load() }

// queueDirs queues the directory dir for each of keys and wakes the
// sender. It does not block.
func (b *Broker) queueDirs(keys []dirKey, dir metadata.UUID) {
	if len(keys) == 0 {
		return
	}
	r := &b.dirs
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[dirKey]metadata.UUID{}
	}
	for _, k := range keys {
		r.pending[k] = dir
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// replicasOffline is replica.Options.OnOffline: the replicas go to
// DirectoryId.LOST.
func (b *Broker) replicasOffline(offline []replica.OfflineReplica) {
	keys := make([]dirKey, len(offline))
	for i, o := range offline {
		keys[i] = dirKey{o.TopicID, o.Partition}
	}
	b.queueDirs(keys, controller.DirectoryLost)
}

// onlineDir is the directory.id of one of this broker's log dirs, as
// AssignReplicasToDirs carries it for a replica hosted again.
func (b *Broker) onlineDir() metadata.UUID {
	if b.logs == nil {
		return dirOnline
	}
	ids := b.logs.DirectoryIDs()
	for _, path := range slices.Sorted(maps.Keys(ids)) {
		var id metadata.UUID
		if raw, err := base64.RawURLEncoding.DecodeString(ids[path]); err == nil && len(raw) == len(id) {
			copy(id[:], raw)
			if id != controller.DirectoryLost && id != (metadata.UUID{}) {
				return id
			}
		}
	}
	return dirOnline
}

// reportDirs sends the queued assignments until the broker stops: one
// request at a time, retried with backoff while it fails (no controller,
// a stale broker epoch before the registration commits).
func (b *Broker) reportDirs() {
	defer b.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.stop
		cancel()
	}()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-b.stop:
			return
		case <-b.dirs.kick:
		}
		r := &b.dirs
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		r.mu.Unlock()
		items := b.dirsToSend(batch)
		if len(items) == 0 {
			continue
		}
		err := b.sendDirs(ctx, items)
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// Warned once per run of failures: a controller of an older
		// Samsa never serves the API, and the broker retries every 2 s.
		level := slog.LevelWarn
		if backoff > 100*time.Millisecond {
			level = slog.LevelDebug
		}
		b.logger.Log(ctx, level, "reporting replica directories to the controller failed; retrying", "partitions", len(items), "err", err)
		// Back in the queue, unless a newer report replaced them.
		r.mu.Lock()
		if r.pending == nil {
			r.pending = map[dirKey]metadata.UUID{}
		}
		for _, it := range items {
			k := dirKey{it.TopicID, it.Partition}
			if _, newer := r.pending[k]; !newer {
				r.pending[k] = it.Dir
			}
		}
		r.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-b.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// dirsToSend is the part of batch that would change the image: a lost
// replica the image does not list as lost, or a hosted one it does, of a
// partition this broker is still a replica of.
func (b *Broker) dirsToSend(batch map[dirKey]metadata.UUID) []controller.DirAssignment {
	im := b.image()
	self := b.node.NodeID
	var items []controller.DirAssignment
	for k, dir := range batch {
		t := im.TopicByID(k.topicID)
		if t == nil || k.partition < 0 || int(k.partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[k.partition]
		if !slices.Contains(p.Replicas, self) {
			continue
		}
		lost := slices.Contains(p.LostReplicas, self)
		if dir == controller.DirectoryLost && lost && p.Leader != self && (len(p.ISR) == 1 || !slices.Contains(p.ISR, self)) {
			continue // the controller knows
		}
		if dir != controller.DirectoryLost && !lost {
			continue
		}
		items = append(items, controller.DirAssignment{TopicID: k.topicID, Partition: k.partition, Dir: dir})
	}
	return items
}

// sendDirs sends one AssignReplicasToDirs (this node's own controller
// directly when it is the active one). Per-partition errors are logged:
// the partition is gone or moved, nothing to send again.
func (b *Broker) sendDirs(ctx context.Context, items []controller.DirAssignment) error {
	epoch := b.brokerEpoch.Load()
	if epoch < 0 {
		return errors.New("not registered yet")
	}
	b.dirs.sent.Add(1)
	logErrs := func(errs []error) {
		for i, err := range errs {
			if err != nil {
				b.logger.Info("replica directory not recorded", "topic_id", base64.RawURLEncoding.EncodeToString(items[i].TopicID[:]), "partition", items[i].Partition, "err", err)
			}
		}
	}
	if b.ctrl.Active() {
		errs, err := b.ctrl.AssignReplicasToDirs(ctx, b.node.NodeID, epoch, items)
		if err == nil {
			logErrs(errs)
			return nil
		}
		if !errors.Is(err, controller.ErrNotController) {
			return err
		}
	}
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = b.node.NodeID, epoch
	dirIdx := map[metadata.UUID]int{}
	topicIdx := map[[2]metadata.UUID]int{}
	for _, it := range items {
		di, ok := dirIdx[it.Dir]
		if !ok {
			di = len(req.Directories)
			dirIdx[it.Dir] = di
			d := kmsg.NewAssignReplicasToDirsRequestDirectory()
			d.ID = it.Dir
			req.Directories = append(req.Directories, d)
		}
		d := &req.Directories[di]
		ti, ok := topicIdx[[2]metadata.UUID{it.Dir, it.TopicID}]
		if !ok {
			ti = len(d.Topics)
			topicIdx[[2]metadata.UUID{it.Dir, it.TopicID}] = ti
			t := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
			t.TopicID = it.TopicID
			d.Topics = append(d.Topics, t)
		}
		p := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
		p.Partition = it.Partition
		d.Topics[ti].Partitions = append(d.Topics[ti].Partitions, p)
	}
	resp, err := b.ctrlChan.send(ctx, req, func(r kmsg.Response) bool {
		return r.(*kmsg.AssignReplicasToDirsResponse).ErrorCode == kerr.NotController.Code
	})
	if errors.Is(err, errLocalController) {
		errs, err := b.ctrl.AssignReplicasToDirs(ctx, b.node.NodeID, epoch, items)
		if err == nil {
			logErrs(errs)
		}
		return err
	}
	if err != nil {
		return err
	}
	ar := resp.(*kmsg.AssignReplicasToDirsResponse)
	if ar.ErrorCode != 0 {
		// A controller of an older Samsa does not serve the API: the
		// connection fails or it answers an error; retried with backoff
		// meanwhile, as Kafka's AssignmentsManager does.
		return kerr.ErrorForCode(ar.ErrorCode)
	}
	for _, d := range ar.Directories {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					b.logger.Info("replica directory not recorded", "topic_id", base64.RawURLEncoding.EncodeToString(t.TopicID[:]), "partition", p.Partition, "err", kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	return nil
}
