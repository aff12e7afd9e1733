package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxE2ERate is the highest --rate of perf e2e, records/s: one record due
// every 100 ns, beyond what one client sends.
const maxE2ERate = 10_000_000

type perfE2EFlags struct {
	perfProducerFlags
	rate     float64
	duration time.Duration
	warmup   time.Duration
	drain    time.Duration
}

func newPerfE2ECommand(cf *clientFlags) *cobra.Command {
	f := new(perfE2EFlags)
	cmd := &cobra.Command{
		Use:   "e2e TOPIC",
		Short: "End-to-end latency at a fixed rate (OpenMessaging Benchmark style)",
		Long: `Produce to TOPIC at --rate records/s for --duration while a consumer
(a second client, without a consumer group) reads the same partitions from
their end offsets at the start, and measure for each record the time from
when it was due to be sent to when the consumer got it.

Each record carries the time it was due (the first 8 bytes of its value,
Unix nanoseconds, big-endian; read back against the run's monotonic
clock): the generator follows a fixed schedule, so a generator, client or
broker that falls behind shows in the latency instead of slowing the rate
down (no coordinated omission). Records produced during --warmup
are not counted.

The final JSON line holds latency_ms (end to end), publish_latency_ms
(due to acknowledgement), records_per_sec, target_rate and
max_send_delay_ms (how late the generator sent its most delayed record).
The command fails when any record failed or did not arrive within --drain
after the last one was sent, when records are outstanding and none was
acknowledged for --delivery-timeout, or when interrupted (SIGINT or
SIGTERM), after printing what was done.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPerfE2E(cmd, cf, f, args[0]) },
	}
	f.perfProducerFlags.add(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&f.rate, "rate", 20000, "records per second, more than 0 and at most 10000000")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long to produce after the warm-up")
	fl.DurationVar(&f.warmup, "warmup", 0, "produce this long first without counting")
	fl.DurationVar(&f.drain, "drain", 10*time.Second, "wait this long at most for the last records to arrive")
	return cmd
}

func runPerfE2E(cmd *cobra.Command, cf *clientFlags, f *perfE2EFlags, topic string) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.recordSize < 8 {
		return fmt.Errorf("--record-size %d: want at least 8, the bytes of the due time each record carries", f.recordSize)
	}
	if !(f.rate > 0 && f.rate <= maxE2ERate) {
		return fmt.Errorf("--rate %v: want more than 0 and at most %d records/s", f.rate, maxE2ERate)
	}
	if f.duration <= 0 {
		return fmt.Errorf("--duration %s: want more than 0", f.duration)
	}
	if f.warmup < 0 {
		return fmt.Errorf("--warmup %s: must not be negative", f.warmup)
	}
	wd, wctx := startWatchdog(cmd.Context(), f.deliveryTimeout)
	defer wd.close()
	ctx, cancel := context.WithCancel(wctx)
	defer cancel()
	pcl, err := cf.newClient(cmd, append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer pcl.Close()
	if err := ensureTopic(ctx, pcl, cmd.ErrOrStderr(), topic, f.partitions, f.replication, f.topicConfigs); err != nil {
		return err
	}
	// The consumer starts from the end offsets listed now, so that it sees
	// every record produced from here on and nothing older.
	_, ends, err := offsetBounds(ctx, kadm.NewClient(pcl), topic)
	if err != nil {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	for p, e := range ends {
		offsets[p] = kgo.NewOffset().At(e)
	}
	ccl, err := cf.newClient(cmd, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(int32(f.batchMaxBytes)), kgo.FetchMaxPartitionBytes(int32(f.batchMaxBytes)))
	if err != nil {
		return err
	}
	defer ccl.Close()

	e2e := startMeter(cmd.ErrOrStderr(), "e2e", f.reportInterval, f.quiet)
	var (
		mu        sync.Mutex // guards the fields below
		pub       latencies
		acked     int64
		failed    int64
		firstErr  error
		countFrom time.Time // records due before are warm-up
	)
	pool := newPayloadPool(f.payload, f.recordSize)
	bufs := sync.Pool{New: func() any { b := make([]byte, f.recordSize); return &b }}
	// The schedule starts now. A record's due time is read back against
	// start's monotonic clock reading: nanoseconds, unaffected by a wall
	// clock step during the run.
	start := time.Now()
	startNanos := start.UnixNano()
	dueOf := func(v []byte) time.Time {
		return start.Add(time.Duration(int64(binary.BigEndian.Uint64(v)) - startNanos))
	}
	promise := func(r *kgo.Record, err error) {
		now := time.Now()
		due := dueOf(r.Value)
		wd.acked()
		mu.Lock()
		switch {
		case err != nil:
			failed++
			if firstErr == nil {
				firstErr = err
			}
		case !due.Before(countFrom):
			acked++
			pub.samples = append(pub.samples, now.Sub(due))
		}
		mu.Unlock()
		b := r.Value[:cap(r.Value)]
		bufs.Put(&b)
	}

	consumed := make(chan struct{})
	progressed := make(chan struct{}, 1)
	go func() {
		defer close(consumed)
		for {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) < 8 {
					return
				}
				due := dueOf(r.Value)
				mu.Lock()
				counted := !due.Before(countFrom)
				mu.Unlock()
				if counted {
					e2e.add(len(r.Value), now.Sub(due))
				}
			})
			select {
			case progressed <- struct{}{}:
			default:
			}
		}
	}()

	mu.Lock()
	countFrom = start.Add(f.warmup)
	mu.Unlock()
	end := countFrom.Add(f.duration)
	interval := time.Duration(float64(time.Second) / f.rate)
	var sent int64
	var maxDelay time.Duration
	e2e.restart()
	for ctx.Err() == nil {
		now := time.Now()
		// Send every record due by now, then sleep until the next.
		for ctx.Err() == nil {
			due := start.Add(time.Duration(sent) * interval)
			if due.After(now) || !due.Before(end) {
				break
			}
			if due.Equal(countFrom) || due.After(countFrom) {
				maxDelay = max(maxDelay, now.Sub(due))
			}
			bp := bufs.Get().(*[]byte)
			v := (*bp)[:f.recordSize]
			copy(v, pool.value(sent))
			binary.BigEndian.PutUint64(v, uint64(due.UnixNano()))
			wd.produced()
			pcl.Produce(ctx, &kgo.Record{Value: v}, promise)
			sent++
		}
		next := start.Add(time.Duration(sent) * interval)
		if !next.Before(end) {
			break
		}
		sleepCtx(ctx, time.Until(next))
	}
	flushErr := pcl.Flush(ctx)
	mu.Lock()
	want := acked
	mu.Unlock()
	drain := time.NewTimer(f.drain)
	var drainErr error
	for drainErr == nil && e2e.count() < want {
		select {
		case <-progressed:
		case <-drain.C:
			drainErr = fmt.Errorf("%d of %d acknowledged records arrived within --drain %s", e2e.count(), want, f.drain)
		case <-ctx.Done():
			drainErr = context.Cause(ctx)
		}
	}
	drain.Stop()
	cancel()
	<-consumed

	res := e2e.finish(time.Now())
	// The rate is what the schedule asked for and got acknowledged over
	// the measured duration.
	res.Seconds = f.duration.Seconds()
	res.RecordsPerSec = float64(res.Records) / res.Seconds
	res.MBPerSec = float64(res.Bytes) / 1e6 / res.Seconds
	res.Topic = topic
	res.TargetRate = f.rate
	mu.Lock()
	res.PublishLatency = pub.summary()
	res.Errors = failed
	perr := firstErr
	mu.Unlock()
	md := ms(maxDelay)
	res.MaxSendDelayMs = &md
	settings := perfSettings(&f.perfProducerFlags)
	settings["warmup_s"] = f.warmup.Seconds()
	res.Settings = settings
	if err := res.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet); err != nil {
		return err
	}
	if cause := context.Cause(wctx); errors.Is(cause, errNoProgress) {
		return fmt.Errorf("%d records sent, %d acknowledged: %w", sent, want, cause)
	}
	switch {
	case cmd.Context().Err() != nil:
		return fmt.Errorf("interrupted: %d records sent, %d acknowledged, %d counted: %w", sent, want, res.Records, cmd.Context().Err())
	case perr != nil:
		return fmt.Errorf("%d records failed; first error: %w", res.Errors, perr)
	case flushErr != nil:
		return flushErr
	case drainErr != nil:
		return drainErr
	}
	return nil
}
