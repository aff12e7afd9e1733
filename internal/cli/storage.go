package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/storage"
)

func init() { clientCommands = append(clientCommands, newStorageCommand) }

// newStorageCommand is `samsa storage`, Kafka's kafka-storage tool: format
// log dirs for a cluster, make cluster ids, show what a dir holds.
func newStorageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Format log directories and make cluster ids (kafka-storage)",
		Long: `Format log directories and make cluster ids, as Kafka's kafka-storage tool.

Every node of a multi-node cluster (controller.quorum.voters set) is
formatted with the same cluster id before its first start:

  id=$(samsa storage random-uuid)
  samsa storage format --cluster-id "$id" --config server.properties

A single node without controller.quorum.voters formats itself on first
start.`,
	}
	cmd.AddCommand(newStorageFormatCommand(), newStorageRandomUUIDCommand(), newStorageInfoCommand())
	return cmd
}

// nodeFlags are the flags reading a node's configuration, as samsa server
// and samsa storage read it: a server.properties file (--config), then
// SAMSA_* environment variables (SAMSA_LOG_DIRS sets log.dirs; SAMSA_BROKERS
// is the clients' bootstrap list, not a property), then --override flags.
type nodeFlags struct {
	configFile string
	overrides  []string
}

func (f *nodeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.configFile, "config", "c", "", "server.properties file")
	cmd.Flags().StringArrayVar(&f.overrides, "override", nil, "key=value property, overriding the file and SAMSA_* variables (repeatable)")
}

// node parses the properties the file, the environment and the flags give.
func (f *nodeFlags) node() (*config.Node, error) {
	props, err := f.props()
	if err != nil {
		return nil, err
	}
	return config.Parse(props)
}

// props are the properties the file, the environment and the flags give,
// unparsed.
func (f *nodeFlags) props() (map[string]string, error) {
	props := map[string]string{}
	if f.configFile != "" {
		p, err := config.ReadPropertiesFile(f.configFile)
		if err != nil {
			return nil, err
		}
		props = p
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, "SAMSA_"); ok && name != "BROKERS" {
			props[strings.ToLower(strings.ReplaceAll(name, "_", "."))] = v
		}
	}
	for _, o := range f.overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return nil, fmt.Errorf("--override %q is not key=value", o)
		}
		props[strings.TrimSpace(k)] = v
	}
	return props, nil
}

// validClusterID checks a cluster id given to format: non-empty, without
// blanks or characters the properties format would mangle.
func validClusterID(id string) error {
	if id == "" {
		return errors.New("--cluster-id is required (make one with samsa storage random-uuid)")
	}
	if strings.ContainsAny(id, " \t\r\n=:#!\\") {
		return fmt.Errorf("cluster id %q has blanks or one of = : # ! \\", id)
	}
	return nil
}

func newStorageFormatCommand() *cobra.Command {
	var (
		nf              nodeFlags
		clusterID       string
		ignoreFormatted bool
	)
	cmd := &cobra.Command{
		Use:   "format",
		Short: "Write meta.properties with the cluster id into every log dir",
		Long: `Write meta.properties (version 1, node.id, cluster.id and a new
directory.id) into each of the node's log dirs (log.dirs or log.dir),
creating them. The node's configuration is read as samsa server reads it:
--config, then SAMSA_* environment variables, then --override. A dir that already has a meta.properties is an error,
unless --ignore-formatted skips it; a dir of another cluster or node is
always an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validClusterID(clusterID); err != nil {
				return err
			}
			nc, err := nf.node()
			if err != nil {
				return err
			}
			if nc.ClusterID != "" && nc.ClusterID != clusterID {
				return fmt.Errorf("--cluster-id %s differs from cluster.id %s of the configuration", clusterID, nc.ClusterID)
			}
			var todo []string
			for _, dir := range nc.LogDirs {
				path := filepath.Join(dir, storage.MetaPropertiesFile)
				m, err := storage.ReadMetaProperties(path)
				switch {
				case errors.Is(err, os.ErrNotExist):
					todo = append(todo, dir)
				case err != nil:
					return err
				case m.ClusterID != clusterID || m.NodeID != nc.NodeID:
					return fmt.Errorf("log dir %s is formatted for cluster %s, node %d", dir, m.ClusterID, m.NodeID)
				case !ignoreFormatted:
					return fmt.Errorf("log dir %s is already formatted; use --ignore-formatted to format the others", dir)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s is already formatted\n", dir)
				}
			}
			for _, dir := range todo {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				m := storage.MetaProperties{Version: 1, NodeID: nc.NodeID, ClusterID: clusterID, DirectoryID: storage.NewUUID()}
				if err := storage.WriteMetaProperties(filepath.Join(dir, storage.MetaPropertiesFile), m); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Formatted %s: cluster.id=%s node.id=%d directory.id=%s\n", dir, clusterID, nc.NodeID, m.DirectoryID)
			}
			return nil
		},
	}
	nf.add(cmd)
	cmd.Flags().StringVarP(&clusterID, "cluster-id", "t", "", "the cluster id (samsa storage random-uuid makes one)")
	cmd.Flags().BoolVarP(&ignoreFormatted, "ignore-formatted", "g", false, "skip dirs already formatted for this cluster and node")
	return cmd
}

func newStorageRandomUUIDCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "random-uuid",
		Short: "Print a new cluster id (a random Kafka Uuid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), storage.NewUUID())
			return err
		},
	}
}

func newStorageInfoCommand() *cobra.Command {
	var nf nodeFlags
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the meta.properties of every log dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := nf.node()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, dir := range nc.LogDirs {
				m, err := storage.ReadMetaProperties(filepath.Join(dir, storage.MetaPropertiesFile))
				switch {
				case errors.Is(err, os.ErrNotExist):
					fmt.Fprintf(out, "%s: not formatted\n", dir)
				case err != nil:
					fmt.Fprintf(out, "%s: %v\n", dir, err)
				default:
					fmt.Fprintf(out, "%s: cluster.id=%s node.id=%d directory.id=%s version=%d\n", dir, m.ClusterID, m.NodeID, m.DirectoryID, m.Version)
				}
			}
			return nil
		},
	}
	nf.add(cmd)
	return cmd
}
