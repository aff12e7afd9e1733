package cli

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newQuotaCommand) }

// quotaFlags name the quota entity, as kafka-configs.sh's --entity-type
// users|clients|ips with --entity-name or --entity-default.
type quotaFlags struct {
	adminFlags
	user, client, ip                      string
	userDefault, clientDefault, ipDefault bool
	add                                   []string
	del                                   []string
	strict                                bool
}

// newQuotaCommand is `samsa quota`: describe and alter client quotas
// (DescribeClientQuotas, AlterClientQuotas), as kafka-configs.sh does for
// --entity-type users, clients and ips.
func newQuotaCommand() *cobra.Command {
	f := new(quotaFlags)
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Describe and alter client quotas (as kafka-configs.sh --entity-type users/clients/ips)",
		Long: `Client quotas bound what a user, a client id, or a user's client id may use:
producer_byte_rate and consumer_byte_rate (bytes per second),
request_percentage (percent of one request-handler thread),
controller_mutation_rate (partitions created or deleted per second), and,
for IP addresses, connection_creation_rate (connections per second). Name
the entity with --user, --client-id (both for a user's client id) or --ip,
or their defaults with --user-default, --client-default, --ip-default.`,
		Args: cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.user, "user", "", "user (the principal's name: alice for User:alice)")
	pf.StringVar(&f.client, "client-id", "", "client id")
	pf.StringVar(&f.ip, "ip", "", "IP address (connection_creation_rate only)")
	pf.BoolVar(&f.userDefault, "user-default", false, "the default user")
	pf.BoolVar(&f.clientDefault, "client-default", false, "the default client id")
	pf.BoolVar(&f.ipDefault, "ip-default", false, "the default IP address")
	cmd.AddCommand(newQuotaDescribeCommand(f), newQuotaAlterCommand(f))
	return cmd
}

// entity is the entity the flags name; empty when none.
func (f *quotaFlags) entity(cmd *cobra.Command) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	add := func(typ, nameFlag, name string, def bool) error {
		named := cmd.Flags().Changed(nameFlag)
		if named && def {
			return fmt.Errorf("--%s and --%s-default are exclusive", nameFlag, strings.TrimSuffix(typ, "-id"))
		}
		switch {
		case named:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: &name})
		case def:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		}
		return nil
	}
	if err := add("user", "user", f.user, f.userDefault); err != nil {
		return nil, err
	}
	if err := add("client-id", "client-id", f.client, f.clientDefault); err != nil {
		return nil, err
	}
	if err := add("ip", "ip", f.ip, f.ipDefault); err != nil {
		return nil, err
	}
	return e, nil
}

func newQuotaDescribeCommand(f *quotaFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe client quotas",
		Long: `Describe the quotas of the entities that match the flags (every entity when
none is given): an entity matches when it has each named component (other
components allowed unless --strict).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := f.entity(cmd)
			if err != nil {
				return err
			}
			var comps []kadm.DescribeClientQuotaComponent
			for _, c := range e {
				dc := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: kmsg.QuotasMatchTypeExact}
				if c.Name == nil {
					dc.MatchType = kmsg.QuotasMatchTypeDefault
				}
				comps = append(comps, dc)
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			described, err := adm.DescribeClientQuotas(ctx, f.strict, comps)
			if err != nil {
				return fmt.Errorf("describe client quotas: %w", err)
			}
			lines := make([]string, 0, len(described))
			for _, d := range described {
				vals := make([]string, 0, len(d.Values))
				for _, v := range d.Values {
					vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
				}
				sort.Strings(vals)
				lines = append(lines, fmt.Sprintf("%s: %s", entityString(d.Entity), strings.Join(vals, ",")))
			}
			sort.Strings(lines)
			for _, l := range lines {
				fmt.Fprintln(cmd.OutOrStdout(), l)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&f.strict, "strict", false, "only entities with exactly the named components")
	return cmd
}

// entityString prints an entity as kafka-configs does: user 'alice',
// client-id 'app'; a default as <default>.
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, 0, len(e))
	for _, c := range e {
		name := "<default>"
		if c.Name != nil {
			name = "'" + *c.Name + "'"
		}
		parts = append(parts, c.Type+" "+name)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func newQuotaAlterCommand(f *quotaFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alter",
		Short: "Set or remove client quotas",
		Long: `Set quotas with --add-config key=value[,key=value] and remove them with
--delete-config key[,key], for the entity the flags name, as
kafka-configs.sh --alter does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := f.entity(cmd)
			if err != nil {
				return err
			}
			if len(e) == 0 {
				return errors.New("name an entity: --user, --client-id, --ip or a default")
			}
			var ops []kadm.AlterClientQuotaOp
			for _, kv := range splitConfigs(f.add) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--add-config %q: want key=value", kv)
				}
				val, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return fmt.Errorf("--add-config %q: the value is not a number", kv)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: strings.TrimSpace(k), Value: val})
			}
			for _, k := range splitConfigs(f.del) {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			if len(ops) == 0 {
				return errors.New("give --add-config or --delete-config")
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
			if err != nil {
				return fmt.Errorf("alter client quotas: %w", err)
			}
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("alter client quotas of %s: %s", entityString(e), kafkaError(r.Err, r.ErrMessage))
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Completed updating quotas of %s\n", entityString(e))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&f.add, "add-config", nil, "quotas to set, key=value[,key=value]")
	cmd.Flags().StringArrayVar(&f.del, "delete-config", nil, "quotas to remove, key[,key]")
	return cmd
}

// splitConfigs splits comma-separated flag values, dropping blanks.
func splitConfigs(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
