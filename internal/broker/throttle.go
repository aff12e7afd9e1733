package broker

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/quota"
	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/wire"
)

// clientQuotas are the rates of the client quota buckets, one set per
// quota type (Kafka's ClientQuotaManager instances).
type clientQuotas struct {
	produce, fetch, request, mutation, connections quota.Buckets
	lastSweep                                      atomic.Int64 // unix nanoseconds of the last Sweep
}

// newClientQuotas returns empty usage sampled with nc's quota.window.*
// (controller.quota.window.* for controller_mutation_rate).
func newClientQuotas(nc *config.Node) *clientQuotas {
	q := &clientQuotas{}
	w := clientWindow(nc)
	q.produce.Window, q.fetch.Window, q.request.Window, q.connections.Window = w, w, w, w
	if nc != nil {
		q.mutation.Window = quota.Window{Num: int(nc.ControllerQuotaWindowNum), Size: time.Duration(nc.ControllerQuotaWindowSizeSeconds) * time.Second}
	}
	return q
}

// clientWindow is the client quotas' quota.window.num and
// quota.window.size.seconds; zero fields mean Kafka's defaults.
func clientWindow(nc *config.Node) quota.Window {
	if nc == nil {
		return quota.Window{}
	}
	return quota.Window{Num: int(nc.QuotaWindowNum), Size: time.Duration(nc.QuotaWindowSizeSeconds) * time.Second}
}

// quotaUser is the user of a principal for quota entities: its name
// (User:alice → alice), as Kafka's sanitized user.
func quotaUser(principal string) string {
	if i := strings.IndexByte(principal, ':'); i >= 0 {
		return principal[i+1:]
	}
	return principal
}

// exemptFromQuotas are the requests Kafka's request quota does not count
// (ClientRequestQuotaManager's exempt APIs: the cluster's own traffic).
var exemptFromQuotas = map[kmsg.Key]bool{
	kmsg.BrokerRegistration: true, kmsg.BrokerHeartbeat: true, kmsg.AlterPartition: true,
	kmsg.AllocateProducerIDs: true, kmsg.WriteTxnMarkers: true, kmsg.ApiVersions: true,
	kmsg.SASLHandshake: true, kmsg.SASLAuthenticate: true,
}

// throttle records the request's usage against the client's quotas and,
// when one is exceeded, sets the response's throttle_time_ms and mutes
// the connection that long (KIP-219): producer_byte_rate by the request's
// size for Produce, consumer_byte_rate by the records returned for a
// consumer's Fetch, request_percentage by the time spent handling it.
// A consumer's Fetch that would be throttled by either quota is answered
// empty instead (no topics, throttle_time_ms set) and its bytes are not
// counted, as Kafka's KafkaApis.handleFetchRequest does: the records are
// read again once the mute ends. Followers' fetches, super users and the
// inter-broker requests are not throttled, as in Kafka. Costs a map
// lookup when no quota is set.
func (b *Broker) throttle(c *server.Conn, req *wire.Request, resp kmsg.Response, elapsed time.Duration) {
	cs := b.image().Quotas()
	if len(cs) == 0 || c == nil || exemptFromQuotas[kmsg.Key(req.Key)] {
		return
	}
	if b.authorizer().SuperUsers[connPrincipal(c)] && b.authorizer().Enabled {
		return
	}
	user, client := quotaUser(connPrincipal(c)), ""
	if req.ClientID != nil {
		client = *req.ClientID
	}
	now := time.Now()
	q := b.usage
	if last := q.lastSweep.Load(); now.UnixNano()-last > int64(time.Minute) && q.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		for _, bs := range []*quota.Buckets{&q.produce, &q.fetch, &q.request, &q.mutation, &q.connections} {
			bs.Sweep(now.Add(-time.Hour))
		}
	}
	var d time.Duration
	// record adds v to the client's rate of key and returns that rate, nil
	// when no quota applies.
	record := func(bs *quota.Buckets, key string, v float64) *quota.Rate {
		limit, bucket, ok := cs.Resolve(key, user, client)
		if !ok {
			return nil
		}
		r := &bs.Get(bucket, now).Rate
		r.Record(v, now)
		d = max(d, r.Throttle(limit, now))
		return r
	}
	var fetched *wire.FetchResponse
	var fetchRate *quota.Rate
	switch kmsg.Key(req.Key) {
	case kmsg.Produce:
		record(&q.produce, quota.ProducerByteRate, float64(len(req.Raw)))
	case kmsg.Fetch:
		if fr, ok := resp.(*wire.FetchResponse); ok && req.Body.(*kmsg.FetchRequest).ReplicaID < 0 {
			fetched, fetchRate = fr, record(&q.fetch, quota.ConsumerByteRate, float64(fr.RecordBytes()))
		}
	}
	record(&q.request, quota.RequestPercentage, float64(elapsed)*100/float64(time.Second))
	if d <= 0 {
		return
	}
	if fetched != nil {
		if fetchRate != nil {
			fetchRate.Record(-float64(fetched.RecordBytes()), now)
		}
		if fetched.Unsent != nil {
			fetched.Unsent()
		}
		fetched.Reset()
		fetched.Topics = nil
	}
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
		ms := int32(min(d.Milliseconds(), 1<<31-1))
		if cur, _ := tr.(kmsg.ThrottleResponse).Throttle(); ms > cur {
			tr.SetThrottle(ms)
		}
	}
	c.Throttle(d)
}

// fetchQuotaBytes is the most a consumer's Fetch may return without being
// throttled, had it fetched nothing in the quota window: the client's
// consumer_byte_rate × (quota.window.num − 1) × quota.window.size.seconds,
// as Kafka's ClientQuotaManager.getMaxValueInQuotaWindow; ok false when no
// quota applies.
func (b *Broker) fetchQuotaBytes(c *server.Conn, clientID string) (n int32, ok bool) {
	if c == nil {
		return 0, false
	}
	cs := b.image().Quotas()
	if len(cs) == 0 {
		return 0, false
	}
	if a := b.authorizer(); a.Enabled && a.SuperUsers[connPrincipal(c)] {
		return 0, false
	}
	limit, _, ok := cs.Resolve(quota.ConsumerByteRate, quotaUser(connPrincipal(c)), clientID)
	if !ok {
		return 0, false
	}
	w := b.usage.fetch.Window.WithDefaults()
	v := limit * float64(w.Num-1) * w.Size.Seconds()
	return int32(min(v, 1<<31-1)), true
}

// mutationGate applies controller_mutation_rate (KIP-599) to CreateTopics,
// CreatePartitions and DeleteTopics: each partition created or deleted
// takes a token from the client's bucket. Strict versions (CreateTopics
// v6+, CreatePartitions v3+, DeleteTopics v5+) get
// THROTTLING_QUOTA_EXCEEDED for each topic met while the bucket is
// negative, the others are throttled only. The response's
// throttle_time_ms and the connection's mute are set by finish. Samsa
// applies the quota on the broker that receives the request, before it
// is forwarded (Kafka: on the active controller).
func (b *Broker) mutationGate(c *server.Conn, req *wire.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	body := req.Body
	cs := b.image().Quotas()
	if len(cs) == 0 || c == nil {
		return noGate(body)
	}
	if a := b.authorizer(); a.Enabled && a.SuperUsers[connPrincipal(c)] {
		return noGate(body)
	}
	client := ""
	if req.ClientID != nil {
		client = *req.ClientID
	}
	limit, name, ok := cs.Resolve(quota.ControllerMutationRate, quotaUser(connPrincipal(c)), client)
	if !ok {
		return noGate(body)
	}
	now := time.Now()
	tb := &b.usage.mutation.Get(name, now).Tokens
	strict := false
	charge := func(partitions int32) int16 {
		if strict && tb.Exceeded(limit, now) {
			return kerr.ThrottlingQuotaExceeded.Code
		}
		tb.Record(float64(max(partitions, 0)), limit, now)
		return 0
	}
	im := b.image()
	var out kmsg.Request
	var finish func(kmsg.Response) kmsg.Response
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		strict = r.Version >= 6
		out, finish = filterEntries(r, func(e entry) int16 {
			t := e.req.(kmsg.CreateTopicsRequestTopic)
			n := t.NumPartitions
			if len(t.ReplicaAssignment) > 0 {
				n = int32(len(t.ReplicaAssignment))
			} else if n == -1 {
				n = b.node.NumPartitions
			}
			return charge(n)
		}, 0)
	case *kmsg.CreatePartitionsRequest:
		strict = r.Version >= 3
		out, finish = filterEntries(r, func(e entry) int16 {
			n := e.req.(kmsg.CreatePartitionsRequestTopic).Count
			if mt := im.Topic(e.name); mt != nil {
				n -= int32(len(mt.Partitions))
			}
			return charge(n)
		}, 0)
	case *kmsg.DeleteTopicsRequest:
		strict = r.Version >= 5
		out, finish = filterDeleteTopics(b, r, func(name string) int16 {
			var n int32
			if mt := im.Topic(name); mt != nil {
				n = int32(len(mt.Partitions))
			}
			return charge(n)
		})
	default:
		return noGate(body)
	}
	// The throttle is due when the partitions are charged, as Kafka
	// computes it when recording.
	d := tb.Throttle(limit, now)
	return out, func(resp kmsg.Response) kmsg.Response {
		resp = finish(resp)
		if d > 0 {
			if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
				ms := int32(min(d.Milliseconds(), 1<<31-1))
				if cur, _ := tr.(kmsg.ThrottleResponse).Throttle(); ms > cur {
					tr.SetThrottle(ms)
				}
			}
			c.Throttle(d)
		}
		return resp
	}
}

// ConnectionThrottle records a new connection from ip against its
// connection_creation_rate (KIP-612: the ip entity, else the ip default)
// and returns how long to hold it before closing it; zero admits it. For
// server.Config.ConnectionRate. Safe for concurrent use.
func (b *Broker) ConnectionThrottle(ip string) time.Duration {
	cs := b.image().Quotas()
	if len(cs) == 0 {
		return 0
	}
	limit, ok := cs.ResolveIP(ip)
	if !ok {
		return 0
	}
	now := time.Now()
	r := &b.usage.connections.Get(ip, now).Rate
	r.Record(1, now)
	return r.Throttle(limit, now)
}
