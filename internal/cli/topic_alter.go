package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
)

func newTopicAlterCommand(f *topicFlags) *cobra.Command {
	var (
		partitions   int32
		validateOnly bool
		ifExists     bool
	)
	cmd := &cobra.Command{
		Use:   "alter NAME... --partitions N [--validate-only] [--if-exists]",
		Short: "Raise a topic's partition count",
		Long: `Raise each topic's partition count to N with CreatePartitions, as
kafka-topics --alter --topic T --partitions N does. The new partitions get
the topic's replication factor and are placed by the controller; the
records already written stay where they are, so a key's later records may
go to another partition than its earlier ones.

The count can only grow: N not larger than the topic's count is refused
with INVALID_PARTITIONS, a missing topic with UNKNOWN_TOPIC_OR_PARTITION
(or skipped with --if-exists), and the broker's message is shown. Each
topic is changed or not on its own; the command exits non-zero when one
failed. --validate-only asks the controller to check the change without
making it. For example:

  samsa topic alter orders --partitions 12

Configs are changed with samsa topic alter-config.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions < 1 {
				return fmt.Errorf("--partitions %d: want a partition count of at least 1", partitions)
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			alter := adm.UpdatePartitions
			if validateOnly {
				alter = adm.ValidateUpdatePartitions
			}
			resps, err := alter(ctx, int(partitions), args...)
			if err != nil {
				return fmt.Errorf("alter partitions: %w", err)
			}
			w := cmd.OutOrStdout()
			var errs []error
			for _, name := range args {
				r, ok := resps[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("alter partitions of topic %s: not in the response", name))
				case r.Err != nil && ifExists && errors.Is(r.Err, kerr.UnknownTopicOrPartition):
					fmt.Fprintf(w, "Topic %s does not exist.\n", name)
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("alter partitions of topic %s: %w", name, &responseError{r.Err, r.ErrMessage}))
				case validateOnly:
					fmt.Fprintf(w, "Topic %s can have %d partitions (validated only, nothing changed).\n", name, partitions)
				default:
					fmt.Fprintf(w, "Topic %s now has %d partitions.\n", name, partitions)
				}
			}
			return errors.Join(errs...)
		},
	}
	fl := cmd.Flags()
	fl.Int32VarP(&partitions, "partitions", "p", 0, "the topic's new partition count, larger than its current one")
	fl.BoolVar(&validateOnly, "validate-only", false, "check the change with the controller without making it")
	fl.BoolVar(&ifExists, "if-exists", false, "succeed when a topic does not exist")
	_ = cmd.MarkFlagRequired("partitions")
	return cmd
}
