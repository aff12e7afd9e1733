package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type perfConsumeFlags struct {
	perfReadFlags
	fetchMaxBytes  int32
	partitionBytes int32
}

func newPerfConsumeCommand(cf *clientFlags) *cobra.Command {
	f := new(perfConsumeFlags)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Read a topic from its start as fast as possible and measure",
		Long: `Read every partition of TOPIC from its log start offset, without a
consumer group, until each partition's position reaches the end offset
found at the start (or until --records records when given), and measure
records/s and MB/s (keys and values). Transaction markers and offsets
removed by compaction count toward the position but not as records, so
records can be fewer than the offsets between start and end. The final
JSON line holds records, bytes, seconds, records_per_sec, mb_per_sec and
first_record_ms.

The command fails when no record arrives for --idle, and at once, before
reading, on a topic that holds no records (every partition's end offset is
its log start offset) unless --records is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPerfConsume(cmd, cf, f, args[0]) },
	}
	fl := cmd.Flags()
	fl.Int32Var(&f.fetchMaxBytes, "fetch-max-bytes", 1<<20, "bytes of one fetch response at most (fetch.max.bytes)")
	fl.Int32Var(&f.partitionBytes, "partition-max-bytes", 1<<20, "bytes of one partition in a fetch at most (max.partition.fetch.bytes)")
	f.perfReadFlags.add(cmd, "records to read (0: up to the end offsets at the start)", "no record arrives")
	return cmd
}

func runPerfConsume(cmd *cobra.Command, cf *clientFlags, f *perfConsumeFlags, topic string) error {
	switch {
	case f.records < 0:
		return fmt.Errorf("--records %d: want 0 (up to the end offsets) or more", f.records)
	case f.fetchMaxBytes <= 0:
		return fmt.Errorf("--fetch-max-bytes %d: want more than 0", f.fetchMaxBytes)
	case f.partitionBytes <= 0:
		return fmt.Errorf("--partition-max-bytes %d: want more than 0", f.partitionBytes)
	case f.idle <= 0:
		return fmt.Errorf("--idle %s: want more than 0", f.idle)
	}
	ctx := cmd.Context()
	adm, err := cf.newAdmin(cmd)
	if err != nil {
		return err
	}
	starts, ends, err := offsetBounds(ctx, adm, topic)
	adm.Close()
	if err != nil {
		return err
	}
	// pending holds the end offset of each partition not read to its end
	// yet. Positions come from the offsets of the records read, control
	// records (transaction markers) included: end - start counts markers
	// and compacted-away offsets, which are not records.
	pending := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	for p, s := range starts {
		offsets[p] = kgo.NewOffset().At(s)
		if ends[p] > s {
			pending[p] = ends[p]
		}
	}
	if f.records == 0 && len(pending) == 0 {
		return fmt.Errorf("topic %s holds no records: every partition's end offset is its log start offset", topic)
	}
	cl, err := cf.newClient(cmd,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(f.fetchMaxBytes), kgo.FetchMaxPartitionBytes(f.partitionBytes),
		kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()

	m := startMeter(cmd.ErrOrStderr(), "consume", f.reportInterval, f.quiet)
	start := time.Now()
	var first *float64
	var last time.Time
	var pollErr error
	for f.records > 0 && m.count() < f.records || f.records == 0 && len(pending) > 0 {
		pctx, cancel := context.WithTimeout(ctx, f.idle)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			pollErr = err
			break
		}
		var n, size, seen int64
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if end, ok := pending[r.Partition]; ok && r.Offset+1 >= end {
				delete(pending, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			n++
			size += int64(len(r.Key) + len(r.Value))
		})
		if seen == 0 {
			if errs := fs.Errors(); len(errs) > 0 && !errors.Is(errs[0].Err, context.DeadlineExceeded) {
				pollErr = fmt.Errorf("partition %d: %w", errs[0].Partition, errs[0].Err)
			} else {
				pollErr = fmt.Errorf("no record for %s", f.idle)
			}
			break
		}
		last = time.Now()
		if first == nil && n > 0 {
			v := ms(last.Sub(start))
			first = &v
		}
		m.addMany(n, size)
	}
	if last.IsZero() {
		last = start
	}
	res := m.finish(last)
	res.Topic = topic
	res.FirstRecordMs = first
	if err := res.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet); err != nil {
		return err
	}
	switch {
	case pollErr != nil && f.records > 0:
		return fmt.Errorf("read %d of %d records: %w", res.Records, f.records, pollErr)
	case pollErr != nil:
		return fmt.Errorf("read %d records, %d partitions short of their end offsets: %w", res.Records, len(pending), pollErr)
	}
	return nil
}

// offsetBounds returns topic's log start and end offsets by partition.
func offsetBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	so, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = so.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	eo, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = eo.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	so.Each(func(o kadm.ListedOffset) { starts[o.Partition] = o.Offset })
	eo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(starts) == 0 {
		return nil, nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	return starts, ends, nil
}
