package broker

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/coordinator/share"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// AlterShareGroupOffsets: v0
//
// Version notes:
//   - v0: sets share-partition start offsets (KIP-932, Kafka 4.1)

// DeleteShareGroupOffsets: v0
//
// Version notes:
//   - v0: deletes share-partition state per topic (KIP-932, Kafka 4.1)

func init() {
	register(kmsg.AlterShareGroupOffsets, 0, 0, handleAlterShareGroupOffsets)
	register(kmsg.DeleteShareGroupOffsets, 0, 0, handleDeleteShareGroupOffsets)
}

// shareOffsetsGroupError checks the group of AlterShareGroupOffsets and
// DeleteShareGroupOffsets, as Kafka: GROUP_AUTHORIZATION_FAILED without op
// on the group (READ to alter, DELETE to delete), GROUP_ID_NOT_FOUND when
// a consumer group holds the id (or, to delete, no share group does),
// NON_EMPTY_GROUP while the share group has members; NOT_COORDINATOR
// when another broker coordinates the group.
func (b *Broker) shareOffsetsGroupError(ctx context.Context, c *server.Conn, groupID string, op kmsg.ACLOperation, create bool) *kerr.Error {
	switch {
	case !b.authorized(c, op, resGroup, groupID):
		return kerr.GroupAuthorizationFailed
	case groupID == "":
		return kerr.InvalidGroupID
	}
	if err := b.shareCoordinatorError(groupID); err != nil {
		return err
	}
	if !b.share.coord.IsShareGroup(groupID) {
		if !create {
			return kerr.GroupIDNotFound
		}
		typ, err := b.otherGroupType(ctx, groupID)
		switch {
		case err != nil:
			return err
		case typ != "":
			return kerr.GroupIDNotFound
		}
	}
	if b.share.coord.HasMembers(groupID) {
		return kerr.NonEmptyGroup
	}
	return nil
}

// AlterShareGroupOffsets (KIP-932): sets the start offset of share-partitions
// of an empty share group (created when missing), dropping their in-flight
// state and delivery counts; the new state is written to
// __share_group_state and the partitions' leaders load it at their next
// use. Errors: the group's (shareOffsetsGroupError) for the whole request,
// TOPIC_AUTHORIZATION_FAILED without READ on a topic,
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a negative offset, per
// partition.
func handleAlterShareGroupOffsets(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	// The id is claimed for a share group until the answer (Claim): no
	// classic group is created under it between the check and EnsureGroup.
	release := b.share.coord.Claim(req.GroupID)
	defer release()
	if err := b.shareOffsetsGroupError(ctx, c, req.GroupID, opRead, true); err != nil {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	im := b.image()
	var altered []group.ShareTopic
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := im.Topic(rt.Topic)
		if t != nil {
			ot.TopicID = t.ID
		}
		allowed := b.authorized(c, opRead, resTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			var err error
			switch {
			case !allowed:
				err = kerr.TopicAuthorizationFailed
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				err = kerr.UnknownTopicOrPartition
			case rp.StartOffset < 0:
				err = kerr.InvalidRequest
			default:
				// A new state epoch, as Kafka's InitializeShareGroupState:
				// the state starts afresh (no state batches).
				k := share.StateKey{Group: req.GroupID, TopicID: t.ID, Partition: rp.Partition}
				var st *share.State
				if st, err = b.readShareState(wctx, k, -1); err == nil {
					w := share.Write{Initialize: true, LeaderEpoch: -1, StartOffset: rp.StartOffset}
					if st != nil {
						w.StateEpoch = st.StateEpoch + 1
					}
					err = b.writeShareState(wctx, k, w)
				}
			}
			if err == nil {
				if n := len(altered); n == 0 || altered[n-1].ID != t.ID {
					altered = append(altered, group.ShareTopic{ID: t.ID, Name: t.Name})
				}
				altered[len(altered)-1].Partitions = append(altered[len(altered)-1].Partitions, rp.Partition)
			}
			op.ErrorCode = errCode(err)
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	// The group exists from now on (Kafka creates it), with the altered
	// partitions among its initialized ones.
	for i := range altered {
		slices.Sort(altered[i].Partitions)
		altered[i].Partitions = slices.Compact(altered[i].Partitions)
	}
	if err := b.share.coord.EnsureGroup(wctx, req.GroupID, altered); err != nil {
		resp.ErrorCode = errCode(err)
	}
	// The leaders forget what they keep in memory and load the new state.
	if err := b.deleteShareGroupState(wctx, req.GroupID, []*metadata.Topic{}); err != nil && resp.ErrorCode == 0 {
		resp.ErrorCode = errCode(err)
	}
	return resp, nil
}

// DeleteShareGroupOffsets (KIP-932): deletes the share-partition state of
// whole topics of an empty share group (tombstones in __share_group_state);
// their share-partitions start again as share.auto.offset.reset says.
// Errors: the group's (shareOffsetsGroupError) for the whole request,
// TOPIC_AUTHORIZATION_FAILED without READ on a topic and
// UNKNOWN_TOPIC_OR_PARTITION per topic.
func handleDeleteShareGroupOffsets(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if err := b.shareOffsetsGroupError(ctx, c, req.GroupID, opDelete, false); err != nil {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	im := b.image()
	var topics []*metadata.Topic
	var results []*kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := im.Topic(rt.Topic)
		switch {
		case !b.authorized(c, opRead, resTopic, rt.Topic):
			ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil:
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			ot.TopicID = t.ID
			topics = append(topics, t)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	for i := range resp.Topics {
		results = append(results, &resp.Topics[i])
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if len(topics) > 0 {
		err := b.deleteShareGroupState(wctx, req.GroupID, topics)
		if err == nil {
			// No longer initialized (ShareGroupStatePartitionMetadata).
			ids := make([][16]byte, len(topics))
			for i, t := range topics {
				ids[i] = t.ID
			}
			err = b.share.coord.ForgetTopics(wctx, req.GroupID, ids)
		}
		if err != nil {
			for _, ot := range results {
				if ot.ErrorCode == 0 {
					ot.ErrorCode = errCode(err)
				}
			}
		}
	}
	return resp, nil
}
