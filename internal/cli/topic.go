package cli

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newTopicCommand) }

// topicFlags are the flags shared by the subcommands: --brokers and --timeout.
type topicFlags = adminFlags

func newTopicCommand() *cobra.Command {
	f := new(topicFlags)
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, delete topics, add partitions, delete their records and alter their configs",
		Args:  cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(
		newTopicCreateCommand(f),
		newTopicListCommand(f),
		newTopicDescribeCommand(f),
		newTopicDeleteCommand(f),
		newTopicDeleteRecordsCommand(f),
		newTopicAlterCommand(f),
		newTopicAlterConfigCommand(f),
	)
	return cmd
}

func newTopicCreateCommand(f *topicFlags) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME [--partitions N] [--replication-factor N] [--config key=value ...]",
		Short: "Create a topic",
		Long: `Create a topic with CreateTopics.

--partitions and --replication-factor default to -1, which asks the broker
for its defaults (num.partitions, default.replication.factor).
--config sets a topic config with Kafka's name, for example
--config cleanup.policy=compact --config retention.ms=86400000; it may be
repeated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, err := parseConfigs("--config", configs)
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
			resp, err := adm.CreateTopic(ctx, partitions, replication, cfg, name)
			if err != nil {
				if ifNotExists && errors.Is(err, kerr.TopicAlreadyExists) {
					fmt.Fprintf(cmd.OutOrStdout(), "Topic %s already exists.\n", name)
					return nil
				}
				return fmt.Errorf("create topic %s: %s", name, kafkaError(err, resp.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created topic %s.\n", name)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: the broker's num.partitions)")
	fl.Int16VarP(&replication, "replication-factor", "r", -1, "replicas of each partition (-1: the broker's default.replication.factor)")
	fl.StringArrayVarP(&configs, "config", "c", nil, "topic config `key=value`; may be repeated")
	fl.BoolVar(&ifNotExists, "if-not-exists", false, "succeed when the topic already exists")
	return cmd
}

// parseConfigs turns the key=value arguments of flag into the map kadm
// takes; its errors name flag.
func parseConfigs(flag string, kvs []string) (map[string]*string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want key=value", flag, kv)
		}
		m[k] = &v
	}
	return m, nil
}

func newTopicListCommand(f *topicFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topic names, one per line",
		Long:  "List topic names, one per line, sorted. Internal topics (such as __consumer_offsets) are hidden unless --all.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			topics, err := adm.ListTopicsWithInternal(ctx)
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			w := cmd.OutOrStdout()
			for _, td := range topics.Sorted() {
				if td.IsInternal && !all {
					continue
				}
				fmt.Fprintln(w, td.Topic)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include internal topics")
	return cmd
}

func newTopicDescribeCommand(f *topicFlags) *cobra.Command {
	var allConfigs bool
	cmd := &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show a topic's partitions and configs",
		Long: `Show each topic's ID, partition count and replication factor, then one
line per partition with its leader, leader epoch, replicas, in-sync replicas
(ISR) and offline replicas, then the topic's configs from DescribeConfigs.

Only configs set on the topic itself (source DYNAMIC_TOPIC_CONFIG) are
shown, as kafka-topics does; --all-configs shows every config with its
source (DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ...). Sensitive values are
shown as [hidden].`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			topics, err := adm.ListTopicsWithInternal(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe topics: %w", err)
			}
			var present []string
			for _, name := range args {
				if td, ok := topics[name]; ok && td.Err == nil {
					present = append(present, name)
				}
			}
			configs, cfgErr := adm.DescribeTopicConfigs(ctx, present...)
			w := cmd.OutOrStdout()
			var errs []error
			shown := 0
			for _, name := range args {
				td, ok := topics[name]
				if !ok {
					errs = append(errs, fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition))
					continue
				}
				if td.Err != nil {
					errs = append(errs, fmt.Errorf("topic %s: %w", name, td.Err))
					continue
				}
				if shown > 0 {
					fmt.Fprintln(w)
				}
				shown++
				writeTopicDetail(w, td)
				rc, err := configs.On(name, nil)
				switch {
				case cfgErr != nil:
					err = cfgErr
				case err == nil && rc.Err != nil:
					err = errors.New(kafkaError(rc.Err, rc.ErrMessage))
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("configs of topic %s: %w", name, err))
					continue
				}
				writeTopicConfigs(w, rc.Configs, allConfigs)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "show every config with its source, not only those set on the topic")
	return cmd
}

// writeTopicDetail writes the header line and one line per partition.
func writeTopicDetail(w io.Writer, td kadm.TopicDetail) {
	rf := 0
	for _, p := range td.Partitions {
		rf = max(rf, len(p.Replicas))
	}
	// Kafka prints topic IDs in URL-safe base64 without padding (Uuid.toString).
	fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d",
		td.Topic, base64.RawURLEncoding.EncodeToString(td.ID[:]), len(td.Partitions), rf)
	if td.IsInternal {
		fmt.Fprint(w, "\tInternal: true")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for _, p := range td.Partitions.Sorted() {
		fmt.Fprintf(tw, "  Partition: %d\tLeader: %d\tLeaderEpoch: %d\tReplicas: %s\tIsr: %s",
			p.Partition, p.Leader, p.LeaderEpoch, joinInt32(p.Replicas), joinInt32(p.ISR))
		if len(p.OfflineReplicas) > 0 {
			fmt.Fprintf(tw, "\tOffline: %s", joinInt32(p.OfflineReplicas))
		}
		if p.Err != nil {
			fmt.Fprintf(tw, "\tError: %s", p.Err)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// writeTopicConfigs writes the configs set on the topic, or all with their
// source when all is set.
func writeTopicConfigs(w io.Writer, configs []kadm.Config, all bool) {
	shown := slices.DeleteFunc(slices.Clone(configs), func(c kadm.Config) bool {
		return !all && c.Source != kmsg.ConfigSourceDynamicTopicConfig
	})
	sort.Slice(shown, func(i, j int) bool { return shown[i].Key < shown[j].Key })
	if len(shown) == 0 {
		fmt.Fprintln(w, "Configs: (none set on the topic)")
		return
	}
	fmt.Fprintln(w, "Configs:")
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for _, c := range shown {
		v := c.MaybeValue()
		if c.Sensitive {
			v = "[hidden]"
		} else if c.Value == nil {
			v = "(null)"
		}
		if all {
			fmt.Fprintf(tw, "  %s=%s\t%s\n", c.Key, v, c.Source)
		} else {
			fmt.Fprintf(tw, "  %s=%s\n", c.Key, v)
		}
	}
	tw.Flush()
}

func joinInt32(s []int32) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ",")
}

func newTopicDeleteCommand(f *topicFlags) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.DeleteTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("delete topics: %w", err)
			}
			var errs []error
			for _, name := range args {
				r, ok := resps[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("delete topic %s: not in the response", name))
				case r.Err != nil && ifExists && errors.Is(r.Err, kerr.UnknownTopicOrPartition):
					fmt.Fprintf(cmd.OutOrStdout(), "Topic %s does not exist.\n", name)
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("delete topic %s: %s", name, kafkaError(r.Err, r.ErrMessage)))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted topic %s.\n", name)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed when a topic does not exist")
	return cmd
}
