package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() { clientCommands = append(clientCommands, newGroupCommand) }

// groupFlags are the flags shared by the subcommands: --brokers and --timeout.
type groupFlags = adminFlags

func newGroupCommand() *cobra.Command {
	f := new(groupFlags)
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset the offsets of and delete groups (classic, KIP-848 consumer and share groups)",
		Long: `List, describe, reset the offsets of and delete groups, as
kafka-consumer-groups.sh and kafka-share-groups.sh do, of the three group
types: classic groups (the JoinGroup protocol: consumer groups of older
clients, Connect and others), consumer groups of the KIP-848 protocol
(ConsumerGroupHeartbeat) and share groups (KIP-932, ShareGroupHeartbeat).
Each subcommand finds a group's type and uses the APIs of that type.`,
		Args: cobra.NoArgs,
	}
	f.addWithTimeout(cmd)
	cmd.AddCommand(
		newGroupListCommand(f),
		newGroupDescribeCommand(f),
		newGroupResetOffsetsCommand(f),
		newGroupDeleteCommand(f),
	)
	return cmd
}

func newGroupListCommand(f *groupFlags) *cobra.Command {
	var (
		states, types []string
		long          bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List groups of every type: classic, consumer (KIP-848) and share (KIP-932)",
		Long: `List the groups of every broker with ListGroups, one name a line, sorted.

--state keeps the groups in that state (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead; for KIP-848 consumer groups also
Assigning and Reconciling; any case; may be repeated). --type keeps the
groups of that type (classic, consumer, share; any case; may be repeated;
ListGroups v5, as kafka-consumer-groups --list --type). --long adds each
group's type (classic: the JoinGroup protocol; consumer: KIP-848; share:
KIP-932), state, protocol type (consumer for consumer groups, share for
share groups, connect or another name for other classic groups; "-" when
none) and coordinator.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			groups, err := adm.ListGroupsByType(ctx, types, states...)
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			w := cmd.OutOrStdout()
			if !long {
				for _, g := range groups.Sorted() {
					fmt.Fprintln(w, g.Group)
				}
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR")
			for _, g := range groups.Sorted() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", g.Group, dash(g.GroupType), g.State, dash(g.ProtocolType), g.Coordinator)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in this state (repeatable)")
	cmd.Flags().StringSliceVar(&types, "type", nil, "only groups of this type: classic, consumer or share (repeatable)")
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show type, state, protocol type and coordinator")
	return cmd
}

func newGroupDescribeCommand(f *groupFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show a group's state, members, assignment, committed offsets and lag",
		Long: `Describe groups with DescribeGroups, OffsetFetch and ListOffsets,
consumer groups of the KIP-848 protocol with ConsumerGroupDescribe, and
share groups (KIP-932) with ShareGroupDescribe and DescribeShareGroupOffsets
(per partition the share-partition start offset and lag).

For each group: its state, protocol and coordinator (for a consumer group:
its type, group epoch, assignment epoch and assignor); then per partition
the committed offset (CURRENT-OFFSET, "-" when none), the log end offset
(the high-watermark) and the lag between them (from the log start offset
when nothing is committed), with the member consuming it, and the total
lag; then the members and their assignments (for a consumer group, also
each member's epoch and target assignment).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			lags, err := adm.Lag(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe groups: %w", err)
			}
			w := cmd.OutOrStdout()
			var errs []error
			for i, g := range args {
				l, ok := lags[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("describe group %s: not in the response", g))
					continue
				case l.Error() != nil && !errors.Is(l.Error(), kerr.GroupIDNotFound):
					errs = append(errs, fmt.Errorf("describe group %s: %w", g, l.Error()))
					continue
				case l.Error() != nil || l.State == "Dead":
					// Not a classic group: maybe a consumer group (KIP-848).
					cg, err := describeConsumerGroup(ctx, adm, g)
					if errors.Is(err, errNoSuchGroup) {
						// Nor a consumer group: maybe a share group (KIP-932).
						sg, serr := describeShareGroup(ctx, adm, g)
						if serr == nil {
							if i > 0 {
								fmt.Fprintln(w)
							}
							writeShareGroup(w, sg)
							continue
						}
						if !errors.Is(serr, errNoSuchGroup) {
							err = serr
						}
					}
					if err != nil {
						errs = append(errs, err)
						continue
					}
					if i > 0 {
						fmt.Fprintln(w)
					}
					writeConsumerGroup(w, cg)
					continue
				}
				if i > 0 {
					fmt.Fprintln(w)
				}
				writeGroupLag(w, l)
			}
			return errors.Join(errs...)
		},
	}
}

// writeGroupLag prints one described group with its lag.
func writeGroupLag(w io.Writer, l kadm.DescribedGroupLag) {
	proto := l.ProtocolType
	if l.Protocol != "" {
		proto += "/" + l.Protocol
	}
	fmt.Fprintf(w, "Group: %s\tState: %s\tProtocol: %s\tCoordinator: %d\tMembers: %d\n",
		l.Group, l.State, dash(proto), l.Coordinator.NodeID, len(l.Members))
	var rows []lagRow
	for _, pl := range l.Lag.Sorted() {
		r := lagRow{topic: pl.Topic, partition: pl.Partition, committed: -1, end: -1, lag: -1, err: pl.Err}
		if pl.End.Err == nil {
			r.end = pl.End.Offset
		}
		if pl.Commit.At >= 0 {
			r.committed = pl.Commit.At
		}
		if pl.Lag >= 0 && pl.Err == nil {
			r.lag = pl.Lag
		}
		if pl.Member != nil {
			r.member, r.host, r.client = pl.Member.MemberID, pl.Member.ClientHost, pl.Member.ClientID
		}
		rows = append(rows, r)
	}
	writeLagTable(w, rows)
	if len(l.Members) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
	for _, m := range l.Members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, memberAssignment(m))
	}
	tw.Flush()
}

// lagRow is one partition of a group's lag table; negative offsets and
// lags are unknown ("-").
type lagRow struct {
	topic                string
	partition            int32
	committed, end, lag  int64
	member, host, client string // "": no member consumes it
	err                  error
}

// writeLagTable prints the partitions of a group with their committed
// offset, log end offset and lag, and the total lag.
func writeLagTable(w io.Writer, rows []lagRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "No committed offsets or assigned partitions.")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	var total int64
	orDash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	for _, r := range rows {
		total += max(r.lag, 0)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", r.topic, r.partition, orDash(r.committed), orDash(r.end), orDash(r.lag),
			dash(r.member), dash(r.host), dash(r.client))
		if r.err != nil {
			fmt.Fprintf(tw, "\tError: %v", r.err)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(w, "Total lag: %d\n", total)
}

// consumerGroupLag is a KIP-848 consumer group with its offsets.
type consumerGroupLag struct {
	kadm.DescribedConsumerGroup
	committed kadm.OffsetResponses
	start     kadm.ListedOffsets
	end       kadm.ListedOffsets
}

// describeConsumerGroup describes group with ConsumerGroupDescribe and
// reads its committed offsets and the log start and end offsets of their
// topics and of the topics assigned. A group that is neither classic nor
// consumer does not exist.
func describeConsumerGroup(ctx context.Context, adm *kadm.Client, group string) (*consumerGroupLag, error) {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	d, ok := described[group]
	switch {
	case !ok || errors.Is(d.Err, kerr.GroupIDNotFound) || errors.Is(d.Err, kerr.UnsupportedVersion):
		return nil, fmt.Errorf("group %s: %w", group, errNoSuchGroup)
	case d.Err != nil:
		return nil, fmt.Errorf("describe group %s: %w", group, d.Err)
	}
	out := &consumerGroupLag{DescribedConsumerGroup: d}
	if out.committed, err = adm.FetchOffsets(ctx, group); err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	topics := d.AssignedPartitions()
	for t := range out.committed {
		topics[t] = nil
	}
	if names := topics.Topics(); len(names) > 0 {
		if out.start, err = adm.ListStartOffsets(ctx, names...); err != nil {
			return nil, fmt.Errorf("list start offsets: %w", err)
		}
		if out.end, err = adm.ListEndOffsets(ctx, names...); err != nil {
			return nil, fmt.Errorf("list end offsets: %w", err)
		}
	}
	return out, nil
}

// writeConsumerGroup prints a consumer group as writeGroupLag prints a
// classic one.
func writeConsumerGroup(w io.Writer, g *consumerGroupLag) {
	fmt.Fprintf(w, "Group: %s\tType: consumer\tState: %s\tEpoch: %d\tAssignment-Epoch: %d\tAssignor: %s\tCoordinator: %d\tMembers: %d\n",
		g.Group, g.State, g.Epoch, g.AssignmentEpoch, dash(g.AssignorName), g.Coordinator.NodeID, len(g.Members))
	owner := map[string]map[int32]*kadm.ConsumerGroupMember{}
	for i := range g.Members {
		m := &g.Members[i]
		for t, ps := range m.Assignment {
			if owner[t] == nil {
				owner[t] = map[int32]*kadm.ConsumerGroupMember{}
			}
			for p := range ps {
				owner[t][p] = m
			}
		}
	}
	type row struct {
		topic     string
		partition int32
	}
	var rows []row
	seen := map[row]bool{}
	add := func(t string, p int32) {
		if r := (row{t, p}); !seen[r] {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	g.committed.Each(func(o kadm.OffsetResponse) { add(o.Topic, o.Partition) })
	for t, ps := range owner {
		for p := range ps {
			add(t, p)
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	lags := make([]lagRow, 0, len(rows))
	for _, r := range rows {
		lr := lagRow{topic: r.topic, partition: r.partition, committed: -1, end: -1, lag: -1}
		if o, ok := g.committed.Lookup(r.topic, r.partition); ok && o.Err == nil && o.At >= 0 {
			lr.committed = o.At
		}
		if e, ok := g.end.Lookup(r.topic, r.partition); ok && e.Err == nil {
			lr.end = e.Offset
			from := lr.committed
			if from < 0 {
				if s, ok := g.start.Lookup(r.topic, r.partition); ok && s.Err == nil {
					from = s.Offset
				}
			}
			if from >= 0 {
				lr.lag = max(e.Offset-from, 0)
			}
		}
		if m := owner[r.topic][r.partition]; m != nil {
			lr.member, lr.host, lr.client = m.MemberID, m.ClientHost, m.ClientID
		}
		lags = append(lags, lr)
	}
	writeLagTable(w, lags)
	if len(g.Members) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER-ID\tINSTANCE-ID\tEPOCH\tCLIENT-ID\tHOST\tASSIGNMENT\tTARGET-ASSIGNMENT")
	for _, m := range g.Members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.MemberEpoch, m.ClientID, m.ClientHost,
			topicsSetString(m.Assignment), topicsSetString(m.TargetAssignment))
	}
	tw.Flush()
}

// topicsSetString formats partitions as topic[0,1] topic2[3]; "-" for none.
func topicsSetString(s kadm.TopicsSet) string {
	var parts []string
	for _, t := range s.Sorted() {
		if len(t.Partitions) > 0 {
			ps := slices.Clone(t.Partitions)
			slices.Sort(ps)
			parts = append(parts, t.Topic+"["+joinInt32(ps)+"]")
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// memberAssignment formats a consumer member's partitions as
// topic[0,1,2] topic2[3]; "-" for none or another protocol.
func memberAssignment(m kadm.DescribedGroupMember) string {
	a, ok := m.Assigned.AsConsumer()
	if !ok {
		return "-"
	}
	s := kadm.TopicsSet{}
	for _, t := range a.Topics {
		s.Add(t.Topic, t.Partitions...)
	}
	return topicsSetString(s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resetSpec is how reset-offsets computes new offsets.
type resetSpec struct {
	earliest, latest bool
	datetime         string
	offset           int64
	offsetSet        bool
	shift            int64
	shiftSet         bool
}

func (s resetSpec) validate() error {
	n := 0
	for _, set := range []bool{s.earliest, s.latest, s.datetime != "", s.offsetSet, s.shiftSet} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by")
	}
	return nil
}

func newGroupResetOffsetsCommand(f *groupFlags) *cobra.Command {
	var (
		spec      resetSpec
		topics    []string
		allTopics bool
		execute   bool
		dryRun    bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic T[:P,P...]... | --all-topics) --to-earliest|--to-latest|--to-datetime TIME|--to-offset N|--shift-by N [--execute]",
		Short: "Set a group's committed offsets (a share group's share-partition start offsets)",
		Long: `Compute new committed offsets for a group and, with --execute, commit them.

As in Kafka, the group must be inactive (Empty, or not existing): stop its
consumers first. For a share group (KIP-932) the new offsets are its
share-partition start offsets (AlterShareGroupOffsets, as
kafka-share-groups.sh --reset-offsets); --all-topics takes the topics it
has start offsets for. Without --execute (or with --dry-run, the default) the new
offsets are only shown.

--topic names a topic (all its partitions) or some partitions of it
(orders:0,2); it may be repeated. --all-topics takes every topic the group
has committed offsets for.

--to-earliest and --to-latest use the log start and end offsets;
--to-datetime the first offset whose record timestamp is at or after TIME
(RFC 3339, 2006-01-02T15:04:05.000 in local time as Kafka's tool takes it,
or milliseconds since the epoch; the log end when none); --to-offset N that
offset, clamped to [log start, log end]; --shift-by N the committed offset
moved by N (negative moves back), clamped likewise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if err := spec.validate(); err != nil {
				return err
			}
			if execute && dryRun && cmd.Flags().Changed("dry-run") {
				return errors.New("give one of --dry-run and --execute")
			}
			if allTopics == (len(topics) > 0) {
				return errors.New("give --topic or --all-topics")
			}
			var at int64
			if spec.datetime != "" {
				t, err := parseResetTime(spec.datetime)
				if err != nil {
					return err
				}
				at = t.UnixMilli()
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()

			// A share group (KIP-932) has share-partition start offsets,
			// set by AlterShareGroupOffsets; any other group committed
			// offsets.
			sg, err := describeShareGroup(ctx, adm, group)
			if err != nil && !errors.Is(err, errNoSuchGroup) {
				return err
			}
			var committed kadm.OffsetResponses
			if sg != nil {
				if sg.GroupState != "Empty" {
					return fmt.Errorf("offsets of share group %s can be reset only while it is inactive, but it is %s: stop its consumers first", group, sg.GroupState)
				}
				committed = kadm.OffsetResponses{}
				sg.offsets.Each(func(o kadm.ShareOffset) {
					if o.Err == nil && o.StartOffset >= 0 {
						committed.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.StartOffset, LeaderEpoch: -1}})
					}
				})
			} else if committed, err = fetchResetOffsets(ctx, adm, group); err != nil {
				return err
			}
			want, err := resetPartitions(ctx, adm, topics, allTopics, committed)
			if err != nil {
				return err
			}
			names := slices.Sorted(func(yield func(string) bool) {
				for t := range want {
					if !yield(t) {
						return
					}
				}
			})
			starts, err := adm.ListStartOffsets(ctx, names...)
			if err != nil {
				return fmt.Errorf("list start offsets: %w", err)
			}
			ends, err := adm.ListEndOffsets(ctx, names...)
			if err != nil {
				return fmt.Errorf("list end offsets: %w", err)
			}
			var after kadm.ListedOffsets
			if spec.datetime != "" {
				if after, err = adm.ListOffsetsAfterMilli(ctx, at, names...); err != nil {
					return fmt.Errorf("list offsets by time: %w", err)
				}
			}
			next := kadm.Offsets{}
			for _, t := range names {
				for _, p := range want[t] {
					start, ok1 := starts.Lookup(t, p)
					end, ok2 := ends.Lookup(t, p)
					switch {
					case !ok1 || !ok2:
						// kadm lists the partitions the metadata has.
						return fmt.Errorf("topic %s has no partition %d", t, p)
					case start.Err != nil:
						return fmt.Errorf("partition %s/%d: start offset: %w", t, p, start.Err)
					case end.Err != nil:
						return fmt.Errorf("partition %s/%d: end offset: %w", t, p, end.Err)
					}
					clamp := func(o int64) int64 { return min(max(o, start.Offset), end.Offset) }
					var o int64
					switch {
					case spec.earliest:
						o = start.Offset
					case spec.latest:
						o = end.Offset
					case spec.datetime != "":
						a, ok := after.Lookup(t, p)
						if !ok || a.Err != nil {
							return fmt.Errorf("partition %s/%d: no offset for %s: %v", t, p, spec.datetime, a.Err)
						}
						o = a.Offset
						if o < 0 {
							o = end.Offset
						}
						o = clamp(o)
					case spec.offsetSet:
						o = clamp(spec.offset)
					case spec.shiftSet:
						c, ok := committed.Lookup(t, p)
						if !ok || c.At < 0 {
							return fmt.Errorf("partition %s/%d: no committed offset to shift", t, p)
						}
						o = clamp(c.At + spec.shift)
					}
					next.Add(kadm.Offset{Topic: t, Partition: p, At: o, LeaderEpoch: -1})
				}
			}

			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
			for _, o := range next.Sorted() {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, o.Topic, o.Partition, o.At)
			}
			tw.Flush()
			if !execute {
				fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing committed; add --execute to commit these offsets.")
				return nil
			}
			if sg != nil {
				resps, err := adm.AlterShareGroupOffsets(ctx, group, next)
				if err == nil {
					err = resps.Error()
				}
				if err != nil {
					return fmt.Errorf("alter share group offsets of %s: %w", group, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Set %d share-partition start offsets for share group %s.\n", len(next.Sorted()), group)
				return nil
			}
			resps, err := adm.CommitOffsets(ctx, group, next)
			if err != nil {
				return fmt.Errorf("commit offsets of group %s: %w", group, err)
			}
			if err := resps.Error(); err != nil {
				return fmt.Errorf("commit offsets of group %s: %w", group, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Committed %d offsets for group %s.\n", len(next.Sorted()), group)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&topics, "topic", nil, "topic, or topic:partition,partition (repeatable)")
	cmd.Flags().BoolVar(&allTopics, "all-topics", false, "every topic the group has committed offsets for")
	cmd.Flags().BoolVar(&spec.earliest, "to-earliest", false, "reset to the log start offset")
	cmd.Flags().BoolVar(&spec.latest, "to-latest", false, "reset to the log end offset")
	cmd.Flags().StringVar(&spec.datetime, "to-datetime", "", "reset to the first offset at or after this time")
	cmd.Flags().Int64Var(&spec.offset, "to-offset", 0, "reset to this offset")
	cmd.Flags().Int64Var(&spec.shift, "shift-by", 0, "move the committed offset by this many (negative: back)")
	cmd.Flags().BoolVar(&execute, "execute", false, "commit the new offsets")
	cmd.Flags().BoolVar(&dryRun, "dry-run", true, "only show the new offsets (the default)")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) {
		spec.offsetSet = cmd.Flags().Changed("to-offset")
		spec.shiftSet = cmd.Flags().Changed("shift-by")
	}
	return cmd
}

// fetchResetOffsets checks that a consumer or classic group is inactive
// (Empty, Dead, or not existing) and returns its committed offsets.
func fetchResetOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	if d, ok := described[group]; ok && !errors.Is(d.Err, kerr.GroupIDNotFound) { // not found: a new group
		if d.Err != nil {
			return nil, fmt.Errorf("describe group %s: %w", group, d.Err)
		}
		if d.State != "Empty" && d.State != "Dead" {
			return nil, fmt.Errorf("offsets of group %s can be reset only while it is inactive, but it is %s: stop its consumers first", group, d.State)
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) { // kfake for a new group; Kafka answers no offsets
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if err := committed.Error(); err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	return committed, nil
}

// resetPartitions resolves the partitions reset-offsets works on: those of
// --topic (all of a topic's when none are named), or every partition the
// group committed for with --all-topics.
func resetPartitions(ctx context.Context, adm *kadm.Client, topics []string, all bool, committed kadm.OffsetResponses) (map[string][]int32, error) {
	want := map[string][]int32{}
	if all {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.At >= 0 {
				want[o.Topic] = append(want[o.Topic], o.Partition)
			}
		})
		if len(want) == 0 {
			return nil, errors.New("the group has no committed offsets")
		}
		for t := range want {
			slices.Sort(want[t])
		}
		return want, nil
	}
	var whole []string
	for _, spec := range topics {
		name, list, hasList := strings.Cut(spec, ":")
		if name == "" {
			return nil, fmt.Errorf("--topic %q: no topic name", spec)
		}
		if !hasList {
			whole = append(whole, name)
			continue
		}
		for _, s := range strings.Split(list, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || p < 0 {
				return nil, fmt.Errorf("--topic %q: bad partition %q", spec, s)
			}
			if !slices.Contains(want[name], int32(p)) {
				want[name] = append(want[name], int32(p))
			}
		}
	}
	if len(whole) > 0 {
		details, err := adm.ListTopics(ctx, whole...)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		for _, name := range whole {
			td, ok := details[name]
			if !ok || td.Err != nil {
				err := error(kerr.UnknownTopicOrPartition)
				if ok && td.Err != nil {
					err = td.Err
				}
				return nil, fmt.Errorf("topic %s: %w", name, err)
			}
			want[name] = td.Partitions.Numbers()
		}
	}
	for t := range want {
		slices.Sort(want[t])
	}
	return want, nil
}

// parseResetTime reads --to-datetime: RFC 3339, Kafka's
// yyyy-MM-ddTHH:mm:ss.SSS in local time (also without milliseconds), or
// milliseconds since the epoch.
func parseResetTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02T15:04:05.000Z07:00"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want RFC 3339 (2006-01-02T15:04:05Z), 2006-01-02T15:04:05.000 (local time) or milliseconds since the epoch", s)
}

// deleteGroupsErr formats a group's deletion error.
func deleteGroupsErr(group string, r kadm.DeleteGroupResponse) error {
	switch {
	case errors.Is(r.Err, kerr.GroupIDNotFound):
		return fmt.Errorf("group %s does not exist", group)
	case errors.Is(r.Err, kerr.NonEmptyGroup):
		return fmt.Errorf("group %s is not empty: stop its consumers first (%s)", group, kafkaError(r.Err, r.ErrMessage))
	}
	return fmt.Errorf("delete group %s: %s", group, kafkaError(r.Err, r.ErrMessage))
}

func newGroupDeleteCommand(f *groupFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups and their committed offsets (share groups: their share-partition state)",
		Long: `Delete groups with DeleteGroups. Only groups without members (Empty) can be
deleted; others fail with NON_EMPTY_GROUP. The committed offsets of a
classic or KIP-848 consumer group go with it; a share group (KIP-932) takes
its share-partition state (start offsets and record states) with it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd)
			defer cancel()
			adm, err := f.newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.DeleteGroups(ctx, args...)
			if err != nil {
				return fmt.Errorf("delete groups: %w", err)
			}
			var errs []error
			for _, g := range args {
				r, ok := resps[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("delete group %s: not in the response", g))
				case r.Err != nil:
					errs = append(errs, deleteGroupsErr(g, r))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted group %s.\n", g)
				}
			}
			return errors.Join(errs...)
		},
	}
}
