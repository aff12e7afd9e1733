package txn

import (
	"cmp"
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// APIVersion is a range of versions of one Kafka API this package answers.
type APIVersion struct {
	Key      int16
	Min, Max int16
}

// APIVersions lists the versions of the transaction APIs the Coordinator
// implements: up to KIP-890 part 2 (transaction version 2: EndTxn v5
// bumps the epoch; AddPartitionsToTxn v5, AddOffsetsToTxn v4 and
// InitProducerId v5 only allow TRANSACTION_ABORTABLE, which this
// coordinator never answers). InitProducerId for
// producers without a transactional id, FindCoordinator, WriteTxnMarkers
// and TxnOffsetCommit are the broker's and the group coordinator's.
var APIVersions = []APIVersion{
	{Key: int16(kmsg.InitProducerID), Min: 0, Max: 5},
	{Key: int16(kmsg.AddPartitionsToTxn), Min: 0, Max: 5},
	{Key: int16(kmsg.AddOffsetsToTxn), Min: 0, Max: 4},
	{Key: int16(kmsg.EndTxn), Min: 0, Max: 5},
	{Key: int16(kmsg.DescribeTransactions), Min: 0, Max: 0},
	{Key: int16(kmsg.ListTransactions), Min: 0, Max: 2},
}

var codeUnavailable = kerr.CoordinatorNotAvailable.Code

// InitProducerID handles InitProducerId (v0-v4) for a transactional id
// (req.TransactionalID not nil): a new id gets a fresh producer id at epoch
// 0; a known one gets its epoch bumped, which fences the previous instance
// of the producer: its open transaction is aborted first (the answer is
// then CONCURRENT_TRANSACTIONS, and the retry gets the new epoch). An
// exhausted epoch rotates the producer id. From v3 the request's producer
// id and epoch must be the current ones, or the previous ones of a bump
// whose answer was lost (KIP-360), else PRODUCER_FENCED. Other errors:
// INVALID_REQUEST (empty id), INVALID_TRANSACTION_TIMEOUT (timeout not in
// (0, transaction.max.timeout.ms]), NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	id := ""
	if req.TransactionalID != nil {
		id = *req.TransactionalID
	}
	switch {
	case id == "" || len(id) > maxTransactionalIDLength:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case req.TransactionTimeoutMillis <= 0 || time.Duration(req.TransactionTimeoutMillis)*time.Millisecond > c.cfg.MaxTimeout:
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return resp
	}
	expPID, expEpoch := int64(noProducerID), int16(noProducerEpoch)
	if req.Version >= 3 {
		expPID, expEpoch = req.ProducerID, req.ProducerEpoch
	}
	r := c.callWithPID(ctx, func(newPID int64, reply func(pidResult)) {
		c.initProducerID(id, req.TransactionTimeoutMillis, expPID, expEpoch, newPID, reply)
	})
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = r.code, r.pid, r.epoch
	return resp
}

// callWithPID runs fn on the run goroutine with newPID -1 and, while it
// asks for a new producer id (needsPID), allocates one on the caller's
// goroutine and runs fn again with it: three runs at most, then
// CONCURRENT_TRANSACTIONS. COORDINATOR_NOT_AVAILABLE when ctx ends or the
// Coordinator closes first.
func (c *Coordinator) callWithPID(ctx context.Context, fn func(newPID int64, reply func(pidResult))) pidResult {
	fail := func(code int16) pidResult { return pidResult{code: code, pid: noProducerID, epoch: noProducerEpoch} }
	newPID := int64(-1)
	for range 3 {
		r, ok := call(c, ctx, func(reply func(pidResult)) { fn(newPID, reply) })
		switch {
		case !ok:
			return fail(codeUnavailable)
		case r.needsPID:
			var code int16
			if newPID, code = c.allocatePID(ctx); code != 0 {
				return fail(code)
			}
			continue
		}
		return r
	}
	return fail(kerr.ConcurrentTransactions.Code)
}

// AddPartitionsToTxn handles AddPartitionsToTxn: v0-v3 add the partitions
// of one transaction; v4 (broker to broker, KIP-890) carries several
// transactions, each of which may be verify_only: then nothing is added
// and each partition gets INVALID_TXN_STATE unless it is in the open
// transaction. The broker has already answered partitions of unknown
// topics (UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED)
// and passes only known ones. Errors per partition: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (a write in flight, or a
// transaction still ending), COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version <= 3 {
		var tps []TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
		code, per := c.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, AddExplicit)
		resp.Topics = partitionResults(tps, code, per)
		return resp
	}
	for _, tx := range req.Transactions {
		var tps []TopicPartition
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
		mode := AddImplicit
		if tx.VerifyOnly {
			mode = AddVerifyOnly
		}
		code, per := c.AddPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tps, mode)
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tx.TransactionalID
		for _, t := range partitionResults(tps, code, per) {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = t.Topic
			for _, p := range t.Partitions {
				tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				tp.Partition, tp.ErrorCode = p.Partition, p.ErrorCode
				tt.Partitions = append(tt.Partitions, tp)
			}
			rt.Topics = append(rt.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// AddMode says what AddPartitions does with its partitions.
type AddMode int8

const (
	// AddExplicit adds them for the producer (AddPartitionsToTxn v0-v3,
	// AddOffsetsToTxn).
	AddExplicit AddMode = iota
	// AddVerifyOnly only reports whether each is in the open transaction,
	// for a partition leader's check of a transactional produce
	// (AddPartitionsToTxn v4+ verify_only, KIP-890 part 1).
	AddVerifyOnly
	// AddImplicit adds them for a partition leader that got a
	// transactional Produce v12+ or TxnOffsetCommit v5+ (AddPartitionsToTxn
	// v4+ without verify_only, KIP-890 part 2): the transaction then runs
	// under transaction version 2.
	AddImplicit
)

// AddPartitions is AddPartitionsToTxn for one transaction: it returns a
// code for the whole request, or per-partition codes when that is zero
// and per is not nil (AddVerifyOnly).
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition, mode AddMode) (int16, map[TopicPartition]int16) {
	verifyOnly, implicit := mode == AddVerifyOnly, mode == AddImplicit
	if id == "" {
		return kerr.InvalidRequest.Code, nil
	}
	type result struct {
		code int16
		per  map[TopicPartition]int16
	}
	r, ok := call(c, ctx, func(reply func(result)) {
		c.addPartitions(id, pid, epoch, tps, verifyOnly, implicit, func(code int16, per map[TopicPartition]int16) { reply(result{code, per}) })
	})
	if !ok {
		return codeUnavailable, nil
	}
	return r.code, r.per
}

// partitionResults groups tps by topic (in request order) with their codes.
func partitionResults(tps []TopicPartition, code int16, per map[TopicPartition]int16) []kmsg.AddPartitionsToTxnResponseTopic {
	var out []kmsg.AddPartitionsToTxnResponseTopic
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(out)
			index[tp.Topic] = i
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = tp.Topic
			out = append(out, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, code
		if code == 0 && per != nil {
			p.ErrorCode = per[tp]
		}
		out[i].Partitions = append(out[i].Partitions, p)
	}
	return out
}

// AddOffsetsToTxn handles AddOffsetsToTxn (v0-v3): it adds the partition
// of __consumer_offsets of req.Group to the transaction, so that the
// group's TxnOffsetCommit is committed or aborted with it. Errors as
// AddPartitionsToTxn, and INVALID_REQUEST for an empty id.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := TopicPartition{offsetsTopic, PartitionFor(req.Group, c.cfg.OffsetsTopicNumPartitions)}
	resp.ErrorCode, _ = c.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []TopicPartition{tp}, AddExplicit)
	return resp
}

// EndTxn handles EndTxn (v0-v5): it writes PrepareCommit or PrepareAbort,
// answers, then writes a COMMIT or ABORT marker to every partition of the
// transaction and finally CompleteCommit or CompleteAbort. Errors:
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (an epoch other than the
// current one: a late EndTxn of a fenced or timed-out producer),
// CONCURRENT_TRANSACTIONS (still ending), INVALID_TXN_STATE (no
// transaction open, or the opposite outcome), NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
//
// v0-v4 (transaction version 1) keep the producer epoch: a retry of an
// EndTxn already completed succeeds, and so does a late copy of it that
// arrives once the producer has begun its next transaction at the same
// epoch, which it then ends.
//
// v5+ (transaction version 2, KIP-890 part 2) bump the epoch with every
// commit or abort: the markers carry the bumped epoch, and the response
// the producer id and epoch of the producer's next transaction (a new
// producer id at epoch 0 when the epoch is exhausted). A retry carries the
// epoch before the bump and gets NONE, with the current id and epoch, once
// the transaction is complete; a late copy that arrives once the next
// transaction began is PRODUCER_FENCED and leaves it alone. An abort with
// nothing added (the producer cannot know whether a produce added a
// partition) bumps the epoch too.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	tv2 := req.Version >= 5
	r := c.callWithPID(ctx, func(newPID int64, reply func(pidResult)) {
		c.endTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv2, newPID, reply)
	})
	resp.ErrorCode = r.code
	if r.code == 0 && tv2 {
		resp.ProducerID, resp.ProducerEpoch = r.pid, r.epoch
	}
	return resp
}

// DescribeTransactions handles DescribeTransactions (v0, KIP-664):
// TRANSACTIONAL_ID_NOT_FOUND for unknown ids, NOT_COORDINATOR for ids of
// partitions not loaded here.
func (c *Coordinator) DescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	out, ok := call(c, ctx, func(reply func([]kmsg.DescribeTransactionsResponseTransactionState)) {
		var states []kmsg.DescribeTransactionsResponseTransactionState
		for _, id := range req.TransactionalIDs {
			states = append(states, c.describe(id))
		}
		reply(states)
	})
	if !ok {
		for _, id := range req.TransactionalIDs {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, codeUnavailable
			out = append(out, s)
		}
	}
	resp.TransactionStates = out
	return resp
}

func (c *Coordinator) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID = id
	s.ProducerID, s.ProducerEpoch, s.StartTimestamp = noProducerID, noProducerEpoch, -1
	if id == "" {
		s.ErrorCode = kerr.InvalidRequest.Code
		return s
	}
	part, code := c.partitionOf(id)
	if code != 0 {
		s.ErrorCode = code
		return s
	}
	m := part.txns[id]
	if m == nil || m.state == stateDead {
		s.ErrorCode = kerr.TransactionalIDNotFound.Code
		return s
	}
	s.State = m.state.String()
	s.TimeoutMillis = m.timeoutMs
	s.StartTimestamp = m.startMs
	s.ProducerID, s.ProducerEpoch = m.producerID, m.epoch
	for _, tp := range m.partitions {
		if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = tp.Topic
			s.Topics = append(s.Topics, t)
		}
		s.Topics[len(s.Topics)-1].Partitions = append(s.Topics[len(s.Topics)-1].Partitions, tp.Partition)
	}
	return s
}

// ListTransactions handles ListTransactions (v0-v2, KIP-664): the
// transactional ids of the partitions loaded here, filtered by state names
// (unknown names are echoed in UnknownStateFilters), producer ids, the time
// a transaction has been open (v1, DurationFilterMillis, for hanging
// transactions) and a regular expression on the id (v2, Go's RE2 syntax
// standing for Java's; a bad one gets INVALID_REQUEST). Sorted by id.
func (c *Coordinator) ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[string]bool{}
	known := kmsg.TransactionStateStrings()
	for _, s := range req.StateFilters {
		if slices.Contains(known, s) {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
	}
	out, ok := call(c, ctx, func(reply func([]kmsg.ListTransactionsResponseTransactionState)) {
		var list []kmsg.ListTransactionsResponseTransactionState
		nowMs := time.Now().UnixMilli()
		for _, part := range c.sortedPartitions() {
			if !part.loaded {
				continue
			}
			for _, m := range part.txns {
				switch {
				case len(req.StateFilters) > 0 && !states[m.state.String()]:
					continue
				case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.producerID):
					continue
				case req.Version >= 1 && req.DurationFilterMillis >= 0 && (m.state != stateOngoing || nowMs-m.startMs < req.DurationFilterMillis):
					continue
				case re != nil && !re.MatchString(m.id):
					continue
				}
				s := kmsg.NewListTransactionsResponseTransactionState()
				s.TransactionalID, s.ProducerID, s.TransactionState = m.id, m.producerID, m.state.String()
				list = append(list, s)
			}
		}
		slices.SortFunc(list, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
			return cmp.Compare(a.TransactionalID, b.TransactionalID)
		})
		reply(list)
	})
	if !ok {
		resp.ErrorCode = codeUnavailable
		return resp
	}
	resp.TransactionStates = out
	return resp
}
