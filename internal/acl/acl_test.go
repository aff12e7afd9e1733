package acl

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	denyP    = kmsg.ACLPermissionTypeDeny
	alice    = "User:alice"
	bob      = "User:bob"
)

func bind(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: pat, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// TestAuthorize follows StandardAuthorizerData's rules one by one.
func TestAuthorize(t *testing.T) {
	read, write, describe := kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe
	tests := []struct {
		name     string
		acls     []Binding
		super    string
		allowNo  bool
		who      string
		host     string
		op       kmsg.ACLOperation
		typ      kmsg.ACLResourceType
		resource string
		want     bool
	}{
		{"no acl denies", nil, "", false, alice, "10.0.0.1", read, topic, "t", false},
		{"no acl, allow.everyone.if.no.acl.found", nil, "", true, alice, "10.0.0.1", read, topic, "t", true},
		{"acl of another principal: not 'no acl found'", []Binding{bind(topic, "t", literal, bob, "*", read, allow)}, "", true, alice, "h", read, topic, "t", false},
		{"acl on another resource: no acl found", []Binding{bind(topic, "u", literal, bob, "*", read, allow)}, "", true, alice, "h", read, topic, "t", true},
		{"literal allow", []Binding{bind(topic, "t", literal, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "t", true},
		{"literal is not a prefix", []Binding{bind(topic, "t", literal, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "tt", false},
		{"other operation", []Binding{bind(topic, "t", literal, alice, "*", read, allow)}, "", false, alice, "h", write, topic, "t", false},
		{"other resource type", []Binding{bind(group, "t", literal, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "t", false},
		{"wildcard resource", []Binding{bind(topic, "*", literal, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "anything", true},
		{"wildcard principal", []Binding{bind(topic, "t", literal, "User:*", "*", read, allow)}, "", false, alice, "h", read, topic, "t", true},
		{"host matches", []Binding{bind(topic, "t", literal, alice, "10.0.0.1", read, allow)}, "", false, alice, "10.0.0.1", read, topic, "t", true},
		{"host differs", []Binding{bind(topic, "t", literal, alice, "10.0.0.1", read, allow)}, "", false, alice, "10.0.0.2", read, topic, "t", false},
		{"prefix matches", []Binding{bind(topic, "fo", prefixed, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "foo", true},
		{"prefix equal to name", []Binding{bind(topic, "foo", prefixed, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "foo", true},
		{"prefix does not match", []Binding{bind(topic, "fx", prefixed, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "foo", false},
		{"prefix longer than name", []Binding{bind(topic, "foox", prefixed, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "foo", false},
		{"prefixed * is a literal star", []Binding{bind(topic, "*", prefixed, alice, "*", read, allow)}, "", false, alice, "h", read, topic, "foo", false},
		{"deny beats allow", []Binding{bind(topic, "t", literal, alice, "*", read, allow), bind(topic, "t", literal, alice, "*", read, denyP)}, "", false, alice, "h", read, topic, "t", false},
		{"prefixed deny beats literal allow", []Binding{bind(topic, "t", literal, alice, "*", read, allow), bind(topic, "", prefixed, alice, "*", read, denyP)}, "", false, alice, "h", read, topic, "t", false},
		{"wildcard deny beats allow", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationAll, allow), bind(topic, "*", literal, "User:*", "*", write, denyP)}, "", false, alice, "h", write, topic, "t", false},
		{"deny of another op", []Binding{bind(topic, "t", literal, alice, "*", read, allow), bind(topic, "t", literal, alice, "*", write, denyP)}, "", false, alice, "h", read, topic, "t", true},
		{"deny ALL", []Binding{bind(topic, "t", literal, alice, "*", read, allow), bind(topic, "t", literal, alice, "*", kmsg.ACLOperationAll, denyP)}, "", false, alice, "h", read, topic, "t", false},
		{"allow ALL", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationAll, allow)}, "", false, alice, "h", kmsg.ACLOperationAlterConfigs, topic, "t", true},
		{"READ implies DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", read, allow)}, "", false, alice, "h", describe, topic, "t", true},
		{"WRITE implies DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", write, allow)}, "", false, alice, "h", describe, topic, "t", true},
		{"DELETE implies DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationDelete, allow)}, "", false, alice, "h", describe, topic, "t", true},
		{"ALTER implies DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationAlter, allow)}, "", false, alice, "h", describe, topic, "t", true},
		{"CREATE does not imply DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationCreate, allow)}, "", false, alice, "h", describe, topic, "t", false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationAlterConfigs, allow)}, "", false, alice, "h", kmsg.ACLOperationDescribeConfigs, topic, "t", true},
		{"DESCRIBE implies nothing", []Binding{bind(topic, "t", literal, alice, "*", describe, allow)}, "", false, alice, "h", read, topic, "t", false},
		{"DENY READ does not deny DESCRIBE", []Binding{bind(topic, "t", literal, alice, "*", describe, allow), bind(topic, "t", literal, alice, "*", read, denyP)}, "", false, alice, "h", describe, topic, "t", true},
		{"super user ignores deny", []Binding{bind(topic, "t", literal, alice, "*", read, denyP)}, alice, false, alice, "h", read, topic, "t", true},
		{"super user is exact", nil, "User:ali", false, alice, "h", read, topic, "t", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Authorizer{Enabled: true, SuperUsers: ParseSuperUsers(tc.super), AllowIfNoACL: tc.allowNo, Index: NewIndex(tc.acls)}
			if got := a.Authorize(tc.who, tc.host, tc.op, tc.typ, tc.resource); got != tc.want {
				t.Errorf("Authorize(%s, %s, %v, %v, %q) = %v, want %v", tc.who, tc.host, tc.op, tc.typ, tc.resource, got, tc.want)
			}
		})
	}
}

func TestDisabledAllows(t *testing.T) {
	var nilA *Authorizer
	a := &Authorizer{Index: NewIndex([]Binding{bind(topic, "t", literal, alice, "*", kmsg.ACLOperationRead, denyP)})}
	if !nilA.Authorize(alice, "h", kmsg.ACLOperationRead, topic, "t") || !a.Authorize(alice, "h", kmsg.ACLOperationRead, topic, "t") {
		t.Fatal("an authorizer that is not enabled denied")
	}
}

func TestAuthorizeAny(t *testing.T) {
	w := kmsg.ACLOperationWrite
	tests := []struct {
		name string
		acls []Binding
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []Binding{bind(topic, "t", literal, alice, "*", w, allow)}, true},
		{"prefixed allow", []Binding{bind(topic, "t", prefixed, alice, "*", w, allow)}, true},
		{"allow denied by same literal", []Binding{bind(topic, "t", literal, alice, "*", w, allow), bind(topic, "t", literal, alice, "*", w, denyP)}, false},
		{"allow denied by wider prefix", []Binding{bind(topic, "tt", prefixed, alice, "*", w, allow), bind(topic, "t", prefixed, alice, "*", w, denyP)}, false},
		{"allow denied by wildcard", []Binding{bind(topic, "t", literal, alice, "*", w, allow), bind(topic, "*", literal, alice, "*", w, denyP)}, false},
		{"deny elsewhere", []Binding{bind(topic, "t", literal, alice, "*", w, allow), bind(topic, "u", literal, alice, "*", w, denyP)}, true},
		{"allow for bob", []Binding{bind(topic, "t", literal, bob, "*", w, allow)}, false},
		{"group allow", []Binding{bind(group, "t", literal, alice, "*", w, allow)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Authorizer{Enabled: true, Index: NewIndex(tc.acls)}
			if got := a.AuthorizeAny(alice, "h", w, topic); got != tc.want {
				t.Errorf("AuthorizeAny = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	s := func(v string) *string { return &v }
	b := bind(topic, "foo", prefixed, alice, "*", kmsg.ACLOperationRead, allow)
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	tests := []struct {
		name string
		mod  func(*Filter)
		want bool
	}{
		{"any", func(*Filter) {}, true},
		{"any with name", func(f *Filter) { f.ResourceName = s("foo") }, true},
		{"any with other name", func(f *Filter) { f.ResourceName = s("foobar") }, false},
		{"match covers", func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch; f.ResourceName = s("foobar") }, true},
		{"match does not cover", func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch; f.ResourceName = s("fo") }, false},
		{"literal type", func(f *Filter) { f.PatternType = literal }, false},
		{"prefixed type", func(f *Filter) { f.PatternType = prefixed; f.ResourceName = s("foo") }, true},
		{"principal", func(f *Filter) { f.Principal = s(bob) }, false},
		{"operation", func(f *Filter) { f.Operation = kmsg.ACLOperationWrite }, false},
		{"permission", func(f *Filter) { f.Permission = denyP }, false},
		{"resource type", func(f *Filter) { f.ResourceType = group }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := any
			tc.mod(&f)
			if got := f.Matches(b); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := bind(topic, "t", literal, alice, "*", kmsg.ACLOperationRead, allow)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Binding){
		func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny },
		func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch },
		func(b *Binding) { b.Operation = kmsg.ACLOperationAny },
		func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.Host = "" },
		func(b *Binding) { b.ResourceType, b.ResourceName = kmsg.ACLResourceTypeCluster, "c" },
	}
	for i, m := range bad {
		b := ok
		m(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, b)
		}
	}
}

// BenchmarkAuthorize: one decision among 100,000 bindings (1,000 prefixes
// of 10 lengths plus literal bindings) costs a few map lookups.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := range 99000 {
		bs = append(bs, bind(topic, fmt.Sprintf("topic-%d", i), literal, fmt.Sprintf("User:u%d", i%100), "*", kmsg.ACLOperationRead, allow))
	}
	for i := range 1000 {
		bs = append(bs, bind(topic, fmt.Sprintf("p%d-%s", i, "xxxxxxxxxx"[:i%10]), prefixed, alice, "*", kmsg.ACLOperationWrite, allow))
	}
	a := &Authorizer{Enabled: true, Index: NewIndex(bs)}
	b.ResetTimer()
	for i := range b.N {
		a.Authorize("User:u7", "h", kmsg.ACLOperationRead, topic, fmt.Sprintf("topic-%d", i%99000))
	}
}
