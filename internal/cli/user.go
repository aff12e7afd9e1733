package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newUserCommand) }

// newUserCommand is `samsa user`, the SCRAM half of kafka-configs
// --entity-type users (--alter --add-config 'SCRAM-SHA-512=[...]'), with
// AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554).
func newUserCommand() *cobra.Command {
	f := new(adminFlags)
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, alter, delete and list SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512)",
		Args:  cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(newUserSetCommand(f, "create"), newUserSetCommand(f, "alter"), newUserDeleteCommand(f), newUserListCommand(f))
	return cmd
}

// scramMechanismFlag parses --mechanism values.
func scramMechanisms(names []string) ([]kadm.ScramMechanism, error) {
	var out []kadm.ScramMechanism
	for _, n := range names {
		switch strings.ToUpper(strings.TrimSpace(n)) {
		case "SCRAM-SHA-256":
			out = append(out, kadm.ScramSha256)
		case "SCRAM-SHA-512":
			out = append(out, kadm.ScramSha512)
		default:
			return nil, fmt.Errorf("--mechanism %s: not SCRAM-SHA-256 or SCRAM-SHA-512", n)
		}
	}
	return out, nil
}

func newUserSetCommand(f *adminFlags, verb string) *cobra.Command {
	var (
		password   string
		mechs      []string
		iterations int32
	)
	cmd := &cobra.Command{
		Use:   verb + " NAME --password PASSWORD",
		Short: map[string]string{"create": "Create a SCRAM user (its credential for each --mechanism)", "alter": "Change a SCRAM user's password (same as create: the credential is replaced)"}[verb],
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if password == "" {
				return errors.New("--password is required")
			}
			ms, adm, ctx, done, err := userSetup(cmd, f, mechs)
			if err != nil {
				return err
			}
			defer done()
			var ups []kadm.UpsertSCRAM
			for _, m := range ms {
				ups = append(ups, kadm.UpsertSCRAM{User: args[0], Mechanism: m, Iterations: iterations, Password: password})
			}
			res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
			if err != nil {
				return err
			}
			return userResults(cmd, res, strings.TrimSuffix(verb, "e")+"ed")
		},
	}
	cmd.Flags().StringVar(&password, "password", "", "the password (salted by this command; the broker never sees it)")
	cmd.Flags().StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to set")
	cmd.Flags().Int32Var(&iterations, "iterations", 4096, "PBKDF2 iterations, 4096-16384 as Kafka")
	return cmd
}

func newUserDeleteCommand(f *adminFlags) *cobra.Command {
	var mechs []string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a SCRAM user's credentials (each --mechanism)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, adm, ctx, done, err := userSetup(cmd, f, mechs)
			if err != nil {
				return err
			}
			defer done()
			if !cmd.Flags().Changed("mechanism") {
				// Only the mechanisms the user has: deleting a missing
				// credential is RESOURCE_NOT_FOUND.
				d, err := adm.DescribeUserSCRAMs(ctx, args[0])
				if err != nil {
					return err
				}
				r, ok := d[args[0]]
				if !ok || r.Err != nil {
					return fmt.Errorf("user %s: %v", args[0], r.Err)
				}
				ms = nil
				for _, ci := range r.CredInfos {
					ms = append(ms, ci.Mechanism)
				}
			}
			var dels []kadm.DeleteSCRAM
			for _, m := range ms {
				dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: m})
			}
			res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
			if err != nil {
				return err
			}
			return userResults(cmd, res, "deleted")
		},
	}
	cmd.Flags().StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to delete (default: those the user has)")
	return cmd
}

func userResults(cmd *cobra.Command, res kadm.AlteredUserSCRAMs, verb string) error {
	var failed []string
	for _, r := range res.Sorted() {
		if r.Err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "user %s: %s\n", r.User, kafkaError(r.Err, r.ErrMessage))
			failed = append(failed, r.User)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "user %s %s\n", r.User, verb)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d user(s) failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func newUserListCommand(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME...]",
		Short: "List SCRAM users with their mechanisms and iterations",
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			ctx, cancel := f.context(cmd)
			defer cancel()
			d, err := adm.DescribeUserSCRAMs(ctx, args...)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
			var failed error
			for _, r := range d.Sorted() {
				if r.Err != nil {
					failed = fmt.Errorf("user %s: %s", r.User, kafkaError(r.Err, r.ErrMessage))
					continue
				}
				for _, ci := range r.CredInfos {
					fmt.Fprintf(tw, "%s\t%s\t%d\n", r.User, ci.Mechanism, ci.Iterations)
				}
			}
			tw.Flush()
			return failed
		},
	}
}

// userSetup parses --mechanism and opens the admin client, bounded by
// --timeout; done closes both.
func userSetup(cmd *cobra.Command, f *adminFlags, mechs []string) ([]kadm.ScramMechanism, *kadm.Client, context.Context, func(), error) {
	ms, err := scramMechanisms(mechs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	adm, err := f.newAdmin(cmd)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := f.context(cmd)
	return ms, adm, ctx, func() { cancel(); adm.Close() }, nil
}
