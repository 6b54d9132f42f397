// Package console is the gateway's web console at /console/: server-rendered
// pages (html/template, every asset embedded) over what the APTIX stream and
// its buckets keep, the same readers `aptix status`, `events`, `trace`,
// `diff`, `replay` and `dead` use (pkg/pipeline/history). See docs/console.md.
//
// Every string a turn carries is attacker-controlled: pages are built with
// html/template's contextual escaping only, the Content-Security-Policy
// allows no inline script, and actions are POSTs with a CSRF token and a
// confirmation step. With authentication on, only a credential holding the
// admin role (auth.RoleAdmin) sees anything.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Owns reports whether the console serves path.
func Owns(path string) bool { return path == "/console" || strings.HasPrefix(path, Prefix) }

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ResponseLookup resolves an HTTP response id (resp_…) to its conversation
// and turn; found is false for an unknown id.
type ResponseLookup func(ctx context.Context, id string) (conversation, turn string, found bool, err error)

// Config configures the console. NC is required.
type Config struct {
	NC *nats.Conn
	// Auth is the gateway's authenticator; nil serves everyone (APTIX_AUTH
	// none: the console is as open as the API).
	Auth auth.Authenticator
	// Profiles name the backends a replay may use (names and default
	// models only: nothing of a profile's credentials is shown).
	Profiles *profiles.Set
	// Responses resolves resp_… ids (the gateway's response store); nil: none.
	Responses ResponseLookup
	// SourceURL, when set, links each context chunk to its source: a URL
	// with {path}, {start} and {end} replaced, e.g.
	// https://git.example.com/org/repo/blob/main/{path}#L{start}-L{end}
	// (APTIX_CONSOLE_SOURCE_URL).
	// Unset, a chunk links to its entry in the turn's retrieval list.
	SourceURL string
	Logger    *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Console is the console's http.Handler.
type Console struct {
	cfg    Config
	js     jetstream.JetStream
	spend  usageStore // cost.go
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	static http.Handler
	cop    *http.CrossOriginProtection
	follow *follower
}

// New prepares the console: templates parsed once, routes registered.
func New(cfg Config) (*Console, error) {
	if cfg.NC == nil {
		return nil, errors.New("console: NC is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SourceURL == "" {
		cfg.SourceURL = os.Getenv("APTIX_CONSOLE_SOURCE_URL")
	}
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, fmt.Errorf("console: jetstream: %w", err)
	}
	c := &Console{cfg: cfg, js: js, log: cfg.Logger, pages: map[string]*template.Template{}, cop: http.NewCrossOriginProtection(),
		follow: &follower{js: js}}
	for _, page := range []string{"overview", "conversation", "turn", "diff", "dead", "deadletter", "live", "confirm", "login", "message"} {
		t, err := template.New("layout.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/layout.tmpl", "templates/partials.tmpl", "templates/"+page+".tmpl")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	sub, _ := fs.Sub(staticFS, "static")
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	c.routes()
	return c, nil
}

// Close stops following the stream (the overview's window).
func (c *Console) Close() { c.follow.stop() }

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /console/{$}", c.overview)
	m.HandleFunc("GET /console/search", c.search)
	m.HandleFunc("GET /console/conversations/{id}", c.conversation)
	m.HandleFunc("GET /console/turns/{id}", c.turn)
	m.HandleFunc("GET /console/turns/{id}/upstream", c.upstreamRaw)
	m.HandleFunc("GET /console/events/{seq}/raw", c.eventRaw)
	m.HandleFunc("POST /console/turns/{id}/replay", c.replay)
	m.HandleFunc("GET /console/diff", c.diff)
	m.HandleFunc("GET /console/dead", c.deadList)
	m.HandleFunc("GET /console/dead/{seq}", c.deadShow)
	m.HandleFunc("POST /console/dead/{seq}/retry", c.deadRetry)
	m.HandleFunc("POST /console/dead/retry", c.deadRetryAll)
	m.HandleFunc("POST /console/dead/purge", c.deadPurge)
	m.HandleFunc("GET /console/live", c.live)
	m.HandleFunc("GET /console/live/events", c.liveEvents)
	m.HandleFunc("GET /console/live/text", c.liveText)
	m.HandleFunc("POST /console/logout", c.logout)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.message(w, r, http.StatusNotFound, "Not found", "There is no console page at "+r.URL.Path+".")
	})
	c.mux = m
}

// Cookie names: the credential a person signed in with (auth on), and the
// CSRF token (double-submit: every form carries the cookie's value).
const (
	credCookie = "aptix_console"
	csrfCookie = "aptix_csrf"
)

type ctxKey struct{}

// request is what every page knows about the request: who, and the CSRF token.
type request struct {
	principal auth.Principal
	csrf      string
}

func from(r *http.Request) request { v, _ := r.Context().Value(ctxKey{}).(request); return v }

// ServeHTTP serves the console: static assets to anyone, the sign-in page,
// and every other page to an admin (or to anyone with authentication off).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.URL.Path == "/console" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	if strings.HasPrefix(r.URL.Path, Prefix+"static/") {
		h.Set("Cache-Control", "public, max-age=300")
		c.static.ServeHTTP(w, r)
		return
	}
	h.Set("Cache-Control", "no-store")
	rq := request{csrf: c.csrfToken(w, r)}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq))
	if r.Method == http.MethodPost {
		if err := c.checkCSRF(r); err != nil {
			c.log.Info("console: POST refused", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err)
			c.message(w, r, http.StatusForbidden, "Request refused", "The form was not sent from this console (missing or stale CSRF token). Reload the page and try again.")
			return
		}
	}
	if r.URL.Path == Prefix+"login" {
		c.login(w, r)
		return
	}
	p, ok := c.authenticate(w, r)
	if !ok {
		return
	}
	rq.principal = p
	c.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
}

// authenticate resolves the caller: anyone when authentication is off; else
// a credential in the Authorization or X-API-Key header, or the one the
// person signed in with (an HttpOnly, SameSite=Strict cookie). A page
// without a credential sends the browser to the sign-in page; a credential
// without the admin role gets 403 and nothing else.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	if c.cfg.Auth == nil {
		return auth.Principal{Via: "none", Roles: []string{auth.RoleAdmin}}, true
	}
	ar := r
	if r.Header.Get("Authorization") == "" && r.Header.Get("X-API-Key") == "" {
		ck, err := r.Cookie(credCookie)
		if err != nil || ck.Value == "" {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, Prefix+"live/") {
				http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			} else {
				c.message(w, r, http.StatusUnauthorized, "Sign in", "The console needs an admin credential.")
			}
			return auth.Principal{}, false
		}
		ar = r.Clone(r.Context())
		ar.Header.Set("Authorization", "Bearer "+ck.Value)
	}
	p, f := c.cfg.Auth.Authenticate(ar)
	if f != nil {
		if f.Code == "unavailable" {
			c.message(w, r, http.StatusServiceUnavailable, "Unavailable", "The key store is unavailable; retry later.")
			return p, false
		}
		c.log.Info("console: authentication failed", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", f.Reason)
		clearCookie(w, credCookie)
		c.message(w, r, http.StatusUnauthorized, "Sign in", "That credential was refused (unknown, revoked or expired).")
		return p, false
	}
	if !p.Has(auth.RoleAdmin) {
		c.log.Info("console: refused a principal without the admin role", "principal", p.ID, "path", r.URL.Path)
		c.message(w, r, http.StatusForbidden, "Admins only", "The console requires a credential with the admin role (aptix keys create --admin, or a token whose roles claim holds admin).")
		return p, false
	}
	return p, true
}

// login shows the sign-in form (GET) or checks a credential and keeps it in
// the session cookie (POST). With authentication off there is nothing to
// sign in to.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		next = Prefix
	}
	if c.cfg.Auth == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	data := map[string]any{"Next": next}
	if r.Method == http.MethodPost {
		cred := strings.TrimSpace(r.PostFormValue("credential"))
		ar := r.Clone(r.Context())
		ar.Header = http.Header{"Authorization": {"Bearer " + cred}}
		p, f := c.cfg.Auth.Authenticate(ar)
		switch {
		case cred == "":
			data["Error"] = "Paste an API key or a token."
		case f != nil:
			data["Error"] = "That credential was refused (unknown, revoked or expired)."
		case !p.Has(auth.RoleAdmin):
			data["Error"] = "That credential has no admin role: the console is for admins."
		default:
			http.SetCookie(w, &http.Cookie{Name: credCookie, Value: cred, Path: Prefix, HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: 8 * 3600})
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		c.renderStatus(w, r, http.StatusUnauthorized, "login", "Sign in", data)
		return
	} else if r.Method != http.MethodGet {
		c.message(w, r, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	c.render(w, r, "login", "Sign in", data)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	clearCookie(w, credCookie)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// csrfToken returns the request's CSRF token, issuing a cookie with a new
// random one when it has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 43 {
		return ck.Value
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: Prefix, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return tok
}

// checkCSRF refuses a POST from another origin (Sec-Fetch-Site / Origin,
// net/http's CrossOriginProtection) and one whose form token is not the
// cookie's.
func (c *Console) checkCSRF(r *http.Request) error {
	if err := c.cop.Check(r); err != nil {
		return err
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" {
		return errors.New("no CSRF cookie")
	}
	if subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		return errors.New("CSRF token mismatch")
	}
	return nil
}

// page is what the layout needs besides the page's own data.
type page struct {
	Title     string
	Nav       string
	CSRF      string
	Principal string
	SignedIn  bool
	Data      any
	Took      string
	start     time.Time
}

// render executes a page template into a buffer first, so a failed
// template never leaves half a page behind a 200.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	c.renderStatus(w, r, http.StatusOK, name, title, data)
}

func (c *Console) renderStatus(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	rq := from(r)
	p := page{Title: title, Nav: name, CSRF: rq.csrf, Principal: rq.principal.ID, SignedIn: c.cfg.Auth != nil && rq.principal.ID != "", Data: data}
	var buf strings.Builder
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Error("console: render failed", "page", name, "err", err)
		http.Error(w, "the console failed to render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// message renders a page with a title and one paragraph, with status.
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	c.renderStatus(w, r, status, "message", title, map[string]any{"Text": text, "Status": status})
}

// fail renders an error reading the bus: a 400 for the caller's mistake,
// 404 for what is not stored, else 502 with the error.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ie interface{ IsInputError() bool }
	switch {
	case errors.As(err, &ie) && ie.IsInputError():
		c.message(w, r, http.StatusBadRequest, "Bad request", err.Error())
	case isNotStored(err):
		c.message(w, r, http.StatusNotFound, "Not found", err.Error())
	default:
		c.log.Warn("console: read failed", "path", r.URL.Path, "err", err)
		c.message(w, r, http.StatusBadGateway, "The bus did not answer", err.Error())
	}
}

// validID checks a path id (a conversation or turn): ids are tokens.
func validID(id string) bool { return contracts.IsToken(id) }
