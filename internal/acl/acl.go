// Package acl is the authorizer: Kafka's StandardAuthorizer semantics
// (KIP-801) over the ACL bindings of the metadata image.
//
// A binding allows or denies one principal, from one host, one operation
// on the resources one pattern names. Authorize decides a request:
//
//   - a principal in super.users is allowed everything;
//   - the bindings that apply are those whose pattern matches the resource
//     (LITERAL: the exact name, or "*" for every name; PREFIXED: names that
//     start with it), whose principal is the request's or "User:*", whose
//     host is the client's IP address or "*", and whose operation is the
//     requested one or ALL; an ALLOW binding for READ, WRITE, DELETE or
//     ALTER also allows DESCRIBE, and for ALTER_CONFIGS also
//     DESCRIBE_CONFIGS (DENY bindings imply nothing);
//   - any applying DENY denies; otherwise any applying ALLOW allows;
//   - otherwise, when no binding at all names the resource (whatever its
//     principal, host or operation), allow.everyone.if.no.acl.found
//     decides; else the request is denied.
//
// Index keeps the bindings by resource so that one decision costs a map
// lookup for the literal name and "*", plus one per distinct length of the
// PREFIXED patterns of that resource type: never a scan of every binding.
package acl

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wildcard is the resource name and host that match any ("*"), and
// WildcardPrincipal the principal that matches any user.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

// ClusterName is the name of the one CLUSTER resource ("kafka-cluster").
const ClusterName = "kafka-cluster"

// Binding is one ACL (Kafka's AclBinding; stored as an
// AccessControlEntryRecord). The enums take kmsg's values, which are
// Kafka's wire codes.
type Binding struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// ErrInvalid reports a binding CreateAcls refuses (INVALID_REQUEST).
var ErrInvalid = errors.New("invalid ACL binding")

// Validate checks b as Kafka's CreateAcls does: a concrete resource type,
// pattern type, operation and permission; a non-empty resource name
// ("kafka-cluster" for CLUSTER); a principal of the form Type:name.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	default:
		return fmt.Errorf("%w: resource type %v", ErrInvalid, b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return fmt.Errorf("%w: pattern type %v", ErrInvalid, b.PatternType)
	}
	if b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %v", ErrInvalid, b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %v", ErrInvalid, b.Permission)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName {
		return fmt.Errorf("%w: the cluster resource is named %s", ErrInvalid, ClusterName)
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 {
		return fmt.Errorf("%w: principal %q is not of the form Type:name", ErrInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host", ErrInvalid)
	}
	return nil
}

// Filter selects bindings for DescribeAcls and DeleteAcls (Kafka's
// AclBindingFilter): nil strings and the ANY enums match everything;
// PatternType MATCH selects the bindings that would apply to the named
// resource (its LITERAL binding, the LITERAL "*" one and the PREFIXED ones
// it starts with).
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternMatches(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType {
			return false
		}
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != kmsg.ACLPermissionTypeAny && f.Permission != b.Permission {
		return false
	}
	return true
}

// patternMatches reports whether b's pattern names resource name.
func patternMatches(b Binding, name string) bool {
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// Validate checks a filter as Kafka's DescribeAcls and DeleteAcls
// do: no UNKNOWN enum.
func (f Filter) Validate() error {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown ||
		f.Operation == kmsg.ACLOperationUnknown || f.Permission == kmsg.ACLPermissionTypeUnknown {
		return fmt.Errorf("%w: filter has an UNKNOWN field", ErrInvalid)
	}
	return nil
}

// resourceKey names one literal resource.
type resourceKey struct {
	typ  kmsg.ACLResourceType
	name string
}

// prefixes are the PREFIXED bindings of one resource type.
type prefixes struct {
	byName  map[string][]Binding
	lengths []int // distinct lengths of the keys of byName, ascending
}

// Index holds bindings by resource for Authorize. Built once per set of
// bindings and never modified: safe for concurrent use.
type Index struct {
	literal  map[resourceKey][]Binding
	prefixed map[kmsg.ACLResourceType]*prefixes
	count    int
}

// NewIndex indexes bs: O(n) time and memory.
func NewIndex(bs []Binding) *Index {
	ix := &Index{literal: map[resourceKey][]Binding{}, prefixed: map[kmsg.ACLResourceType]*prefixes{}, count: len(bs)}
	for _, b := range bs {
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			p := ix.prefixed[b.ResourceType]
			if p == nil {
				p = &prefixes{byName: map[string][]Binding{}}
				ix.prefixed[b.ResourceType] = p
			}
			p.byName[b.ResourceName] = append(p.byName[b.ResourceName], b)
			continue
		}
		k := resourceKey{b.ResourceType, b.ResourceName}
		ix.literal[k] = append(ix.literal[k], b)
	}
	for _, p := range ix.prefixed {
		seen := map[int]bool{}
		for name := range maps.Keys(p.byName) {
			if !seen[len(name)] {
				seen[len(name)] = true
				p.lengths = append(p.lengths, len(name))
			}
		}
		slices.Sort(p.lengths)
	}
	return ix
}

// Len is the number of bindings indexed.
func (ix *Index) Len() int {
	if ix == nil {
		return 0
	}
	return ix.count
}

// decision accumulates the bindings that apply to one request.
type decision struct {
	deny, allow, found bool
}

// check folds the bindings bs of a matching resource pattern into d.
func (d *decision) check(bs []Binding, principal, host string, op kmsg.ACLOperation) {
	for _, b := range bs {
		d.found = true
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			continue
		}
		if b.Host != Wildcard && b.Host != host {
			continue
		}
		if !opApplies(b, op) {
			continue
		}
		if b.Permission == kmsg.ACLPermissionTypeDeny {
			d.deny = true
		} else {
			d.allow = true
		}
	}
}

// opApplies reports whether binding b covers operation op, with the
// implications Kafka gives ALLOW bindings.
func opApplies(b Binding, op kmsg.ACLOperation) bool {
	if b.Operation == kmsg.ACLOperationAll || b.Operation == op {
		return true
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow {
		return false
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch b.Operation {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return b.Operation == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// decide folds every binding that names resource (typ, name).
func (ix *Index) decide(principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) decision {
	var d decision
	if ix == nil {
		return d
	}
	d.check(ix.literal[resourceKey{typ, name}], principal, host, op)
	if name != Wildcard {
		d.check(ix.literal[resourceKey{typ, Wildcard}], principal, host, op)
	}
	if p := ix.prefixed[typ]; p != nil {
		for _, n := range p.lengths {
			if n > len(name) {
				break
			}
			d.check(p.byName[name[:n]], principal, host, op)
		}
	}
	return d
}

// Authorizer decides requests: the Index of the current bindings plus the
// static configs. The zero value and nil allow everything (no
// authorizer.class.name). Safe for concurrent use once built.
type Authorizer struct {
	// Enabled is whether authorizer.class.name is set.
	Enabled bool
	// SuperUsers is super.users, principals allowed everything.
	SuperUsers map[string]bool
	// AllowIfNoACL is allow.everyone.if.no.acl.found (default false).
	AllowIfNoACL bool
	// Index is the bindings; nil holds none.
	Index *Index
}

// Authorize reports whether principal, connected from host (an IP address
// without port), may perform op on resource (typ, name). Costs one map
// lookup per LITERAL key plus one per distinct PREFIXED length.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if a == nil || !a.Enabled || a.SuperUsers[principal] {
		return true
	}
	d := a.Index.decide(principal, host, op, typ, name)
	switch {
	case d.deny:
		return false
	case d.allow:
		return true
	case !d.found:
		return a.AllowIfNoACL
	}
	return false
}

// AuthorizeAny reports whether principal may perform op on some resource
// of type typ (Kafka's authorizeByResourceType, KIP-679: InitProducerId
// of an idempotent producer with WRITE on any topic). It holds when an
// ALLOW binding of that type applies to principal, host and op and no
// DENY binding of the same principal set and op covers every resource
// (LITERAL "*") or its pattern (a PREFIXED DENY that is a prefix of it, a
// LITERAL DENY of the same name); with no binding of the type at all,
// allow.everyone.if.no.acl.found decides. Costs a scan of the bindings of
// typ: Kafka's own check is a scan too, and only InitProducerId uses it.
func (a *Authorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool {
	if a == nil || !a.Enabled || a.SuperUsers[principal] {
		return true
	}
	ix := a.Index
	if ix == nil {
		return a.AllowIfNoACL
	}
	var all []Binding
	for k, bs := range ix.literal {
		if k.typ == typ {
			all = append(all, bs...)
		}
	}
	if p := ix.prefixed[typ]; p != nil {
		for _, bs := range p.byName {
			all = append(all, bs...)
		}
	}
	if len(all) == 0 {
		return a.AllowIfNoACL
	}
	applies := func(b Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
			(b.Host == Wildcard || b.Host == host) && opApplies(b, op)
	}
	for _, allow := range all {
		if allow.Permission != kmsg.ACLPermissionTypeAllow || !applies(allow) {
			continue
		}
		denied := false
		for _, deny := range all {
			if deny.Permission != kmsg.ACLPermissionTypeDeny || !applies(deny) {
				continue
			}
			if deny.PatternType == kmsg.ACLResourcePatternTypeLiteral && deny.ResourceName == Wildcard ||
				deny.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(allow.ResourceName, deny.ResourceName) ||
				deny.PatternType == allow.PatternType && deny.ResourceName == allow.ResourceName {
				denied = true
				break
			}
		}
		if !denied {
			return true
		}
	}
	return false
}

// ParseSuperUsers parses super.users: principals separated by ';'
// ("User:admin;User:broker"), blanks trimmed.
func ParseSuperUsers(s string) map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			m[p] = true
		}
	}
	return m
}
