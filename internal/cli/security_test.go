package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/config"
)

// TestSecuredClusterWalkthrough follows docs/security.md: samsa certs,
// storage format --add-scram, a node whose only client listener is
// SASL_SSL with SCRAM-SHA-512, then samsa user, topic, produce and consume
// with --command-config; a wrong password fails with
// SASL_AUTHENTICATION_FAILED and a plaintext client gets nothing.
func TestSecuredClusterWalkthrough(t *testing.T) {
	dir := t.TempDir()
	certs, data := filepath.Join(dir, "certs"), filepath.Join(dir, "data")
	mustRun(t, nil, "certs", "--dir", certs, "--client", "alice")
	for _, f := range []string{"ca.pem", "ca-key.pem", "server.pem", "client-alice.pem"} {
		if _, err := os.Stat(filepath.Join(certs, f)); err != nil {
			t.Fatal(err)
		}
	}
	propsFile := filepath.Join(dir, "server.properties")
	conf := strings.Join([]string{
		"log.dirs=" + data,
		"listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + filepath.Join(certs, "server.pem"),
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + filepath.Join(certs, "ca.pem"),
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
	}, "\n") + "\n"
	if err := os.WriteFile(propsFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, "storage", "format", "-t", "q1Yk5XNDRmuJxeHKBQdUOw", "-c", propsFile, "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]")
	f, err := os.Open(propsFile)
	if err != nil {
		t.Fatal(err)
	}
	props, err := config.ReadProperties(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	addr := n.ListenerAddr("SASL_SSL")

	clientProps := func(name, user, pass string) string {
		p := filepath.Join(dir, name)
		c := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=" + user + "\nsasl.password=" + pass + "\nssl.truststore.location=" + filepath.Join(certs, "ca.pem") + "\n"
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin := clientProps("admin.properties", "admin", "admin-secret")
	if r := mustRun(t, nil, "user", "create", "bob", "--password", "bob-old", "--mechanism", "SCRAM-SHA-512", "-b", addr, "--command-config", admin); r.stdout != "user bob created\n" {
		t.Fatalf("user create: %q", r.stdout)
	}
	if r := mustRun(t, nil, "user", "alter", "bob", "--password", "bob-secret", "--mechanism", "SCRAM-SHA-512", "-b", addr, "--command-config", admin); r.stdout != "user bob altered\n" {
		t.Fatalf("user alter: %q", r.stdout)
	}
	r := mustRun(t, nil, "user", "list", "-b", addr, "--command-config", admin)
	for _, want := range []string{"admin  SCRAM-SHA-512  4096", "bob    SCRAM-SHA-512  4096"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("user list:\n%s\nwant a line %q", r.stdout, want)
		}
	}
	bob := clientProps("bob.properties", "bob", "bob-secret")
	mustRun(t, nil, "topic", "create", "secured", "-b", addr, "--command-config", bob)
	mustRun(t, strings.NewReader("hello\n"), "produce", "secured", "-b", addr, "--command-config", bob)
	r = mustRun(t, nil, "consume", "secured", "--from-beginning", "--max-messages", "1", "-b", addr, "--command-config", bob)
	if !strings.Contains(r.stdout, "hello") {
		t.Fatalf("consumed %q", r.stdout)
	}

	wrong := clientProps("wrong.properties", "bob", "nope")
	if r := run(t, nil, "topic", "list", "-b", addr, "--command-config", wrong, "--timeout", "10s"); r.err == nil || !strings.Contains(r.err.Error()+r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("wrong password: %v\n%s", r.err, r.stderr)
	}
	mustRun(t, nil, "user", "delete", "bob", "-b", addr, "--command-config", admin)
	if r := run(t, nil, "topic", "list", "-b", addr, "--command-config", bob, "--timeout", "10s"); r.err == nil || !strings.Contains(r.err.Error()+r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("deleted user: %v\n%s", r.err, r.stderr)
	}
	if r := run(t, nil, "topic", "list", "-b", addr, "--timeout", "5s"); r.err == nil {
		t.Fatalf("a plaintext client listed topics on a SASL_SSL listener:\n%s", r.stdout)
	}
}
