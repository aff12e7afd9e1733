package console_test

import (
	"context"
	"crypto/x509/pkix"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/config"
)

// startTLSNode starts a node whose first broker listener is proto (SSL or
// SASL_SSL, with certificates of a CA made here for hosts), then a
// PLAINTEXT one (a super user, to set up), and its console on
// http.listener; props are added. It returns the node and a client of its
// PLAINTEXT listener.
func startTLSNode(t *testing.T, proto string, hosts []string, props map[string]string) (*samsa.Node, *kadm.Client) {
	t.Helper()
	dir := t.TempDir()
	ca, err := auth.NewDevCA("console test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ca.Issue(pkix.Name{CommonName: "node-1"}, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, ksFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ksFile, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	p := map[string]string{
		"listeners":                      proto + "://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": proto + ":" + proto + ",PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":     "PLAINTEXT",
		"http.listener":                  "127.0.0.1:0",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          ksFile,
		"ssl.truststore.type":            "PEM",
		"ssl.truststore.location":        caFile,
	}
	for k, v := range props {
		p[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: filepath.Join(dir, "data"), Properties: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("PLAINTEXT")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("k"), Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return n, adm
}

type browsed struct {
	Messages []struct {
		Offset int64
		Value  *string
	}
}

// TestConsoleSASLSSL: on a node whose first broker listener is SASL_SSL,
// the console dials it with TLS (the node's truststore), a SCRAM user logs
// in and browses a topic through /api/.
func TestConsoleSASLSSL(t *testing.T) {
	n, adm := startTLSNode(t, "SASL_SSL", []string{"localhost", "127.0.0.1"}, map[string]string{
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"authorizer.class.name":   config.StandardAuthorizerClass,
		"super.users":             "User:ANONYMOUS",
	})
	ctx := context.Background()
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Operations(kadm.OpDescribe, kadm.OpRead).Allow("User:alice").AllowHosts("*")); err != nil {
		t.Fatal(err)
	}
	a := newAPIClient(t, "http://"+n.HTTPAddr())
	if code := a.get("/api/topics", nil); code != http.StatusUnauthorized {
		t.Fatalf("topics before login: %d, want 401", code)
	}
	if code, body := a.post("/login", url.Values{"csrf": {a.csrf}, "user": {"alice"}, "password": {"alice-secret"}}, false, nil); code != http.StatusOK && code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", code, body)
	}
	var sess struct{ CSRF, User string }
	if code := a.get("/api/session", &sess); code != 200 || sess.User != "alice" {
		t.Fatalf("session after login: %d %+v", code, sess)
	}
	var b browsed
	if code := a.get("/api/topics/orders/messages?partition=0&mode=beginning&limit=10", &b); code != 200 || len(b.Messages) != 1 || b.Messages[0].Value == nil || *b.Messages[0].Value != "over tls" {
		t.Fatalf("browse: %d %+v", code, b)
	}
}

// TestConsoleSSL: on a node whose first broker listener is SSL, without
// and with ssl.client.auth=required (where the console presents the
// node's own keystore certificate), the console browses a topic; a broker
// certificate without the advertised name (127.0.0.1) is refused.
func TestConsoleSSL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		props map[string]string
		works bool
	}{
		{"no client auth", []string{"127.0.0.1"}, nil, true},
		{"client auth required", []string{"127.0.0.1"}, map[string]string{"listener.name.ssl.ssl.client.auth": "required"}, true},
		{"certificate of another name", []string{"other.example"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _ := startTLSNode(t, "SSL", tc.hosts, tc.props)
			a := newAPIClient(t, "http://"+n.HTTPAddr())
			var b browsed
			code := a.get("/api/topics/orders/messages?partition=0&mode=beginning&limit=10", &b)
			works := code == 200 && len(b.Messages) == 1 && b.Messages[0].Value != nil && *b.Messages[0].Value == "over tls"
			if works != tc.works {
				t.Fatalf("browse: %d %+v, want working %v", code, b, tc.works)
			}
		})
	}
}
