package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/metadata"
)

// Start registers the broker with the active controller (retrying until
// ctx ends), waits until this node's metadata image holds that
// registration and the cluster's bootstrap records (a restarted node may
// replay a local metadata log far behind the quorum; Kafka's brokers too
// catch up before serving, BrokerServer's wait for the initial catch-up),
// and then heartbeats every broker.heartbeat.interval.ms until Close,
// registering again when the controller forgot it. The caller serves
// clients once Start returns.
//
// The bootstrap records (the finalized features of `samsa storage
// format`, transaction.version 2 in a new cluster) are written by the
// first active controller on its own, so in a new cluster the
// registration may be committed before them; waiting for both keeps a
// client's first ApiVersions from showing the features of no cluster.
func (b *Broker) Start(ctx context.Context, endpoints []metadata.Endpoint) error {
	b.endpoints = endpoints
	if err := b.register(ctx); err != nil {
		return err
	}
	epoch := b.brokerEpoch.Load()
	// Applied, not only committed: clients are served once this broker
	// hosts and leads what the image says (Kafka's BrokerServer waits
	// for its metadata publisher's first publish).
	caughtUp := b.ctrl.WaitApplied(ctx, func(im *metadata.Image) bool {
		br := im.Broker(b.node.NodeID)
		return br != nil && br.Epoch >= epoch && im.Bootstrapped
	})
	if !caughtUp {
		err := context.Cause(ctx)
		if err == nil {
			err = errors.New("controller closed")
		}
		return fmt.Errorf("catching up with the metadata log to broker epoch %d and the bootstrap records: %w", epoch, err)
	}
	// Caught up: what the image does not assign this broker was deleted
	// or moved away, not yet to be learned of (a voter may replay fewer
	// committed records after a crash until the quorum's leader tells it
	// the rest).
	b.ctrl.Exclusive(b.removeStrayReplicas)
	b.wg.Add(3)
	go b.heartbeats()
	go b.reportDirs()
	go b.expireSessions()
	return nil
}

func (b *Broker) register(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for {
		err := b.registerOnce(ctx)
		if err == nil {
			return nil
		}
		b.logger.Debug("broker registration failed", "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-b.stop:
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (b *Broker) registerOnce(ctx context.Context) error {
	prev := b.previousEpoch.Load()
	local := func() (done bool, err error) {
		epoch, err := b.ctrl.RegisterBroker(ctx, b.node.NodeID, b.incarnation, prev, b.endpoints, b.rack())
		if err == nil {
			b.brokerEpoch.Store(epoch)
			b.previousEpoch.Store(-1)
		}
		return !errors.Is(err, controller.ErrNotController), err
	}
	if b.ctrl.Active() {
		if done, err := local(); done {
			return err
		}
	}
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(1)
	if prev >= 0 {
		// v3 carries PreviousBrokerEpoch (KIP-966). Should it fail (a
		// controller of an older Samsa serves v0-1), the next attempt
		// registers as after an unclean shutdown, with v1.
		req.SetVersion(3)
		req.PreviousBrokerEpoch = prev
	}
	req.BrokerID, req.ClusterID, req.IncarnationID = b.node.NodeID, b.image().ClusterID, b.incarnation
	req.Rack = b.rack()
	for _, ep := range b.endpoints {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = ep.Name, ep.Host, uint16(ep.Port)
		req.Listeners = append(req.Listeners, l)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.lifeChan.send(rctx, req, func(r kmsg.Response) bool {
		return r.(*kmsg.BrokerRegistrationResponse).ErrorCode == kerr.NotController.Code
	})
	if errors.Is(err, errLocalController) {
		// This node's controller became active meanwhile.
		_, err = local()
		return err
	}
	if err == nil && resp.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.(*kmsg.BrokerRegistrationResponse).ErrorCode)
	}
	if err != nil {
		if prev >= 0 && !errors.Is(err, kerr.NotController) && ctx.Err() == nil {
			b.previousEpoch.Store(-1)
		}
		return err
	}
	b.brokerEpoch.Store(resp.(*kmsg.BrokerRegistrationResponse).BrokerEpoch)
	b.previousEpoch.Store(-1)
	return nil
}

// heartbeat sends one heartbeat; shutdown asks for a controlled shutdown.
// It carries the log dirs an I/O error took offline (KIP-858).
func (b *Broker) heartbeat(ctx context.Context, shutdown bool) (shouldShutdown bool, err error) {
	offline := b.offlineDirs()
	if b.ctrl.Active() {
		_, should, err := b.ctrl.Heartbeat(ctx, b.node.NodeID, b.brokerEpoch.Load(), shutdown, offline)
		if !errors.Is(err, controller.ErrNotController) {
			return should, err
		}
	}
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch = b.node.NodeID, b.brokerEpoch.Load()
	req.CurrentMetadataOffset = b.image().Offset
	req.WantShutdown = shutdown
	req.OfflineLogDirs = offline
	resp, err := b.lifeChan.send(ctx, req, func(r kmsg.Response) bool {
		return r.(*kmsg.BrokerHeartbeatResponse).ErrorCode == kerr.NotController.Code
	})
	if errors.Is(err, errLocalController) {
		// This node's controller became active meanwhile.
		_, should, err := b.ctrl.Heartbeat(ctx, b.node.NodeID, b.brokerEpoch.Load(), shutdown, offline)
		return should, err
	}
	if err != nil {
		return false, err
	}
	hr := resp.(*kmsg.BrokerHeartbeatResponse)
	if hr.ErrorCode != 0 {
		return false, kerr.ErrorForCode(hr.ErrorCode)
	}
	return hr.ShouldShutdown, nil
}

func (b *Broker) heartbeats() {
	defer b.wg.Done()
	interval := b.node.BrokerHeartbeatInterval
	if interval <= 0 {
		interval = controller.DefaultHeartbeatInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.stop
		cancel()
	}()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.dirOffline:
			// Tell the controller now, not at the next tick.
		}
		if b.shuttingDown.Load() {
			// Shutdown heartbeats (asking for it) in its own loop, as
			// Kafka's BrokerLifecycleManager does once in controlled
			// shutdown: one without WantShutdown unfenced the broker
			// while its leaderships were being moved away, and a second
			// heartbeat would queue on the same connection.
			continue
		}
		hctx, hcancel := context.WithTimeout(ctx, interval)
		_, err := b.heartbeat(hctx, false)
		hcancel()
		switch {
		case errors.Is(err, controller.ErrStaleBrokerEpoch), errors.Is(err, kerr.StaleBrokerEpoch):
			b.logger.Info("registering again", "reason", err)
			rctx, rcancel := context.WithTimeout(ctx, interval)
			b.registerOnce(rctx)
			rcancel()
		case err != nil && ctx.Err() == nil:
			b.logger.Debug("heartbeat failed", "err", err)
		}
	}
}

// Shutdown is a controlled shutdown: it asks the active controller to move
// leadership of this broker's partitions to other in-sync replicas and
// waits until it has, or ctx ends. Call it before Close.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.shuttingDown.Store(true)
	for {
		should, err := b.heartbeat(ctx, true)
		if err == nil && should {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// LogDirOffline tells the broker that a log dir went offline (the
// storage Manager's OnDirOffline): it heartbeats at once, reporting the
// dir, so that the controller moves leadership away (Kafka's
// ReplicaManager.handleLogDirFailure, then BrokerLifecycleManager's
// propagateDirectoryFailure). It does not block; safe for concurrent use.
func (b *Broker) LogDirOffline() {
	select {
	case b.dirOffline <- struct{}{}:
	default:
	}
}

// ReportOfflineDirs sends a heartbeat now, carrying the offline log dirs,
// and returns once the controller answered it (or ctx ends): a node that
// halts calls it first, so that leadership moves at once rather than
// when its session expires.
func (b *Broker) ReportOfflineDirs(ctx context.Context) error {
	_, err := b.heartbeat(ctx, false)
	return err
}

// offlineDirs is the directory.id of every offline log dir, as
// BrokerHeartbeat carries them; nil when all are online.
func (b *Broker) offlineDirs() []metadata.UUID {
	if b.logs == nil {
		return nil
	}
	var out []metadata.UUID
	for _, s := range b.logs.OfflineDirIDs() {
		var id metadata.UUID
		if raw, err := base64.RawURLEncoding.DecodeString(s); err == nil && len(raw) == len(id) {
			copy(id[:], raw)
		}
		// An unparsable directory.id is still reported (as zero: Kafka's
		// Uuid.ZERO_UUID): the dir is offline all the same.
		out = append(out, id)
	}
	return out
}

// rack is broker.rack, nil when unset.
func (b *Broker) rack() *string {
	if b.node.BrokerRack == "" {
		return nil
	}
	r := b.node.BrokerRack
	return &r
}
