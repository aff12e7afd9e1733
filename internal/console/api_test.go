package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/console"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// apiClient is a browser-like client of a console: a cookie jar and the
// session's CSRF token.
type apiClient struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

func newAPIClient(t *testing.T, base string) *apiClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	a := &apiClient{t: t, base: base, hc: &http.Client{Jar: jar,
		// A bound for a hung server, not a performance check: an 8 MiB
		// browse under the race detector on a loaded machine took more
		// than 30 s to read (CI).
		Timeout: 3 * time.Minute}}
	var s struct{ CSRF string }
	a.get("/api/session", &s)
	a.csrf = s.CSRF
	if a.csrf == "" {
		t.Fatal("no CSRF token from /api/session")
	}
	return a
}

func (a *apiClient) get(path string, out any) int {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.base+path, nil)
	code, _ := a.do(req, out)
	return code
}

// do sends req and decodes a 200 answer into out (when not nil).
func (a *apiClient) do(req *http.Request, out any) (int, string) {
	a.t.Helper()
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: reading the answer after %d bytes: %v", req.Method, req.URL.Path, len(body), err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", req.Method, req.URL.Path, err, clip.String(string(body)))
		}
	}
	return resp.StatusCode, string(body)
}

func (a *apiClient) post(path string, form url.Values, csrf bool, out any) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest("POST", a.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if csrf {
		req.Header.Set("X-CSRF-Token", a.csrf)
	}
	return a.do(req, out)
}

func startNode(t *testing.T, readOnly bool) (*samsa.Node, *apiClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, startConsole(t, console.Config{Addr: n.Addr(), ReadOnly: readOnly, Version: "test"})
}

// startConsole serves a console of cfg over httptest and returns a client
// of it with a session; both stop with the test.
func startConsole(t *testing.T, cfg console.Config) *apiClient {
	t.Helper()
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return newAPIClient(t, srv.URL)
}

func TestAPI(t *testing.T) {
	n, a := startNode(t, false)
	ctx := context.Background()

	// Create a topic through the API: refused without the CSRF token.
	form := url.Values{"topic": {"orders"}, "partitions": {"3"}, "replication": {"1"}}
	if code, body := a.post("/api/do/create-topic", form, false, nil); code != http.StatusForbidden {
		t.Fatalf("create without CSRF: %d %s, want 403", code, body)
	}
	var plan struct{ Plan string }
	form.Set("preview", "1")
	if code, body := a.post("/api/do/create-topic", form, true, &plan); code != 200 || !strings.Contains(plan.Plan, `"orders" with 3 partitions`) {
		t.Fatalf("preview: %d %s", code, body)
	}
	form.Del("preview")
	if code, body := a.post("/api/do/create-topic", form, true, nil); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, path := range []string{"/api/topics/nosuch", "/api/topics/nosuch/messages?partition=0", "/api/groups/nosuch"} {
		if code := a.get(path, nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 30 {
		v := `{"id":` + itoa(i) + `,"kind":"plain"}`
		if i == 17 {
			v = `{"id":17,"kind":"needle"}`
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Key: []byte("k" + itoa(i)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t" + itoa(i))}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var tl struct {
		Items []struct {
			Name       string
			Partitions int
		}
		Total int
	}
	if code := a.get("/api/topics?q=ord&size=10", &tl); code != 200 || tl.Total != 1 || tl.Items[0].Name != "orders" || tl.Items[0].Partitions != 3 {
		t.Fatalf("topics: %d %+v", code, tl)
	}
	var td struct {
		Partitions struct {
			Items []struct {
				Partition, Leader int32
				End               int64 `json:"logEndOffset"`
			}
			Total int
		}
		Configs []struct{ Name, Value, Source string }
	}
	if code := a.get("/api/topics/orders?size=2", &td); code != 200 || td.Partitions.Total != 3 || len(td.Partitions.Items) != 2 || td.Partitions.Items[0].End != 10 || len(td.Configs) == 0 {
		t.Fatalf("topic: %d %+v", code, td)
	}

	var b struct {
		Messages []struct {
			Offset  int64
			Key     *string
			Value   *string
			Headers []struct{ Key, Value string }
		}
		NextOffset int64
	}
	if code := a.get("/api/topics/orders/messages?partition=2&mode=offset&offset=3&limit=4&enc=json", &b); code != 200 || len(b.Messages) != 4 || b.Messages[0].Offset != 3 || b.NextOffset != 7 {
		t.Fatalf("browse: %d %+v", code, b)
	}
	if m := b.Messages[0]; *m.Key != "k11" || !strings.Contains(*m.Value, "\n  \"id\": 11") || m.Headers[0].Value != "t11" {
		t.Fatalf("browse record: key %q value %q headers %+v", *m.Key, *m.Value, m.Headers)
	}
	if code := a.get("/api/topics/orders/messages?partition=0&mode=end&limit=2&enc=hex", &b); code != 200 || len(b.Messages) != 2 || b.Messages[0].Offset != 8 || *b.Messages[0].Key != "6b3234" {
		t.Fatalf("browse end hex: %d %+v", code, b)
	}

	var sc struct {
		Messages []struct {
			Partition int32
			Offset    int64
		}
		Scanned  int64
		Done     bool
		Progress []struct {
			Partition int32
			Next, End int64
		}
	}
	if code := a.get("/api/topics/orders/messages?search=1&jf=kind&jv=needle", &sc); code != 200 || len(sc.Messages) != 1 || sc.Messages[0].Partition != 2 || sc.Messages[0].Offset != 5 || sc.Scanned != 30 || !sc.Done {
		t.Fatalf("search: %d %+v", code, sc)
	}
	// A budget of 4 records stops early and says where to continue.
	if code := a.get("/api/topics/orders/messages?search=1&value=needle&budget=4", &sc); code != 200 || sc.Scanned != 4 || sc.Done || len(sc.Progress) != 3 {
		t.Fatalf("search with budget: %d %+v", code, sc)
	}

	// Produce through the API, with headers.
	pf := url.Values{"topic": {"orders"}, "partition": {"1"}, "key": {"api"}, "value": {"hello"}, "headers": {"a=1\nb=two"}}
	if code, body := a.post("/api/do/produce", pf, true, nil); code != 200 || !strings.Contains(body, "partition 1 at offset 10") {
		t.Fatalf("produce: %d %s", code, body)
	}
	if code := a.get("/api/topics/orders/messages?partition=1&mode=offset&offset=10", &b); code != 200 || len(b.Messages) != 1 || *b.Messages[0].Value != "hello" || len(b.Messages[0].Headers) != 2 || b.Messages[0].Headers[1].Value != "two" {
		t.Fatalf("produced record: %d %+v", code, b)
	}

	// A group that committed offsets, then a reset to earliest.
	adm := kadm.NewClient(cl)
	os := kadm.Offsets{}
	for p := range int32(3) {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: 10, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, "billing", os); err != nil {
		t.Fatal(err)
	}
	var gl struct {
		Items []struct{ Group, Type, State string }
	}
	if code := a.get("/api/groups", &gl); code != 200 || len(gl.Items) != 1 || gl.Items[0].Group != "billing" || gl.Items[0].State != "Empty" {
		t.Fatalf("groups: %d %+v", code, gl)
	}
	var gd struct {
		TotalLag int64
		Lag      []struct {
			Partition int32
			Lag       int64
		}
	}
	if code := a.get("/api/groups/billing", &gd); code != 200 || gd.TotalLag != 1 || len(gd.Lag) != 3 {
		t.Fatalf("group: %d %+v", code, gd)
	}
	rf := url.Values{"group": {"billing"}, "topic": {"orders"}, "to": {"offset"}, "offset": {"4"}, "preview": {"1"}}
	var prev struct {
		Preview []struct {
			Partition    int32
			Current, New int64
		}
	}
	if code, body := a.post("/api/do/reset-offsets", rf, true, &prev); code != 200 || len(prev.Preview) != 3 || prev.Preview[0].Current != 10 || prev.Preview[0].New != 4 {
		t.Fatalf("reset preview: %d %s", code, body)
	}
	if o, _ := adm.FetchOffsets(ctx, "billing"); o["orders"][0].At != 10 {
		t.Fatalf("the preview committed: %+v", o)
	}
	rf.Del("preview")
	if code, body := a.post("/api/do/reset-offsets", rf, true, nil); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if o, _ := adm.FetchOffsets(ctx, "billing"); o["orders"][0].At != 4 || o["orders"][2].At != 4 {
		t.Fatalf("after reset: %+v", o)
	}
	// With a member (it fetched, so the group is Stable) the group's
	// offsets are not reset and it is not deleted: 409.
	member, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	fs := member.PollFetches(pctx)
	pcancel()
	if fs.NumRecords() == 0 {
		member.Close()
		t.Fatalf("the member fetched nothing: %v", fs.Errors())
	}
	rf.Set("offset", "0")
	if code, body := a.post("/api/do/reset-offsets", rf, true, nil); code != http.StatusConflict {
		t.Errorf("reset of a group with a member: %d %s, want 409", code, body)
	}
	if code, body := a.post("/api/do/delete-group", url.Values{"group": {"billing"}}, true, nil); code != http.StatusConflict {
		t.Errorf("delete of a group with a member: %d %s, want 409", code, body)
	}
	member.Close() // leaves the group: Empty
	if o, _ := adm.FetchOffsets(ctx, "billing"); o["orders"][0].At != 4 {
		t.Fatalf("offsets after the refused reset: %+v", o)
	}
	if code, body := a.post("/api/do/delete-group", url.Values{"group": {"billing"}}, true, nil); code != 200 {
		t.Fatalf("delete group: %d %s", code, body)
	}

	var ov console.Overview
	if code := a.get("/api/overview", &ov); code != 200 || len(ov.Brokers) != 1 || !ov.Brokers[0].Broker || ov.Health.Partitions < 3 || len(ov.LogDirs) != 1 || ov.LogDirs[0].Bytes == 0 || len(ov.Errors) > 0 {
		t.Fatalf("overview: %d %+v", code, ov)
	}

	if code, body := a.post("/api/do/delete-topic", url.Values{"topic": {"orders"}}, true, nil); code != 200 {
		t.Fatalf("delete topic: %d %s", code, body)
	}
	var after map[string]any
	if code := a.get("/api/topics/orders", &after); code == 200 {
		t.Fatalf("deleted topic still described: %v", after)
	}
}

func TestReadOnly(t *testing.T) {
	_, a := startNode(t, true)
	for _, act := range []string{"create-topic", "delete-topic", "alter-config", "produce", "reset-offsets", "delete-group", "replay"} {
		if code, body := a.post("/api/do/"+act, url.Values{"topic": {"x"}, "group": {"g"}}, true, nil); code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", act, code, body)
		}
	}
	var ts struct{ Total int }
	if code := a.get("/api/topics", &ts); code != 200 {
		t.Fatalf("read-only topics: %d", code)
	}
}

func TestSecurityHeaders(t *testing.T) {
	_, a := startNode(t, false)
	resp, err := a.hc.Get(a.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%d headers %v", resp.StatusCode, resp.Header)
	}
	// A cross-site POST is refused even with the token.
	req, _ := http.NewRequest("POST", a.base+"/api/do/create-topic", strings.NewReader("topic=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", a.csrf)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if code, body := a.do(req, nil); code != http.StatusForbidden {
		t.Fatalf("cross-site POST: %d %s", code, body)
	}
	// /static/ serves the stylesheet and the script, no directory listing,
	// no templates, nothing outside web/.
	for path, want := range map[string]int{"/static/console.js": 200, "/static/console.css": 200, "/static/": 404,
		"/static/layout.html": 404, "/static/pages.html": 404, "/static/..%2fconsole.go": 404} {
		if code := a.get(path, nil); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	fresh, _ := http.Get(a.base + "/topics")
	fresh.Body.Close()
	sc := fresh.Header.Get("Set-Cookie")
	if !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Fatalf("session cookie %q", sc)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFlash: a write from a page form shows its result on the next page,
// once; a message in the URL is not shown (anyone could link to the
// console with a message of their own).
func TestFlash(t *testing.T) {
	_, a := startNode(t, false)
	page := func(path string) string {
		t.Helper()
		resp, err := a.hc.Get(a.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if body := page("/topics?msg=Session+expired"); strings.Contains(body, "Session expired") {
		t.Fatal("/topics?msg= shows the URL's message")
	}
	resp, err := a.hc.PostForm(a.base+"/do/create-topic", url.Values{"csrf": {a.csrf}, "confirm": {"yes"}, "topic": {"flashed"}, "partitions": {"1"}, "replication": {"-1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/topics/flashed" || !strings.Contains(string(body), "Created topic flashed.") {
		t.Fatalf("create-topic from a page: %d at %s, body without the result", resp.StatusCode, resp.Request.URL)
	}
	if strings.Contains(page("/topics/flashed"), "Created topic flashed.") {
		t.Fatal("the result shows again on the next page")
	}
}

// TestLargeRecords: a browse or search of large records stops at 8 MiB of
// them (not limit x 1 MiB in the node) and says where to continue.
func TestLargeRecords(t *testing.T) {
	n, a := startNode(t, false)
	ctx := context.Background()
	cl := mustClient(t, n.Addr())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 900<<10)
	for range 12 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var b console.Browse
	if code := a.get("/api/topics/big/messages?partition=0&limit=12", &b); code != 200 || len(b.Messages) == 0 || len(b.Messages) >= 12 || b.NextOffset != int64(len(b.Messages)) {
		t.Fatalf("browse: %d, %d records, next %d: want fewer than 12 and the next offset after them", code, len(b.Messages), b.NextOffset)
	}
	var sc console.Scan
	if code := a.get("/api/topics/big/messages?search=1&value=x&limit=12", &sc); code != 200 || len(sc.Messages) == 0 || len(sc.Messages) >= 12 || sc.Done ||
		len(sc.Progress) != 1 || sc.Progress[0].Next != int64(len(sc.Messages)) {
		t.Fatalf("search: %d, %d records, done %v, progress %+v: want fewer than 12, not done, and the next offset after them", code, len(sc.Messages), sc.Done, sc.Progress)
	}
}
