package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/dlq"
)

func init() { clientCommands = append(clientCommands, newDLQCommand) }

// dlqTopicEnableConfig is the topic config that lets share groups write to
// a topic as their dead-letter topic (KIP-1191).
const dlqTopicEnableConfig = "errors.deadletterqueue.group.enable"

// newDLQCommand is `samsa dlq`: find dead-letter topics, read their records
// with their origin, and produce them back to their source partitions.
func newDLQCommand() *cobra.Command {
	f := new(adminFlags)
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, inspect and replay dead-letter topics (share groups' and Spring's .DLT)",
		Long: "Work with dead-letter topics: those share groups write to (KIP-1191 headers __dlq.errors.*, " +
			"see docs/groups.md) and those Spring's DeadLetterPublishingRecoverer writes (kafka_dlt-* headers).",
		Args: cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(newDLQListCommand(f), newDLQInspectCommand(f), newDLQReplayCommand(f))
	return cmd
}

// looksDeadLetter reports whether a topic name follows a dead-letter
// naming convention: Kafka's "dlq." prefix (errors.deadletterqueue.topic.name.prefix),
// Spring's ".DLT" suffix, or a "-dlt"/"-dlq"/".dlq" suffix.
func looksDeadLetter(name string) bool {
	l := strings.ToLower(name)
	return strings.HasPrefix(l, "dlq.") || strings.HasSuffix(l, ".dlt") || strings.HasSuffix(l, "-dlt") ||
		strings.HasSuffix(l, ".dlq") || strings.HasSuffix(l, "-dlq")
}

func newDLQListCommand(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List dead-letter topics: partitions and records",
		Long: "List the topics that are dead-letter topics: those with " + dlqTopicEnableConfig + "=true, and those " +
			"named like one (prefix dlq., suffix .DLT, -dlt, .dlq or -dlq), with their partition count and the " +
			"records they hold (end offset minus start offset, summed over partitions).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.withAdmin(cmd, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				topics, err := adm.ListTopics(ctx)
				if err != nil {
					return fmt.Errorf("list topics: %w", err)
				}
				names := topics.Names()
				configs, err := adm.DescribeTopicConfigs(ctx, names...)
				if err != nil {
					return fmt.Errorf("describe topic configs: %w", err)
				}
				enabled := map[string]bool{}
				for _, rc := range configs {
					for _, c := range rc.Configs {
						if c.Key == dlqTopicEnableConfig && c.Value != nil && strings.EqualFold(*c.Value, "true") {
							enabled[rc.Name] = true
						}
					}
				}
				var dead []string
				for _, n := range names {
					if enabled[n] || looksDeadLetter(n) {
						dead = append(dead, n)
					}
				}
				sort.Strings(dead)
				counts := map[string]int64{}
				if len(dead) > 0 {
					starts, err := adm.ListStartOffsets(ctx, dead...)
					if err != nil {
						return fmt.Errorf("list start offsets: %w", err)
					}
					ends, err := adm.ListEndOffsets(ctx, dead...)
					if err != nil {
						return fmt.Errorf("list end offsets: %w", err)
					}
					ends.Each(func(o kadm.ListedOffset) {
						if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Err == nil && s.Err == nil {
							counts[o.Topic] += o.Offset - s.Offset
						}
					})
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TOPIC\tPARTITIONS\tRECORDS\tGROUP DLQ ENABLED")
				for _, n := range dead {
					fmt.Fprintf(w, "%s\t%d\t%d\t%t\n", n, len(topics[n].Partitions), counts[n], enabled[n])
				}
				return w.Flush()
			})
		},
	}
}

// dlqReadFlags select the dead-letter records inspect and replay read.
type dlqReadFlags struct {
	partition   int32
	sourceTopic string
	max         int
}

func (r *dlqReadFlags) add(cmd *cobra.Command) {
	cmd.Flags().Int32VarP(&r.partition, "partition", "p", -1, "read only this partition of the dead-letter topic (-1: all)")
	cmd.Flags().StringVar(&r.sourceTopic, "source-topic", "", "only records whose origin is this topic")
	cmd.Flags().IntVarP(&r.max, "max-messages", "n", 0, "stop after this many matching records (0: no limit)")
}

// dlqRecord is a record of a dead-letter topic with its decoded origin
// (err set when its headers name none).
type dlqRecord struct {
	rec    *kgo.Record
	origin dlq.Origin
	err    error
}

// withDLQ is the RunE of a command that reads the dead-letter topic
// args[0]: it runs fn on the records that r selects (readDLQ), within
// --timeout.
func withDLQ(f *adminFlags, r *dlqReadFlags, fn func(ctx context.Context, cmd *cobra.Command, recs []dlqRecord) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return f.withAdmin(cmd, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			recs, err := readDLQ(ctx, cmd, f, adm, args[0], r)
			if err != nil {
				return err
			}
			return fn(ctx, cmd, recs)
		})
	}
}

// readDLQ reads topic from its start offsets to the end offsets listed when
// it starts, and returns the records that match r, in partition and offset
// order.
func readDLQ(ctx context.Context, cmd *cobra.Command, f *adminFlags, adm *kadm.Client, topic string, r *dlqReadFlags) ([]dlqRecord, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	if len(ends[topic]) == 0 {
		return nil, fmt.Errorf("topic %s: not found", topic)
	}
	want := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	for p, e := range ends[topic] {
		if r.partition >= 0 && p != r.partition {
			continue
		}
		if e.Err != nil {
			return nil, fmt.Errorf("%s[%d]: %s", topic, p, kafkaError(e.Err, ""))
		}
		s, _ := starts.Lookup(topic, p)
		if s.Offset < e.Offset {
			want[p] = kgo.NewOffset().At(s.Offset)
			end[p] = e.Offset
		}
	}
	var out []dlqRecord
	if len(want) == 0 {
		return out, nil
	}
	cl, err := f.newClient(cmd, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		for _, rec := range fs.Records() {
			e, ok := end[rec.Partition]
			if !ok || rec.Offset >= e {
				continue
			}
			if rec.Offset+1 >= e {
				delete(end, rec.Partition)
			}
			o, err := dlq.Decode(rec.Headers)
			if r.sourceTopic != "" && (err != nil || o.Topic != r.sourceTopic) {
				continue
			}
			if r.max > 0 && len(out) >= r.max {
				continue
			}
			out = append(out, dlqRecord{rec: rec, origin: o, err: err})
		}
		if r.max > 0 && len(out) >= r.max {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].rec, out[j].rec
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset
	})
	return out, nil
}

func newDLQInspectCommand(f *adminFlags) *cobra.Command {
	r := new(dlqReadFlags)
	cmd := &cobra.Command{
		Use:   "inspect TOPIC",
		Short: "Show the records of a dead-letter topic with their origin and reason",
		Long: "Read TOPIC from its start to its end offsets and print, for each record, its partition and offset, " +
			"where it came from (source topic, partition and offset), the header family (kip-1191 or spring), " +
			"the group, the delivery count, the reason (KIP-1191 message, or Spring's exception class and message) " +
			"and its key. Records without origin headers are shown with '-' and the reason they cannot be replayed.",
		Args: cobra.ExactArgs(1),
		RunE: withDLQ(f, r, func(ctx context.Context, cmd *cobra.Command, recs []dlqRecord) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PARTITION\tOFFSET\tSOURCE\tFORMAT\tGROUP\tDELIVERIES\tREASON\tKEY")
			for _, d := range recs {
				if d.err != nil {
					fmt.Fprintf(w, "%d\t%d\t-\t-\t-\t-\t%s\t%s\n", d.rec.Partition, d.rec.Offset, d.err, printable(d.rec.Key))
					continue
				}
				o := d.origin
				deliveries := "-"
				if o.DeliveryCount >= 0 {
					deliveries = strconv.Itoa(o.DeliveryCount)
				}
				reason := o.Reason
				if o.Exception != "" {
					reason = o.Exception + ": " + reason
				}
				fmt.Fprintf(w, "%d\t%d\t%s[%d]@%d\t%s\t%s\t%s\t%s\t%s\n", d.rec.Partition, d.rec.Offset, o.Topic, o.Partition,
					o.Offset, o.Format, dash(o.Group), deliveries, dash(reason), printable(d.rec.Key))
			}
			return w.Flush()
		}),
	}
	r.add(cmd)
	return cmd
}

// printable returns b quoted when it holds anything but printable ASCII,
// "-" when nil, at most 40 bytes of it.
func printable(b []byte) string {
	if b == nil {
		return "-"
	}
	s := string(b)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f || c == ' ' || c == '\t' {
			return strconv.Quote(s)
		}
	}
	return s
}

func newDLQReplayCommand(f *adminFlags) *cobra.Command {
	r := new(dlqReadFlags)
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "replay TOPIC",
		Short: "Produce the records of a dead-letter topic back to their source partitions",
		Long: "Read TOPIC from its start to its end offsets and produce each record back to the topic and partition " +
			"its headers name, with its key, value and timestamp and its headers minus the dead-letter ones " +
			"(__dlq.errors.*, kafka_dlt-*). A record without origin headers stops the replay before anything is " +
			"produced. The dead-letter topic is left as it is (delete its records with `samsa topic delete-records`).",
		Args: cobra.ExactArgs(1),
		RunE: withDLQ(f, r, func(ctx context.Context, cmd *cobra.Command, recs []dlqRecord) error {
			batch := make([]*kgo.Record, 0, len(recs))
			perTopic := map[string]int{}
			for _, d := range recs {
				if d.err != nil {
					return fmt.Errorf("%s[%d]@%d: %w", d.rec.Topic, d.rec.Partition, d.rec.Offset, d.err)
				}
				batch = append(batch, d.rec)
				perTopic[d.origin.Topic]++
			}
			if !dryRun && len(batch) > 0 {
				cl, err := f.newClient(cmd, kgo.RecordPartitioner(kgo.ManualPartitioner()))
				if err != nil {
					return err
				}
				defer cl.Close()
				n, err := dlq.Replay(ctx, cl, batch)
				if err != nil {
					return fmt.Errorf("replayed %d of %d records: %w", n, len(batch), err)
				}
			}
			verb := "replayed"
			if dryRun {
				verb = "would replay"
			}
			topics := make([]string, 0, len(perTopic))
			for t := range perTopic {
				topics = append(topics, t)
			}
			sort.Strings(topics)
			for _, t := range topics {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %d records to %s\n", verb, perTopic[t], t)
			}
			if len(batch) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no records to replay")
			}
			return nil
		}),
	}
	r.add(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "read and check the records, produce nothing")
	return cmd
}
