package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newReassignCommand) }

// reassignmentPlan is kafka-reassign-partitions' JSON format:
// {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.
type reassignmentPlan struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	} `json:"partitions"`
}

func readPlan(path string) (*reassignmentPlan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p reassignmentPlan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, want 1", path, p.Version)
	}
	if len(p.Partitions) == 0 {
		return nil, fmt.Errorf("%s: no partitions", path)
	}
	return &p, nil
}

func newReassignCommand() *cobra.Command {
	f := new(clientFlags)
	var plan string
	cmd := &cobra.Command{
		Use:   "reassign",
		Short: "Move partition replicas between brokers (like kafka-reassign-partitions)",
		Long: `Move partition replicas between brokers (KIP-455). A plan is
kafka-reassign-partitions' JSON:

  {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}

New replicas copy the partition from its leader; once they are in sync the
replicas left out of the plan are removed. execute, verify and cancel take
the plan's file as their argument or with --plan:

  samsa reassign execute plan.json`,
	}
	f.add(cmd)
	// The plan is the argument or --plan, as the user finds natural.
	withPlan := func(c *cobra.Command) *cobra.Command {
		c.Use += " [PLAN.json]"
		c.Flags().StringVar(&plan, "plan", "", "reassignment JSON `file` (or give it as the argument)")
		c.Args = cobra.MaximumNArgs(1)
		return c
	}
	planPath := func(c *cobra.Command, args []string) (string, error) {
		switch {
		case len(args) == 1 && plan != "" && args[0] != plan:
			return "", fmt.Errorf("two plans: %s and --plan %s", args[0], plan)
		case len(args) == 1:
			return args[0], nil
		case plan == "":
			return "", fmt.Errorf("no plan: give the reassignment JSON file, samsa reassign %s PLAN.json (or --plan PLAN.json)", c.Name())
		}
		return plan, nil
	}
	run := func(cancel bool) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			path, err := planPath(c, args)
			if err != nil {
				return err
			}
			p, err := readPlan(path)
			if err != nil {
				return err
			}
			adm, err := f.newAdmin(c)
			if err != nil {
				return err
			}
			defer adm.Close()
			req := kadm.AlterPartitionAssignmentsReq{}
			for _, pp := range p.Partitions {
				if cancel {
					req.CancelAssign(pp.Topic, pp.Partition)
				} else {
					req.Assign(pp.Topic, pp.Partition, pp.Replicas)
				}
			}
			resps, err := adm.AlterPartitionAssignments(c.Context(), req)
			if err != nil {
				return err
			}
			failed := 0
			for _, t := range sortedKeys(resps) {
				for _, part := range sortedKeys(resps[t]) {
					r := resps[t][part]
					if r.Err != nil {
						failed++
						fmt.Fprintf(c.OutOrStdout(), "%s-%d: %s\n", t, part, kafkaError(r.Err, r.ErrMessage))
					} else if cancel {
						fmt.Fprintf(c.OutOrStdout(), "%s-%d: cancelled\n", t, part)
					} else {
						fmt.Fprintf(c.OutOrStdout(), "%s-%d: started\n", t, part)
					}
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d partitions failed", failed)
			}
			return nil
		}
	}
	cmd.AddCommand(withPlan(&cobra.Command{Use: "execute", Short: "Start the reassignments of a plan", RunE: run(false)}))
	cmd.AddCommand(withPlan(&cobra.Command{Use: "cancel", Short: "Cancel the reassignments of a plan in progress", RunE: run(true)}))
	cmd.AddCommand(withPlan(&cobra.Command{
		Use:   "verify",
		Short: "Tell whether each partition of a plan has reached its replicas",
		RunE: func(c *cobra.Command, args []string) error {
			path, err := planPath(c, args)
			if err != nil {
				return err
			}
			p, err := readPlan(path)
			if err != nil {
				return err
			}
			adm, err := f.newAdmin(c)
			if err != nil {
				return err
			}
			defer adm.Close()
			var topics []string
			for _, pp := range p.Partitions {
				topics = append(topics, pp.Topic)
			}
			td, err := adm.ListTopics(c.Context(), topics...)
			if err != nil {
				return err
			}
			pending := 0
			for _, pp := range p.Partitions {
				cur, ok := td[pp.Topic].Partitions[pp.Partition]
				switch {
				case !ok:
					pending++
					fmt.Fprintf(c.OutOrStdout(), "%s-%d: unknown partition\n", pp.Topic, pp.Partition)
				case slices.Equal(cur.Replicas, pp.Replicas):
					fmt.Fprintf(c.OutOrStdout(), "%s-%d: complete\n", pp.Topic, pp.Partition)
				default:
					pending++
					fmt.Fprintf(c.OutOrStdout(), "%s-%d: in progress (replicas %v, target %v)\n", pp.Topic, pp.Partition, cur.Replicas, pp.Replicas)
				}
			}
			if pending > 0 {
				return errors.New("reassignment not complete")
			}
			return nil
		},
	}))
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the reassignments in progress",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			adm, err := f.newAdmin(c)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.ListPartitionReassignments(c.Context(), nil)
			if err != nil {
				return err
			}
			for _, t := range sortedKeys(resps) {
				for _, part := range sortedKeys(resps[t]) {
					r := resps[t][part]
					fmt.Fprintf(c.OutOrStdout(), "%s-%d replicas %v adding %v removing %v\n", t, part, r.Replicas, r.AddingReplicas, r.RemovingReplicas)
				}
			}
			return nil
		},
	})
	return cmd
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
