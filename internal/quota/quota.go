// Package quota is the client quotas of Kafka's ClientQuotaManager: the
// quota configs of users and client ids (and their defaults) resolved in
// Kafka's order of precedence, and sampled rates measured as Kafka's Rate
// with quota.window.num (default 11) windows of quota.window.size.seconds
// (default 1 s).
//
// Quota keys (Kafka's QuotaConfig):
//   - producer_byte_rate: Produce request bytes per second;
//   - consumer_byte_rate: Fetch response bytes per second;
//   - request_percentage: request handling time, as a percentage of one
//     thread's time (100 = one full thread);
//   - controller_mutation_rate: topic partitions created or deleted per
//     second (KIP-599);
//   - connection_creation_rate: connections accepted per second from one IP
//     address (KIP-612; IP entities only).
//
// A client (user U, client id C) is bound by the first of these entities
// that has the quota, as Kafka resolves them: (user=U, client-id=C),
// (user=U, client-id=default), (user=U), (user=default, client-id=C),
// (user=default, client-id=default), (user=default), (client-id=C),
// (client-id=default). Its usage is measured in a bucket shared by the
// clients that resolve to the same entity with the same values of the
// entity's components: a quota of user=U is shared by all of U's client
// ids, a default quota is applied to each user (or client id) separately.
package quota

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entity types of DescribeClientQuotas and AlterClientQuotas (KIP-546).
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"
)

// Quota config keys.
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// Kafka's quota.window.num and quota.window.size.seconds defaults.
const (
	WindowNum  = 11
	WindowSize = time.Second
)

// Window is how a Rate samples: Num windows of Size each (Kafka's
// quota.window.num and quota.window.size.seconds, or for
// controller_mutation_rate controller.quota.window.num and
// controller.quota.window.size.seconds). A field zero or negative means
// its default, WindowNum and WindowSize.
type Window struct {
	Num  int
	Size time.Duration
}

// WithDefaults is w with its zero fields set to the defaults.
func (w Window) WithDefaults() Window {
	if w.Num <= 0 {
		w.Num = WindowNum
	}
	if w.Size <= 0 {
		w.Size = WindowSize
	}
	return w
}

// Component is one part of an entity: its type and name; Name nil is the
// type's default entity.
type Component struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// Entity is a quota entity: one component per type, sorted by type.
type Entity []Component

// Key is e's canonical form, a map key: `type="name"` (the name quoted as
// Go quotes strings, so that no name can forge a separator) or `type` for
// a default, joined by ','. Normalize e first.
func (e Entity) Key() string {
	parts := make([]string, len(e))
	for i, c := range e {
		if c.Name == nil {
			parts[i] = c.Type
		} else {
			parts[i] = named(c.Type, *c.Name)
		}
	}
	return strings.Join(parts, ",")
}

func named(typ, name string) string { return typ + "=" + strconv.Quote(name) }

// Normalize sorts e by type.
func (e Entity) Normalize() Entity {
	out := append(Entity(nil), e...)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// ErrInvalid reports an entity or a quota AlterClientQuotas refuses
// (INVALID_REQUEST).
var ErrInvalid = errors.New("invalid client quota")

// Validate checks e and one quota key and value of it as Kafka's
// ClientQuotaControlManager: user, client-id, both, or ip alone; each type
// once; the key valid for the entity; the value positive (and integral
// for the byte rates and connection rate).
func Validate(e Entity, key string, value *float64) error {
	seen := map[string]bool{}
	for _, c := range e {
		switch c.Type {
		case EntityUser, EntityClientID, EntityIP:
		default:
			return fmt.Errorf("%w: unknown entity type %q", ErrInvalid, c.Type)
		}
		if seen[c.Type] {
			return fmt.Errorf("%w: entity type %q given twice", ErrInvalid, c.Type)
		}
		seen[c.Type] = true
	}
	if len(e) == 0 {
		return fmt.Errorf("%w: empty entity", ErrInvalid)
	}
	ip := seen[EntityIP]
	if ip && len(e) > 1 {
		return fmt.Errorf("%w: an ip entity cannot be combined", ErrInvalid)
	}
	switch key {
	case ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate:
		if ip {
			return fmt.Errorf("%w: %s does not apply to ip entities", ErrInvalid, key)
		}
	case ConnectionCreationRate:
		if !ip {
			return fmt.Errorf("%w: %s applies to ip entities only", ErrInvalid, key)
		}
	default:
		return fmt.Errorf("%w: unknown quota %q", ErrInvalid, key)
	}
	if value != nil {
		v := *value
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrInvalid, key, v)
		}
		if key != RequestPercentage && key != ControllerMutationRate && v != math.Trunc(v) {
			return fmt.Errorf("%w: %s must be an integer, got %v", ErrInvalid, key, v)
		}
	}
	return nil
}

// Configs are the quotas of every entity by Entity.Key. Never modified
// once built: safe for concurrent use.
type Configs map[string]*EntityQuotas

// EntityQuotas are the quotas of one entity.
type EntityQuotas struct {
	Entity Entity
	Values map[string]float64
}

// precedence lists, for a user and client id, the entities in Kafka's
// order, each with the bucket that measures clients resolving to it.
func precedence(user, client string) [8]struct{ entity, bucket string } {
	u, c := named(EntityUser, user), named(EntityClientID, client)
	du, dc := EntityUser, EntityClientID
	return [8]struct{ entity, bucket string }{
		{c + "," + u, c + "," + u},
		{dc + "," + u, c + "," + u},
		{u, u},
		{c + "," + du, c + "," + u},
		{dc + "," + du, c + "," + u},
		{du, u},
		{c, c},
		{dc, c},
	}
}

// Resolve returns the quota key of (user, client) and the bucket that
// measures its usage; ok false when no entity sets it. user is the
// principal's name (User:alice → alice). Entity keys sort client-id
// before user, as Normalize does.
func (cs Configs) Resolve(key, user, client string) (limit float64, bucket string, ok bool) {
	if len(cs) == 0 {
		return 0, "", false
	}
	for _, p := range precedence(user, client) {
		if q := cs[p.entity]; q != nil {
			if v, ok := q.Values[key]; ok {
				return v, p.bucket, true
			}
		}
	}
	return 0, "", false
}

// ResolveIP returns the connection_creation_rate of an IP address: its
// own entity, else the ip default.
func (cs Configs) ResolveIP(ip string) (float64, bool) {
	for _, k := range []string{named(EntityIP, ip), EntityIP} {
		if q := cs[k]; q != nil {
			if v, ok := q.Values[ConnectionCreationRate]; ok {
				return v, true
			}
		}
	}
	return 0, false
}

// Rate is Kafka's sampled Rate: the sum of the values recorded in the last
// Window.Num windows of Window.Size, divided by the time they span (at
// least Num-1 windows). The zero value samples with Kafka's defaults;
// Buckets.Get returns rates with the Buckets' Window. Safe for concurrent
// use.
type Rate struct {
	mu      sync.Mutex
	w       Window   // set before the first Record
	samples []sample // w.Num, allocated by the first Record
	current int
}

type sample struct {
	start time.Time // zero: unused
	value float64
}

// Record adds v at now.
func (r *Rate) Record(v float64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.w = r.w.WithDefaults()
		r.samples = make([]sample, r.w.Num)
	}
	s := &r.samples[r.current]
	if s.start.IsZero() {
		s.start = now
	} else if now.Sub(s.start) >= r.w.Size {
		r.current = (r.current + 1) % r.w.Num
		s = &r.samples[r.current]
		*s = sample{start: now}
	}
	s.value += v
}

// Measure is the rate per second at now.
func (r *Rate) Measure(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.measureLocked(now)
}

func (r *Rate) measureLocked(now time.Time) float64 {
	total := 0.0
	var oldest time.Time
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() {
			continue
		}
		if now.Sub(s.start) >= time.Duration(r.w.Num)*r.w.Size {
			*s = sample{} // obsolete
			continue
		}
		total += s.value
		if oldest.IsZero() || s.start.Before(oldest) {
			oldest = s.start
		}
	}
	if total == 0 {
		return 0
	}
	return total / r.window(now, oldest).Seconds()
}

// window is Kafka's Rate.windowSize: the time since the oldest sample,
// padded to Num-1 full windows; at least a millisecond (with
// quota.window.num=1 Kafka's would be zero right after a sample).
func (r *Rate) window(now, oldest time.Time) time.Duration {
	w := r.w.WithDefaults()
	elapsed := time.Duration(0)
	if !oldest.IsZero() {
		elapsed = now.Sub(oldest)
	}
	full := elapsed / w.Size
	if min := time.Duration(w.Num - 1); full < min {
		elapsed += (min - full) * w.Size
	}
	return max(elapsed, time.Millisecond)
}

// Throttle is the time to wait for the rate to fall back to limit, as
// Kafka's QuotaUtils.throttleTime: (rate - limit) / limit × window; zero
// when within the limit.
func (r *Rate) Throttle(limit float64, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.measureLocked(now)
	if rate <= limit || limit <= 0 {
		return 0
	}
	var oldest time.Time
	for _, s := range r.samples {
		if !s.start.IsZero() && (oldest.IsZero() || s.start.Before(oldest)) {
			oldest = s.start
		}
	}
	return time.Duration((rate - limit) / limit * float64(r.window(now, oldest)))
}

// Buckets are the rates of the buckets of one quota type. Safe for
// concurrent use. Buckets unused for an hour are dropped by Sweep (Kafka
// expires its quota sensors after an hour too).
type Buckets struct {
	// Window is the sampling of the buckets' rates and the burst of their
	// token buckets; set it before the first Get.
	Window Window
	mu     sync.Mutex
	rates  map[string]*bucket
}

type bucket struct {
	Bucket
	used time.Time
}

// Bucket is the usage of one quota bucket: a Rate for the client quotas,
// a TokenBucket for controller_mutation_rate.
type Bucket struct {
	Rate
	Tokens TokenBucket
}

// Get returns bucket name.
func (bs *Buckets) Get(name string, now time.Time) *Bucket {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.rates == nil {
		bs.rates = map[string]*bucket{}
	}
	b := bs.rates[name]
	if b == nil {
		w := bs.Window.WithDefaults()
		b = &bucket{Bucket: Bucket{Rate: Rate{w: w}, Tokens: TokenBucket{w: w}}}
		bs.rates[name] = b
	}
	b.used = now
	return &b.Bucket
}

// Sweep drops the buckets unused since before.
func (bs *Buckets) Sweep(before time.Time) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for k, b := range bs.rates {
		if b.used.Before(before) {
			delete(bs.rates, k)
		}
	}
}

// TokenBucket is Kafka's TokenBucket of controller_mutation_rate
// (KIP-599): it holds up to limit × Window.Num × Window.Size tokens (full
// at first), refilled at limit per second; each partition created or
// deleted takes one, and the balance may go negative. The zero value uses
// Kafka's default window. Safe for concurrent use.
type TokenBucket struct {
	mu     sync.Mutex
	w      Window
	tokens float64
	last   time.Time // zero: full
}

func (tb *TokenBucket) refillLocked(limit float64, now time.Time) {
	w := tb.w.WithDefaults()
	burst := limit * float64(w.Num) * w.Size.Seconds()
	if tb.last.IsZero() {
		tb.tokens = burst
	} else if now.After(tb.last) {
		tb.tokens = min(burst, tb.tokens+limit*now.Sub(tb.last).Seconds())
	}
	tb.last = now
}

// Exceeded reports whether the balance is negative: a strict request
// (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) is then
// refused THROTTLING_QUOTA_EXCEEDED.
func (tb *TokenBucket) Exceeded(limit float64, now time.Time) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.refillLocked(limit, now)
	return tb.tokens < 0
}

// Record takes v tokens.
func (tb *TokenBucket) Record(v, limit float64, now time.Time) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.refillLocked(limit, now)
	tb.tokens -= v
}

// Throttle is the time until the balance is back to zero.
func (tb *TokenBucket) Throttle(limit float64, now time.Time) time.Duration {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.refillLocked(limit, now)
	if tb.tokens >= 0 || limit <= 0 {
		return 0
	}
	return time.Duration(-tb.tokens / limit * float64(time.Second))
}
