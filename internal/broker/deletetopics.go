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

// DeleteTopics v1-v6 (v6 names topics by name or id).
func init() { register(kmsg.DeleteTopics, 1, 6, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	im := b.image()
	type entry struct {
		name string
		id   [16]byte
		ok   bool
	}
	var entries []entry
	if req.Version >= 6 {
		for _, t := range req.Topics {
			switch {
			case t.Topic != nil:
				e := entry{name: *t.Topic, ok: true}
				if mt := im.Topic(*t.Topic); mt != nil {
					e.id = mt.ID
				}
				entries = append(entries, e)
			default:
				mt := im.TopicByID(t.TopicID)
				if mt == nil {
					entries = append(entries, entry{id: t.TopicID})
				} else {
					entries = append(entries, entry{name: mt.Name, id: mt.ID, ok: true})
				}
			}
		}
	} else {
		for _, n := range req.TopicNames {
			e := entry{name: n, ok: true}
			if mt := im.Topic(n); mt != nil {
				e.id = mt.ID
			}
			entries = append(entries, e)
		}
	}
	var names []string
	for _, e := range entries {
		if e.ok {
			names = append(names, e.name)
		}
	}
	errs, err := b.ctrl.DeleteTopics(ctx, names)
	if err != nil {
		return nil, err
	}
	i := 0
	for _, e := range entries {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = e.id
		if !e.ok {
			rt.ErrorCode = kerr.UnknownTopicID.Code
		} else {
			n := e.name
			rt.Topic = &n
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
