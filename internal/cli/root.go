// Package cli implements the samsa subcommands. The client-side commands are
// Kafka clients built on franz-go's kgo and kadm.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/samsahq/samsa/internal/buildinfo"
	"github.com/samsahq/samsa/internal/storage/vfs"
)

// Main runs the samsa command line with args (without the program name) and
// returns the process exit code.
func Main(args []string) int { return Run(args, Options{}) }

// Options are what a program embedding the command line gives it besides
// the arguments. The zero value is the samsa command's.
type Options struct {
	// FS is the filesystem of samsa server's log dirs; nil is the
	// operating system's. Only the fault harness's build of the command
	// (e2e/chaos/faultfs) sets it, to a fault-injecting one.
	FS vfs.FS
}

// Run is Main with opts.
func Run(args []string, opts Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootWith(opts)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "samsa:", err)
		return 1
	}
	return 0
}

func newRoot() *cobra.Command { return newRootWith(Options{}) }

func newRootWith(opts Options) *cobra.Command {
	root := &cobra.Command{
		Use:           "samsa",
		Short:         "Samsa: a Kafka-compatible streaming platform",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints the same line as `samsa version`.
		Version: buildinfo.Version(),
	}
	root.SetVersionTemplate("samsa {{.Version}}\n")
	root.AddCommand(newServerCommand(opts.FS), newVersionCommand())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	return root
}

// clientCommands are the constructors of the client-side subcommands; each
// file registers its own in an init function.
var clientCommands []func() *cobra.Command

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary (as --version), then its commit, commit time and Go version",
		Long: `Print the version of this binary: the first line as samsa --version prints
it (module version, commit and whether the tree had uncommitted changes, Go
version), then one field a line. Fields the Go toolchain did not record
(a build outside a git checkout has no commit) are left out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := buildinfo.Read()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "samsa %s\nversion: %s\n", i, i.Version)
			if i.Revision != "" {
				fmt.Fprintf(out, "commit: %s\nmodified: %t\n", i.Revision, i.Modified)
			}
			if i.Time != "" {
				fmt.Fprintf(out, "commit time: %s\n", i.Time)
			}
			fmt.Fprintf(out, "go: %s\n", i.GoVersion)
			return nil
		},
	}
}
