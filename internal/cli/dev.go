package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa"
)

func init() { clientCommands = append(clientCommands, newDevCommand) }

func newDevCommand() *cobra.Command {
	var (
		nodes, controllers, brokers int
		dir                         string
		overrides                   []string
		logLevel                    string
		startTimeout                time.Duration
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local multi-node cluster in this process, for development",
		Long: `Run a cluster of Samsa nodes inside this process, on 127.0.0.1 with free
ports: --nodes combined nodes (broker and controller, the default 3), or
--controller-nodes controller-only and --broker-nodes broker-only nodes. Each node
keeps its data in <dir>/node-<id>, so running again on the same --dir finds
the topics again. The bootstrap addresses are printed on standard output,
then each node's operations HTTP listener (Prometheus /metrics, /healthz,
/readyz; on free ports, --override http.listener= turns them off) and the
web console of each broker (docs/console.md); SIGINT or
SIGTERM stops every node cleanly.

Topics get default.replication.factor min(3, brokers) unless --override
sets it; --override key=value applies any other server property (Kafka's
names) to every node.`,
		Example: `  samsa dev --nodes 3
  SAMSA_BROKERS=127.0.0.1:40123 samsa topic create events --partitions 6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			props := map[string]string{}
			for _, o := range overrides {
				k, v, ok := strings.Cut(o, "=")
				if !ok {
					return fmt.Errorf("--override %q is not key=value", o)
				}
				props[strings.TrimSpace(k)] = v
			}
			cfg := samsa.ClusterConfig{Dir: dir, Properties: props,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))}
			// Every node gets its own http.listener on a free port (one
			// address for all would collide); an empty override turns them off.
			if v, ok := props["http.listener"]; !ok || v != "" {
				cfg.HTTPListeners = true
			}
			nBrokers := nodes
			switch {
			case controllers > 0 || brokers > 0:
				if cmd.Flags().Changed("nodes") {
					return fmt.Errorf("--nodes and --controller-nodes/--broker-nodes exclude each other")
				}
				cfg.Controllers, cfg.Brokers = controllers, brokers
				nBrokers = brokers
				if nBrokers <= 0 {
					nBrokers = 3 // StartCluster's default
				}
			case nodes <= 0:
				return fmt.Errorf("--nodes %d: at least 1", nodes)
			default:
				cfg.Nodes = nodes
			}
			if _, ok := props["default.replication.factor"]; !ok {
				props["default.replication.factor"] = strconv.Itoa(min(nBrokers, 3))
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			cfg.Dir = abs
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), startTimeout)
			c, err := samsa.StartCluster(ctx, cfg)
			cancel()
			if err != nil {
				return fmt.Errorf("starting the cluster: %w", err)
			}
			out := cmd.OutOrStdout()
			bootstrap := strings.Join(c.Addrs(), ",")
			total := cfg.Nodes + cfg.Controllers + cfg.Brokers
			if cfg.Nodes == 0 {
				total = len(c.Brokers()) + len(c.Controllers())
			}
			fmt.Fprintf(out, "samsa dev: %d nodes (%d brokers, %d controllers), data in %s\n", total, len(c.Brokers()), len(c.Controllers()), abs)
			fmt.Fprintf(out, "bootstrap=%s\n", bootstrap)
			fmt.Fprintf(out, "  export SAMSA_BROKERS=%s\n", bootstrap)
			if cfg.HTTPListeners {
				ids := append(c.Controllers(), c.Brokers()...)
				slices.Sort(ids)
				var urls []string
				for _, id := range slices.Compact(ids) {
					urls = append(urls, "http://"+c.HTTPAddr(id)+"/metrics")
				}
				fmt.Fprintf(out, "metrics=%s\n", strings.Join(urls, ","))
				urls = urls[:0]
				for _, id := range c.Brokers() { // controller-only nodes serve no console
					urls = append(urls, "http://"+c.HTTPAddr(id)+"/")
				}
				fmt.Fprintf(out, "console=%s\n", strings.Join(urls, ","))
			}
			fmt.Fprintln(out, "Ctrl-C stops the cluster.")
			<-cmd.Context().Done()
			fmt.Fprintln(out, "stopping")
			if err := c.Close(); err != nil {
				return fmt.Errorf("stopping the cluster: %w", err)
			}
			fmt.Fprintln(out, "stopped")
			return nil
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 3, "number of combined nodes (broker and controller)")
	cmd.Flags().IntVar(&controllers, "controller-nodes", 0, "controller-only nodes, instead of --nodes (default 3 with --broker-nodes)")
	cmd.Flags().IntVar(&brokers, "broker-nodes", 0, "broker-only nodes, instead of --nodes (default 3 with --controller-nodes)")
	cmd.Flags().StringVar(&dir, "dir", "samsa-dev", "directory of the nodes' data (node-<id> each)")
	cmd.Flags().StringArrayVar(&overrides, "override", nil, "key=value server property for every node (repeatable)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (node logs on standard error)")
	cmd.Flags().DurationVar(&startTimeout, "start-timeout", time.Minute, "give up starting after this long")
	return cmd
}
