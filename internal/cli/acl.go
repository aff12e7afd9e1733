package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newACLCommand) }

// aclFlags are the flags of `samsa acl`, named as kafka-acls.sh names
// them.
type aclFlags struct {
	adminFlags
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	patternType                     string
	producer, consumer, idempotent  bool
	principals                      []string // list: filter by principal
}

// newACLCommand is `samsa acl`, after Kafka's kafka-acls.sh: add, list and
// remove ACL bindings (CreateAcls, DescribeAcls, DeleteAcls).
func newACLCommand() *cobra.Command {
	f := new(aclFlags)
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs (as kafka-acls.sh)",
		Long: `Manage the ACL bindings the authorizer (authorizer.class.name) enforces. A
binding allows or denies a principal (User:name), from a host (an IP address,
* for any), an operation (Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All) on
resources: --topic, --group, --transactional-id (each repeatable) or
--cluster, named literally or as a prefix (--resource-pattern-type prefixed),
* naming every resource of the type.`,
		Args: cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	pf := cmd.PersistentFlags()
	pf.StringArrayVar(&f.topics, "topic", nil, "topic name or prefix (repeatable; * for all)")
	pf.StringArrayVar(&f.groups, "group", nil, "consumer group (repeatable; * for all)")
	pf.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional id (repeatable; * for all)")
	pf.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	cmd.AddCommand(newACLAddCommand(f), newACLListCommand(f), newACLRemoveCommand(f))
	return cmd
}

func (f *aclFlags) addBindingFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal to allow, User:name (repeatable)")
	fl.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal to deny, User:name (repeatable)")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "host the allow applies from (default *)")
	fl.StringArrayVar(&f.denyHosts, "deny-host", nil, "host the deny applies from (default *)")
	fl.StringArrayVar(&f.operations, "operation", nil, "operation (repeatable): Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All")
}

func newACLAddCommand(f *aclFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add ACL bindings",
		Long: `Add ACL bindings (CreateAcls): every combination of principal, host, operation
and resource. --producer adds Write, Describe and Create on the topics
(Write and Describe on --transactional-id, IdempotentWrite on the cluster
with --idempotent); --consumer adds Read and Describe on the topics and
Read on the groups, as kafka-acls.sh does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bs, err := f.bindings()
			if err != nil {
				return err
			}
			return f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				req := kmsg.NewPtrCreateACLsRequest()
				for _, b := range bs {
					c := kmsg.NewCreateACLsRequestCreation()
					c.ResourceType, c.ResourceName, c.ResourcePatternType = b.typ, b.name, b.pattern
					c.Principal, c.Host, c.Operation, c.PermissionType = b.principal, b.host, b.op, b.perm
					req.Creations = append(req.Creations, c)
				}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("create acls: %w", err)
				}
				var errs []error
				for i, r := range resp.Results {
					if r.ErrorCode != 0 && i < len(bs) {
						errs = append(errs, fmt.Errorf("%s: %s", bs[i], codeError(r.ErrorCode, r.ErrorMessage)))
					}
				}
				if len(errs) > 0 {
					return errors.Join(errs...)
				}
				w := cmd.OutOrStdout()
				for _, b := range bs {
					fmt.Fprintf(w, "Added %s\n", b)
				}
				return nil
			})
		},
	}
	f.addBindingFlags(cmd)
	cmd.Flags().StringVar(&f.patternType, "resource-pattern-type", "literal", "literal or prefixed")
	cmd.Flags().BoolVar(&f.producer, "producer", false, "the producer's operations")
	cmd.Flags().BoolVar(&f.consumer, "consumer", false, "the consumer's operations (needs --group)")
	cmd.Flags().BoolVar(&f.idempotent, "idempotent", false, "with --producer: IdempotentWrite on the cluster")
	return cmd
}

func newACLListCommand(f *aclFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ACL bindings",
		Long: `List ACL bindings (DescribeAcls) of the given resources, or of every resource
when none is given. --resource-pattern-type match lists the bindings that
apply to the named resources (literal, * and matching prefixes); any (the
default) those of that exact name, whatever their pattern type.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filters, err := f.filters(false)
			if err != nil {
				return err
			}
			return f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				var rows []aclBinding
				for _, flt := range filters {
					req := kmsg.NewPtrDescribeACLsRequest()
					req.ResourceType, req.ResourceName, req.ResourcePatternType = flt.typ, flt.name, flt.pattern
					req.Principal, req.Host, req.Operation, req.PermissionType = flt.principal, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
					resp, err := req.RequestWith(ctx, cl)
					if err != nil {
						return fmt.Errorf("describe acls: %w", err)
					}
					if resp.ErrorCode != 0 {
						return fmt.Errorf("describe acls: %s", codeError(resp.ErrorCode, resp.ErrorMessage))
					}
					for _, r := range resp.Resources {
						for _, a := range r.ACLs {
							rows = append(rows, aclBinding{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType})
						}
					}
				}
				printBindings(cmd, rows)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&f.patternType, "resource-pattern-type", "any", "any, match, literal or prefixed")
	cmd.Flags().StringArrayVar(&f.principals, "principal", nil, "only the bindings of this principal (repeatable)")
	return cmd
}

func newACLRemoveCommand(f *aclFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove ACL bindings",
		Long: `Remove the ACL bindings (DeleteAcls) of the given resources that match the
principals, hosts and operations given; a flag left out matches any value
(no --operation: every operation; no principal: every principal).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filters, err := f.filters(true)
			if err != nil {
				return err
			}
			return f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				req := kmsg.NewPtrDeleteACLsRequest()
				for _, flt := range filters {
					d := kmsg.NewDeleteACLsRequestFilter()
					d.ResourceType, d.ResourceName, d.ResourcePatternType = flt.typ, flt.name, flt.pattern
					d.Principal, d.Host, d.Operation, d.PermissionType = flt.principal, flt.host, flt.op, flt.perm
					req.Filters = append(req.Filters, d)
				}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("delete acls: %w", err)
				}
				var rows []aclBinding
				for _, r := range resp.Results {
					if r.ErrorCode != 0 {
						return fmt.Errorf("delete acls: %s", codeError(r.ErrorCode, r.ErrorMessage))
					}
					for _, m := range r.MatchingACLs {
						rows = append(rows, aclBinding{m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType})
					}
				}
				for _, b := range rows {
					fmt.Fprintf(cmd.OutOrStdout(), "Removed %s\n", b)
				}
				if len(rows) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "No ACL matched")
				}
				return nil
			})
		},
	}
	f.addBindingFlags(cmd)
	cmd.Flags().StringVar(&f.patternType, "resource-pattern-type", "literal", "literal, prefixed, any or match")
	return cmd
}

// aclBinding is one binding to create or print.
type aclBinding struct {
	typ       kmsg.ACLResourceType
	name      string
	pattern   kmsg.ACLResourcePatternType
	principal string
	host      string
	op        kmsg.ACLOperation
	perm      kmsg.ACLPermissionType
}

func (b aclBinding) String() string {
	return fmt.Sprintf("%s %s %s from host %s on %s %s (%s)", b.perm, b.principal, b.op, b.host, b.typ, b.name, b.pattern)
}

// resource is one resource named on the command line.
type resource struct {
	typ  kmsg.ACLResourceType
	name string
}

func (f *aclFlags) resources() []resource {
	var rs []resource
	for _, t := range f.topics {
		rs = append(rs, resource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		rs = append(rs, resource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range f.txnIDs {
		rs = append(rs, resource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if f.cluster {
		rs = append(rs, resource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return rs
}

func (f *aclFlags) parseOps() ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, s := range f.operations {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationAny {
			return nil, fmt.Errorf("unknown --operation %q", s)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func (f *aclFlags) parsePattern() (kmsg.ACLResourcePatternType, error) {
	p, err := kmsg.ParseACLResourcePatternType(f.patternType)
	if err != nil {
		return 0, fmt.Errorf("unknown --resource-pattern-type %q", f.patternType)
	}
	return p, nil
}

// bindings expands the add flags into bindings.
func (f *aclFlags) bindings() ([]aclBinding, error) {
	pattern, err := f.parsePattern()
	if err != nil {
		return nil, err
	}
	if pattern != kmsg.ACLResourcePatternTypeLiteral && pattern != kmsg.ACLResourcePatternTypePrefixed {
		return nil, errors.New("--resource-pattern-type must be literal or prefixed to add")
	}
	if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		return nil, errors.New("give --allow-principal or --deny-principal")
	}
	ops, err := f.parseOps()
	if err != nil {
		return nil, err
	}
	// opsFor are the operations of each resource.
	opsFor := map[resource][]kmsg.ACLOperation{}
	rs := f.resources()
	switch {
	case f.producer || f.consumer:
		if len(ops) > 0 {
			return nil, errors.New("--operation cannot be combined with --producer or --consumer")
		}
		if f.consumer && len(f.groups) == 0 {
			return nil, errors.New("--consumer needs --group")
		}
		if len(f.topics) == 0 {
			return nil, errors.New("--producer and --consumer need --topic")
		}
		rs = nil
		add := func(r resource, ops ...kmsg.ACLOperation) {
			if _, ok := opsFor[r]; !ok {
				rs = append(rs, r)
			}
			opsFor[r] = append(opsFor[r], ops...)
		}
		for _, t := range f.topics {
			r := resource{kmsg.ACLResourceTypeTopic, t}
			if f.producer {
				add(r, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
			}
			if f.consumer {
				add(r, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
			}
		}
		if f.producer {
			for _, x := range f.txnIDs {
				add(resource{kmsg.ACLResourceTypeTransactionalId, x}, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe)
			}
			if f.idempotent {
				add(resource{kmsg.ACLResourceTypeCluster, "kafka-cluster"}, kmsg.ACLOperationIdempotentWrite)
			}
		}
		if f.consumer {
			for _, g := range f.groups {
				add(resource{kmsg.ACLResourceTypeGroup, g}, kmsg.ACLOperationRead)
			}
		}
	default:
		if len(ops) == 0 {
			return nil, errors.New("give --operation, --producer or --consumer")
		}
		if len(rs) == 0 {
			return nil, errors.New("give a resource: --topic, --group, --transactional-id or --cluster")
		}
		for _, r := range rs {
			opsFor[r] = ops
		}
	}
	hosts := func(h []string) []string {
		if len(h) == 0 {
			return []string{"*"}
		}
		return h
	}
	var out []aclBinding
	seen := map[aclBinding]bool{}
	for _, r := range rs {
		pat := pattern
		if r.typ == kmsg.ACLResourceTypeCluster {
			pat = kmsg.ACLResourcePatternTypeLiteral
		}
		for _, op := range opsFor[r] {
			for _, perm := range []struct {
				principals, hosts []string
				perm              kmsg.ACLPermissionType
			}{{f.allowPrincipals, hosts(f.allowHosts), kmsg.ACLPermissionTypeAllow}, {f.denyPrincipals, hosts(f.denyHosts), kmsg.ACLPermissionTypeDeny}} {
				for _, p := range perm.principals {
					for _, h := range perm.hosts {
						b := aclBinding{r.typ, r.name, pat, p, h, op, perm.perm}
						if !seen[b] {
							seen[b] = true
							out = append(out, b)
						}
					}
				}
			}
		}
	}
	return out, nil
}

// aclFilter is one DescribeAcls or DeleteAcls filter.
type aclFilter struct {
	typ       kmsg.ACLResourceType
	name      *string
	pattern   kmsg.ACLResourcePatternType
	principal *string
	host      *string
	op        kmsg.ACLOperation
	perm      kmsg.ACLPermissionType
}

// filters expands the list or remove flags into filters; remove needs a
// resource and may narrow by principal, host and operation.
func (f *aclFlags) filters(remove bool) ([]aclFilter, error) {
	pattern, err := f.parsePattern()
	if err != nil {
		return nil, err
	}
	rs := f.resources()
	var base []aclFilter
	for _, r := range rs {
		name := r.name
		base = append(base, aclFilter{typ: r.typ, name: &name, pattern: pattern})
	}
	if len(rs) == 0 {
		if remove {
			return nil, errors.New("give a resource: --topic, --group, --transactional-id or --cluster")
		}
		base = []aclFilter{{typ: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeAny}}
	}
	if !remove {
		if len(f.principals) == 0 {
			return base, nil
		}
		var out []aclFilter
		for _, b := range base {
			for _, p := range f.principals {
				b.principal = &p
				out = append(out, b)
			}
		}
		return out, nil
	}
	ops, err := f.parseOps()
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	}
	type who struct {
		principal, host *string
		perm            kmsg.ACLPermissionType
	}
	var whos []who
	expand := func(principals, hosts []string, perm kmsg.ACLPermissionType) {
		for _, p := range principals {
			if len(hosts) == 0 {
				whos = append(whos, who{&p, nil, perm})
			}
			for _, h := range hosts {
				whos = append(whos, who{&p, &h, perm})
			}
		}
	}
	expand(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	expand(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	if len(whos) == 0 {
		whos = []who{{nil, nil, kmsg.ACLPermissionTypeAny}}
	}
	var out []aclFilter
	for _, b := range base {
		for _, w := range whos {
			for _, op := range ops {
				x := b
				x.principal, x.host, x.perm, x.op = w.principal, w.host, w.perm, op
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// printBindings prints bindings as a table sorted by resource.
func printBindings(cmd *cobra.Command, rows []aclBinding) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		if a.name != b.name {
			return a.name < b.name
		}
		if a.pattern != b.pattern {
			return a.pattern < b.pattern
		}
		if a.principal != b.principal {
			return a.principal < b.principal
		}
		return a.op < b.op
	})
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE TYPE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, b := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.typ, b.name, b.pattern, b.principal, b.host, b.op, b.perm)
	}
	w.Flush()
}
