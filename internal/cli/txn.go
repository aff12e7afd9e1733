package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newTxnCommand) }

// txnFlags are the flags shared by the subcommands: --brokers and --timeout.
type txnFlags = adminFlags

// newTxnCommand is `samsa txn`, after Kafka's kafka-transactions.sh: list
// the transactional ids, describe one, and list the producers of a
// partition (DescribeProducers, to find hanging transactions).
func newTxnCommand() *cobra.Command {
	f := new(txnFlags)
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions and the producers of partitions",
		Args:  cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(newTxnListCommand(f), newTxnDescribeCommand(f), newTxnProducersCommand(f))
	return cmd
}

func newTxnListCommand(f *txnFlags) *cobra.Command {
	var (
		states      []string
		producerIDs []int64
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List transactional ids: coordinator, producer id and state",
		Long: "List the transactional ids of every broker (ListTransactions), sorted, with their coordinator, " +
			"producer id and state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			listed, err := adm.ListTransactions(ctx, producerIDs, states)
			if err != nil {
				return fmt.Errorf("list transactions: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TRANSACTIONAL ID\tCOORDINATOR\tPRODUCER ID\tSTATE")
			for _, t := range listed.Sorted() {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.TxnID, t.Coordinator, t.ProducerID, t.State)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only transactions in these states (repeat or comma-separate)")
	cmd.Flags().Int64SliceVar(&producerIDs, "producer-id", nil, "only these producer ids")
	return cmd
}

func newTxnDescribeCommand(f *txnFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TRANSACTIONAL_ID...",
		Short: "Describe transactional ids: producer, epoch, state, timeout, open partitions",
		Long: "Describe transactional ids (DescribeTransactions to their coordinators): coordinator, producer id " +
			"and epoch, state, transaction timeout, start time and duration of the open transaction, and its partitions.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			described, err := adm.DescribeTransactions(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe transactions: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TRANSACTIONAL ID\tCOORDINATOR\tPRODUCER ID\tEPOCH\tSTATE\tTIMEOUT MS\tSTART TIME\tDURATION MS\tPARTITIONS")
			var firstErr error
			now := time.Now()
			for _, d := range described.Sorted() {
				if d.Err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("describe %s: %s", d.TxnID, kafkaError(d.Err, ""))
					}
					continue
				}
				start, duration := "-", "-"
				if d.StartTimestamp >= 0 && d.State == "Ongoing" {
					st := time.UnixMilli(d.StartTimestamp)
					start = st.UTC().Format(time.RFC3339Nano)
					duration = strconv.FormatInt(now.Sub(st).Milliseconds(), 10)
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.TxnID, d.Coordinator, d.ProducerID, d.ProducerEpoch,
					d.State, d.TimeoutMillis, start, duration, partitionList(d.Topics))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return firstErr
		},
	}
}

// partitionList formats a set of partitions as topic-partition, comma
// separated, sorted; "-" for none.
func partitionList(s kadm.TopicsSet) string {
	var out []string
	for _, tp := range s.Sorted() {
		for _, p := range tp.Partitions {
			out = append(out, tp.Topic+"-"+strconv.Itoa(int(p)))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func newTxnProducersCommand(f *txnFlags) *cobra.Command {
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "producers TOPIC",
		Short: "List the producers a topic's partition leaders keep state for",
		Long: "List, for each partition of TOPIC (or those of --partition), the producers its leader keeps state for " +
			"(DescribeProducers): producer id and epoch, last sequence and timestamp, coordinator epoch, and the " +
			"first offset of the producer's open transaction (a transaction open for long is a hanging one).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			set := kadm.TopicsSet{}
			if len(partitions) == 0 {
				md, err := adm.Metadata(ctx, args[0])
				if err != nil {
					return fmt.Errorf("metadata: %w", err)
				}
				td, ok := md.Topics[args[0]]
				switch {
				case !ok:
					return fmt.Errorf("topic %s: not in the metadata", args[0])
				case td.Err != nil:
					return fmt.Errorf("topic %s: %s", args[0], kafkaError(td.Err, ""))
				}
				for p := range td.Partitions {
					set.Add(args[0], p)
				}
			} else {
				set.Add(args[0], partitions...)
			}
			described, err := adm.DescribeProducers(ctx, set)
			if err != nil {
				return fmt.Errorf("describe producers: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PARTITION\tPRODUCER ID\tEPOCH\tLAST SEQUENCE\tLAST TIMESTAMP\tCOORDINATOR EPOCH\tTXN START OFFSET")
			var firstErr error
			for _, dp := range described.SortedPartitions() {
				if dp.Err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("partition %d: %s", dp.Partition, kafkaError(dp.Err, dp.ErrMessage))
					}
					continue
				}
				for _, p := range dp.ActiveProducers.Sorted() {
					fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", dp.Partition, p.ProducerID, p.ProducerEpoch,
						p.LastSequence, p.LastTimestamp, p.CoordinatorEpoch, p.CurrentTxnStartOffset)
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return firstErr
		},
	}
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions")
	return cmd
}
