package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newServerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "server",
		Short: "Run a Samsa node (broker and controller)",
		RunE:  func(cmd *cobra.Command, args []string) error { return errors.New("not built yet") },
	}
}
