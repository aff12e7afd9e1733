package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
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
		addScram        []string
		features        []string
	)
	cmd := &cobra.Command{
		Use:   "format",
		Short: "Write meta.properties with the cluster id into every log dir",
		Long: `Write meta.properties (version 1, node.id, cluster.id and a new
directory.id) into each of the node's log dirs (log.dirs or log.dir),
creating them. The node's configuration is read as samsa server reads it:
--config, then SAMSA_* environment variables, then --override. A dir that already has a meta.properties is an error,
unless --ignore-formatted skips it; a dir of another cluster or node is
always an error.

--add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]' (repeatable,
as kafka-storage format) adds a SCRAM user the cluster starts with, for
SASL listeners whose clients have no other way in: iterations=N (4096 by
default) may be given too. The salted credential is written to
bootstrap.json in each dir and to the metadata log by the first active
controller; format every controller with the same --add-scram.

--feature transaction.version=N (as kafka-storage format) sets the level
a feature starts at. transaction.version 2, the default as in Kafka 4.x,
makes clients run transactions under KIP-890 part 2 (every commit or
abort bumps the producer epoch, so a late EndTxn retry cannot end the
next transaction); 0 or 1 keeps them on transaction version 1.`,
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
			var boot []metadata.Record
			for _, spec := range addScram {
				r, err := parseAddScram(spec)
				if err != nil {
					return err
				}
				boot = append(boot, r)
			}
			seen := map[string]bool{}
			for _, spec := range features {
				r, err := metadata.ParseFeatureLevel(spec)
				if err != nil {
					return err
				}
				if seen[r.Name] {
					return fmt.Errorf("feature %s given more than once", r.Name)
				}
				seen[r.Name] = true
				boot = append(boot, r)
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
				if len(boot) > 0 {
					if err := metadata.WriteBootstrap(dir, boot); err != nil {
						return err
					}
				}
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
	cmd.Flags().StringArrayVarP(&addScram, "add-scram", "S", nil, "a SCRAM user to start with: 'SCRAM-SHA-512=[name=admin,password=admin-secret]' (repeatable)")
	cmd.Flags().StringArrayVarP(&features, "feature", "f", nil, "a feature level to start with, name=level: transaction.version=0|1|2 (default 2) (repeatable)")
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

// parseAddScram parses an --add-scram value as kafka-storage does,
// MECHANISM=[name=NAME,password=PASSWORD[,iterations=N]] (values may be
// double-quoted), and salts the password into a credential record.
func parseAddScram(spec string) (metadata.UserScramCredentialRecord, error) {
	var r metadata.UserScramCredentialRecord
	bad := func(why string) (metadata.UserScramCredentialRecord, error) {
		return r, fmt.Errorf("--add-scram %q: %s (want 'SCRAM-SHA-512=[name=admin,password=admin-secret]')", spec, why)
	}
	mech, body, ok := strings.Cut(spec, "=")
	if !ok || !strings.HasPrefix(body, "[") || !strings.HasSuffix(body, "]") {
		return bad("not MECHANISM=[...]")
	}
	m := auth.ScramMechanism(strings.TrimSpace(mech))
	if m == 0 {
		return bad("mechanism is not SCRAM-SHA-256 or SCRAM-SHA-512")
	}
	kv := map[string]string{}
	for _, f := range strings.Split(body[1:len(body)-1], ",") {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return bad("field " + f + " is not key=value")
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	name, password := kv["name"], kv["password"]
	if name == "" || password == "" {
		return bad("name and password are required")
	}
	iters := int64(0)
	if s, ok := kv["iterations"]; ok {
		var err error
		if iters, err = strconv.ParseInt(s, 10, 32); err != nil {
			return bad("iterations is not a number")
		}
	}
	cred, err := auth.NewScramCredential(m, password, int32(iters))
	if err != nil {
		return bad(err.Error())
	}
	return metadata.UserScramCredentialRecord{Name: name, Mechanism: m, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}, nil
}
