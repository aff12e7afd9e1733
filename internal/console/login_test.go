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
	n := startSecured(t, ctx)
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

	testLogin(t, startConsole(t, console.Config{Addr: n.ListenerAddr("SASL_PLAINTEXT"), SASL: true}))
}

// startSecured starts a node with an ACL authorizer, a PLAINTEXT listener
// whose ANONYMOUS principal is a super user, and a SASL_PLAINTEXT one with
// SCRAM-SHA-512.
func startSecured(t *testing.T, ctx context.Context) *samsa.Node {
	t.Helper()
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
	t.Cleanup(func() { n.Close() })
	return n
}

func testLogin(t *testing.T, a *apiClient) {
	t.Helper()
	base := a.base
	if code := a.get("/api/topics", nil); code != http.StatusUnauthorized {
		t.Fatalf("topics before login: %d, want 401", code)
	}
	a.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := a.hc.Get(base + "/topics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("page before login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	login := func(pass string) int {
		resp, err := a.hc.PostForm(base+"/login", url.Values{"csrf": {a.csrf}, "user": {"alice"}, "password": {pass}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := login("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", code)
	}
	u, _ := url.Parse(base)
	sessionID := func() string {
		for _, ck := range a.hc.Jar.Cookies(u) {
			if ck.Name == "samsa_console" {
				return ck.Value
			}
		}
		return ""
	}
	before := sessionID()
	if code := login("alice-secret"); code != http.StatusSeeOther {
		t.Fatalf("login: %d, want 303", code)
	}
	// The login gives a new session id and CSRF token: the id the browser
	// had before (which someone else may have planted: session fixation)
	// is not logged in.
	if after := sessionID(); after == "" || after == before {
		t.Fatalf("session id %q before the login, %q after: want a new one", before, after)
	}
	req, _ := http.NewRequest("GET", base+"/api/topics", nil)
	req.AddCookie(&http.Cookie{Name: "samsa_console", Value: before})
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the session id of before the login: %d, want 401", resp.StatusCode)
	}
	oldCSRF := a.csrf
	var sess struct{ CSRF, User string }
	if code := a.get("/api/session", &sess); code != 200 || sess.User != "alice" || sess.CSRF == "" || sess.CSRF == oldCSRF {
		t.Fatalf("session after login: %d %+v (CSRF before %q)", code, sess, oldCSRF)
	}
	a.csrf = sess.CSRF
	var tl struct{ Items []struct{ Name string } }
	if code := a.get("/api/topics", &tl); code != 200 || len(tl.Items) != 1 || tl.Items[0].Name != "visible" {
		t.Fatalf("alice's topics: %d %+v", code, tl)
	}
	// Requests without a cookie (anyone's) create sessions, more than the
	// console keeps, without logging alice out.
	for range 1100 {
		if resp, err := http.Get(base + "/api/session"); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
	}
	if code := a.get("/api/topics", nil); code != 200 {
		t.Fatalf("alice after 1,100 other sessions: %d, want 200", code)
	}
	// What the broker denies alice is a 403.
	for path, want := range map[string]int{"/api/topics/secret/messages?partition=0": 403, "/api/topics/secret/messages?search=1&value=x": 403,
		"/api/topics/visible/messages?partition=0": 200, "/api/topics/nosuch": 403} { // not 404: an unknown topic looks like a denied one, as Kafka answers
		if code := a.get(path, nil); code != want {
			t.Errorf("GET %s as alice: %d, want %d", path, code, want)
		}
	}
	// alice may not create topics: the broker's answer comes back.
	if code, body := a.post("/api/do/create-topic", url.Values{"topic": {"mine"}}, true, nil); code == 200 || !strings.Contains(body, "AUTHORIZATION") {
		t.Fatalf("alice creates a topic: %d %s", code, body)
	}
	// Logged out, the session is gone.
	resp, err = a.hc.PostForm(base+"/logout", url.Values{"csrf": {a.csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := a.get("/api/topics", nil); code != http.StatusUnauthorized {
		t.Fatalf("topics after logout: %d, want 401", code)
	}
}

// TestSecurityWrites: users, ACLs and quotas added and removed through the
// API, as a super user, show in /api/security and take effect.
func TestSecurityWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := startSecured(t, ctx)
	a := startConsole(t, console.Config{Addr: n.ListenerAddr("PLAINTEXT")})
	do := func(action string, form url.Values) {
		t.Helper()
		if code, body := a.post("/api/do/"+action, form, true, nil); code != 200 {
			t.Fatalf("%s %v: %d %s", action, form, code, body)
		}
	}
	var sec console.SecurityView
	do("upsert-user", url.Values{"user": {"bob"}, "mechanism": {"SCRAM-SHA-512"}, "password": {"bob-secret"}})
	acl := url.Values{"principal": {"User:bob"}, "resourceType": {"TOPIC"}, "resource": {"bobs"}, "pattern": {"PREFIXED"}, "operation": {"DESCRIBE"}, "permission": {"ALLOW"}}
	do("create-acl", acl)
	do("alter-quota", url.Values{"entityType": {"user"}, "entity": {"bob"}, "key": {"producer_byte_rate"}, "value": {"1048576"}})
	if code := a.get("/api/security", &sec); code != 200 || len(sec.Errors) > 0 {
		t.Fatalf("security: %d %+v", code, sec)
	}
	if len(sec.Users) != 1 || sec.Users[0].User != "bob" || len(sec.ACLs) != 1 || sec.ACLs[0].Resource != "bobs" || sec.ACLs[0].Pattern != "PREFIXED" ||
		len(sec.Quotas) != 1 || sec.Quotas[0].Entity != "user=bob" || sec.Quotas[0].Values["producer_byte_rate"] != 1048576 {
		t.Fatalf("security after adding: %+v", sec)
	}
	// bob can log in and describe his prefixed topics.
	adm := kadm.NewClient(mustClient(t, n.ListenerAddr("PLAINTEXT")))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bobs-orders"); err != nil {
		t.Fatal(err)
	}
	b := startConsole(t, console.Config{Addr: n.ListenerAddr("SASL_PLAINTEXT"), SASL: true})
	resp, err := b.hc.PostForm(b.base+"/login", url.Values{"csrf": {b.csrf}, "user": {"bob"}, "password": {"bob-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var tl struct{ Items []struct{ Name string } }
	if code := b.get("/api/topics", &tl); code != 200 || len(tl.Items) != 1 || tl.Items[0].Name != "bobs-orders" {
		t.Fatalf("bob's topics: %d %+v", code, tl)
	}

	do("delete-acl", acl)
	do("alter-quota", url.Values{"entityType": {"user"}, "entity": {"bob"}, "key": {"producer_byte_rate"}, "op": {"delete"}})
	do("delete-user", url.Values{"user": {"bob"}, "mechanism": {"SCRAM-SHA-512"}})
	if code := a.get("/api/security", &sec); code != 200 || len(sec.Users)+len(sec.ACLs)+len(sec.Quotas) != 0 {
		t.Fatalf("security after removing: %d %+v", code, sec)
	}
	if code, body := a.post("/api/do/create-acl", url.Values{"principal": {"bob"}, "resourceType": {"TOPIC"}, "resource": {"x"}, "operation": {"READ"}, "permission": {"ALLOW"}}, true, nil); code != http.StatusBadRequest {
		t.Fatalf("an ACL with a principal without a type: %d %s", code, body)
	}
}

func mustClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSessionClient: a login keeps one client for the session and no
// password: twenty browses, live-tail polls and produces after the first
// start no SCRAM exchange (each opened a client with a full SCRAM login
// before), and the session's mechanisms hold no password.
func TestSessionClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := startSecured(t, ctx)
	adm := kadm.NewClient(mustClient(t, n.ListenerAddr("PLAINTEXT")))
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Operations(kadm.OpDescribe, kadm.OpRead, kadm.OpWrite).Allow("User:bob").AllowHosts("*")); err != nil {
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
	resp, err := a.hc.PostForm(srv.URL+"/login", url.Values{"csrf": {a.csrf}, "user": {"bob"}, "password": {"bob-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var sess struct{ CSRF, User string }
	if code := a.get("/api/session", &sess); code != 200 || sess.User != "bob" {
		t.Fatalf("login: %d %+v", code, sess)
	}
	a.csrf = sess.CSRF
	if _, held := console.SCRAMState(c); held {
		t.Fatal("a password is held after the login")
	}
	round := func(i int) {
		t.Helper()
		if code, body := a.post("/api/do/produce", url.Values{"topic": {"t"}, "partition": {"0"}, "value": {"v" + itoa(i)}}, true, nil); code != 200 {
			t.Fatalf("produce: %d %s", code, body)
		}
		var b struct{ Messages []struct{ Value string } }
		if code := a.get("/api/topics/t/messages?partition=0&mode=offset&offset="+itoa(i), &b); code != 200 || len(b.Messages) != 1 || b.Messages[0].Value != "v"+itoa(i) {
			t.Fatalf("browse %d: %d %+v", i, code, b)
		}
	}
	round(0)
	first, _ := console.SCRAMState(c)
	if first == 0 {
		t.Fatal("no SCRAM exchange counted")
	}
	for i := 1; i <= 20; i++ {
		round(i)
	}
	if auths, held := console.SCRAMState(c); auths != first || held {
		t.Fatalf("%d SCRAM exchanges after the first round, %d after 20 more (want no more); password held: %v", first, auths, held)
	}
}
