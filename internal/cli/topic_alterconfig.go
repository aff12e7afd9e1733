package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func newTopicAlterConfigCommand(f *topicFlags) *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config NAME... [--set key=value]... [--delete key]...",
		Short: "Change or remove topic configs",
		Long: `Change topic configs with IncrementalAlterConfigs, as kafka-configs
--alter does: --set key=value sets a config on the topic, --delete key
removes it so that the broker's value or Kafka's default applies again.
Both may be repeated; the changes to one topic apply together, or not at
all. They take effect on the brokers without a restart and persist in the
cluster metadata, for example:

  samsa topic alter-config orders --set retention.ms=3600000 --delete retention.bytes

samsa topic describe NAME shows the configs set on a topic.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ops, err := alterConfigOps(sets, deletes)
			if err != nil {
				return err
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.AlterTopicConfigs(ctx, ops, args...)
			if err != nil {
				return fmt.Errorf("alter configs: %w", err)
			}
			byName := map[string]kadm.AlterConfigsResponse{}
			for _, r := range resps {
				byName[r.Name] = r
			}
			var errs []error
			for _, name := range args {
				r, ok := byName[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("alter configs of topic %s: not in the response", name))
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("alter configs of topic %s: %s", name, kafkaError(r.Err, r.ErrMessage)))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "Altered configs of topic %s.\n", name)
				}
			}
			return errors.Join(errs...)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&sets, "set", "s", nil, "set topic config `key=value`; may be repeated")
	fl.StringArrayVarP(&deletes, "delete", "d", nil, "remove topic config `key` (back to the broker's or Kafka's default); may be repeated")
	return cmd
}

// alterConfigOps turns --set and --delete arguments into
// IncrementalAlterConfigs operations. A key given twice is an error.
func alterConfigOps(sets, deletes []string) ([]kadm.AlterConfig, error) {
	if len(sets)+len(deletes) == 0 {
		return nil, errors.New("nothing to change: give --set key=value or --delete key")
	}
	seen := map[string]bool{}
	var ops []kadm.AlterConfig
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want key=value", kv)
		}
		if seen[k] {
			return nil, fmt.Errorf("config %s given twice", k)
		}
		seen[k] = true
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range deletes {
		if k == "" || strings.Contains(k, "=") {
			return nil, fmt.Errorf("--delete %q: want a config name", k)
		}
		if seen[k] {
			return nil, fmt.Errorf("config %s given twice", k)
		}
		seen[k] = true
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return ops, nil
}
