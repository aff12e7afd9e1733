package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newClusterCommand) }

func newClusterCommand() *cobra.Command {
	f := new(adminFlags)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster",
		Args:  cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(newClusterHealthCommand(f))
	return cmd
}

// errUnhealthy is returned by cluster health when the cluster is not
// healthy (exit status 1).
var errUnhealthy = errors.New("cluster unhealthy")

func newClusterHealthCommand(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the cluster's health; exit status 1 when unhealthy",
		Long: `Show the cluster's health in one screen, as rpk cluster health does: the
active controller, the brokers (those that hold replicas but are not
registered and unfenced are down), and the partitions without a leader,
with fewer in-sync replicas than replicas (under-replicated) and with fewer
than min.insync.replicas (under-min-ISR: acks=all produces fail). It asks
with the Kafka admin APIs (Metadata, DescribeConfigs), so it works against
any Kafka cluster. The exit status is 1 when the cluster is unhealthy: no
controller, a broker down, or a partition leaderless, under-replicated or
under min ISR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			ctx, cancel := f.context(cmd)
			defer cancel()
			h, err := clusterHealth(ctx, adm)
			if err != nil {
				return err
			}
			h.print(cmd.OutOrStdout())
			if !h.healthy() {
				return fmt.Errorf("%w: %s", errUnhealthy, strings.Join(h.reasons(), ", "))
			}
			return nil
		},
	}
}

// health is what cluster health reports.
type health struct {
	controller      int32
	brokers         []int32  // registered, unfenced (in Metadata)
	down            []int32  // hold replicas but are not in Metadata
	leaderless      []string // topic/partition
	underReplicated []string
	underMinISR     []string
}

func (h *health) reasons() []string {
	var out []string
	if h.controller < 0 {
		out = append(out, "no_controller")
	}
	if len(h.down) > 0 {
		out = append(out, "nodes_down")
	}
	if len(h.leaderless) > 0 {
		out = append(out, "leaderless_partitions")
	}
	if len(h.underReplicated) > 0 {
		out = append(out, "under_replicated_partitions")
	}
	if len(h.underMinISR) > 0 {
		out = append(out, "under_min_isr_partitions")
	}
	return out
}

func (h *health) healthy() bool { return len(h.reasons()) == 0 }

func (h *health) print(w io.Writer) {
	ids := func(v []int32) string {
		s := make([]string, len(v))
		for i, id := range v {
			s[i] = strconv.Itoa(int(id))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	list := func(v []string) string { return "[" + strings.Join(v, " ") + "]" }
	fmt.Fprintln(w, "CLUSTER HEALTH OVERVIEW")
	fmt.Fprintln(w, "=======================")
	fmt.Fprintf(w, "%-36s%v\n", "Healthy:", h.healthy())
	fmt.Fprintf(w, "%-36s%s\n", "Unhealthy reasons:", list(h.reasons()))
	fmt.Fprintf(w, "%-36s%d\n", "Controller ID:", h.controller)
	fmt.Fprintf(w, "%-36s%s\n", "Brokers up:", ids(h.brokers))
	fmt.Fprintf(w, "%-36s%s\n", "Brokers down:", ids(h.down))
	fmt.Fprintf(w, "%-36s%s\n", fmt.Sprintf("Leaderless partitions (%d):", len(h.leaderless)), list(h.leaderless))
	fmt.Fprintf(w, "%-36s%s\n", fmt.Sprintf("Under-replicated partitions (%d):", len(h.underReplicated)), list(h.underReplicated))
	fmt.Fprintf(w, "%-36s%s\n", fmt.Sprintf("Under-min-ISR partitions (%d):", len(h.underMinISR)), list(h.underMinISR))
}

// clusterHealth asks the cluster for its metadata and the topics'
// min.insync.replicas.
func clusterHealth(ctx context.Context, adm *kadm.Client) (*health, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	h := &health{controller: md.Controller}
	up := map[int32]bool{}
	for _, b := range md.Brokers {
		up[b.NodeID] = true
		h.brokers = append(h.brokers, b.NodeID)
	}
	slices.Sort(h.brokers)
	minISR := map[string]int{}
	if names := md.Topics.Names(); len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return nil, fmt.Errorf("describe configs: %w", err)
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					minISR[rc.Name], _ = strconv.Atoi(*c.Value)
				}
			}
		}
	}
	down := map[int32]bool{}
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			name := t.Topic + "/" + strconv.Itoa(int(p.Partition))
			for _, r := range p.Replicas {
				if !up[r] {
					down[r] = true
				}
			}
			if p.Leader < 0 {
				h.leaderless = append(h.leaderless, name)
			}
			if len(p.ISR) < len(p.Replicas) {
				h.underReplicated = append(h.underReplicated, name)
			}
			if len(p.ISR) < minISR[t.Topic] {
				h.underMinISR = append(h.underMinISR, name)
			}
		}
	}
	for id := range down {
		h.down = append(h.down, id)
	}
	slices.Sort(h.down)
	return h, nil
}
