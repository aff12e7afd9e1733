package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errNoSuchGroup: no group of the kind asked for has the id.
var errNoSuchGroup = errors.New("does not exist")

// shareGroup is a described share group with its share-partition offsets.
type shareGroup struct {
	kadm.DescribedShareGroup
	offsets kadm.ShareOffsets
}

// describeShareGroup describes a share group (ShareGroupDescribe) and its
// share-partition start offsets and lag (DescribeShareGroupOffsets).
func describeShareGroup(ctx context.Context, adm *kadm.Client, group string) (*shareGroup, error) {
	described, err := adm.DescribeShareGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe share group %s: %w", group, err)
	}
	d, ok := described[group]
	switch {
	case !ok || errors.Is(d.Err, kerr.GroupIDNotFound) || errors.Is(d.Err, kerr.UnsupportedVersion):
		return nil, fmt.Errorf("group %s: %w", group, errNoSuchGroup)
	case d.Err != nil:
		return nil, fmt.Errorf("describe share group %s: %w", group, d.Err)
	}
	out := &shareGroup{DescribedShareGroup: d}
	offs, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe share group offsets of %s: %w", group, err)
	}
	if o, ok := offs[group]; ok && o.Err == nil {
		out.offsets = o.Offsets
	}
	return out, nil
}

// writeShareGroup prints a share group: its header line, the start offset
// and lag of each share-partition, then its members.
func writeShareGroup(w io.Writer, g *shareGroup) {
	fmt.Fprintf(w, "Group: %s\tType: share\tState: %s\tEpoch: %d\tAssignment-Epoch: %d\tAssignor: %s\tCoordinator: %d\tMembers: %d\n",
		g.GroupID, g.GroupState, g.GroupEpoch, g.AssignmentEpoch, dash(g.Assignor), g.Coordinator.NodeID, len(g.Members))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tLAG")
	topics := make([]string, 0, len(g.offsets))
	for t := range g.offsets {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	var total int64
	for _, t := range topics {
		ps := make([]int32, 0, len(g.offsets[t]))
		for p := range g.offsets[t] {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		for _, p := range ps {
			o := g.offsets[t][p]
			start, lag := "-", "-"
			if o.StartOffset >= 0 {
				start = fmt.Sprint(o.StartOffset)
			}
			if o.Lag >= 0 {
				lag = fmt.Sprint(o.Lag)
				total += o.Lag
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t, p, start, lag)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "Total lag: %d\n", total)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER-ID\tCLIENT-ID\tHOST\tEPOCH\tSUBSCRIBED\tASSIGNMENT")
	for _, m := range g.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.MemberID, dash(m.ClientID), dash(m.ClientHost), m.MemberEpoch,
			dash(strings.Join(m.SubscribedTopicNames, ",")), topicsSetString(m.Assignment))
	}
	tw.Flush()
}
