package console

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

//go:embed web
var webFS embed.FS

// Config of a Console.
type Config struct {
	// Addr is the host:port of the node's own broker listener, which the
	// console's Kafka clients connect to. Required.
	Addr string
	// SASL says the listener at Addr needs SASL: users log in with SCRAM
	// credentials (SCRAM-SHA-512, else SCRAM-SHA-256) and see what their
	// principal may describe.
	SASL bool
	// Dial, when not nil, opens the clients' connections (kgo.Dialer): the
	// node gives one that dials TLS to an SSL or SASL_SSL listener. Nil
	// dials plain TCP.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ReadOnly is console.read.only: writes are hidden and refused (403).
	ReadOnly bool
	// Counters returns the node's bytes in (produced) and out (fetched by
	// consumers) counters since start, for the throughput charts; nil
	// draws none.
	Counters func() (bytesIn, bytesOut int64)
	// Version is shown on the overview (internal/buildinfo).
	Version string
	// SampleInterval is the period of the samples; zero means 10 s.
	SampleInterval time.Duration
	// Logger receives errors; nil discards.
	Logger *slog.Logger
}

// Console serves the web console. It is safe for concurrent use; Close
// stops its sampler and clients.
type Console struct {
	cfg  Config
	tmpl *template.Template
	mux  *http.ServeMux
	// handler is mux behind net/http's cross-origin protection, which
	// refuses cross-site POSTs (Sec-Fetch-Site, Origin) before the CSRF
	// token is checked.
	handler http.Handler
	logger  *slog.Logger
	shared  *kgo.Client // without SASL, every session's client

	throughput *ring // bytes/s in and out

	mu       sync.Mutex // guards the fields below
	sessions map[string]*session
	lags     map[lagKey]*lagWatch
	closed   bool

	stop chan struct{}
	done chan struct{}
}

// session is a browser's: its CSRF token and, with SASL, its client.
type session struct {
	id, csrf string
	user     string
	// cl is the session's one client: the shared one without SASL, else
	// the one authenticated at login (it keeps no password, see
	// scramKeys), closed at logout or expiry. Every read, search, produce
	// and admin request of the session goes through it. nil until login.
	cl    *kgo.Client
	auth  []*scramKeys // cl's SASL mechanisms (no password after login)
	seen  time.Time
	flash string // the last write's result, shown once by the next page
}

// lagKey is a group as one principal sees it: each principal's lag chart
// is sampled with its own client and shown to it only, so nobody sees lag
// over topics their principal may not describe. Without SASL every session
// is the same (anonymous) principal, user "".
type lagKey struct{ group, user string }

// lagWatch samples a viewed group's total lag, as one principal sees it,
// for an hour after its last view by that principal.
type lagWatch struct {
	adm  *kadm.Client
	seen time.Time
	r    *ring
}

const (
	maxSessions = 1000
	sessionIdle = 12 * time.Hour
	maxLagWatch = 50
	cookieName  = "samsa_console"
)

// New returns a console; its sampler runs until Close.
func New(cfg Config) (*Console, error) {
	if cfg.Addr == "" {
		return nil, errors.New("console: Config.Addr is required")
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 10 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(webFS, "web/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, tmpl: tmpl, logger: logger,
		throughput: newRing(int(time.Hour / cfg.SampleInterval)),
		sessions:   map[string]*session{},
		lags:       map[lagKey]*lagWatch{},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if !cfg.SASL {
		if c.shared, err = kgo.NewClient(c.clientOpts()...); err != nil {
			return nil, err
		}
	}
	c.routes()
	c.handler = http.NewCrossOriginProtection().Handler(c.mux)
	go c.sample()
	return c, nil
}

// clientOpts are the options of a session's client; mechs are its SASL
// mechanisms (none without SASL). Its partitioner honours a record's
// Partition when the produce's context says so (withPartition).
func (c *Console) clientOpts(mechs ...sasl.Mechanism) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.cfg.Addr), kgo.ClientID("samsa-console"), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(time.Second), kgo.RecordPartitioner(manualOr{kgo.StickyKeyPartitioner(nil)})}
	if c.cfg.Dial != nil {
		opts = append(opts, kgo.Dialer(c.cfg.Dial))
	}
	if len(mechs) > 0 {
		opts = append(opts, kgo.SASL(mechs...))
	}
	return opts
}

// Close stops the sampler and closes every client.
func (c *Console) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		if s.cl != nil && s.cl != c.shared {
			s.cl.Close()
		}
	}
	if c.shared != nil {
		c.shared.Close()
	}
	return nil
}

// ServeHTTP serves the console with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.handler.ServeHTTP(w, r)
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// session returns a copy of the request's session, creating one (and its
// cookie) when it has none.
func (c *Console) session(w http.ResponseWriter, r *http.Request) *session {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ck, err := r.Cookie(cookieName); err == nil {
		if s := c.sessions[ck.Value]; s != nil && now.Sub(s.seen) < sessionIdle {
			s.seen = now
			snap := *s
			return &snap
		}
	}
	if len(c.sessions) >= maxSessions {
		c.expireLocked(now)
	}
	s := &session{id: randomID(), csrf: randomID(), seen: now, cl: c.shared}
	c.sessions[s.id] = s
	setCookie(w, r, s.id)
	snap := *s
	return &snap
}

func setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// setFlash keeps msg for the next page of session id: a write's result
// travels in the session, not in the URL, where anyone could write a
// link showing a message of their own as if the console said it.
func (c *Console) setFlash(id, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		s.flash = msg
	}
}

// takeFlash returns and forgets session id's message.
func (c *Console) takeFlash(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		return ""
	}
	msg := s.flash
	s.flash = ""
	return msg
}

// expireLocked drops idle sessions, or else the oldest of those not
// logged in, or else the oldest: requests without a cookie, which anyone
// can send, create sessions but never push out a logged-in one.
func (c *Console) expireLocked(now time.Time) {
	var oldest, oldestAnon *session
	for id, s := range c.sessions {
		if now.Sub(s.seen) >= sessionIdle {
			c.dropLocked(id)
			continue
		}
		if oldest == nil || s.seen.Before(oldest.seen) {
			oldest = s
		}
		if s.user == "" && (oldestAnon == nil || s.seen.Before(oldestAnon.seen)) {
			oldestAnon = s
		}
	}
	if len(c.sessions) < maxSessions {
		return
	}
	if oldestAnon != nil {
		c.dropLocked(oldestAnon.id)
	} else if oldest != nil {
		c.dropLocked(oldest.id)
	}
}

func (c *Console) dropLocked(id string) {
	if s := c.sessions[id]; s != nil && s.cl != nil && s.cl != c.shared {
		s.cl.Close()
	}
	delete(c.sessions, id)
}

// login checks user's SCRAM credentials against the broker and replaces
// the session snap is a copy of by a new one, with a new id (its cookie
// set on w) and CSRF token, bound to a client authenticated as user: an id
// known before the login (planted in the browser by someone else: session
// fixation) never becomes an authenticated one.
//
// The client keeps the password only until its first SCRAM exchange
// succeeds (scramKeys), then the salted password derived for the broker's
// salt and iteration count: the password leaves memory (this function's
// strings aside) once login returns.
func (c *Console) login(ctx context.Context, w http.ResponseWriter, r *http.Request, snap *session, user, pass string) error {
	m512, m256 := newSCRAMKeys(true, user, pass), newSCRAMKeys(false, user, pass)
	cl, err := kgo.NewClient(c.clientOpts(m512, m256)...)
	if err != nil {
		return err
	}
	err = cl.Ping(ctx)
	if err == nil && m512.hasPassword() && m256.hasPassword() {
		err = errors.New("no SCRAM exchange took place")
	}
	if err != nil {
		m512.forget()
		m256.forget()
		cl.Close()
		return errors.New("login failed: " + err.Error())
	}
	if m512.hasPassword() { // the other one logged in
		m512.forget()
	} else {
		m256.forget()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[snap.id]
	if s == nil {
		cl.Close()
		return errors.New("the session expired: reload the page")
	}
	c.dropLocked(s.id)
	ns := &session{id: randomID(), csrf: randomID(), user: user, cl: cl, auth: []*scramKeys{m512, m256}, seen: time.Now()}
	c.sessions[ns.id] = ns
	setCookie(w, r, ns.id)
	return nil
}

func (c *Console) logout(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(s.id)
}

// sample records throughput and the watched groups' lag every
// SampleInterval until Close.
func (c *Console) sample() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	var lastIn, lastOut int64
	last := time.Now()
	if c.cfg.Counters != nil {
		lastIn, lastOut = c.cfg.Counters()
	}
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			if c.cfg.Counters != nil {
				in, out := c.cfg.Counters()
				secs := now.Sub(last).Seconds()
				c.throughput.add(now, float64(in-lastIn)/secs, float64(out-lastOut)/secs)
				lastIn, lastOut, last = in, out, now
			}
			c.sampleLags(now)
		}
	}
}

func (c *Console) sampleLags(now time.Time) {
	type watch struct {
		adm *kadm.Client // copied under c.mu: watchLag replaces it
		r   *ring
	}
	c.mu.Lock()
	watches := map[lagKey]watch{}
	for k, lw := range c.lags {
		if now.Sub(lw.seen) > time.Hour {
			delete(c.lags, k)
			continue
		}
		watches[k] = watch{lw.adm, lw.r}
	}
	c.mu.Unlock()
	for k, lw := range watches {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.SampleInterval/2)
		rows, err := groupLag(ctx, lw.adm, k.group)
		cancel()
		if err != nil {
			continue
		}
		var total int64
		for _, r := range rows {
			total += max(r.Lag, 0)
		}
		lw.r.add(now, float64(total), 0)
	}
}

// watchLag starts (or renews) sampling group's lag as user sees it, with
// adm (a client of user's), and returns the ring of user's samples.
func (c *Console) watchLag(group, user string, adm *kadm.Client) *ring {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lagKey{group, user}
	lw := c.lags[k]
	if lw == nil {
		if len(c.lags) >= maxLagWatch {
			var oldest *lagKey
			for kk, w := range c.lags {
				if oldest == nil || w.seen.Before(c.lags[*oldest].seen) {
					oldest = &kk
				}
			}
			delete(c.lags, *oldest)
		}
		lw = &lagWatch{r: newRing(int(time.Hour / c.cfg.SampleInterval))}
		c.lags[k] = lw
	}
	lw.adm, lw.seen = adm, time.Now()
	return lw.r
}

// ring keeps the last n samples of two series.
type ring struct {
	mu   sync.Mutex
	pts  []point
	next int
	full bool
}

type point struct {
	T    time.Time `json:"t"`
	A, B float64
}

func newRing(n int) *ring { return &ring{pts: make([]point, max(n, 2))} }

func (r *ring) add(t time.Time, a, b float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pts[r.next] = point{t, a, b}
	r.next++
	if r.next == len(r.pts) {
		r.next, r.full = 0, true
	}
}

// points returns the samples, oldest first.
func (r *ring) points() []point {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]point{}, r.pts[:r.next]...)
	}
	return append(append([]point{}, r.pts[r.next:]...), r.pts[:r.next]...)
}

// staticFS serves the stylesheet and the script under /static/ (after
// StripPrefix): no directory listing, and not the page templates.
func staticFS() http.Handler {
	sub, _ := fs.Sub(webFS, "web")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path.Ext(r.URL.Path) {
		case ".css", ".js":
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
