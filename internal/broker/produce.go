package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
)

// Produce: v3-12
//
// Version notes:
//   - v3: the lowest version served: record batch v2 (magic 2) and
//     transactional_id (KIP-98); message sets (v0-v2) are not served
//   - v4: KAFKA_STORAGE_ERROR may be returned (KIP-112)
//   - v5: LogStartOffset (response TopicPartition)
//   - v6: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v7: zstd-compressed batches (KIP-110)
//   - v8: ErrorRecords (response TopicPartition), ErrorMessage (response
//     TopicPartition)
//   - v9: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v10: tagged CurrentLeader and NodeEndpoints in the response (KIP-951)
//   - v11: TRANSACTION_ABORTABLE may be returned (KIP-890)
//   - v12: a transactional batch adds its partition to the transaction
//     (KIP-890 part 2): the leader asks the coordinator to add it
//     (AddPartitionsToTxn v5) instead of checking it was added

// Produce v3-v12 (record batch v2 only). Each partition is validated and
// appended on its own: a bad batch fails its partition with INVALID_RECORD,
// CORRUPT_MESSAGE, MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE while the
// others succeed. As in Kafka, each partition's records must be exactly one
// batch of magic 2 (see checkProduceRecords).
// acks=0 sends no response; acks=1 is answered once the leader appended;
// acks=-1 (all) waits until the high-watermark passes the appended records,
// that is until every in-sync replica has them, or until the request's
// timeout (REQUEST_TIMED_OUT).
func init() { register(kmsg.Produce, 3, 12, handleProduce) }

func handleProduce(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) { //nolint:gocyclo // one pass over the request's partitions
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// As Kafka's KafkaApis: a transactional produce needs WRITE on the
	// transactional id (else every partition fails), each topic WRITE.
	txnDenied := req.TransactionID != nil && !b.authorized(c, opWrite, resTxnID, *req.TransactionID)
	if txnDenied || req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		code := kerr.InvalidRequiredAcks.Code
		if txnDenied {
			code = kerr.TransactionalIDAuthorizationFailed.Code
		}
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	var denied map[string]bool // topics without WRITE
	if b.authorizer().Enabled {
		denied = map[string]bool{}
		for _, rt := range req.Topics {
			if !b.authorized(c, opWrite, resTopic, rt.Topic) {
				denied[rt.Topic] = true
			}
		}
	}
	// A partition given to this broker whose log is still being made is
	// waited for, up to the request's timeout.
	b.awaitPending(ctx, time.Now().Add(time.Duration(req.TimeoutMillis)*time.Millisecond), func(add func(string, int32)) {
		for _, rt := range req.Topics {
			if denied[rt.Topic] {
				continue
			}
			for _, rp := range rt.Partitions {
				add(rt.Topic, rp.Partition)
			}
		}
	})
	now := time.Now().UnixMilli()
	type job struct {
		p       *replica.Partition
		records []byte
		batch   record.Batch // records, checked
		err     error        // of the check
		key     verifyKey
		ti, pi  int // index of the response entry
		v       *replica.TxnVerification
	}
	var jobs []job
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			// Kafka's order: the partition, the framing
			// (ProduceRequest.validateRecords), the internal topic
			// (ReplicaManager.appendToLocalLog), then the records.
			p := b.replicas.Get(rt.Topic, rp.Partition)
			switch {
			case denied[rt.Topic]:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				sp.ErrorCode = b.absentCode(rt.Topic, rp.Partition)
			case checkProduceRecords(req.Version, rp.Records, &sp):
			case isInternalTopic(rt.Topic):
				// Only the coordinators write their topics, through
				// replica.AppendInternal, never Produce.
				msg := fmt.Sprintf("Cannot append to internal topic %s", rt.Topic)
				sp.ErrorCode, sp.ErrorMessage = kerr.InvalidTopicException.Code, &msg
			default:
				jobs = append(jobs, job{p: p, records: rp.Records, key: verifyKey{rt.Topic, rp.Partition}, ti: len(resp.Topics), pi: len(st.Partitions)})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// The one parse of each batch: its header and the check of every
	// record, handed down to the log. Decompressing takes far longer than
	// walking uncompressed records: several compressed batches are
	// checked in parallel.
	compressed := 0
	for _, j := range jobs {
		if record.CodecOf(j.records) != record.CodecNone {
			compressed += len(j.records)
		}
	}
	checkOne := func(i int) { jobs[i].batch, jobs[i].err = jobs[i].p.Check(jobs[i].records, now) }
	if len(jobs) > 1 && compressed >= parallelCheckBytes {
		appendAll(len(jobs), checkOne)
	} else {
		for i := range jobs {
			checkOne(i)
		}
	}
	checked := jobs[:0]
	for _, j := range jobs {
		if j.err != nil {
			countProduce(j.p, len(j.records), storage.AppendResult{}, j.err)
			failProduce(&resp.Topics[j.ti].Partitions[j.pi], j.err)
			continue
		}
		checked = append(checked, j)
	}
	jobs = checked
	if req.TransactionID != nil && len(jobs) > 0 {
		targets := make([]verifyTarget, len(jobs))
		for i, j := range jobs {
			targets[i] = verifyTarget{key: j.key, p: j.p, h: j.batch.Header}
		}
		verified, verifyErrs := b.verifyTxnProduce(ctx, *req.TransactionID, targets, req.Version >= 12)
		kept := jobs[:0]
		for _, j := range jobs {
			if c := verifyErrs[j.key]; c != 0 {
				resp.Topics[j.ti].Partitions[j.pi].ErrorCode = c
				continue
			}
			j.v = verified[j.key]
			kept = append(kept, j)
		}
		jobs = kept
	}
	// The response entries no longer move: each append fills its own.
	lasts := make([]int64, len(jobs))
	appendOne := func(i int) {
		j := jobs[i]
		sp := &resp.Topics[j.ti].Partitions[j.pi]
		res, err := j.p.Append(j.batch, req.Acks, now, j.v)
		countProduce(j.p, len(j.records), res, err)
		if err != nil {
			failProduce(sp, err)
			if sp.ErrorCode == kerr.UnknownServerError.Code {
				b.logger.Error("append failed", "topic", resp.Topics[j.ti].Topic, "partition", sp.Partition, "err", err)
				// What no sentinel names is a failed disk write (the
				// record errors all map to codes): not the client's
				// fault but must not read as success; Kafka answers
				// KAFKA_STORAGE_ERROR, which clients retry.
				sp.ErrorCode = kerr.KafkaStorageError.Code
			}
			return
		}
		sp.BaseOffset = res.BaseOffset
		if j.p.Config().LogAppendTime {
			sp.LogAppendTime = now
		}
		sp.LogStartOffset = j.p.LogStartOffset()
		lasts[i] = res.LastOffset
	}
	// Appends copy into the page cache and take a fraction of a core; on
	// a loaded machine running them in parallel measured slower (0.85-0.9x
	// for 8 partitions of 1 MiB batches), so only requests that wait for
	// fsyncs (flush.messages) spread over goroutines, to wait together.
	parallel := false
	for _, j := range jobs {
		parallel = parallel || j.p.Config().Storage.FlushIntervalMessages > 0
	}
	if parallel {
		appendAll(len(jobs), appendOne)
	} else {
		for i := range jobs {
			appendOne(i)
		}
	}
	var waits []ackWait
	if req.Acks == -1 {
		for i, j := range jobs {
			if sp := &resp.Topics[j.ti].Partitions[j.pi]; sp.ErrorCode == 0 {
				waits = append(waits, ackWait{p: j.p, last: lasts[i], resp: sp})
			}
		}
	}
	if len(waits) > 0 {
		// The wait runs on its own: the connection goes on with the
		// Produce requests that follow while it waits, and writes the
		// responses in order (server.Deferred).
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		return server.Defer(resp, func() { waitAcks(ctx, waits, timeout) }), nil
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

// ackWait is a partition of an acks=all Produce waiting for the
// high-watermark to pass last, with its response entry.
type ackWait struct {
	p    *replica.Partition
	last int64
	resp *kmsg.ProduceResponseTopicPartition
}

// waitAcks waits until the high-watermark of every partition of waits
// passed its records, or it can no longer (an error in its response entry:
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND), or until
// timeout (REQUEST_TIMED_OUT for those still waiting) or ctx is done.
func waitAcks(ctx context.Context, waits []ackWait, timeout time.Duration) {
	waiter := replica.NewWaiter()
	defer waiter.Close()
	for _, w := range waits {
		w.p.WatchHighWatermark(waiter, w.last)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		open := 0
		for _, w := range waits {
			if w.resp.ErrorCode != 0 {
				continue
			}
			done, err := w.p.AckState(w.last)
			switch {
			case err != nil:
				w.resp.ErrorCode = errCode(err)
			case !done:
				open++
			}
		}
		if open == 0 {
			return
		}
		select {
		case <-waiter.C():
			continue
		case <-ctx.Done():
		case <-timer.C:
		}
		for _, w := range waits {
			if w.resp.ErrorCode != 0 {
				continue
			}
			if done, err := w.p.AckState(w.last); err != nil {
				w.resp.ErrorCode = errCode(err)
			} else if !done {
				w.resp.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		return
	}
}

// checkProduceRecords applies Kafka's checks of a Produce v3+ partition's
// records before any append (ProduceRequest.validateRecords, called by
// KafkaApis.handleProduceRequest): the records must hold a whole first
// batch (else INVALID_RECORD), framed with a valid size and magic (else
// CORRUPT_MESSAGE), of magic 2 (else INVALID_RECORD: magic 0 and 1
// message sets are refused whatever their content, Kafka converts no
// format up), not zstd-compressed before v7 (else
// UNSUPPORTED_COMPRESSION_TYPE, KIP-110), and followed by no other whole
// batch (else INVALID_RECORD): one batch per partition, with or without
// producer ids, compressed or not. Kafka's LogValidator repeats the last
// rule ("Compressed outer record has more than one batch"). The error
// message is Kafka's exception message; Kafka itself sends none in this
// case, and responses before v8 have no field for it. It reports whether
// it failed sp.
func checkProduceRecords(version int16, records []byte, sp *kmsg.ProduceResponseTopicPartition) bool {
	fail := func(err *kerr.Error, msg string) bool {
		sp.ErrorCode = err.Code
		sp.ErrorMessage = &msg
		return true
	}
	size, magic, err := record.NextBatch(records)
	switch {
	case err != nil:
		return fail(kerr.CorruptMessage, err.Error())
	case size == 0:
		return fail(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d must have at least one record batch per partition", version))
	case magic != 2:
		return fail(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain record batches with magic version 2", version))
	}
	if version < 7 && record.CodecOf(records[:size]) == record.CodecZstd {
		return fail(kerr.UnsupportedCompressionType, fmt.Sprintf("Produce requests with version %d are not allowed to use ZStandard compression", version))
	}
	next, _, err := record.NextBatch(records[size:])
	switch {
	case err != nil:
		return fail(kerr.CorruptMessage, err.Error())
	case next > 0:
		return fail(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain exactly one record batch per partition", version))
	}
	return false
}

// failProduce answers a partition's error: its code, its message
// (error_message, Produce v8+) and, for a batch record.Check refused, the
// records at fault (record_errors, Produce v8+, KIP-467).
func failProduce(sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.ErrorCode = errCode(err)
	msg := err.Error()
	sp.ErrorMessage = &msg
	var ve *record.ValidationError
	if errors.As(err, &ve) {
		for _, re := range ve.Records {
			er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			er.RelativeOffset = re.BatchIndex
			m := re.Message
			er.ErrorMessage = &m
			sp.ErrorRecords = append(sp.ErrorRecords, er)
		}
	}
}

// isInternalTopic reports Kafka's internal topics (Topic.isInternal):
// the group coordinator's, the transaction coordinator's and the share
// coordinator's (KIP-932) state.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state"
}

// parallelCheckBytes is the compressed bytes of one request above which
// its partitions' batches are checked in parallel: below it, the goroutines
// cost more than they save.
const parallelCheckBytes = 64 << 10

// maxParallelAppends bounds the goroutines appending the partitions of one
// Produce request.
const maxParallelAppends = 8

// appendAll runs fn(i) for i in [0, n): inline for one, and for more on
// up to maxParallelAppends goroutines, so that the partitions of one
// request wait for their fsyncs (flush.messages) together rather than one
// after another, or decompress their batches on several cores. It returns
// when every call has.
func appendAll(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	workers := min(n, maxParallelAppends)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
