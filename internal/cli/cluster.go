package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
with the Kafka admin APIs (Metadata, DescribeConfigs, and DescribeQuorum for
the metadata quorum's leader, the active controller), so it works against
any Kafka cluster. A broker that lost the metadata quorum still answers
Metadata from its last state, which looks healthy; DescribeQuorum, which it
forwards to the active controller, tells: no answer within 5 seconds, or no
leader, is no controller. Against a cluster without DescribeQuorum (ZooKeeper
mode) the controller is Metadata's. The exit status is 1 when the cluster
is unhealthy: no controller, a broker down, or a partition leaderless,
under-replicated or under min ISR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var h *health
			err := f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				var err error
				h, err = clusterHealth(ctx, cl, adm)
				return err
			})
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

// quorumWait bounds how long cluster health waits for DescribeQuorum: a
// broker forwards it to the active controller and, without one, retries
// until its own timeout.
const quorumWait = 5 * time.Second

// clusterHealth asks the cluster for its metadata, the metadata quorum's
// leader and the topics' min.insync.replicas.
func clusterHealth(ctx context.Context, cl *kgo.Client, adm *kadm.Client) (*health, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	h := &health{controller: md.Controller}
	if id, ok := quorumLeader(ctx, cl, md.Brokers); ok {
		h.controller = id
	}
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

// quorumLeader asks the brokers in turn, within quorumWait, for the
// metadata quorum's leader with DescribeQuorum v0 (KIP-595; brokers forward
// it to the active controller). It returns -1 when none answers in time or
// the answer has an error or no leader, and ok false when the cluster does
// not serve DescribeQuorum (ZooKeeper-mode Kafka) or ctx ended.
func quorumLeader(ctx context.Context, cl *kgo.Client, brokers kadm.BrokerDetails) (id int32, ok bool) {
	qctx, cancel := context.WithTimeout(ctx, quorumWait)
	defer cancel()
	for _, b := range brokers {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(qctx, cl.Broker(int(b.NodeID)))
		switch {
		case qctx.Err() != nil:
			if ctx.Err() != nil {
				return 0, false
			}
			return -1, true
		case err != nil && !servesDescribeQuorum(qctx, cl, b.NodeID):
			return 0, false
		case err != nil:
			continue // this broker is down: ask the next
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -1, true
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID < 0 {
			return -1, true
		}
		return p.LeaderID, true
	}
	return -1, true
}

// servesDescribeQuorum is false when broker id answers ApiVersions without
// DescribeQuorum (kgo then refuses to send it), true otherwise.
func servesDescribeQuorum(ctx context.Context, cl *kgo.Client, id int32) bool {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.Broker(int(id)))
	if err != nil || resp.ErrorCode != 0 {
		return true // down, not too old
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == kmsg.DescribeQuorum.Int16() {
			return true
		}
	}
	return false
}
