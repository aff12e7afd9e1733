package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DeleteTopics: v1-6
//
// Version notes:
//   - v1: the lowest version served
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: no field change
//   - v4: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v5: ErrorMessage (response Topic)
//   - v6: drops TopicNames (request), Topics (request), TopicID (response
//     Topic)

// DeleteTopics v1-v6 (v6 names topics by name or id). As Kafka's
// ControllerApis, a name or id listed twice deletes nothing for it and gets
// one INVALID_REQUEST result ("Duplicate topic name." / "Duplicate topic
// id."), and so does a v6 entry with both a name and an id, or neither;
// the other topics are deleted.
func init() { register(kmsg.DeleteTopics, 1, 6, handleDeleteTopics) }

// Kafka's messages for DeleteTopics v6 entries it refuses.
const (
	msgDuplicateTopicID = "Duplicate topic id."
	msgNoTopicNorID     = "Neither topic name nor id were specified."
)

func handleDeleteTopics(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	im := b.image()
	// entry is one topic of the request: by name, by id (byID), or an
	// error already decided (invalid, a message, or an unknown id).
	type entry struct {
		name    string
		id      [16]byte
		byID    bool
		invalid string // INVALID_REQUEST with this message
		unknown bool   // an id no topic has
	}
	var entries []entry
	if req.Version >= 6 {
		for _, t := range req.Topics {
			switch {
			case t.Topic != nil && t.TopicID != [16]byte{}:
				entries = append(entries, entry{name: *t.Topic, id: t.TopicID, invalid: "You may not specify both topic name and topic id."})
			case t.Topic != nil:
				entries = append(entries, entry{name: *t.Topic})
			case t.TopicID == [16]byte{}:
				entries = append(entries, entry{invalid: msgNoTopicNorID})
			default:
				entries = append(entries, entry{id: t.TopicID, byID: true})
			}
		}
	} else {
		for _, n := range req.TopicNames {
			entries = append(entries, entry{name: n})
		}
	}
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, e := range entries {
		switch {
		case e.invalid != "":
		case e.byID:
			ids[e.id]++
		default:
			names[e.name]++
		}
	}
	answered := map[entry]bool{}
	var toDelete []string
	for i := range entries {
		e := &entries[i]
		switch {
		case e.invalid != "":
		case e.byID && ids[e.id] > 1:
			e.invalid = msgDuplicateTopicID
		case !e.byID && names[e.name] > 1:
			e.invalid = msgDuplicateTopic
		case e.byID:
			if mt := im.TopicByID(e.id); mt != nil {
				e.name = mt.Name
				toDelete = append(toDelete, e.name)
			} else {
				e.unknown = true
			}
		default:
			if mt := im.Topic(e.name); mt != nil {
				e.id = mt.ID
			}
			toDelete = append(toDelete, e.name)
		}
	}
	errs, err := b.ctrl.DeleteTopics(ctx, toDelete)
	if err != nil {
		return nil, err
	}
	i := 0
	for _, e := range entries {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		switch {
		case e.invalid != "":
			if e.invalid == msgDuplicateTopic || e.invalid == msgDuplicateTopicID {
				// One result for a name or id listed twice.
				key := entry{name: e.name, id: e.id, byID: e.byID}
				if answered[key] {
					continue
				}
				answered[key] = true
			}
			if !e.byID && e.invalid != msgNoTopicNorID {
				n := e.name
				rt.Topic = &n
			}
			rt.TopicID = e.id
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(e.invalid)
		case e.unknown:
			rt.TopicID = e.id
			rt.ErrorCode = kerr.UnknownTopicID.Code
		default:
			n := e.name
			rt.Topic, rt.TopicID = &n, e.id
			rt.ErrorCode = errCode(errs[i])
			if errs[i] != nil {
				rt.ErrorMessage = errMessage(errs[i])
			}
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
