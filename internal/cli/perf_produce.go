package cli

import (
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

The final JSON line holds records, bytes, errors, seconds, records_per_sec,
mb_per_sec and latency_ms (count, mean, p50, p90, p99, p99_9, max). The
command fails when any record failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPerfProduce(cmd, cf, f, args[0]) },
	}
	f.perfProducerFlags.add(cmd)
	cmd.Flags().Int64VarP(&f.records, "records", "n", 1_000_000, "records to produce")
	cmd.Flags().Float64Var(&f.throughput, "throughput", -1, "records per second at most (-1: no limit)")
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
	ctx := cmd.Context()
	cl, err := cf.newClient(cmd, append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureTopic(ctx, cl, topic, f.partitions, f.replication, f.topicConfigs); err != nil {
		return err
	}
	if f.partitions > 0 {
		// The clock starts once the topic it may just have created has
		// its leaders; a topic that must exist has them already.
		if err := waitForLeaders(ctx, cl, topic, 10*time.Second); err != nil {
			return err
		}
	}
	pool := newPayloadPool(f.payload, f.recordSize)
	m := startMeter(cmd.ErrOrStderr(), "produce", f.reportInterval, f.quiet)

	// Records are recycled once acknowledged: kgo hands each back in its
	// promise and no longer touches it.
	recs := sync.Pool{New: func() any { return new(kgo.Record) }}
	var (
		errMu    sync.Mutex
		firstErr error
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			m.fail()
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
		} else {
			// kgo stamps Timestamp with the time of the Produce call.
			m.add(len(r.Value), time.Since(r.Timestamp))
		}
		*r = kgo.Record{}
		recs.Put(r)
	}
	start := time.Now()
	m.restart()
	var sent int64
	for ; sent < f.records && ctx.Err() == nil; sent++ {
		if f.throughput > 0 {
			due := start.Add(time.Duration(float64(sent) / f.throughput * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		r := recs.Get().(*kgo.Record)
		r.Value = pool.value(sent)
		cl.Produce(ctx, r, promise)
	}
	flushErr := cl.Flush(ctx)
	res := m.finish(time.Now())
	res.Topic = topic
	res.Settings = perfSettings(&f.perfProducerFlags)
	if err := res.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet); err != nil {
		return err
	}
	switch {
	case firstErr != nil:
		return fmt.Errorf("%d of %d records failed; first error: %w", res.Errors, sent, firstErr)
	case flushErr != nil:
		return fmt.Errorf("%d of %d records acknowledged: %w", res.Records, sent, flushErr)
	case sent < f.records:
		return fmt.Errorf("stopped after %d of %d records: %w", sent, f.records, ctx.Err())
	}
	return nil
}

// perfSettings is the settings object of a producer's final line.
func perfSettings(f *perfProducerFlags) map[string]any {
	return map[string]any{
		"record_size":     f.recordSize,
		"acks":            f.acks,
		"compression":     f.compression,
		"linger_ms":       ms(f.linger),
		"batch_max_bytes": f.batchMaxBytes,
		"payload":         f.payload,
	}
}
