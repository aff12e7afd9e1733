package group

import (
	"github.com/samsahq/samsa/internal/clip"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupType is the type ListGroups v5+ reports for classic groups; KIP-848
// groups are of type "consumer" (ConsumerProtocolType).
const groupType = "classic"

// deletionTombstones are the tombstones that delete g's own records (not
// its offsets): the classic group's metadata, or a consumer group's
// target assignment and metadata (its members are gone already).
func (g *group) deletionTombstones() []Record {
	if g.cg == nil {
		return []Record{{Key: groupKey(g.id)}}
	}
	return []Record{{Key: cgKey(cgTargetMetadataType, g.id)}, {Key: cgKey(cgMetadataType, g.id)}}
}

func (c *Coordinator) logGroup(g *group) *slog.Logger {
	return g.part.log.With("group", clip.String(g.id))
}

// describeGroups handles DescribeGroups v0-v6. AuthorizedOperations are left
// for the broker to fill in.
func (c *Coordinator) describeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		part, code := c.partitionOf(id)
		if code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g := part.groups[id]
		if g == nil || g.cg != nil {
			// Kafka answers a consumer group (KIP-848) as unknown:
			// Dead before v6, GROUP_ID_NOT_FOUND from v6
			// (ConsumerGroupDescribe describes it).
			dg.State = stateDead.String()
			if req.Version >= 6 {
				dg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "Group " + id + " not found."
				if g != nil {
					msg = "Group " + id + " is not a classic group."
				}
				dg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State = g.state.String()
		dg.ProtocolType = g.protocolType
		stable := g.state == stateStable && g.protocolName != nil
		if stable {
			dg.Protocol = *g.protocolName
		}
		for _, m := range g.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID = m.id
			dm.InstanceID = m.instanceID
			dm.ClientID = m.clientID
			dm.ClientHost = m.clientHost
			dm.ProtocolMetadata = []byte{}
			if stable {
				dm.ProtocolMetadata = m.metadata(*g.protocolName)
			}
			dm.MemberAssignment = m.assignment
			if dm.MemberAssignment == nil {
				dm.MemberAssignment = []byte{}
			}
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// listGroups handles ListGroups v0-v5: the groups of the loaded partitions,
// filtered by state (v4+) and type (v5+), case-insensitively.
// COORDINATOR_LOAD_IN_PROGRESS, with the groups listed so far, while a
// partition is loading.
func (c *Coordinator) listGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	var states, types map[string]bool
	if req.Version >= 4 && len(req.StatesFilter) > 0 {
		states = map[string]bool{}
		for _, s := range req.StatesFilter {
			states[strings.ToLower(s)] = true
		}
	}
	if req.Version >= 5 && len(req.TypesFilter) > 0 {
		types = map[string]bool{}
		for _, t := range req.TypesFilter {
			types[strings.ToLower(t)] = true
		}
	}
	for _, part := range c.sortedPartitions() {
		if !part.loaded {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			continue
		}
		for _, g := range part.sortedGroups() {
			if g.state == stateDead {
				continue
			}
			typ, st := groupType, g.state.String()
			if g.cg != nil {
				typ, st = ConsumerProtocolType, g.cg.state()
			}
			if types != nil && !types[typ] {
				continue
			}
			if states != nil && !states[strings.ToLower(st)] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = g.id
			lg.ProtocolType = g.protocolType
			lg.GroupState = st
			lg.GroupType = typ
			resp.Groups = append(resp.Groups, lg)
		}
	}
	return resp
}

// deleteGroups handles DeleteGroups v0-v2: an empty group is deleted with
// tombstones for its offsets and metadata, and answered once they are
// written.
func (c *Coordinator) deleteGroups(req *kmsg.DeleteGroupsRequest, reply func(*kmsg.DeleteGroupsResponse)) {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		resp.Groups = append(resp.Groups, dg)
	}
	outstanding := 1 // released after the loop
	finish := func() {
		if outstanding--; outstanding == 0 {
			reply(resp)
		}
	}
	seen := map[string]bool{}
	for i, id := range req.Groups {
		part, code := c.partitionOf(id)
		if code != 0 {
			resp.Groups[i].ErrorCode = code
			continue
		}
		g := part.groups[id]
		switch {
		case g == nil || g.state == stateDead:
			if seen[id] { // listed twice: the first deletes it
				continue
			}
			resp.Groups[i].ErrorCode = kerr.GroupIDNotFound.Code
			continue
		case g.state != stateEmpty || g.cg != nil && len(g.cg.members) > 0:
			resp.Groups[i].ErrorCode = kerr.NonEmptyGroup.Code
			continue
		}
		seen[id] = true
		keys := map[tp]bool{}
		for k := range g.offsets {
			keys[k] = true
		}
		for k := range g.pendingCommits {
			keys[k] = true
		}
		recs := make([]Record, 0, len(keys)+1)
		for _, k := range slices.SortedFunc(maps.Keys(keys), compareTP) {
			recs = append(recs, Record{Key: offsetKey(g.id, k.topic, k.partition)})
		}
		recs = append(recs, g.deletionTombstones()...)
		g.transition(stateDead, time.Now()) // until the tombstones are written
		outstanding++
		c.appendRecords(part, recs, func(err error) {
			if code := appendErrorCode(err); code != 0 {
				resp.Groups[i].ErrorCode = code
				if g.state == stateDead && c.owns(part) {
					g.state, g.prevState = stateEmpty, stateDead
				}
			} else {
				if part.groups[g.id] == g {
					delete(part.groups, g.id)
				}
				c.logGroup(g).Info("group deleted", "offsets", len(keys))
			}
			finish()
		})
	}
	finish()
}
