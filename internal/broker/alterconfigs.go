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

// AlterConfigs: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)

// IncrementalAlterConfigs: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: flexible versions: compact encodings and tagged fields (KIP-482)

// AlterConfigs v0-v2 (replaces a topic's configs) and IncrementalAlterConfigs
// v0-v1 (KIP-339: SET, DELETE, APPEND, SUBTRACT). Topic configs take effect
// at once and persist in the metadata log. Dynamic broker configs are not
// supported yet: a broker resource gets INVALID_REQUEST.
func init() {
	register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs)
	register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs)
}

var errBrokerConfigs = fmt.Errorf("%w: dynamic broker configs are not supported yet", controller.ErrInvalidRequest)

// resourceKey names a config resource, to find those named twice.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// checkConfigNames is Kafka's ConfigAdminManager.preprocess for one
// resource: a config named twice, or a null value for anything but an
// IncrementalAlterConfigs DELETE, is INVALID_REQUEST. dup says whether
// the request names the resource more than once (INVALID_REQUEST too).
// names and nulls are the resource's config names and whether each value
// is null (and not a DELETE).
func checkConfigNames(dup bool, names []string, nulls []bool) error {
	if dup {
		return fmt.Errorf("%w: each resource must appear at most once", controller.ErrInvalidRequest)
	}
	seen := make(map[string]bool, len(names))
	var nullNames []string
	for i, n := range names {
		if seen[n] {
			return fmt.Errorf("%w: duplicate config key %s", controller.ErrInvalidRequest, n)
		}
		seen[n] = true
		if nulls[i] {
			nullNames = append(nullNames, n)
		}
	}
	if len(nullNames) > 0 {
		return fmt.Errorf("%w: null value not supported for %s", controller.ErrInvalidRequest, strings.Join(nullNames, ", "))
	}
	return nil
}

func handleAlterConfigs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	named := map[resourceKey]int{}
	for _, r := range req.Resources {
		named[resourceKey{r.ResourceType, r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		names, nulls := make([]string, len(r.Configs)), make([]bool, len(r.Configs))
		for i, c := range r.Configs {
			names[i], nulls[i] = c.Name, c.Value == nil
		}
		err := checkConfigNames(named[resourceKey{r.ResourceType, r.ResourceName}] > 1, names, nulls)
		switch {
		case err != nil:
		case r.ResourceType == kmsg.ConfigResourceTypeTopic:
			changes := make([]controller.ConfigChange, 0, len(r.Configs))
			for _, c := range r.Configs {
				changes = append(changes, controller.ConfigChange{Name: c.Name, Value: c.Value})
			}
			err = b.ctrl.AlterTopicConfigs(ctx, r.ResourceName, changes, true, req.ValidateOnly)
		case r.ResourceType == kmsg.ConfigResourceTypeBroker:
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
	named := map[resourceKey]int{}
	for _, r := range req.Resources {
		named[resourceKey{r.ResourceType, r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		names, nulls := make([]string, len(r.Configs)), make([]bool, len(r.Configs))
		for i, c := range r.Configs {
			names[i], nulls[i] = c.Name, c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete
		}
		err := checkConfigNames(named[resourceKey{r.ResourceType, r.ResourceName}] > 1, names, nulls)
		switch {
		case err != nil:
		case r.ResourceType == kmsg.ConfigResourceTypeTopic:
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
		case r.ResourceType == kmsg.ConfigResourceTypeBroker:
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
