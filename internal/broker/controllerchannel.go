package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/wire"
)

// errNoController: no active controller is known yet.
var errNoController = errors.New("no active controller known")

// errLocalController: the active controller is this node's own and there
// is no address to reach it by (a single node lists no
// controller.quorum.voters): the caller asks it directly.
var errLocalController = errors.New("the active controller is this node's")

// controllerChannel carries this broker's requests to the active
// controller over its controller listener (controller.quorum.voters gives
// the addresses). Callers first try the local controller when it is the
// active one.
type controllerChannel struct {
	b *Broker

	mu      sync.Mutex // guards clients
	clients map[int32]*wire.Client
}

func (cc *controllerChannel) client(id int32) (*wire.Client, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c := cc.clients[id]; c != nil {
		return c, nil
	}
	for _, v := range cc.b.node.QuorumVoters {
		if v.ID == id {
			c := wire.NewClient(v.Addr(), "samsa-broker-"+strconv.Itoa(int(cc.b.node.NodeID)), 64<<20).WithDial(cc.b.dialController)
			if cc.clients == nil {
				cc.clients = map[int32]*wire.Client{}
			}
			cc.clients[id] = c
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: controller %d is not in controller.quorum.voters", errNoController, id)
}

// attemptTimeout bounds one attempt of the broker's own requests to the
// controller (heartbeats, registrations, AlterPartition), which are safe
// to send again.
const attemptTimeout = 10 * time.Second

// send sends req to the active controller, retrying with backoff while
// none is known or the one asked is no longer active, until ctx ends; an
// attempt that gets no answer in attemptTimeout is sent again.
// notController tells whether a response says NOT_CONTROLLER.
func (cc *controllerChannel) send(ctx context.Context, req kmsg.Request, notController func(kmsg.Response) bool) (kmsg.Response, error) {
	return cc.sendWithin(ctx, req, notController, attemptTimeout)
}

// sendWithin is send with attempt bounding each attempt; zero means ctx
// alone bounds it, so that a request sent is never sent again for want of
// an answer.
func (cc *controllerChannel) sendWithin(ctx context.Context, req kmsg.Request, notController func(kmsg.Response) bool, attempt time.Duration) (kmsg.Response, error) {
	backoff := 50 * time.Millisecond
	for {
		leader := cc.b.ctrl.Leader()
		var err error
		if leader >= 0 {
			var c *wire.Client
			if c, err = cc.client(leader); err != nil && leader == cc.b.node.NodeID {
				// No voter entry to dial for this node's own controller
				// (a single node): the caller asks it directly once it is
				// active.
				if cc.b.ctrl.Active() {
					return nil, errLocalController
				}
			} else if err == nil {
				rctx, cancel := ctx, context.CancelFunc(func() {})
				if attempt > 0 {
					rctx, cancel = context.WithTimeout(ctx, attempt)
				}
				var resp kmsg.Response
				resp, err = c.Request(rctx, req)
				cancel()
				if err == nil && !notController(resp) {
					return resp, nil
				}
				if err == nil {
					err = kerr.NotController
				}
			}
		} else {
			err = errNoController
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (cc *controllerChannel) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range cc.clients {
		c.Close()
	}
	cc.clients = nil
}

// alterBatcher gathers the AlterPartition calls of this broker's leaders
// into one request, as Kafka's AlterPartitionManager: one request in
// flight, the partitions queued meanwhile go together in the next, which
// the controller checks and commits as one write. After a whole cluster
// restarts, hundreds of leaders ask for their followers at once: one
// request (and one metadata commit) instead of one each.
type alterBatcher struct {
	mu      sync.Mutex // guards the fields below
	pending []*alterItem
	sending bool // a caller is sending the queue
}

// alterItem is one partition waiting in the batcher.
type alterItem struct {
	controller.AlterPartitionItem
	res  controller.AlterPartitionResult
	done chan struct{} // closed once res is set
}

// alterPartition implements replica.Controller: it queues the partition
// and, unless a request is in flight, sends the queue until it is empty.
func (b *Broker) alterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) ([]int32, int32, error) {
	it := &alterItem{AlterPartitionItem: controller.AlterPartitionItem{TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr}, done: make(chan struct{})}
	q := &b.alters
	q.mu.Lock()
	q.pending = append(q.pending, it)
	send := !q.sending
	q.sending = true
	q.mu.Unlock()
	if send {
		for {
			q.mu.Lock()
			batch := q.pending
			q.pending = nil
			if len(batch) == 0 {
				q.sending = false
				q.mu.Unlock()
				break
			}
			q.mu.Unlock()
			b.sendAlterPartitions(ctx, batch)
		}
	}
	select {
	case <-it.done:
		return it.res.ISR, it.res.PartitionEpoch, it.res.Err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// sendAlterPartitions sends one batch to the active controller (this
// node's own directly) and completes its items.
func (b *Broker) sendAlterPartitions(ctx context.Context, batch []*alterItem) {
	defer func() {
		for _, it := range batch {
			close(it.done)
		}
	}()
	fail := func(err error) {
		for _, it := range batch {
			it.res = controller.AlterPartitionResult{Err: err}
		}
	}
	if b.ctrl.Active() {
		items := make([]controller.AlterPartitionItem, len(batch))
		for i, it := range batch {
			items[i] = it.AlterPartitionItem
		}
		res, err := b.ctrl.AlterPartitions(ctx, b.node.NodeID, items)
		if err == nil {
			for i, it := range batch {
				it.res = res[i]
			}
			return
		}
		if !errors.Is(err, controller.ErrNotController) {
			fail(err)
			return
		}
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(2)
	req.BrokerID, req.BrokerEpoch = b.node.NodeID, b.brokerEpoch.Load()
	type key struct {
		topic     [16]byte
		partition int32
	}
	byKey := map[key][]*alterItem{}
	topicIndex := map[[16]byte]int{}
	for _, it := range batch {
		i, ok := topicIndex[it.TopicID]
		if !ok {
			i = len(req.Topics)
			topicIndex[it.TopicID] = i
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.TopicID = it.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.NewISR, rp.PartitionEpoch = it.Partition, it.LeaderEpoch, it.ISR, it.PartitionEpoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		k := key{it.TopicID, it.Partition}
		byKey[k] = append(byKey[k], it)
	}
	resp, err := b.alterChan.send(ctx, req, func(r kmsg.Response) bool {
		return r.(*kmsg.AlterPartitionResponse).ErrorCode == kerr.NotController.Code
	})
	if err != nil {
		fail(err)
		return
	}
	ar := resp.(*kmsg.AlterPartitionResponse)
	if ar.ErrorCode != 0 {
		fail(kerr.ErrorForCode(ar.ErrorCode))
		return
	}
	fail(fmt.Errorf("AlterPartition: partition missing from the response"))
	for _, t := range ar.Topics {
		for _, p := range t.Partitions {
			k := key{t.TopidID, p.Partition}
			its := byKey[k]
			if len(its) == 0 {
				continue
			}
			it := its[0]
			byKey[k] = its[1:]
			if p.ErrorCode != 0 {
				it.res = controller.AlterPartitionResult{Err: kerr.ErrorForCode(p.ErrorCode)}
			} else {
				it.res = controller.AlterPartitionResult{ISR: p.ISR, PartitionEpoch: p.PartitionEpoch}
			}
		}
	}
}

// allocateProducerIDs reserves a block of producer ids from the active
// controller.
func (b *Broker) allocateProducerIDs(ctx context.Context) (int64, int, error) {
	if b.ctrl.Active() {
		first, n, err := b.ctrl.AllocateProducerIDs(ctx, b.node.NodeID)
		if !errors.Is(err, controller.ErrNotController) {
			return first, n, err
		}
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = b.node.NodeID, b.brokerEpoch.Load()
	resp, err := b.ctrlChan.send(ctx, req, func(r kmsg.Response) bool {
		return r.(*kmsg.AllocateProducerIDsResponse).ErrorCode == kerr.NotController.Code
	})
	if err != nil {
		return 0, 0, err
	}
	ar := resp.(*kmsg.AllocateProducerIDsResponse)
	if ar.ErrorCode != 0 {
		return 0, 0, kerr.ErrorForCode(ar.ErrorCode)
	}
	return ar.ProducerIDStart, int(ar.ProducerIDLen), nil
}

// forwardTimeout bounds a forwarded request (Kafka's forwarding channel
// uses request.timeout.ms, 30 s by default); a request whose own
// timeout_ms is longer gets that.
const forwardTimeout = 30 * time.Second

// forward sends a client's admin request to the active controller and
// returns its answer (KIP-590 forwarding, without the envelope: the
// controller listener answers the same APIs), once this broker's image
// holds the write (readYourWrite, forwardcommit.go). A request that got
// no answer in time is not sent again, since the controller may have done
// it (a DeleteTopics sent again answered UNKNOWN_TOPIC_OR_PARTITION for
// the topics the first deleted): as Kafka's ForwardingManager on timeout,
// the client gets REQUEST_TIMED_OUT (timedOut) and decides.
func (b *Broker) forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	start := time.Now()
	d, _ := requestTimeout(req)
	fctx, cancel := context.WithTimeout(ctx, max(forwardTimeout, d))
	defer cancel()
	undo := askCommitOffset(req)
	resp, err := b.ctrlChan.sendWithin(fctx, req, func(kmsg.Response) bool { return false }, 0)
	undo()
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		if r := timedOut(req); r != nil {
			b.logger.Warn("forwarded request timed out", "api", kmsg.NameForKey(req.Key()), "err", err)
			return r, nil
		}
	}
	if err == nil {
		b.readYourWrite(ctx, start, req, resp)
	}
	return resp, err
}

// requestTimeout is the timeout_ms of the requests that carry one
// (kmsg.TimeoutRequest: CreateTopics, DeleteTopics, CreatePartitions,
// ElectLeaders, AlterPartitionReassignments, UpdateFeatures, ...;
// negative: zero), and whether req does.
func requestTimeout(req kmsg.Request) (time.Duration, bool) {
	r, ok := req.(kmsg.TimeoutRequest)
	if !ok {
		return 0, false
	}
	return time.Duration(max(r.Timeout(), 0)) * time.Millisecond, true
}

// timedOut is the answer to req whose every entry is REQUEST_TIMED_OUT,
// nil for the APIs it does not build (their forward fails as before).
func timedOut(req kmsg.Request) kmsg.Response {
	code := kerr.RequestTimedOut.Code
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = name, id, code
			resp.Topics = append(resp.Topics, rt)
		}
		if r.Version >= 6 {
			for _, t := range r.Topics {
				add(t.Topic, t.TopicID)
			}
		} else {
			for _, n := range r.TopicNames {
				add(kmsg.StringPtr(n), [16]byte{})
			}
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}
