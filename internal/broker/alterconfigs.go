package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// AlterConfigs v0-v2 (replaces a topic's configs) and IncrementalAlterConfigs
// v0-v1 (KIP-339: SET, DELETE, APPEND, SUBTRACT). Topic configs take effect
// at once and persist in the metadata log. Dynamic broker configs are not
// supported yet: a broker resource gets INVALID_REQUEST.
func init() {
	register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs)
	register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs)
}

var errBrokerConfigs = fmt.Errorf("%w: dynamic broker configs are not supported yet", controller.ErrInvalidRequest)

func handleAlterConfigs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			changes := make([]controller.ConfigChange, 0, len(r.Configs))
			for _, c := range r.Configs {
				changes = append(changes, controller.ConfigChange{Name: c.Name, Value: c.Value})
			}
			err = b.ctrl.AlterTopicConfigs(ctx, r.ResourceName, changes, true, req.ValidateOnly)
		case kmsg.ConfigResourceTypeBroker:
			err = errBrokerConfigs
		default:
			err = fmt.Errorf("%w: unsupported resource type %d", controller.ErrInvalidRequest, r.ResourceType)
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func handleIncrementalAlterConfigs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	im := b.image()
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := im.Topic(r.ResourceName)
			if t == nil {
				err = fmt.Errorf("%w: %s", controller.ErrUnknownTopic, r.ResourceName)
				break
			}
			var changes []controller.ConfigChange
			for _, c := range r.Configs {
				ch := controller.ConfigChange{Name: c.Name}
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					ch.Value = c.Value
					if ch.Value == nil {
						err = fmt.Errorf("%w: null value for %s", controller.ErrInvalidConfig, c.Name)
					}
				case kmsg.IncrementalAlterConfigOpDelete:
				case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
					tc, ok := config.LookupTopicConfig(c.Name)
					if !ok || tc.Type != config.TypeList {
						err = fmt.Errorf("%w: %s is not a list config", controller.ErrInvalidConfig, c.Name)
						break
					}
					cur, _ := b.topicConfig(t, c.Name)
					list := splitList(cur)
					for _, v := range splitList(deref(c.Value)) {
						if c.Op == kmsg.IncrementalAlterConfigOpAppend {
							if !slices.Contains(list, v) {
								list = append(list, v)
							}
						} else {
							list = slices.DeleteFunc(list, func(s string) bool { return s == v })
						}
					}
					ch.Value = kmsg.StringPtr(strings.Join(list, ","))
				default:
					err = fmt.Errorf("%w: unknown op %d", controller.ErrInvalidRequest, c.Op)
				}
				changes = append(changes, ch)
			}
			if err == nil {
				err = b.ctrl.AlterTopicConfigs(ctx, r.ResourceName, changes, false, req.ValidateOnly)
			}
		case kmsg.ConfigResourceTypeBroker:
			err = errBrokerConfigs
		default:
			err = fmt.Errorf("%w: unsupported resource type %d", controller.ErrInvalidRequest, r.ResourceType)
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		if rr.ErrorCode == kerr.UnknownServerError.Code {
			b.logger.Error("altering configs failed", "err", err)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
