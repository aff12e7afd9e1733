package broker

import (
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// entryAuth is how an API authorizes the entries of its request one by
// one, as Kafka's KafkaApis and ControllerApis do per API with
// AuthHelper.filterByAuthorized: the entries are its request's Topics
// (each a Topic, maybe with Partitions) or Resources (config resources:
// ResourceType and ResourceName), and a denied entry is answered in the
// response's list of the same name, with its partitions when it has
// them.
type entryAuth struct {
	// op is the operation an entry needs on its topic, or on its config
	// resource (configResourceDenied).
	op kmsg.ACLOperation
	// byName decides a name listed twice once and answers it once
	// (CreateTopics, CreatePartitions: Kafka answers a name once).
	byName bool
	// message sets a denied entry's ErrorMessage to the code's message.
	message bool
	// fill sets the fields of a denied partition's entry (a pointer to
	// the response's partition type) that Kafka sets to other than the
	// schema's default; nil when there are none.
	fill func(partition any)
}

// entryAuths are the APIs whose gates authorize entry by entry, for the
// handlers here and for the requests forwarded to the active controller
// alike. Entries of a topic denied get TOPIC_AUTHORIZATION_FAILED in each
// partition; config resources the code of configResourceDenied.
var entryAuths = map[kmsg.Key]entryAuth{
	kmsg.OffsetCommit:         {op: opRead},     // after READ on the group
	kmsg.TxnOffsetCommit:      {op: opRead},     // after WRITE on the transactional id and READ on the group
	kmsg.OffsetDelete:         {op: opRead},     // after DELETE on the group
	kmsg.OffsetForLeaderEpoch: {op: opDescribe}, // consumers; followers CLUSTER_ACTION on the cluster
	kmsg.ListOffsets:          {op: opDescribe},
	kmsg.DescribeProducers:    {op: opRead},
	kmsg.DeleteRecords: {op: opDelete, fill: func(p any) {
		p.(*kmsg.DeleteRecordsResponseTopicPartition).LowWatermark = -1 // INVALID_LOW_WATERMARK
	}},
	kmsg.CreateTopics:            {op: opCreate, byName: true, message: true}, // unless CREATE on the cluster
	kmsg.CreatePartitions:        {op: opAlter, byName: true, message: true},
	kmsg.AlterConfigs:            {op: opAlterConfigs},
	kmsg.IncrementalAlterConfigs: {op: opAlterConfigs},
	kmsg.DescribeConfigs:         {op: opDescribeConfigs},
}

// entry is one entry of a request of entryAuths.
type entry struct {
	// name is the topic's, or the config resource's.
	name string
	// config is the config resource's type; 0 for a topic.
	config kmsg.ConfigResourceType
	// req is the request's entry itself (kmsg.ListOffsetsRequestTopic, …).
	req any
}

// gateEntries is the gate of an API of entryAuths that checks nothing
// before its entries.
func gateEntries(b *Broker, c *server.Conn, req kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	return filterEntries(req, b.entryCheck(c, req), 0)
}

// entryCheck is the check of entryAuths for req's API: its operation on
// each topic (decided once a name) or config resource.
func (b *Broker) entryCheck(c *server.Conn, req kmsg.Request) func(entry) int16 {
	op := entryAuths[kmsg.Key(req.Key())].op
	d := b.topicDenier(c, op)
	return func(e entry) int16 {
		if e.config != 0 {
			return b.configResourceDenied(c, op, e.config, e.name)
		}
		return d.code(e.name)
	}
}

// filterEntries takes the entries of req (an API of entryAuths) that check
// gives an error code out of a copy of req and returns the copy and a
// finish that adds an entry with that code to the response for each; req
// itself and a finish that does nothing when check denies none. whole,
// when not 0, is the code of a check of the whole request that failed
// (the group of OffsetCommit): every entry gets it, and the request is
// answered at once, even without entries.
func filterEntries(req kmsg.Request, check func(entry) int16, whole int16) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	auth, ok := entryAuths[kmsg.Key(req.Key())]
	if !ok {
		panic(fmt.Sprintf("filterEntries: %T is not in entryAuths", req))
	}
	in := entryList(reflect.ValueOf(req))
	isConfig := hasField(in.Type().Elem(), "ResourceName")
	out := reflect.New(reflect.TypeOf(req).Elem())
	out.Elem().Set(reflect.ValueOf(req).Elem())
	kept := reflect.Zero(in.Type()) // nil when all are denied, as before
	var denied []reflect.Value      // request entries
	var codes []int16
	decided := map[string]int16{}
	for i := range in.Len() {
		t := in.Index(i)
		e := entry{req: t.Interface()}
		if isConfig {
			e.name = t.FieldByName("ResourceName").String()
			e.config = kmsg.ConfigResourceType(t.FieldByName("ResourceType").Int())
		} else {
			e.name = t.FieldByName("Topic").String()
		}
		code, seen := decided[e.name]
		if !auth.byName || !seen {
			code = whole
			if code == 0 {
				code = check(e)
			}
			if auth.byName {
				decided[e.name] = code
			}
			if code != 0 {
				denied, codes = append(denied, t), append(codes, code)
			}
		}
		if code == 0 {
			kept = reflect.Append(kept, t)
		}
	}
	if len(denied) == 0 && whole == 0 {
		return noGate(req)
	}
	finish := func(r kmsg.Response) kmsg.Response {
		list := entryList(reflect.ValueOf(r))
		for i, t := range denied {
			list.Set(reflect.Append(list, deniedEntry(list.Type().Elem(), t, codes[i], auth)))
		}
		return r
	}
	if whole != 0 {
		return deny(finish(req.ResponseKind()))
	}
	entryList(out).Set(kept)
	return out.Interface().(kmsg.Request), finish
}

// entryList is the list of entries of a request or response of
// entryAuths (a pointer to its struct): its field Resources, else Topics.
func entryList(v reflect.Value) reflect.Value {
	s := v.Elem()
	if f := s.FieldByName("Resources"); f.IsValid() {
		return f
	}
	return s.FieldByName("Topics")
}

// hasField reports whether struct type t has a field name.
func hasField(t reflect.Type, name string) bool {
	_, ok := t.FieldByName(name)
	return ok
}

// deniedEntry is the response entry (of type typ) of the request entry
// req denied with code: its Topic or ResourceType and ResourceName, and
// code in each of its partitions or, without partitions, in the entry;
// the other fields as the schema's defaults (kmsg's
// Default) and auth.fill leave the other fields.
func deniedEntry(typ reflect.Type, req reflect.Value, code int16, auth entryAuth) reflect.Value {
	rt := newDefault(typ)
	for _, f := range []string{"Topic", "ResourceType", "ResourceName"} {
		if to := rt.FieldByName(f); to.IsValid() {
			to.Set(req.FieldByName(f))
		}
	}
	parts := rt.FieldByName("Partitions")
	if !parts.IsValid() {
		rt.FieldByName("ErrorCode").SetInt(int64(code))
		if auth.message {
			rt.FieldByName("ErrorMessage").Set(reflect.ValueOf(codeMessage(code)))
		}
	} else {
		in := req.FieldByName("Partitions")
		for i := range in.Len() {
			p := in.Index(i)
			if p.Kind() == reflect.Struct {
				p = p.FieldByName("Partition")
			}
			rp := newDefault(parts.Type().Elem())
			rp.FieldByName("Partition").Set(p)
			rp.FieldByName("ErrorCode").SetInt(int64(code))
			if auth.fill != nil {
				auth.fill(rp.Addr().Interface())
			}
			parts.Set(reflect.Append(parts, rp))
		}
	}
	return rt
}

// newDefault is a new addressable value of typ with kmsg's defaults.
func newDefault(typ reflect.Type) reflect.Value {
	v := reflect.New(typ)
	if d, ok := v.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return v.Elem()
}

// code is TOPIC_AUTHORIZATION_FAILED for a denied topic, else 0.
func (d *topicDenier) code(topic string) int16 {
	if d.deny(topic) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}
