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
)

// Main runs the samsa command line with args (without the program name) and
// returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "samsa:", err)
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "samsa",
		Short:         "Samsa: a Kafka-compatible streaming platform",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServerCommand())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	return root
}

// clientCommands are the constructors of the client-side subcommands; each
// file registers its own in an init function.
var clientCommands []func() *cobra.Command
