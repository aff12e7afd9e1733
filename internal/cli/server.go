package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/buildinfo"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// haltCloseWait bounds how long a halted node's close may take before
// the samsa command exits with status 1 regardless.
const haltCloseWait = 10 * time.Second

// newServerCommand is samsa server with its log dirs on fsys (nil: the
// operating system's filesystem).
func newServerCommand(fsys vfs.FS) *cobra.Command {
	var (
		nf        nodeFlags
		logLevel  string
		pprofAddr string
		phaseDir  string
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Samsa node (broker and controller)",
		Long: `Run a Samsa node. With no configuration it is a single-node cluster:
node.id=1, data in ./samsa-data, listeners
PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093, and the operations
HTTP listener on localhost:9644 (http.listener: the web console on /,
Prometheus metrics on /metrics, probes on /healthz and /readyz; empty
turns it off).

Configuration uses Kafka's property names and defaults: a server.properties
file (--config), then SAMSA_* environment variables
(SAMSA_LOG_SEGMENT_BYTES=1048576 sets log.segment.bytes), then
--override key=value flags, each overriding the ones before. An unknown
property or invalid value stops startup.
SIGINT or SIGTERM stops the node cleanly (logs flushed, checkpoints written).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			props, err := nf.props()
			if err != nil {
				return err
			}
			nc, err := config.Parse(props) // checked before any log line; the node parses them again
			if err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if pprofAddr != "" {
				stop, err := servePprof(pprofAddr, logger)
				if err != nil {
					return err
				}
				defer stop()
			}
			var prof *phaseProfiler
			if phaseDir != "" {
				if prof, err = startPhaseProfiler(phaseDir); err != nil {
					return err
				}
				defer func() {
					if err := prof.end(); err != nil {
						logger.Warn("writing profiles", "err", err)
					}
				}()
			}
			n, err := samsa.StartPropertiesFS(cmd.Context(), props, logger, fsys)
			if err != nil {
				return err
			}
			if prof != nil {
				if err := prof.end(); err != nil {
					logger.Warn("writing profiles", "err", err)
				}
			}
			// After an unclean shutdown the node's controller runs while
			// its data logs load in the background (docs/architecture.md):
			// "samsa started" means serving clients, as Kafka logs its
			// server started at the end of its startup, and harnesses
			// (internal/proctest) wait for it.
			serving := n.Serving()
			select {
			case <-serving:
			default:
				logger.Info("controller started: loading the logs before serving clients", "node_id", nc.NodeID)
			}
			select {
			case <-serving:
				logger.Info("samsa started", "version", buildinfo.Version(), "node_id", nc.NodeID, "cluster_id", n.ClusterID(), "log_dirs", strings.Join(nc.LogDirs, ","), "bootstrap", n.Addr(), "http", n.HTTPAddr())
			case <-cmd.Context().Done():
			case <-n.Halted():
			}
			select {
			case <-cmd.Context().Done():
			case <-n.Halted():
				// Kafka halts the broker when its last log dir goes
				// offline: what is left serves nothing. Exit 1, so
				// that a supervisor restarts it once the disk is fixed.
				logger.Error("exiting: the node halted", "err", n.HaltError())
				// Kafka halts the process outright (Exit.halt). Closing
				// releases the log dirs' locks and the ports sooner, but
				// a close stuck behind the failed disk must not keep a
				// halted node alive: exit after haltCloseWait anyway.
				closed := make(chan struct{})
				go func() { n.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(haltCloseWait):
					logger.Error("closing the halted node did not finish: exiting without it", "waited", haltCloseWait)
				}
				return n.HaltError()
			}
			logger.Info("stopping")
			if prof != nil {
				if err := prof.begin("stop"); err != nil {
					logger.Warn("profiling the stop", "err", err)
				}
			}
			if err := n.Close(); err != nil {
				return err
			}
			logger.Info("stopped cleanly")
			return nil
		},
	}
	nf.add(cmd)
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&phaseDir, "profile-phases", "", "write CPU, block and trace profiles of the start (until serving) and of the stop (signal to exit) to this `dir` (start.cpu.pprof, stop.trace, ...)")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve Go's /debug/pprof/ profiles on this `host:port` (for profiling; keep it on loopback)")
	return cmd
}
