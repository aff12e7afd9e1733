package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/console"
)

// TestLogin: on a SASL listener the console asks for SCRAM credentials,
// refuses wrong ones, and then acts as that principal: alice, allowed to
// describe one topic, sees only it.
func TestLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), Properties: map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"authorizer.class.name":          config.StandardAuthorizerClass,
		"super.users":                    "User:ANONYMOUS",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("PLAINTEXT")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"visible", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("visible").Operations(kadm.OpDescribe, kadm.OpRead).Allow("User:alice").AllowHosts("*")); err != nil {
		t.Fatal(err)
	}

	c, err := console.New(console.Config{Addr: n.ListenerAddr("SASL_PLAINTEXT"), SASL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(c)
	defer srv.Close()
	a := newAPIClient(t, srv.URL)

	if code := a.get("/api/topics", nil); code != http.StatusUnauthorized {
		t.Fatalf("topics before login: %d, want 401", code)
	}
	a.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := a.hc.Get(srv.URL + "/topics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("page before login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	login := func(pass string) int {
		resp, err := a.hc.PostForm(srv.URL+"/login", url.Values{"csrf": {a.csrf}, "user": {"alice"}, "password": {pass}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := login("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", code)
	}
	if code := login("alice-secret"); code != http.StatusSeeOther {
		t.Fatalf("login: %d, want 303", code)
	}
	var tl struct{ Items []struct{ Name string } }
	if code := a.get("/api/topics", &tl); code != 200 || len(tl.Items) != 1 || tl.Items[0].Name != "visible" {
		t.Fatalf("alice's topics: %d %+v", code, tl)
	}
	// alice may not create topics: the broker's answer comes back.
	if code, body := a.post("/api/do/create-topic", url.Values{"topic": {"mine"}}, true, nil); code == 200 || !strings.Contains(body, "AUTHORIZATION") {
		t.Fatalf("alice creates a topic: %d %s", code, body)
	}
	// Logged out, the session is gone.
	resp, err = a.hc.PostForm(srv.URL+"/logout", url.Values{"csrf": {a.csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := a.get("/api/topics", nil); code != http.StatusUnauthorized {
		t.Fatalf("topics after logout: %d, want 401", code)
	}
}
