package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

type perfProduceFlags struct {
	perfProducerFlags
	records    int64
	throughput float64
}

func newPerfProduceCommand(cf *clientFlags) *cobra.Command {
	f := new(perfProduceFlags)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce records as fast as possible (or at --throughput) and measure",
		Long: `Produce --records records of --record-size bytes without keys to TOPIC
(kgo's sticky partitioner fills one partition's batch at a time), then wait
for every acknowledgement. Latency is from the Produce call to the
acknowledgement, as in kafka-producer-perf-test. With --partitions the
clock starts once the topic has a leader for every partition. Without
idempotence (--acks 1 or 0) up to --max-in-flight produce requests (5, as
the Java producer's max.in.flight.requests.per.connection) are in flight to
a broker; --acks all uses the idempotent producer, which keeps 5.

Latency is measured from a monotonic clock reading taken at the Produce
call, not from the record's timestamp (which is in milliseconds).

The final JSON line holds records, bytes, errors, seconds, records_per_sec,
mb_per_sec, latency_ms (count, mean, p50, p90, p99, p99_9, max) and the
settings. The command fails when any record failed, when records are
outstanding and none was acknowledged for --delivery-timeout (a broker that
died: kgo never gives up on the idempotent producer's records by itself),
or when interrupted (SIGINT or SIGTERM), after printing what was done.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPerfProduce(cmd, cf, f, args[0]) },
	}
	f.perfProducerFlags.add(cmd)
	cmd.Flags().Int64VarP(&f.records, "records", "n", 1_000_000, "records to produce")
	cmd.Flags().Float64Var(&f.throughput, "throughput", -1, "records per second at most, more than 0 (-1: no limit)")
	return cmd
}

func runPerfProduce(cmd *cobra.Command, cf *clientFlags, f *perfProduceFlags, topic string) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.records <= 0 {
		return fmt.Errorf("--records %d: want at least 1", f.records)
	}
	if f.throughput != -1 && !(f.throughput > 0) {
		return fmt.Errorf("--throughput %v: want -1 (no limit) or more than 0", f.throughput)
	}
	cl, err := cf.newClient(cmd, append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureTopic(cmd.Context(), cl, cmd.ErrOrStderr(), topic, f.partitions, f.replication, f.topicConfigs); err != nil {
		return err
	}
	if f.partitions > 0 {
		// The clock starts once the topic it may just have created has
		// its leaders; a topic that must exist has them already.
		if err := waitForLeaders(cmd.Context(), cl, topic, 10*time.Second); err != nil {
			return err
		}
	}
	pool := newPayloadPool(f.payload, f.recordSize)
	wd, ctx := startWatchdog(cmd.Context(), f.deliveryTimeout)
	defer wd.close()
	m := startMeter(cmd.ErrOrStderr(), "produce", f.reportInterval, f.quiet)

	// Records are recycled once acknowledged: kgo hands each back in its
	// promise and no longer touches it. Each carries its send time in its
	// Context (see sentAt).
	recs := sync.Pool{New: func() any { return &kgo.Record{Context: &sentAt{Context: context.Background()}} }}
	var (
		errMu    sync.Mutex
		firstErr error
	)
	promise := func(r *kgo.Record, err error) {
		s := r.Context.(*sentAt)
		if err != nil {
			m.fail()
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
		} else {
			m.add(len(r.Value), time.Since(s.at))
		}
		wd.acked()
		*r = kgo.Record{Context: s}
		recs.Put(r)
	}
	start := time.Now()
	m.restart()
	var sent int64
	for ; sent < f.records && ctx.Err() == nil; sent++ {
		if f.throughput > 0 {
			due := start.Add(time.Duration(float64(sent) / f.throughput * float64(time.Second)))
			sleepCtx(ctx, time.Until(due))
		}
		r := recs.Get().(*kgo.Record)
		r.Value = pool.value(sent)
		now := time.Now()
		// The record's CreateTime is the same reading, which spares kgo
		// a clock read of its own per record.
		r.Context.(*sentAt).at, r.Timestamp = now, now
		wd.produced()
		cl.Produce(ctx, r, promise)
	}
	flushErr := cl.Flush(ctx)
	res := m.finish(time.Now())
	res.Topic = topic
	settings := perfSettings(&f.perfProducerFlags)
	settings["throughput"] = f.throughput
	res.Settings = settings
	if err := res.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, errNoProgress) {
		return fmt.Errorf("%d of %d records sent, %d acknowledged: %w", sent, f.records, res.Records, cause)
	}
	switch {
	case cmd.Context().Err() != nil:
		return fmt.Errorf("interrupted: %d of %d records sent, %d acknowledged: %w", sent, f.records, res.Records, cmd.Context().Err())
	case firstErr != nil:
		return fmt.Errorf("%d of %d records failed; first error: %w", res.Errors, sent, firstErr)
	case flushErr != nil:
		return fmt.Errorf("%d of %d records acknowledged: %w", res.Records, sent, flushErr)
	}
	return nil
}

// sentAt is the Context of a record of perf produce: the time of its
// Produce call, monotonic, for its latency (kgo truncates Record.Timestamp
// to the millisecond and drops the monotonic reading). It is allocated once
// per pooled record, not per record sent; its Done is nil, so kgo never
// cancels the record through it.
type sentAt struct {
	context.Context
	at time.Time
}

// perfSettings is the settings object of a producer's final line.
func perfSettings(f *perfProducerFlags) map[string]any {
	return map[string]any{
		"record_size":        f.recordSize,
		"acks":               f.acks,
		"compression":        f.compression,
		"linger_ms":          ms(f.linger),
		"batch_max_bytes":    f.batchMaxBytes,
		"payload":            f.payload,
		"partitioner":        f.partitioner,
		"max_in_flight":      f.maxInFlight,
		"partitions":         f.partitions,
		"topic_configs":      f.topicConfigs,
		"delivery_timeout_s": f.deliveryTimeout.Seconds(),
	}
}
