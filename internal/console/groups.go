package console

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupRow is a row of the group list.
type GroupRow struct {
	Group        string `json:"group"`
	Type         string `json:"type"` // classic, consumer (KIP-848), share (KIP-932)
	ProtocolType string `json:"protocolType"`
	State        string `json:"state"`
	Coordinator  int32  `json:"coordinator"`
}

// groups lists groups of every type (ListGroups v5 gives their types).
func groups(ctx context.Context, adm *kadm.Client, q string, page, size int) (Page[GroupRow], error) {
	out := Page[GroupRow]{Items: []GroupRow{}, Page: page, Size: size, Query: q}
	ls, err := adm.ListGroupsByType(ctx, nil)
	if err != nil {
		return out, err
	}
	var rows []GroupRow
	for _, g := range ls.Sorted() {
		if q != "" && !strings.Contains(g.Group, q) {
			continue
		}
		rows = append(rows, GroupRow{Group: g.Group, Type: g.GroupType, ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator})
	}
	out.Total = len(rows)
	out.Items = pageOf(rows, page, size)
	return out, nil
}

// Member is a group member and its assignment.
type Member struct {
	ID         string   `json:"memberId"`
	InstanceID string   `json:"instanceId,omitempty"`
	ClientID   string   `json:"clientId"`
	ClientHost string   `json:"clientHost"`
	Assigned   []string `json:"assigned"` // topic:partition
}

// LagRow is a partition's committed offset and lag.
type LagRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"logEndOffset"`
	Lag       int64  `json:"lag"` // -1 unknown
}

// GroupDetail is /api/groups/{group}.
type GroupDetail struct {
	Group    string   `json:"group"`
	Type     string   `json:"type"`
	State    string   `json:"state"`
	Protocol string   `json:"protocol,omitempty"`
	Members  []Member `json:"members"`
	Lag      []LagRow `json:"lag"`
	TotalLag int64    `json:"totalLag"`
	LagChart []point  `json:"lagChart"` // A: total lag
	Errors   []string `json:"errors,omitempty"`
}

func assigned(s kadm.TopicsSet) []string {
	out := []string{}
	for _, tp := range s.Sorted() {
		for _, p := range tp.Partitions {
			out = append(out, fmt.Sprintf("%s:%d", tp.Topic, p))
		}
	}
	return out
}

// groupType looks the group up in ListGroups for its type and state.
func groupType(ctx context.Context, adm *kadm.Client, group string) (GroupRow, error) {
	ls, err := adm.ListGroupsByType(ctx, nil)
	if err != nil {
		return GroupRow{}, err
	}
	g, ok := ls[group]
	if !ok {
		return GroupRow{}, kerr.GroupIDNotFound
	}
	return GroupRow{Group: g.Group, Type: g.GroupType, ProtocolType: g.ProtocolType, State: g.State}, nil
}

// groupDetail describes group as user (whose client adm is) sees it; its
// lag chart holds the samples taken with user's client only.
func (c *Console) groupDetail(ctx context.Context, adm *kadm.Client, user, group string) (GroupDetail, error) {
	d := GroupDetail{Group: group, Members: []Member{}, Lag: []LagRow{}, LagChart: []point{}}
	fail := func(what string, err error) { d.Errors = append(d.Errors, what+": "+err.Error()) }
	row, err := groupType(ctx, adm, group)
	if err != nil {
		return d, err
	}
	d.Type, d.State = row.Type, row.State
	switch row.Type {
	case "consumer":
		gs, err := adm.DescribeConsumerGroups(ctx, group)
		if err == nil {
			err = gs[group].Err
		}
		if err != nil {
			fail("ConsumerGroupDescribe", err)
			break
		}
		g := gs[group]
		d.State, d.Protocol = g.State, g.AssignorName
		for _, m := range g.Members {
			mm := Member{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: assigned(m.Assignment)}
			if m.InstanceID != nil {
				mm.InstanceID = *m.InstanceID
			}
			d.Members = append(d.Members, mm)
		}
	case "share":
		gs, err := adm.DescribeShareGroups(ctx, group)
		if err == nil {
			err = gs[group].Err
		}
		if err != nil {
			fail("ShareGroupDescribe", err)
			break
		}
		g := gs[group]
		d.State, d.Protocol = g.GroupState, g.Assignor
		for _, m := range g.Members {
			d.Members = append(d.Members, Member{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: assigned(m.Assignment)})
		}
	default:
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			err = gs[group].Err
		}
		if err != nil {
			fail("DescribeGroups", err)
			break
		}
		g := gs[group]
		d.State, d.Protocol = g.State, g.Protocol
		for _, m := range g.Members {
			mm := Member{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: []string{}}
			if m.InstanceID != nil {
				mm.InstanceID = *m.InstanceID
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						mm.Assigned = append(mm.Assigned, fmt.Sprintf("%s:%d", t.Topic, p))
					}
				}
			}
			d.Members = append(d.Members, mm)
		}
	}
	if row.Type != "share" {
		if lag, err := groupLag(ctx, adm, group); err != nil {
			fail("OffsetFetch", err)
		} else {
			d.Lag = lag
		}
		for _, r := range d.Lag {
			d.TotalLag += max(r.Lag, 0)
		}
		d.LagChart = c.watchLag(group, user, adm).points()
	}
	return d, nil
}

// groupLag is the group's committed offsets against the end offsets.
func groupLag(ctx context.Context, adm *kadm.Client, group string) ([]LagRow, error) {
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	var topics []string
	for t := range fetched {
		topics = append(topics, t)
	}
	rows := []LagRow{}
	if len(topics) == 0 {
		return rows, nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			return
		}
		r := LagRow{Topic: o.Topic, Partition: o.Partition, Committed: o.At, End: -1, Lag: -1}
		if e, ok := ends.Lookup(o.Topic, o.Partition); ok && e.Err == nil {
			r.End = e.Offset
			r.Lag = max(e.Offset-o.At, 0)
		}
		rows = append(rows, r)
	})
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}

// ResetRow is a partition's offset before and after a reset.
type ResetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current"` // -1 none committed
	New       int64  `json:"new"`
}

// resetPlan computes the new offsets of group's partitions of topic (every
// topic it committed when topic is ""): to "earliest", "latest",
// "timestamp" (the first offset at or after millis) or "offset" (offset,
// clamped to the log). The group must be empty.
func resetPlan(ctx context.Context, adm *kadm.Client, group, topic, to string, millis, offset int64) ([]ResetRow, error) {
	row, err := groupType(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	if row.State != "Empty" {
		return nil, fmt.Errorf("%w: group %s is %s: offsets can be reset only while it is Empty (stop its consumers first)", errConflict, group, row.State)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	var topics []string
	if topic != "" {
		topics = []string{topic}
	} else {
		for t := range fetched {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("group %s has no committed offsets: name a topic", group)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var at kadm.ListedOffsets
	if to == "timestamp" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, millis, topics...); err != nil {
			return nil, err
		}
	}
	var rows []ResetRow
	var ferr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			ferr = fmt.Errorf("%s[%d]: %w", e.Topic, e.Partition, e.Err)
			return
		}
		s, _ := starts.Lookup(e.Topic, e.Partition)
		r := ResetRow{Topic: e.Topic, Partition: e.Partition, Current: -1}
		if o, ok := fetched.Lookup(e.Topic, e.Partition); ok && o.Err == nil {
			r.Current = o.At
		}
		switch to {
		case "earliest":
			r.New = s.Offset
		case "latest":
			r.New = e.Offset
		case "timestamp":
			r.New = e.Offset
			if a, ok := at.Lookup(e.Topic, e.Partition); ok && a.Err == nil && a.Offset >= 0 {
				r.New = a.Offset
			}
		case "offset":
			r.New = min(max(offset, s.Offset), e.Offset)
		default:
			ferr = fmt.Errorf("reset to %q: want earliest, latest, timestamp or offset", to)
		}
		rows = append(rows, r)
	})
	if ferr != nil {
		return nil, ferr
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}

// applyReset commits the plan's offsets.
func applyReset(ctx context.Context, adm *kadm.Client, group string, plan []ResetRow) error {
	os := kadm.Offsets{}
	for _, r := range plan {
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	return adm.CommitAllOffsets(ctx, group, os)
}

// deleteGroup deletes an empty group.
func deleteGroup(ctx context.Context, adm *kadm.Client, group string) error {
	r, err := adm.DeleteGroup(ctx, group)
	if err != nil {
		return err
	}
	return r.Err
}
