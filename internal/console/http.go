package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// view is what every page template gets.
type view struct {
	Title    string
	Active   string // nav entry
	CSRF     string
	User     string
	SASL     bool
	ReadOnly bool
	Msg, Err string
	Path     string
	Q        url.Values
	D        any
}

// requestTimeout bounds the work of one page or API request, but a
// search's, which gets its seconds on top (timeoutOf).
const requestTimeout = 15 * time.Second

// maxSearchSeconds bounds a search's seconds parameter.
const maxSearchSeconds = 60

// timeoutOf is r's deadline: requestTimeout, plus the seconds a search may
// scan (up to maxSearchSeconds), so that a search asked for 60 s is not
// cut at 15.
func timeoutOf(r *http.Request) time.Duration {
	q := r.URL.Query()
	if q.Get("search") == "" {
		return requestTimeout
	}
	secs, err := intParam(q, "seconds", defaultSearchSeconds, 1, maxSearchSeconds)
	if err != nil {
		return requestTimeout // refused by the handler
	}
	return requestTimeout + time.Duration(secs)*time.Second
}

const defaultSearchSeconds = 5

func (c *Console) routes() {
	m := http.NewServeMux()
	c.mux = m
	m.Handle("GET /static/", http.StripPrefix("/static/", staticFS()))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.loginPost)
	m.HandleFunc("POST /logout", c.logoutPost)
	m.HandleFunc("GET /{$}", c.page("overview", "Overview", func(ctx context.Context, s *session, r *http.Request) (any, error) {
		return c.overview(ctx, s.cl), nil
	}))
	m.HandleFunc("GET /topics", c.page("topics", "Topics", c.getTopics))
	m.HandleFunc("GET /topics/{topic}", c.page("topic", "Topic", c.getTopic))
	m.HandleFunc("GET /topics/{topic}/messages", c.page("messages", "Messages", c.getMessages))
	m.HandleFunc("GET /groups", c.page("groups", "Consumer groups", c.getGroups))
	m.HandleFunc("GET /groups/{group}", c.page("group", "Group", c.getGroup))
	m.HandleFunc("GET /dlt", c.page("dlt", "Dead letters", c.getDLTs))
	m.HandleFunc("GET /security", c.page("security", "Security", c.getSecurity))
	m.HandleFunc("POST /do/{action}", c.doPage)

	m.HandleFunc("GET /api/session", func(w http.ResponseWriter, r *http.Request) {
		s := c.session(w, r) // no login needed: it gives the token that POST /login takes
		writeJSON(w, http.StatusOK, map[string]any{"csrf": s.csrf, "user": s.user, "login": c.cfg.SASL, "loggedIn": s.cl != nil, "readOnly": c.cfg.ReadOnly})
	})
	m.HandleFunc("GET /api/overview", c.api(func(ctx context.Context, s *session, r *http.Request) (any, error) {
		return c.overview(ctx, s.cl), nil
	}))
	m.HandleFunc("GET /api/topics", c.api(c.getTopics))
	m.HandleFunc("GET /api/topics/{topic}", c.api(c.getTopic))
	m.HandleFunc("GET /api/topics/{topic}/messages", c.api(c.getMessages))
	m.HandleFunc("GET /api/groups", c.api(c.getGroups))
	m.HandleFunc("GET /api/groups/{group}", c.api(c.getGroup))
	m.HandleFunc("GET /api/dlt", c.api(c.getDLTs))
	m.HandleFunc("GET /api/security", c.api(c.getSecurity))
	m.HandleFunc("POST /api/do/{action}", c.doAPI)
}

// authed returns the request's session and whether it may go on; without
// a login (SASL) it redirects pages to /login and answers the API 401.
func (c *Console) authed(w http.ResponseWriter, r *http.Request, api bool) (*session, bool) {
	s := c.session(w, r)
	if s.cl != nil {
		return s, true
	}
	if api {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "log in first: POST /login with user and password"})
	} else {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	}
	return s, false
}

func (c *Console) newView(s *session, r *http.Request, title, active string) view {
	return view{Title: title, Active: active, CSRF: s.csrf, User: s.user, SASL: c.cfg.SASL, ReadOnly: c.cfg.ReadOnly,
		Msg: c.takeFlash(s.id), Path: r.URL.Path, Q: r.URL.Query()}
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.tmpl.ExecuteTemplate(w, name, v); err != nil {
		c.logger.Warn("console template", "page", name, "err", err)
	}
}

type getter func(ctx context.Context, s *session, r *http.Request) (any, error)

func (c *Console) page(name, title string, get getter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.authed(w, r, false)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(r))
		defer cancel()
		v := c.newView(s, r, title, name)
		d, err := get(ctx, s, r)
		v.D = d
		status := http.StatusOK
		if errors.Is(err, errRelogin) {
			c.logout(s)
		}
		if err != nil {
			v.Err, status = err.Error(), statusOf(err)
		}
		c.render(w, status, name, v)
	}
}

func (c *Console) api(get getter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.authed(w, r, true)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeoutOf(r))
		defer cancel()
		d, err := get(ctx, s, r)
		if errors.Is(err, errRelogin) {
			c.logout(s)
		}
		if err != nil {
			writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
			return
		}
		if r.URL.Query().Get("format") == "jsonl" {
			writeJSONLines(w, r, d)
			return
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// errBadRequest marks errors in the request's parameters (400).
var errBadRequest = errors.New("bad request")

// errConflict marks a write the state of the cluster forbids now, such
// as a reset of a group with members (409).
var errConflict = errors.New("conflict")

// errNotFound marks a topic or partition the request names that does not
// exist (404).
var errNotFound = errors.New("not found")

func statusOf(err error) int {
	switch {
	case errors.Is(err, errRelogin):
		return http.StatusUnauthorized
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return http.StatusForbidden // the broker's answer to this principal
	case errors.Is(err, errNotFound), errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.GroupIDNotFound):
		return http.StatusNotFound
	case errors.Is(err, errConflict), errors.Is(err, kerr.NonEmptyGroup):
		return http.StatusConflict // the group has members
	}
	return http.StatusBadGateway
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// writeJSONLines writes the messages of a browse or scan, one JSON object
// a line, as a download.
func writeJSONLines(w http.ResponseWriter, r *http.Request, d any) {
	var msgs []Message
	name := "messages"
	switch d := d.(type) {
	case Browse:
		msgs, name = d.Messages, fmt.Sprintf("%s-%d", d.Topic, d.Partition)
	case Scan:
		msgs, name = d.Messages, d.Topic+"-search"
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.Map(safeName, name)+".jsonl"))
	enc := json.NewEncoder(w)
	for _, m := range msgs {
		enc.Encode(m)
	}
}

func safeName(r rune) rune {
	if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
		return r
	}
	return '_'
}

// Query parameters.

func intParam(q url.Values, k string, def, lo, hi int64) (int64, error) {
	s := q.Get(k)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s=%q (an integer in [%d, %d])", errBadRequest, k, s, lo, hi)
	}
	return n, nil
}

func paging(q url.Values) (page, size int, err error) {
	p, err := intParam(q, "page", 0, 0, 1<<31-1)
	if err != nil {
		return 0, 0, err
	}
	sz, err := intParam(q, "size", 50, 1, 1000)
	return int(p), int(sz), err
}

// millisParam parses unix millis or an RFC 3339 time; 0 when absent.
func millisParam(q url.Values, k string) (int64, error) {
	s := strings.TrimSpace(q.Get(k))
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("%w: %s=%q (unix millis or RFC 3339)", errBadRequest, k, s)
}

func encParam(q url.Values) string {
	e := q.Get("enc")
	for _, x := range encodings {
		if e == x {
			return e
		}
	}
	return "utf8"
}

// Getters shared by pages and the API.

func (c *Console) getTopics(ctx context.Context, s *session, r *http.Request) (any, error) {
	page, size, err := paging(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return topics(ctx, kadm.NewClient(s.cl), r.URL.Query().Get("q"), page, size)
}

func (c *Console) getTopic(ctx context.Context, s *session, r *http.Request) (any, error) {
	page, size, err := paging(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return topicDetail(ctx, kadm.NewClient(s.cl), r.PathValue("topic"), page, size)
}

// messagesView is the messages page: a browse or a scan.
type messagesView struct {
	Topic      string
	Partitions []int32
	Browse     *Browse
	Scan       *Scan
	Encodings  []string
}

func (c *Console) getMessages(ctx context.Context, s *session, r *http.Request) (any, error) {
	q := r.URL.Query()
	topic := r.PathValue("topic")
	enc := encParam(q)
	limit, err := intParam(q, "limit", 50, 1, 1000)
	if err != nil {
		return nil, err
	}
	wantsPage := !strings.HasPrefix(r.URL.Path, "/api/")
	var mv messagesView
	if wantsPage {
		mv = messagesView{Topic: topic, Encodings: encodings}
		td, err := kadm.NewClient(s.cl).ListTopics(ctx, topic)
		if err != nil {
			return mv, err
		}
		if t, ok := td[topic]; ok && t.Err == nil {
			for _, p := range t.Partitions.Sorted() {
				mv.Partitions = append(mv.Partitions, p.Partition)
			}
		} else {
			return mv, fmt.Errorf("%w: no topic %q", errNotFound, topic)
		}
	}
	if q.Get("search") != "" {
		f := Filter{KeyContains: q.Get("key"), ValueContains: q.Get("value"), JSONField: q.Get("jf"), JSONEquals: q.Get("jv")}
		if f.FromMillis, err = millisParam(q, "from"); err != nil {
			return mv, err
		}
		if f.ToMillis, err = millisParam(q, "to"); err != nil {
			return mv, err
		}
		part, err := intParam(q, "partition", -1, -1, 1<<31-1)
		if err != nil {
			return mv, err
		}
		starts, err := parseStarts(q.Get("start"))
		if err != nil {
			return mv, fmt.Errorf("%w: %v", errBadRequest, err)
		}
		budget, err := intParam(q, "budget", 1_000_000, 1, 100_000_000)
		if err != nil {
			return mv, err
		}
		secs, err := intParam(q, "seconds", defaultSearchSeconds, 1, maxSearchSeconds)
		if err != nil {
			return mv, err
		}
		sc, err := c.search(ctx, s, topic, int32(part), starts, f, int(limit), budget, time.Duration(secs)*time.Second, enc)
		if !wantsPage {
			return sc, err
		}
		mv.Scan = &sc
		return mv, err
	}
	part, err := intParam(q, "partition", 0, 0, 1<<31-1)
	if err != nil {
		return mv, err
	}
	st := Start{Mode: q.Get("mode")}
	switch st.Mode {
	case "", "beginning":
		st.Mode = "beginning"
	case "end":
	case "offset":
		if st.Offset, err = intParam(q, "offset", 0, 0, 1<<62); err != nil {
			return mv, err
		}
	case "timestamp":
		if st.Millis, err = millisParam(q, "ts"); err != nil {
			return mv, err
		}
	default:
		return mv, fmt.Errorf("%w: mode=%q (beginning, end, offset or timestamp)", errBadRequest, st.Mode)
	}
	b, err := c.browse(ctx, s, topic, int32(part), st, int(limit), enc)
	if !wantsPage {
		return b, err
	}
	mv.Browse = &b
	return mv, err
}

func (c *Console) getGroups(ctx context.Context, s *session, r *http.Request) (any, error) {
	page, size, err := paging(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return groups(ctx, kadm.NewClient(s.cl), r.URL.Query().Get("q"), page, size)
}

func (c *Console) getGroup(ctx context.Context, s *session, r *http.Request) (any, error) {
	return c.groupDetail(ctx, kadm.NewClient(s.cl), s.user, r.PathValue("group"))
}

// DLTView is /api/dlt: the dead-letter topics (by name), and with
// ?topic= the records of one of its partitions with their failure headers.
type DLTView struct {
	Topics []TopicRow `json:"topics"`
	Topic  string     `json:"topic,omitempty"`
	Browse *Browse    `json:"records,omitempty"`
}

func (c *Console) getDLTs(ctx context.Context, s *session, r *http.Request) (any, error) {
	v := DLTView{Topics: []TopicRow{}}
	adm := kadm.NewClient(s.cl)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return v, err
	}
	for _, t := range td.Sorted() {
		if isDLT(t.Topic) {
			v.Topics = append(v.Topics, TopicRow{Name: t.Topic, Partitions: len(t.Partitions), RF: t.Partitions.NumReplicas()})
		}
	}
	q := r.URL.Query()
	if v.Topic = q.Get("topic"); v.Topic == "" {
		return v, nil
	}
	part, err := intParam(q, "partition", 0, 0, 1<<31-1)
	if err != nil {
		return v, err
	}
	off, err := intParam(q, "offset", 0, 0, 1<<62)
	if err != nil {
		return v, err
	}
	b, err := c.browse(ctx, s, v.Topic, int32(part), Start{Mode: "offset", Offset: off}, 100, "utf8")
	v.Browse = &b
	return v, err
}

// Login.

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	s := c.session(w, r)
	c.render(w, http.StatusOK, "login", c.newView(s, r, "Log in", "login"))
}

func (c *Console) loginPost(w http.ResponseWriter, r *http.Request) {
	s := c.session(w, r)
	if !c.csrfOK(s, r) {
		http.Error(w, "bad CSRF token: reload the page", http.StatusForbidden)
		return
	}
	if !c.cfg.SASL {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if err := c.login(ctx, w, r, s, r.PostFormValue("user"), r.PostFormValue("password")); err != nil {
		v := c.newView(s, r, "Log in", "login")
		v.Err = err.Error()
		c.render(w, http.StatusUnauthorized, "login", v)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (c *Console) logoutPost(w http.ResponseWriter, r *http.Request) {
	s := c.session(w, r)
	if !c.csrfOK(s, r) {
		http.Error(w, "bad CSRF token: reload the page", http.StatusForbidden)
		return
	}
	c.logout(s)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// csrfOK checks the request's CSRF token (form field csrf or header
// X-CSRF-Token) against the session's.
func (c *Console) csrfOK(s *session, r *http.Request) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	return tok != "" && tok == s.csrf
}

var _ = template.HTML("")
