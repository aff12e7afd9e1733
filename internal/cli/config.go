package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newConfigCommand) }

// configEntity is the resource of samsa config describe|alter, as
// kafka-configs names it: --entity-type and --entity-name or
// --entity-default.
type configEntity struct {
	typ   string // brokers, topics, broker-loggers or groups
	name  string
	def   bool   // --entity-default: the cluster-wide broker defaults
	group string // --group: shorthand for --entity-type groups --entity-name
}

func (e *configEntity) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&e.typ, "entity-type", "", "`type` of the entity: brokers, topics, broker-loggers or groups (required but with --group)")
	fl.StringVar(&e.name, "entity-name", "", "`name` of the entity: a broker id, a topic or a group id")
	fl.StringVar(&e.group, "group", "", "the group `id` whose group configs to use (as --entity-type groups --entity-name ID)")
	fl.BoolVar(&e.def, "entity-default", false, "the cluster-wide default of brokers (DYNAMIC_DEFAULT_BROKER_CONFIG)")
}

// check normalises the type and checks the name against it.
func (e *configEntity) check() error {
	if e.group != "" {
		if e.typ != "" && e.typ != "group" && e.typ != "groups" || e.name != "" && e.name != e.group {
			return errors.New("give --group or --entity-type and --entity-name, not both")
		}
		e.typ, e.name = "groups", e.group
	}
	switch e.typ {
	case "broker", "brokers":
		e.typ = "brokers"
	case "topic", "topics":
		e.typ = "topics"
	case "broker-logger", "broker-loggers":
		e.typ = "broker-loggers"
	case "group", "groups":
		e.typ = "groups"
	case "":
		return errors.New("--entity-type is required: brokers, topics, broker-loggers or groups")
	default:
		return fmt.Errorf("--entity-type %q: want brokers, topics, broker-loggers or groups", e.typ)
	}
	switch {
	case e.def && e.name != "":
		return errors.New("give --entity-name or --entity-default, not both")
	case e.def && e.typ != "brokers":
		return errors.New("--entity-default is for --entity-type brokers only")
	case !e.def && e.name == "":
		if e.typ == "brokers" {
			return errors.New("give --entity-name ID or --entity-default")
		}
		return errors.New("--entity-name is required")
	}
	if e.typ != "topics" && e.typ != "groups" && !e.def {
		if _, err := strconv.ParseInt(e.name, 10, 32); err != nil {
			return fmt.Errorf("--entity-name %q: a broker id is an integer", e.name)
		}
	}
	return nil
}

// id is the broker id of a broker or broker-logger entity.
func (e *configEntity) id() int32 {
	i, _ := strconv.ParseInt(e.name, 10, 32)
	return int32(i)
}

// label names the entity in messages, as kafka-configs does.
func (e *configEntity) label() string {
	switch {
	case e.def:
		return "default config for brokers in the cluster"
	case e.typ == "brokers":
		return "broker " + e.name
	case e.typ == "broker-loggers":
		return "broker-logger " + e.name
	case e.typ == "groups":
		return "group " + e.name
	}
	return "topic " + e.name
}

func newConfigCommand() *cobra.Command {
	f := new(adminFlags)
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Describe and alter dynamic configs of brokers, topics, broker loggers and groups",
		Long: `Describe and alter configs as kafka-configs --bootstrap-server does:
broker configs per broker (--entity-name ID) or as the cluster-wide default
(--entity-default), topic configs, broker loggers' levels (KIP-412), and
group configs (--group ID: consumer.session.timeout.ms,
consumer.heartbeat.interval.ms and the share.* configs of share groups).
Broker, topic and group configs persist in the cluster metadata and take
effect without a restart; logger levels last until the node restarts.`,
		Args: cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(newConfigDescribeCommand(f), newConfigAlterCommand(f))
	return cmd
}

func newConfigDescribeCommand(f *adminFlags) *cobra.Command {
	var (
		e   configEntity
		all bool
	)
	cmd := &cobra.Command{
		Use:   "describe (--entity-type TYPE (--entity-name NAME | --entity-default) | --group ID) [--all]",
		Short: "Show the dynamic configs of an entity, or all with --all",
		Long: `Show an entity's configs with DescribeConfigs, one per line as
kafka-configs --describe prints them: name=value, whether it is sensitive,
and its synonyms in order of precedence (source:name=value). Without --all
only the configs set on the entity itself are listed, as kafka-configs:
DYNAMIC_BROKER_CONFIG for a broker id (not the cluster-wide defaults it
inherits), DYNAMIC_DEFAULT_BROKER_CONFIG for --entity-default,
DYNAMIC_TOPIC_CONFIG for a topic, GROUP_CONFIG for a group; broker
loggers are always listed all. For example:

  samsa config describe --entity-type brokers --entity-name 1
  samsa config describe --group orders --all
  samsa config describe --entity-type brokers --entity-default
  samsa config describe --entity-type broker-loggers --entity-name 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.check(); err != nil {
				return err
			}
			return f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				return describeConfigs(ctx, cmd.OutOrStdout(), e, all, cl, adm)
			})
		},
	}
	e.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list every config, not only those set dynamically")
	return cmd
}

// describeConfigs describes e and prints its configs.
func describeConfigs(ctx context.Context, w io.Writer, e configEntity, all bool, cl *kgo.Client, adm *kadm.Client) error {
	var rcs kadm.ResourceConfigs
	var err error
	switch {
	case e.typ == "topics":
		rcs, err = adm.DescribeTopicConfigs(ctx, e.name)
	case e.def:
		rcs, err = adm.DescribeBrokerConfigs(ctx)
	case e.typ == "brokers":
		rcs, err = adm.DescribeBrokerConfigs(ctx, e.id())
	case e.typ == "groups":
		rcs, err = describeRaw(ctx, kmsg.ConfigResourceTypeGroupConfig, e.name, cl)
	default:
		rcs, err = describeRaw(ctx, kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(e.id())), cl.Broker(int(e.id())))
	}
	if err == nil && len(rcs) != 1 {
		err = fmt.Errorf("%d resources in the response", len(rcs))
	}
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", e.label(), err)
	}
	rc := rcs[0]
	if rc.Err != nil {
		return fmt.Errorf("describe configs of %s: %s", e.label(), kafkaError(rc.Err, rc.ErrMessage))
	}
	printConfigs(w, e, rc.Configs, all || e.typ == "broker-loggers")
	return nil
}

// withAdmin runs fn with a client and an admin client on it, within
// --timeout.
func (f *adminFlags) withAdmin(cmd *cobra.Command, fn func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error) error {
	ctx, cancel := f.context(cmd)
	defer cancel()
	cl, err := f.newClient(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl, kadm.NewClient(cl))
}

// describeRaw describes one resource of type typ (kadm has no call for
// BROKER_LOGGER and GROUP resources) through r: the broker of a
// BROKER_LOGGER resource, any broker (the client) for a group.
func describeRaw(ctx context.Context, typ kmsg.ConfigResourceType, name string, r kmsg.Requestor) (kadm.ResourceConfigs, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rs := kmsg.NewDescribeConfigsRequestResource()
	rs.ResourceType, rs.ResourceName = typ, name
	req.Resources = append(req.Resources, rs)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return nil, err
	}
	var out kadm.ResourceConfigs
	for _, rr := range resp.Resources {
		rc := kadm.ResourceConfig{Name: rr.ResourceName, Err: kerr.ErrorForCode(rr.ErrorCode), ErrMessage: orEmpty(rr.ErrorMessage)}
		for _, c := range rr.Configs {
			kc := kadm.Config{Key: c.Name, Value: c.Value, Source: c.Source, Sensitive: c.IsSensitive}
			for _, syn := range c.ConfigSynonyms {
				kc.Synonyms = append(kc.Synonyms, kadm.ConfigSynonym{Key: syn.Name, Value: syn.Value, Source: syn.Source})
			}
			rc.Configs = append(rc.Configs, kc)
		}
		out = append(out, rc)
	}
	return out, nil
}

// printConfigs writes configs as kafka-configs --describe does; all false
// keeps the dynamically set ones.
func printConfigs(w io.Writer, e configEntity, configs []kadm.Config, all bool) {
	kind := "Dynamic configs"
	if all {
		kind = "All configs"
	}
	if e.def {
		fmt.Fprintf(w, "Default configs for brokers in the cluster are:\n")
	} else {
		fmt.Fprintf(w, "%s for %s are:\n", kind, e.label())
	}
	sort.SliceStable(configs, func(i, j int) bool { return configs[i].Key < configs[j].Key })
	for _, c := range configs {
		if !all && c.Source != e.dynamicSource() {
			continue
		}
		var syns []string
		for _, s := range c.Synonyms {
			syns = append(syns, s.Source.String()+":"+s.Key+"="+orNull(s.Value))
		}
		fmt.Fprintf(w, "  %s=%s sensitive=%t synonyms={%s}\n", c.Key, orNull(c.Value), c.Sensitive, strings.Join(syns, ", "))
	}
}

// dynamicSource is the source of the configs set on e itself, which
// describe lists without --all, as kafka-configs (ConfigCommand's
// dynamicConfigSource): a broker's describe leaves out the cluster-wide
// defaults it inherits, a topic's the broker configs.
func (e *configEntity) dynamicSource() kmsg.ConfigSource {
	switch {
	case e.def:
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	case e.typ == "brokers":
		return kmsg.ConfigSourceDynamicBrokerConfig
	case e.typ == "topics":
		return kmsg.ConfigSourceDynamicTopicConfig
	case e.typ == "groups":
		return kmsg.ConfigSourceGroupConfig
	}
	return kmsg.ConfigSourceDynamicBrokerLoggerConfig
}

func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func newConfigAlterCommand(f *adminFlags) *cobra.Command {
	var (
		e            configEntity
		adds, delete []string
	)
	cmd := &cobra.Command{
		Use:   "alter (--entity-type TYPE (--entity-name NAME | --entity-default) | --group ID) [--add-config k=v,...] [--delete-config k,...]",
		Short: "Set or remove configs of an entity",
		Long: `Change configs with IncrementalAlterConfigs, as kafka-configs --alter
does: --add-config sets key=value pairs separated by commas (a list value
goes in square brackets: cleanup.policy=[compact,delete]), --delete-config
removes keys, after which the next level applies again (the cluster
default, the server properties, Kafka's default; a broker logger follows
root). Both may be repeated. A broker config that cannot change without a
restart is refused naming it. For example:

  samsa config alter --entity-type brokers --entity-default --add-config log.retention.ms=3600000
  samsa config alter --entity-type brokers --entity-name 1 --add-config leader.replication.throttled.rate=10485760
  samsa config alter --entity-type broker-loggers --entity-name 1 --add-config replica=DEBUG
  samsa config alter --entity-type topics --entity-name orders --delete-config retention.ms
  samsa config alter --group orders --add-config consumer.session.timeout.ms=50000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.check(); err != nil {
				return err
			}
			var sets []string
			for _, a := range adds {
				kvs, err := splitAddConfig(a)
				if err != nil {
					return err
				}
				sets = append(sets, kvs...)
			}
			var dels []string
			for _, d := range delete {
				for _, k := range strings.Split(d, ",") {
					if k = strings.TrimSpace(k); k != "" {
						dels = append(dels, k)
					}
				}
			}
			ops, err := alterConfigOps(sets, dels)
			if err != nil {
				return err
			}
			return f.withAdmin(cmd, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				return alterConfigs(ctx, cmd.OutOrStdout(), e, ops, cl, adm)
			})
		},
	}
	e.add(cmd)
	fl := cmd.Flags()
	fl.StringArrayVar(&adds, "add-config", nil, "set configs `k=v,k2=[a,b]`; may be repeated")
	fl.StringArrayVar(&delete, "delete-config", nil, "remove configs `k,k2`; may be repeated")
	return cmd
}

// alterConfigs applies ops to e and says so.
func alterConfigs(ctx context.Context, w io.Writer, e configEntity, ops []kadm.AlterConfig, cl *kgo.Client, adm *kadm.Client) error {
	var resps kadm.AlterConfigsResponses
	var err error
	switch {
	case e.typ == "topics":
		resps, err = adm.AlterTopicConfigs(ctx, ops, e.name)
	case e.def:
		resps, err = adm.AlterBrokerConfigs(ctx, ops)
	case e.typ == "brokers":
		resps, err = adm.AlterBrokerConfigs(ctx, ops, e.id())
	case e.typ == "groups":
		resps, err = alterRaw(ctx, kmsg.ConfigResourceTypeGroupConfig, e.name, cl, ops)
	default:
		resps, err = alterRaw(ctx, kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(e.id())), cl.Broker(int(e.id())), ops)
	}
	if err == nil && len(resps) != 1 {
		err = fmt.Errorf("%d resources in the response", len(resps))
	}
	if err != nil {
		return fmt.Errorf("alter configs of %s: %w", e.label(), err)
	}
	if r := resps[0]; r.Err != nil {
		return fmt.Errorf("alter configs of %s: %s", e.label(), kafkaError(r.Err, r.ErrMessage))
	}
	if e.def {
		fmt.Fprintln(w, "Completed updating default config for brokers in the cluster.")
	} else {
		fmt.Fprintf(w, "Completed updating config for %s.\n", e.label())
	}
	return nil
}

// alterRaw sends IncrementalAlterConfigs for one resource of type typ
// through rq: for a BROKER_LOGGER resource its broker, for a group any
// broker (the client).
func alterRaw(ctx context.Context, typ kmsg.ConfigResourceType, name string, rq kmsg.Requestor, ops []kadm.AlterConfig) (kadm.AlterConfigsResponses, error) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for _, op := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = op.Name, op.Value, kmsg.IncrementalAlterConfigOp(op.Op)
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, rq)
	if err != nil {
		return nil, err
	}
	var out kadm.AlterConfigsResponses
	for _, rr := range resp.Resources {
		out = append(out, kadm.AlterConfigsResponse{Name: rr.ResourceName, Err: kerr.ErrorForCode(rr.ErrorCode), ErrMessage: orEmpty(rr.ErrorMessage)})
	}
	return out, nil
}

// splitAddConfig splits an --add-config value into key=value pairs at
// commas outside square brackets, dropping the brackets of list values, as
// kafka-configs parses it.
func splitAddConfig(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("--add-config %q: unbalanced ]", s)
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("--add-config %q: unbalanced [", s)
	}
	out = append(out, s[start:])
	for i, kv := range out {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--add-config %q: want key=value", kv)
		}
		if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			v = v[1 : len(v)-1]
		}
		out[i] = k + "=" + v
	}
	return out, nil
}
