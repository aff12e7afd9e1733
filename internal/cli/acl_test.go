package cli

import (
	"regexp"
	"strings"
	"testing"
)

func TestACLAddListRemove(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	r := mustRun(t, nil, "acl", "add", b, "--allow-principal", "User:alice", "--producer", "--topic", "orders", "--transactional-id", "tx", "--idempotent")
	if n := strings.Count(r.stdout, "Added"); n != 6 {
		t.Fatalf("--producer added %d bindings, want 6 (3 topic, 2 transactional id, 1 cluster):\n%s", n, r.stdout)
	}
	mustRun(t, nil, "acl", "add", b, "--allow-principal", "User:bob", "--consumer", "--topic", "ord", "--resource-pattern-type", "prefixed", "--group", "g")
	mustRun(t, nil, "acl", "add", b, "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--operation", "Read", "--topic", "orders")

	r = mustRun(t, nil, "acl", "list", b, "--topic", "orders", "--resource-pattern-type", "match")
	for _, re := range []string{
		`(?m)^TOPIC\s+orders\s+LITERAL\s+User:alice\s+\*\s+WRITE\s+ALLOW$`,
		`(?m)^TOPIC\s+ord\s+PREFIXED\s+User:bob\s+\*\s+READ\s+ALLOW$`,
		`(?m)^TOPIC\s+orders\s+LITERAL\s+User:bob\s+10\.0\.0\.1\s+READ\s+DENY$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("list --resource-pattern-type match: no line %s:\n%s", re, r.stdout)
		}
	}
	r = mustRun(t, nil, "acl", "list", b, "--principal", "User:bob")
	if strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, "GROUP") {
		t.Errorf("list --principal User:bob:\n%s", r.stdout)
	}
	r = mustRun(t, nil, "acl", "remove", b, "--topic", "orders", "--allow-principal", "User:alice")
	if n := strings.Count(r.stdout, "Removed"); n != 3 {
		t.Errorf("remove removed %d bindings, want alice's 3 on orders:\n%s", n, r.stdout)
	}
	r = mustRun(t, nil, "acl", "list", b, "--topic", "orders")
	if strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, "DENY") {
		t.Errorf("after remove:\n%s", r.stdout)
	}
	if r := run(t, nil, "acl", "add", b, "--allow-principal", "alice", "--operation", "Read", "--topic", "x"); r.err == nil || !strings.Contains(r.err.Error(), "INVALID_REQUEST") {
		t.Errorf("a principal without a type: %v", r.err)
	}
	if r := run(t, nil, "acl", "add", b, "--allow-principal", "User:a", "--operation", "Fly", "--topic", "x"); r.err == nil {
		t.Error("unknown operation accepted")
	}
}
