package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// AlterConfigs v0-v2 (replaces a resource's configs) and
// IncrementalAlterConfigs v0-v1 (KIP-339: SET, DELETE, APPEND, SUBTRACT)
// on TOPIC, BROKER, GROUP and (IncrementalAlterConfigs only)
// BROKER_LOGGER resources, as Kafka's ConfigAdminManager and controller:
//
//   - TOPIC configs take effect at once and persist in the metadata log.
//   - BROKER resources are dynamic broker configs: a broker id (that of the
//     broker the request is sent to, else INVALID_REQUEST) or "" for the
//     cluster-wide defaults. The receiving broker checks them
//     (config.CheckDynamic: a read-only config is INVALID_REQUEST "Cannot
//     update these configs dynamically: [...]", a bad value
//     INVALID_REQUEST too, as Kafka since KAFKA-13609 left it), then the
//     active controller writes them to the metadata log; every node applies
//     them as the image arrives (dynconfig.go).
//   - BROKER_LOGGER resources (KIP-412) change this node's log levels at
//     once and are not persisted, as in Kafka.
//   - GROUP resources (type 32) set a group's overrides of the group
//     configs (config.GroupConfigNames: consumer.session.timeout.ms,
//     share.record.lock.duration.ms, ...), checked by the active
//     controller against the broker's min and max properties
//     (INVALID_CONFIG with Kafka's message otherwise) and written to the
//     metadata log as ConfigRecords, as Kafka stores them; every node
//     reads them from its image (Broker.GroupConfig).
//
// validate_only checks everything and changes nothing. A broker that is
// not the active controller answers BROKER_LOGGER resources and the checks
// above itself and forwards the rest to the active controller (KIP-590),
// as Kafka's copyWithoutPreprocessed does.
func init() {
	register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs)
	register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs)
}

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

// checkBrokerAlter is the receiving broker's check of a BROKER resource
// (ConfigAdminManager.validateBrokerConfigChange): the name is "" or this
// broker's id, unless the request came in on a controller listener
// (forwarded, or a KIP-919 client of the controllers), and the values set
// are dynamic and valid.
func (b *Broker) checkBrokerAlter(onController bool, name string, changes []controller.ConfigChange) error {
	if name != "" && !onController {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: Node id must be an integer, but it is: %s", controller.ErrInvalidRequest, name)
		}
		if int32(id) != b.node.NodeID {
			return fmt.Errorf("%w: Unexpected broker id, expected %d, but received %s", controller.ErrInvalidRequest, b.node.NodeID, name)
		}
	}
	set := map[string]string{}
	for _, ch := range changes {
		if ch.Value != nil {
			set[ch.Name] = *ch.Value
		}
	}
	if err := config.CheckDynamic(set, name != ""); err != nil {
		return fmt.Errorf("%w: %v", controller.ErrInvalidRequest, err)
	}
	return nil
}

// pending is a resource left for the controller: its index in the
// response, and how to apply it on the active controller.
type pending struct {
	i     int
	apply func(ctx context.Context) error
}

// toController applies the pending resources on this node's controller
// when it is active (or the request came in on a controller listener),
// otherwise forwards fwd, a copy of the request with those resources only,
// to the active controller and returns its error codes. It returns each
// pending resource's error code and message, in order.
func (b *Broker) toController(ctx context.Context, onController bool, todo []pending, fwd kmsg.Request, codes func(kmsg.Response) ([]int16, []*string)) ([]int16, []*string) {
	codes2, msgs := make([]int16, len(todo)), make([]*string, len(todo))
	local := func() {
		for j, p := range todo {
			err := p.apply(ctx)
			codes2[j], msgs[j] = errCode(err), errMessage(err)
			if codes2[j] == kerr.UnknownServerError.Code {
				b.logger.Error("altering configs failed", "err", err)
			}
		}
	}
	if len(todo) == 0 {
		return codes2, msgs
	}
	if onController || b.ctrl.Active() {
		local()
		return codes2, msgs
	}
	resp, err := b.forward(ctx, fwd)
	switch {
	case errors.Is(err, errLocalController):
		local()
	case err != nil:
		for j := range todo {
			codes2[j], msgs[j] = errCode(err), errMessage(err)
		}
	default:
		c, m := codes(resp)
		for j := range todo {
			if j < len(c) {
				codes2[j], msgs[j] = c[j], m[j]
			} else {
				codes2[j] = kerr.UnknownServerError.Code
			}
		}
	}
	return codes2, msgs
}

// errorsOf lists the error code and message of each resource of a
// forwarded response.
func errorsOf[R any](rs []R, get func(R) (int16, *string)) (codes []int16, msgs []*string) {
	for _, r := range rs {
		c, m := get(r)
		codes, msgs = append(codes, c), append(msgs, m)
	}
	return codes, msgs
}

func handleAlterConfigs(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	onController := b.onControllerListener(c)
	named := map[resourceKey]int{}
	for _, r := range req.Resources {
		named[resourceKey{r.ResourceType, r.ResourceName}]++
	}
	fwd := *req
	fwd.Resources = nil
	var todo []pending
	for i, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		names, nulls := make([]string, len(r.Configs)), make([]bool, len(r.Configs))
		changes := make([]controller.ConfigChange, 0, len(r.Configs))
		for i, c := range r.Configs {
			names[i], nulls[i] = c.Name, c.Value == nil
			changes = append(changes, controller.ConfigChange{Name: c.Name, Value: c.Value})
		}
		err := checkConfigNames(named[resourceKey{r.ResourceType, r.ResourceName}] > 1, names, nulls)
		name := r.ResourceName
		switch {
		case err != nil:
		case r.ResourceType == kmsg.ConfigResourceTypeTopic:
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterTopicConfigs(ctx, name, changes, true, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		case r.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterGroupConfigs(ctx, name, changes, true, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		case r.ResourceType == kmsg.ConfigResourceTypeBroker:
			if err = b.checkBrokerAlter(onController, name, changes); err != nil {
				break
			}
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterBrokerConfigs(ctx, name, changes, true, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		default:
			err = fmt.Errorf("%w: unknown resource type %d", controller.ErrInvalidRequest, r.ResourceType)
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	codes, msgs := b.toController(ctx, onController, todo, &fwd, func(r kmsg.Response) ([]int16, []*string) {
		return errorsOf(r.(*kmsg.AlterConfigsResponse).Resources, func(rr kmsg.AlterConfigsResponseResource) (int16, *string) {
			return rr.ErrorCode, rr.ErrorMessage
		})
	})
	for j, p := range todo {
		resp.Resources[p.i].ErrorCode, resp.Resources[p.i].ErrorMessage = codes[j], msgs[j]
	}
	return resp, nil
}

func handleIncrementalAlterConfigs(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	onController := b.onControllerListener(c)
	im := b.image()
	named := map[resourceKey]int{}
	for _, r := range req.Resources {
		named[resourceKey{r.ResourceType, r.ResourceName}]++
	}
	fwd := *req
	fwd.Resources = nil
	var todo []pending
	for i, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		names, nulls := make([]string, len(r.Configs)), make([]bool, len(r.Configs))
		for i, c := range r.Configs {
			names[i], nulls[i] = c.Name, c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete
		}
		err := checkConfigNames(named[resourceKey{r.ResourceType, r.ResourceName}] > 1, names, nulls)
		name := r.ResourceName
		switch {
		case err != nil:
		case r.ResourceType == kmsg.ConfigResourceTypeTopic:
			t := im.Topic(name)
			if t == nil {
				err = fmt.Errorf("%w: %s", controller.ErrUnknownTopic, name)
				break
			}
			var changes []controller.ConfigChange
			changes, err = incrementalChanges(r.Configs, func(c string) (string, bool) {
				tc, ok := config.LookupTopicConfig(c)
				if !ok || tc.Type != config.TypeList {
					return "", false
				}
				v, _ := b.topicConfig(t, c)
				return v, true
			})
			if err != nil {
				break
			}
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterTopicConfigs(ctx, name, changes, false, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		case r.ResourceType == kmsg.ConfigResourceTypeBroker:
			var changes []controller.ConfigChange
			changes, err = incrementalChanges(r.Configs, func(c string) (string, bool) {
				return b.brokerListValue(im.BrokerConfigs(name), c)
			})
			if err != nil {
				break
			}
			if err = b.checkBrokerAlter(onController, name, changes); err != nil {
				break
			}
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterBrokerConfigs(ctx, name, changes, false, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		case r.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			var changes []controller.ConfigChange
			changes, err = incrementalChanges(r.Configs, func(string) (string, bool) { return "", false })
			if err != nil {
				break
			}
			todo = append(todo, pending{i, func(ctx context.Context) error {
				return b.ctrl.AlterGroupConfigs(ctx, name, changes, false, req.ValidateOnly)
			}})
			fwd.Resources = append(fwd.Resources, r)
		case r.ResourceType == kmsg.ConfigResourceTypeBrokerLogger:
			err = b.alterLoggers(name, r.Configs, req.ValidateOnly)
		default:
			err = fmt.Errorf("%w: unknown resource type %d", controller.ErrInvalidRequest, r.ResourceType)
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	codes, msgs := b.toController(ctx, onController, todo, &fwd, func(r kmsg.Response) ([]int16, []*string) {
		return errorsOf(r.(*kmsg.IncrementalAlterConfigsResponse).Resources, func(rr kmsg.IncrementalAlterConfigsResponseResource) (int16, *string) {
			return rr.ErrorCode, rr.ErrorMessage
		})
	})
	for j, p := range todo {
		resp.Resources[p.i].ErrorCode, resp.Resources[p.i].ErrorMessage = codes[j], msgs[j]
	}
	return resp, nil
}

// incrementalChanges turns IncrementalAlterConfigs operations into changes:
// SET a value, DELETE a nil one, APPEND and SUBTRACT the list current
// returns for a list config (false: not a list config, INVALID_CONFIG as
// Kafka's "Config value append is not allowed for config key").
func incrementalChanges(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, current func(name string) (string, bool)) ([]controller.ConfigChange, error) {
	changes := make([]controller.ConfigChange, 0, len(ops))
	for _, c := range ops {
		ch := controller.ConfigChange{Name: c.Name}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			ch.Value = c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			cur, ok := current(c.Name)
			if !ok {
				return nil, fmt.Errorf("%w: %s is not a list config", controller.ErrInvalidConfig, c.Name)
			}
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
			return nil, fmt.Errorf("%w: unknown op %d", controller.ErrInvalidRequest, c.Op)
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// brokerListValue is the current value of list broker config name for
// APPEND and SUBTRACT: the resource's dynamic value, else the value in
// effect here; false for a config that is not a list (of the broker
// synonyms of topic configs, log.cleanup.policy is the one list).
func (b *Broker) brokerListValue(dynamic map[string]string, name string) (string, bool) {
	topicName, ok := config.TopicConfigForBrokerSynonym(name)
	if !ok {
		return "", false
	}
	if tc, _ := config.LookupTopicConfig(topicName); tc.Type != config.TypeList {
		return "", false
	}
	if v, ok := dynamic[name]; ok {
		return v, true
	}
	return b.config().Topic[topicName], true
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
