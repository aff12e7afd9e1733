package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newConsumeCommand) }

// undecodable reports a fetch error of franz-go's own decoding of a batch
// (ProcessFetchPartition: a CRC or length mismatch, data that does not
// decompress, a bad record count or magic), which comes back at every
// fetch: no retry mends it.
func undecodable(err error) bool {
	var big *kgo.ErrDecompressTooLarge
	if errors.As(err, &big) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unable to decompress batch", "invalid record batch", "encoded crc", "encoded length",
		"unable to read", "unknown batch magic", "unknown magic", "unknown message magic", "unknown attributes",
		"invalid compressed message set", "message set v1 has inner"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.HasPrefix(msg, "length ") && strings.Contains(msg, "too short to allow for a crc")
}

// consumeStallTimeout bounds how long consume --until-end waits for any
// record while a partition is below its end offset: a batch the client
// silently cannot decode (fewer records than its header claims) would
// otherwise be fetched again forever. Data below the high-watermark comes
// back at once from a live broker.
var consumeStallTimeout = 30 * time.Second

type consumeFlags struct {
	clientFlags
	fromBeginning bool
	untilEnd      bool
	partition     int32
	offset        int64
	group         string
	format        string
	isolation     string
	maxMessages   int64
	quiet         bool
}

func newConsumeCommand() *cobra.Command {
	f := new(consumeFlags)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print the records of a topic",
		Long: `Print the records of TOPIC to standard output, by default each value on a
line of its own.

Where to start, in each partition:
  (default)          the end: only records produced from now on
  --from-beginning   the log start offset
  --offset N         offset N (N >= 0; past the end: the end), or N records
                     before the end (N < 0)
  --group G          join consumer group G and start at its committed
                     offsets; partitions without one start at the end, or
                     at the beginning with --from-beginning. Offsets of the
                     printed records are committed. --partition and
                     --offset do not apply to groups.

--until-end reads the end offsets once at start (ListOffsets: the high
watermark, or the last stable offset with --isolation read_committed) and
stops when every partition has reached them; records produced later are
not printed. It stops at once when there is nothing to read. With --group
it assumes this is the group's only member.

--isolation read_committed hides records of aborted and open transactions.

` + formatHelp + `

A progress line goes to standard error about once a second, and a summary
at the end, unless --quiet; with --group it says "joining group G" until
the group has assigned partitions (a new group's first rebalance waits
group.initial.rebalance.delay.ms, 3 s by default), then which ones.
Interrupt (Ctrl-C) stops cleanly.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runConsume(cmd, f, args[0]) },
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.fromBeginning, "from-beginning", false, "start at the log start offset")
	fl.BoolVarP(&f.untilEnd, "until-end", "e", false, "stop after the end offsets read at start")
	fl.Int32VarP(&f.partition, "partition", "p", -1, "consume only this partition (-1: all)")
	fl.Int64VarP(&f.offset, "offset", "o", 0, "start at this offset; negative: this many records before the end")
	fl.StringVarP(&f.group, "group", "g", "", "consume as a member of this consumer group and commit offsets")
	fl.StringVarP(&f.format, "format", "f", "", `output template, see above (default %v\n)`)
	fl.StringVar(&f.isolation, "isolation", "read_uncommitted", "read_uncommitted or read_committed")
	fl.Int64VarP(&f.maxMessages, "max-messages", "n", 0, "stop after printing this many records (0: no limit)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress or summary on standard error")
	cmd.MarkFlagsMutuallyExclusive("from-beginning", "offset")
	cmd.MarkFlagsMutuallyExclusive("group", "offset")
	cmd.MarkFlagsMutuallyExclusive("group", "partition")
	return cmd
}

// consumeRange is what runConsume reads of one partition: from start up to
// end (exclusive) when end >= 0.
type consumeRange struct {
	start int64
	end   int64
}

func runConsume(cmd *cobra.Command, f *consumeFlags, topic string) error {
	tmpl := f.format
	if tmpl == "" {
		tmpl = defaultFormat
	}
	format, err := parseFormat(tmpl)
	if err != nil {
		return err
	}
	var isolation kgo.IsolationLevel
	switch f.isolation {
	case "read_uncommitted":
		isolation = kgo.ReadUncommitted()
	case "read_committed":
		isolation = kgo.ReadCommitted()
	default:
		return fmt.Errorf("--isolation %q: want read_uncommitted or read_committed", f.isolation)
	}
	if f.maxMessages < 0 {
		return fmt.Errorf("--max-messages %d: must not be negative", f.maxMessages)
	}
	offsetSet := cmd.Flags().Changed("offset")
	ctx := cmd.Context()

	ranges, err := f.plan(ctx, cmd, topic, offsetSet)
	if err != nil {
		return err
	}

	prog := startProgress(cmd.ErrOrStderr(), "consume", "consumed", time.Second, f.quiet)
	defer prog.finish(f.quiet)

	pending := 0 // partitions not yet at their end offset (with --until-end)
	for _, r := range ranges {
		if r.start < r.end {
			pending++
		}
	}
	if f.untilEnd && pending == 0 {
		return nil
	}

	opts := []kgo.Opt{
		kgo.FetchIsolationLevel(isolation),
		// Control records (transaction markers) advance the position
		// that --until-end watches; they are never printed.
		kgo.KeepControlRecords(),
	}
	if f.group != "" {
		reset := kgo.NewOffset().AtEnd()
		if f.fromBeginning {
			reset = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(reset), kgo.AutoCommitMarks())
		// Joining takes a while: a new group's first rebalance waits
		// group.initial.rebalance.delay.ms (3 s by default) for more
		// members. Say so, rather than "0 records consumed" lines that
		// look like a hang.
		joining := fmt.Sprintf("joining group %s; the coordinator may delay a new group's first rebalance (group.initial.rebalance.delay.ms, 3 s by default)", f.group)
		if !f.quiet {
			prog.logf("samsa consume: %s\n", joining)
		}
		prog.setNote("joining group " + f.group)
		opts = append(opts,
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
				prog.setNote("")
				if !f.quiet {
					prog.logf("samsa consume: joined group %s, assigned partitions %s\n", f.group, joinInt32(sorted(assigned[topic])))
				}
			}),
			kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {
				prog.setNote("rejoining group " + f.group)
			}),
			kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {
				prog.setNote("rejoining group " + f.group)
			}))
	} else {
		parts := make(map[int32]kgo.Offset, len(ranges))
		for p, r := range ranges {
			if !f.untilEnd || r.start < r.end {
				parts[p] = kgo.NewOffset().At(r.start)
			}
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	cl, err := f.newClient(cmd, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 256<<10)
	var (
		printed int64
		buf     []byte
		done    = make(map[int32]bool, len(ranges))
		runErr  error
		// position is each partition's next offset, for the message of
		// a batch the client cannot decode.
		position = make(map[int32]int64, len(ranges))
	)
	for p, r := range ranges {
		position[p] = r.start
	}
poll:
	for {
		n := 10000
		if f.maxMessages > 0 {
			n = int(min(f.maxMessages-printed, 10000))
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if f.untilEnd {
			pollCtx, cancel = context.WithTimeout(ctx, consumeStallTimeout)
		}
		fetches := cl.PollRecords(pollCtx, n)
		cancel()
		if fetches.IsClientClosed() {
			break
		}
		if ctx.Err() == nil && pollCtx.Err() != nil && fetches.NumRecords() == 0 {
			var stuck []string
			for p, r := range ranges {
				if at := position[p]; !done[p] && at < r.end {
					stuck = append(stuck, fmt.Sprintf("partition %d at offset %d (end %d)", p, at, r.end))
				}
			}
			if len(stuck) > 0 {
				slices.Sort(stuck)
				runErr = fmt.Errorf("no record for %v below the end offset: %s; a batch there may be one the client cannot decode", consumeStallTimeout, strings.Join(stuck, ", "))
				break
			}
			continue
		}
		transient := false
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
				if ctx.Err() != nil {
					break poll
				}
				continue // the stall bound of one poll
			}
			// Kafka errors that are not retriable end the command; the
			// rest (a broker restarting, a group rejoining) the client
			// retries on its own, as Kafka's console consumer carries on.
			var ke *kerr.Error
			if errors.As(fe.Err, &ke) && !ke.Retriable {
				runErr = fmt.Errorf("fetch partition %d: %w", fe.Partition, fe.Err)
				break poll
			}
			// A batch the client cannot decode (written by a broker
			// that did not check records) comes back at every fetch:
			// retrying would loop forever.
			if undecodable(fe.Err) {
				at := "its start"
				if off, ok := position[fe.Partition]; ok {
					at = fmt.Sprintf("offset %d", off)
				}
				runErr = fmt.Errorf("partition %d at %s: the batch there cannot be decoded (%w); the records after it can be read with --offset past it, or the log start moved past it (kafka-delete-records)", fe.Partition, at, fe.Err)
				break poll
			}
			prog.logf("samsa consume: %v (retrying)\n", fe.Err)
			transient = true
		}
		if transient && fetches.NumRecords() == 0 {
			t := time.NewTimer(500 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				break poll
			case <-t.C:
			}
			continue
		}
		var stop bool
		fetches.EachRecord(func(r *kgo.Record) {
			if stop {
				return
			}
			position[r.Partition] = r.Offset + 1
			rg, known := ranges[r.Partition]
			if f.untilEnd && known {
				if r.Offset >= rg.end {
					return
				}
				if r.Offset+1 >= rg.end && !done[r.Partition] {
					done[r.Partition] = true
					pending--
					cl.PauseFetchPartitions(map[string][]int32{topic: {r.Partition}})
				}
			}
			if r.Attrs.IsControl() {
				stop = f.untilEnd && pending == 0
				return
			}
			buf = format.appendRecord(buf[:0], r)
			out.Write(buf)
			printed++
			prog.add(1, int64(len(r.Key)+len(r.Value)))
			if f.group != "" {
				cl.MarkCommitRecords(r)
			}
			stop = (f.untilEnd && pending == 0) || (f.maxMessages > 0 && printed >= f.maxMessages)
		})
		if err := out.Flush(); err != nil {
			runErr = fmt.Errorf("writing standard output: %w", err)
			break
		}
		if stop {
			break
		}
	}
	if err := out.Flush(); err != nil && runErr == nil {
		runErr = fmt.Errorf("writing standard output: %w", err)
	}
	if f.group != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("commit offsets of group %s: %w", f.group, err))
		}
	}
	return runErr
}

// sorted returns ps sorted, in a new slice.
func sorted(ps []int32) []int32 {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}

// plan lists the topic's offsets and returns, for each partition to read,
// where to start and (for --until-end) where to stop. It fails when the
// topic or the requested partition does not exist.
func (f *consumeFlags) plan(ctx context.Context, cmd *cobra.Command, topic string, offsetSet bool) (map[int32]consumeRange, error) {
	adm, err := f.newAdmin(cmd)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	list := adm.ListEndOffsets
	if f.isolation == "read_committed" {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	var committed kadm.OffsetResponses
	if f.group != "" {
		committed, err = adm.FetchOffsets(ctx, f.group)
		if err == nil {
			err = committed.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil // a new group: nothing committed
		}
		if err != nil {
			return nil, fmt.Errorf("fetch offsets of group %s: %w", f.group, err)
		}
	}
	if f.partition >= 0 {
		if _, ok := ends.Lookup(topic, f.partition); !ok {
			return nil, fmt.Errorf("topic %s has no partition %d (%d partitions)", topic, f.partition, len(ends[topic]))
		}
	}
	ranges := make(map[int32]consumeRange)
	for p, e := range ends[topic] {
		if f.partition >= 0 && p != f.partition {
			continue
		}
		s, _ := starts.Lookup(topic, p)
		// Where consuming starts: the end unless a flag says otherwise;
		// an offset outside the log resets as the consumer will (a
		// group's reset policy, or the log start), so that --until-end
		// does not wait for records that will never come.
		r := consumeRange{start: e.Offset, end: e.Offset}
		switch {
		case f.group != "":
			c, ok := committed.Lookup(topic, p)
			switch {
			case ok && c.At >= s.Offset:
				r.start = min(c.At, e.Offset)
			case f.fromBeginning:
				r.start = s.Offset
			}
		case f.fromBeginning:
			r.start = s.Offset
		case offsetSet && f.offset >= 0:
			r.start = min(max(f.offset, s.Offset), e.Offset)
		case offsetSet:
			r.start = max(e.Offset+f.offset, s.Offset)
		}
		ranges[p] = r
	}
	return ranges, nil
}
