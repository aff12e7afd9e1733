package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type perfQueueFlags struct {
	perfReadFlags
	consumers  int
	groupType  string
	ack        string
	group      string
	maxRecords int32
}

// Acknowledgement modes of perf queue.
const (
	queueAckBatch = "batch" // a poll's acceptances together (ShareAcknowledge piggy-backed on the next ShareFetch)
	queueAckOne   = "one"   // each acceptance flushed alone (a ShareAcknowledge per record)
)

func newPerfQueueCommand(cf *clientFlags) *cobra.Command {
	f := new(perfQueueFlags)
	cmd := &cobra.Command{
		Use:   "queue TOPIC",
		Short: "Consume a topic as a queue with N consumers of one group and measure",
		Long: `Consume TOPIC from its start with --consumers consumers of one new group,
as a work queue, and measure the records/s the group acknowledged.

  --group-type share     share consumers (KIP-932, Kafka 4.1+), each record
                         accepted by one of them: --ack batch accepts the
                         records of a poll together (the acknowledgements
                         ride on the next ShareFetch, or one
                         ShareAcknowledge), --ack one accepts each record
                         alone and waits for the broker's answer before the
                         next (a ShareAcknowledge per record). The group's
                         share.auto.offset.reset is set to earliest first
                         (IncrementalAlterConfigs on the GROUP resource).
  --group-type consumer  a consumer group (the baseline): each consumer
                         reads the partitions assigned to it, offsets
                         committed by autocommit, and at the end every
                         polled offset; a record counts when polled.

The run ends when the group has acknowledged --records records (0: the
number of offsets between each partition's log start and end offsets at
the start, which counts transaction markers and compacted-away offsets
too: give --records on such topics). A record delivered again after its
lock expired counts again. The final JSON line holds records, bytes,
seconds, records_per_sec, mb_per_sec and the settings. The command fails
when the group acknowledges nothing for --idle.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPerfQueue(cmd, cf, f, args[0]) },
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.consumers, "consumers", "c", 1, "consumers in the group, 1 or more")
	fl.StringVar(&f.groupType, "group-type", "share", "share (KIP-932 share consumers) or consumer (a consumer group, the baseline)")
	fl.StringVar(&f.ack, "ack", queueAckBatch, "share groups: batch (a poll's records accepted together) or one (each record accepted and flushed alone)")
	fl.StringVar(&f.group, "group", "", "group id (default: samsa-perf-queue- and a random suffix, a new group)")
	fl.Int32Var(&f.maxRecords, "max-records", 0, "share groups: records a ShareFetch acquires at most (share.max.poll.records; 0: the client's default, 500)")
	f.perfReadFlags.add(cmd, "records to acknowledge (0: the offsets between start and end at the start)", "nothing is acknowledged")
	return cmd
}

func runPerfQueue(cmd *cobra.Command, cf *clientFlags, f *perfQueueFlags, topic string) error {
	switch {
	case f.records < 0:
		return fmt.Errorf("--records %d: want 0 (the offsets at the start) or more", f.records)
	case f.consumers < 1:
		return fmt.Errorf("--consumers %d: want 1 or more", f.consumers)
	case f.groupType != "share" && f.groupType != "consumer":
		return fmt.Errorf("--group-type %q: want share or consumer", f.groupType)
	case f.ack != queueAckBatch && f.ack != queueAckOne:
		return fmt.Errorf("--ack %q: want batch or one", f.ack)
	case f.maxRecords < 0:
		return fmt.Errorf("--max-records %d: want 0 (the client's default) or more", f.maxRecords)
	case f.idle <= 0:
		return fmt.Errorf("--idle %s: want more than 0", f.idle)
	}
	ctx := cmd.Context()
	group := f.group
	if group == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		group = "samsa-perf-queue-" + hex.EncodeToString(b[:])
	}
	adm, err := cf.newAdmin(cmd)
	if err != nil {
		return err
	}
	target := f.records
	if target == 0 {
		starts, ends, err := offsetBounds(ctx, adm, topic)
		if err != nil {
			adm.Close()
			return err
		}
		for p, s := range starts {
			target += max(ends[p]-s, 0)
		}
		if target == 0 {
			adm.Close()
			return fmt.Errorf("topic %s holds no records: every partition's end offset is its log start offset", topic)
		}
	}
	adm.Close()
	if f.groupType == "share" {
		cl, err := cf.newClient(cmd)
		if err != nil {
			return err
		}
		err = setShareEarliest(ctx, cl, group)
		cl.Close()
		if err != nil {
			return err
		}
	}

	opts := []kgo.Opt{kgo.ConsumeTopics(topic)}
	if f.groupType == "share" {
		opts = append(opts, kgo.ShareGroup(group))
		if f.maxRecords > 0 {
			opts = append(opts, kgo.ShareMaxRecords(f.maxRecords))
		}
	} else {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	clients := make([]*kgo.Client, f.consumers)
	for i := range clients {
		if clients[i], err = cf.newClient(cmd, opts...); err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return err
		}
	}

	m := startMeter(cmd.ErrOrStderr(), "queue", f.reportInterval, f.quiet)
	start := time.Now()
	var last atomic.Int64 // unix nanos of the last acknowledgement
	last.Store(start.UnixNano())
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop()
	}
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := queueConsume(runCtx, c, f, m, &last, target, stop); err != nil {
				fail(err)
			}
		}()
	}
	// The watchdog: nothing acknowledged for --idle fails the run.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(min(f.idle/4, 250*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, last.Load())) > f.idle {
					fail(fmt.Errorf("nothing acknowledged for %s", f.idle))
					return
				}
			}
		}
	}()
	wg.Wait()
	end := time.Unix(0, last.Load())
	var commitErr error
	if f.groupType == "consumer" {
		commitErr = commitPolled(ctx, clients)
	}
	closeAll(clients)
	res := m.finish(end)
	res.Topic = topic
	res.Settings = map[string]any{"group": group, "group_type": f.groupType, "consumers": f.consumers, "ack": f.ack,
		"max_records": f.maxRecords}
	if f.groupType == "consumer" {
		res.Settings.(map[string]any)["ack"] = "autocommit"
	}
	if err := res.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet); err != nil {
		return err
	}
	if res.Records < target {
		if firstErr == nil {
			firstErr = ctx.Err()
		}
		return fmt.Errorf("acknowledged %d of %d records: %w", res.Records, target, firstErr)
	}
	if commitErr != nil {
		return fmt.Errorf("committing the offsets of group %s: %w", group, commitErr)
	}
	return nil
}

// commitPolled commits the offsets of every record the consumers of a
// consumer group polled. Autocommit commits a poll's offsets at the next
// poll, and Close (its revoke) commits those of the polls before the last
// one only: each consumer's last poll, counted, would stay uncommitted,
// its partitions' committed offsets short of their end.
func commitPolled(ctx context.Context, clients []*kgo.Client) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = c.CommitUncommittedOffsets(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// closeAll closes the clients in parallel (a share consumer's Close
// releases what it holds and leaves its group, a round trip each).
func closeAll(clients []*kgo.Client) {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(c.Close)
	}
	wg.Wait()
}

// queueConsume polls c until the meter reaches target or ctx ends,
// acknowledging as f says and counting what the broker acknowledged; it
// calls done when the target is reached.
func queueConsume(ctx context.Context, c *kgo.Client, f *perfQueueFlags, m *meter, last *atomic.Int64, target int64, done func()) error {
	count := func(n, size int64) {
		if n == 0 {
			return
		}
		m.addMany(n, size)
		last.Store(time.Now().UnixNano())
		if m.count() >= target {
			done()
		}
	}
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := c.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) && !kerr.IsRetriable(e.Err) {
				return fmt.Errorf("topic %s partition %d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		var n, size int64
		for _, r := range fs.Records() {
			switch {
			case f.groupType == "consumer":
			case f.ack == queueAckOne:
				r.Ack(kgo.AckAccept)
				if err := c.FlushAcks(ctx); err != nil {
					return queueAckError(ctx, err)
				}
				count(1, int64(len(r.Key)+len(r.Value)))
				continue
			default:
				r.Ack(kgo.AckAccept)
			}
			n++
			size += int64(len(r.Key) + len(r.Value))
		}
		if f.groupType == "share" && f.ack == queueAckBatch && n > 0 {
			if err := c.FlushAcks(ctx); err != nil {
				return queueAckError(ctx, err)
			}
		}
		count(n, size)
	}
	return nil
}

// queueAckError is nil when the run ended (ctx done) during an
// acknowledgement, else err.
func queueAckError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("acknowledging: %w", err)
}

// setShareEarliest sets share.auto.offset.reset=earliest on group, so that
// a new share group reads the topic from its start.
func setShareEarliest(ctx context.Context, cl *kgo.Client, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = "share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("setting share.auto.offset.reset of %s: %w", group, err)
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("setting share.auto.offset.reset of %s: %d resources in the response", group, len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		var msg string
		if m := resp.Resources[0].ErrorMessage; m != nil {
			msg = *m
		}
		return fmt.Errorf("setting share.auto.offset.reset of %s: %s", group, kafkaError(err, msg))
	}
	// Each share-partition leader reads the config from its metadata
	// image when the partition starts: wait until every broker has it.
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		return err
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{"share.auto.offset.reset"}
	dreq.Resources = append(dreq.Resources, dr)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, b := range cl.DiscoveredBrokers() {
		for {
			resp, err := dreq.RequestWith(wctx, b)
			if err == nil && len(resp.Resources) == 1 && len(resp.Resources[0].Configs) == 1 {
				if v := resp.Resources[0].Configs[0].Value; v != nil && *v == "earliest" {
					break
				}
			}
			select {
			case <-wctx.Done():
				return fmt.Errorf("share.auto.offset.reset of %s not on every broker after 10s", group)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
