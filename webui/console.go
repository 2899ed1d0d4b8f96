package webui

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"

	"gantry/broker/auth"
	"gantry/cluster"
	"gantry/lot/command"
)

// prefix is where the console is mounted on the operations port.
const prefix = "/ui/"

// Users is the broker's user store as the console reads it; changes go
// through the LoT command interface (Commander), with its rules.
type Users interface {
	Verify(name string, password []byte) (auth.User, error)
	Lookup(name string) (auth.User, bool)
	Names() []string
}

// Commander runs a LoT command (LOT.md §8, "-addAction ...") as user, on
// the path $SYS/Coreflux/Command takes, and returns the reply.
type Commander interface {
	Command(ctx context.Context, user, payload string) (command.Reply, error)
}

// Throttle counts failed logins per source address (broker/auth.Throttle:
// the console and MQTT share one, so guesses cannot alternate between them).
type Throttle interface {
	Blocked(ip string) bool
	Fail(ip string) bool
}

// NodeStats are this node's broker counters, the values GET /info and
// GET /metrics serve.
type NodeStats struct {
	NodeName      string
	Version       string
	Slot          string // the appliance's running root slot (a or b); "" off the appliance
	Uptime        time.Duration
	Connections   int64
	Sessions      int
	Subscriptions int
	Retained      int
	Queued        int
	Inflight      int
	MessagesIn    uint64
	MessagesOut   uint64
	Dropped       uint64
	AuthFailures  uint64
}

// Options configure a Console. Users, Commands, Status and Stats are
// required.
type Options struct {
	Users    Users
	Throttle Throttle // nil: one of the console's own
	Commands Commander
	Status   func() cluster.Status // GET /cluster
	Stats    func() NodeStats
	// Retained returns a retained message's payload (the deployed LoT
	// sources and runtime errors under $SYS/Coreflux/).
	Retained func(topic string) ([]byte, bool)
	// Sessions lists and disconnects this node's MQTT sessions (the
	// clients page); nil: the page says it has none.
	Sessions Sessions
	// Connectors lists this node's connectors with their tags' latest
	// readings (the connectors page).
	Connectors func() []ConnectorView
	// ClusterJSON is the body GET /cluster serves: the health page lists
	// the fields that Status does not hold (the data plane's, replication).
	ClusterJSON func() []byte
	// Setup runs the first-boot wizard; nil: no wizard.
	Setup Setup
	// DataDir keeps the editor's drafts and the wizard's progress; ""
	// keeps them in memory.
	DataDir string
	// Done ends the live streams (close it when the node shuts down).
	Done <-chan struct{}
	// Interval between live health updates (0: one second).
	Interval time.Duration
	Logger   *slog.Logger
}

// Console is the web console of one node.
type Console struct {
	o        Options
	log      *slog.Logger
	assets   *assets
	sessions *sessions
	throttle Throttle
	drafts   *drafts
	wizard   *wizard
	rates    rateHistory
	mux      *http.ServeMux
}

// New builds a console.
func New(o Options) (*Console, error) {
	if o.Users == nil || o.Commands == nil || o.Status == nil || o.Stats == nil {
		return nil, errors.New("webui: Options.Users, Commands, Status and Stats are required")
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retained == nil {
		o.Retained = func(string) ([]byte, bool) { return nil, false }
	}
	c := &Console{o: o, log: o.Logger.With("component", "webui"), assets: loadAssets(), sessions: newSessions(),
		throttle: o.Throttle, drafts: newDrafts(o.DataDir)}
	if c.throttle == nil {
		c.throttle = auth.NewThrottle()
	}
	if o.Setup != nil {
		c.wizard = newWizard(o.DataDir)
	}
	c.routes()
	return c, nil
}

// Handler serves the console under /ui/.
func (c *Console) Handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	return securityHeaders(cop.Handler(c.mux))
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET "+prefix+"static/", c.assets.handler())
	m.HandleFunc("GET "+prefix+"{$}", c.serveRoot)
	m.HandleFunc("GET "+prefix+"login", c.serveLogin)
	m.HandleFunc("POST "+prefix+"login", c.postLogin)
	m.HandleFunc("POST "+prefix+"logout", c.post(false, c.postLogout))
	m.HandleFunc("POST "+prefix+"theme", c.postTheme)
	m.HandleFunc("GET "+prefix+"health", c.page(c.serveHealth))
	m.HandleFunc("GET "+prefix+"health/events", c.page(c.serveHealthEvents))
	m.HandleFunc("GET "+prefix+"health/node/{name}", c.page(c.serveMember))
	m.HandleFunc("GET "+prefix+"lot", c.page(c.serveLoT))
	m.HandleFunc("GET "+prefix+"lot/rows", c.serveLoTRows)
	m.HandleFunc("GET "+prefix+"lot/edit", c.page(c.serveEditor))
	m.HandleFunc("POST "+prefix+"lot/check", c.post(false, c.postCheck))
	m.HandleFunc("POST "+prefix+"lot/draft", c.post(false, c.postDraft))
	m.HandleFunc("POST "+prefix+"lot/discard", c.post(false, c.postDiscard))
	m.HandleFunc("POST "+prefix+"lot/deploy", c.post(true, c.postDeploy))
	m.HandleFunc("GET "+prefix+"lot/remove", c.page(c.serveRemoveLoT))
	m.HandleFunc("POST "+prefix+"lot/remove", c.post(true, c.postRemove))
	m.HandleFunc("GET "+prefix+"users", c.page(c.serveUsers))
	m.HandleFunc("POST "+prefix+"users/add", c.post(true, c.postAddUser))
	m.HandleFunc("GET "+prefix+"users/remove", c.page(c.serveRemoveUser))
	m.HandleFunc("POST "+prefix+"users/remove", c.post(true, c.postRemoveUser))
	m.HandleFunc("POST "+prefix+"users/password", c.post(false, c.postPassword))
	m.HandleFunc("GET "+prefix+"clients", c.page(c.serveClients))
	m.HandleFunc("GET "+prefix+"clients/rows", c.serveClientRows)
	m.HandleFunc("POST "+prefix+"clients/disconnect", c.post(true, c.postDisconnect))
	m.HandleFunc("GET "+prefix+"connectors", c.page(c.serveConnectors))
	m.HandleFunc("GET "+prefix+"connectors/live", c.serveConnectorsLive)
	m.HandleFunc("GET "+prefix+"setup", c.serveSetup)
	m.HandleFunc("POST "+prefix+"setup", c.postSetup)
	c.mux = m
}

// securityHeaders: every asset is the node's own (default-src 'self');
// CodeMirror sets element styles, hence style-src 'unsafe-inline'.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, prefix+"static/") {
			hd.Set("Cache-Control", "no-store")
		}
		h.ServeHTTP(w, r)
	})
}

// req is what a handler knows about the browser behind a request.
type req struct {
	sess  *session
	user  auth.User
	theme string
}

func (rq *req) admin() bool { return rq.user.Admin }

// setupPending reports whether the first-boot wizard still runs: then
// every page leads to it.
func (c *Console) setupPending() bool { return c.o.Setup != nil && c.o.Setup.Pending() }

// current returns the logged-in session of r, or nil. A session whose user
// was removed ends.
func (c *Console) current(r *http.Request) (*session, auth.User) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, auth.User{}
	}
	ss := c.sessions.get(ck.Value)
	if ss == nil {
		return nil, auth.User{}
	}
	u, ok := c.o.Users.Lookup(ss.user)
	if !ok {
		c.sessions.remove(ss.id)
		return nil, auth.User{}
	}
	return ss, u
}

func themeOf(r *http.Request) string {
	if ck, err := r.Cookie(themeCookie); err == nil && (ck.Value == "dark" || ck.Value == "light") {
		return ck.Value
	}
	return "auto"
}

// page wraps a GET handler that needs a login.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *req)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.setupPending() {
			http.Redirect(w, r, prefix+"setup", http.StatusSeeOther)
			return
		}
		ss, u := c.current(r)
		if ss == nil {
			http.Redirect(w, r, prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, &req{sess: ss, user: u, theme: themeOf(r)})
	}
}

// post wraps a POST handler: a login, the session's CSRF token and, when
// admin, an administrator.
func (c *Console) post(admin bool, h func(http.ResponseWriter, *http.Request, *req)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		ss, u := c.current(r)
		if ss == nil {
			http.Error(w, "Log in first: your session has ended.", http.StatusUnauthorized)
			return
		}
		if !tokenOK(r, ss.csrf) {
			c.log.Warn("request without a valid CSRF token refused", "path", r.URL.Path, "user", ss.user, "remote", clientIP(r))
			http.Error(w, "This form has expired or did not come from the console (CSRF token missing or wrong). Reload the page and try again.", http.StatusForbidden)
			return
		}
		if admin && !u.Admin {
			http.Error(w, "Only an administrator may do this; "+u.Name+" is not one.", http.StatusForbidden)
			return
		}
		h(w, r, &req{sess: ss, user: u, theme: themeOf(r)})
	}
}

func (c *Console) serveRoot(w http.ResponseWriter, r *http.Request) {
	switch ss, _ := c.current(r); {
	case c.setupPending():
		http.Redirect(w, r, prefix+"setup", http.StatusSeeOther)
	case ss == nil:
		http.Redirect(w, r, prefix+"login", http.StatusSeeOther)
	default:
		http.Redirect(w, r, prefix+"health", http.StatusSeeOther)
	}
}

// render writes a component as the response.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, comp templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := comp.Render(r.Context(), w); err != nil {
		c.log.Warn("render failed", "path", r.URL.Path, "err", err)
	}
}

// frame is the page chrome's data.
func (c *Console) frame(rq *req, title, active string) frame {
	f := frame{Title: title, Active: active, Theme: "auto", Assets: c.assets}
	if rq != nil {
		f.Theme = rq.theme
		if rq.sess != nil {
			f.User, f.Admin, f.CSRF = rq.user.Name, rq.user.Admin, rq.sess.csrf
		}
	}
	return f
}

// postTheme sets the colour scheme: auto (the system's), light or dark.
// It changes nothing on the node, so it needs no login; the pre-login or
// session token still guards it.
func (c *Console) postTheme(w http.ResponseWriter, r *http.Request) {
	ss, _ := c.current(r)
	want := ""
	if ss != nil {
		want = ss.csrf
	} else if ck, err := r.Cookie(preCookie); err == nil {
		want = c.sessions.preToken(ck.Value)
	}
	if !tokenOK(r, want) {
		http.Error(w, "CSRF token missing or wrong: reload the page and try again.", http.StatusForbidden)
		return
	}
	switch t := r.PostFormValue("theme"); t {
	case "dark", "light":
		setCookie(w, r, themeCookie, t, 365*24*3600)
	default:
		setCookie(w, r, themeCookie, "", -1)
	}
	back := r.PostFormValue("back")
	if !strings.HasPrefix(back, prefix) || strings.HasPrefix(back, "//") {
		back = prefix
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
