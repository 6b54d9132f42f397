package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// TestPages opens every page with authentication off: each answers 200 with
// what a person needs to see, and none renders a turn's hostile text as markup.
func TestPages(t *testing.T) {
	e := newEnv(t)
	e.turn("c-one", "t-1", "Explain the retry policy "+hostile, "Retries back off "+hostile)
	e.turn("c-one", "t-2", "And the timeouts?", "Timeouts are per attempt.")
	e.dead("c-two", "t-dead", "gave up after 3 deliveries: index unavailable "+hostile)
	loop := e.turn("c-tools", "t-tools", "Search the docs", "Found it")
	loop.Tools = &contracts.ToolLoop{Round: 1, Executions: []contracts.ToolExecution{{ID: "exec_1", Tool: "search_code" + hostile, Server: "aptix", Round: 1,
		Output: "results " + hostile, DurationMs: 12, Status: contracts.ExecCompleted}}}
	e.publish(contracts.StageCompleted, loop, nil)
	c := e.server()

	for _, p := range []struct {
		path string
		want []string
	}{
		{"/console/", []string{"Turns per second", "Error rate", `data-stage="retriever"`, `data-stage="llmcaller"`, `href="/console/conversations/c-one"`, "Newest conversations"}},
		{"/console/conversations/c-one", []string{"t-1", "t-2", "Explain the retry policy &lt;script&gt;alert(1)&lt;/script&gt;", "Retries back off", "ok / stop",
			"sandbox-1", "tokens 12 in / 7 out", `data-stage="retrieved"`, `data-stage="enveloped"`, `data-stage="responded"`, `data-stage="completed"`}},
		{"/console/turns/t-1?c=c-one", []string{"The [CONTEXT] block", "=== CHUNK 1 ===", "ck_retry", "internal/retry/policy.go:10-24", `href="#retrieved-ck_retry"`,
			"‹the [CONTEXT] block: 2 chunk(s)", "matched: symbol[backoff] doc[retri &lt;script&gt;] (added: retri)", "near in meaning #3 · used by 12", "akin: again~retri 0.51, &lt;b&gt;~wait 0.40", "resp_up_t-1", "AgentExecuteResponse", "Every stored event (4)", "warning &lt;script&gt;", "Replay…",
			`id="request-rule">AGN-003 framing`}},
		{"/console/turns/t-1", []string{"Every stored event (4)"}}, // the conversation found from the stream
		{"/console/turns/resp_known", []string{"Every stored event (4)", "c-one"}},
		{"/console/diff?a=t-1&ca=c-one&b=t-2&cb=c-one", []string{"kind/finish", "Response text", "Retries back off", "Timeouts are per attempt."}},
		{"/console/dead", []string{"dead-letters", "index unavailable &lt;script&gt;", "Retry all", "Purge all"}},
		{"/console/dead?stage=retriever", []string{"dead-letters"}},
		{"/console/conversations/c-tools", []string{"Tool loop: 1 round(s)", "search_code&lt;script&gt;", "results &lt;script&gt;", "completed"}},
		{"/console/live", []string{`data-page="live"`, `id="live"`, "requested", "completed"}},
	} {
		r := c.get(p.path)
		if r.status != 200 {
			t.Fatalf("%s: %d\n%s", p.path, r.status, r.body)
		}
		for _, w := range p.want {
			if !strings.Contains(r.body, w) {
				t.Errorf("%s lacks %q", p.path, w)
			}
		}
		noRawHostile(t, p.path, r.body)
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", p.path, csp)
		}
	}
	// The dead letter's own page.
	letters := deadSeqs(t, e)
	r := c.get("/console/dead/" + letters[0])
	if r.status != 200 || !strings.Contains(r.body, "aptix.requested.c-two.t-dead") {
		t.Fatalf("dead letter page %d:\n%s", r.status, r.body)
	}
	noRawHostile(t, "dead letter", r.body)
	// Static assets are embedded.
	if r := c.get("/console/static/console.js"); r.status != 200 || !strings.Contains(r.body, "EventSource") {
		t.Fatalf("console.js: %d", r.status)
	}
	if r := c.get("/console"); r.status != http.StatusMovedPermanently {
		t.Fatalf("/console: %d", r.status)
	}
}

func deadSeqs(t *testing.T, e *env) []string {
	t.Helper()
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(contracts.DeadPrefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		if m, err := s.GetMsg(context.Background(), seq); err == nil && strings.HasPrefix(m.Subject, contracts.DeadPrefix) {
			out = append(out, jsonNum(seq))
		}
	}
	return out
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// TestStatuses: bad ids are 400, what is not stored 404, unknown pages 404.
func TestStatuses(t *testing.T) {
	e := newEnv(t)
	e.turn("c-one", "t-1", "hello", "hi")
	c := e.server()
	for path, want := range map[string]int{
		"/console/conversations/nope":                404,
		"/console/conversations/bad!id":              400,
		"/console/turns/nope?c=c-one":                404,
		"/console/turns/t-1?c=bad!":                  400,
		"/console/turns/resp_unknown":                404,
		"/console/dead/999":                          404,
		"/console/dead/abc":                          400,
		"/console/dead?stage=nope":                   400,
		"/console/diff?a=t-1&b=nope&cb=c-one":        404,
		"/console/diff?a=t-1&b=bad!":                 400,
		"/console/nothing":                           404,
		"/console/search?q=c-one":                    303,
		"/console/search?q=t-1":                      303,
		"/console/search?q=resp_known":               303,
		"/console/search?q=resp_unknown":             404,
		"/console/search?q=nope":                     404,
		"/console/search?q=%3Cscript%3E":             400,
		"/console/live/text?conversation=c&turn=%3C": 400,
	} {
		r := c.get(path)
		if r.status != want {
			t.Errorf("%s: %d, want %d\n%.300s", path, r.status, want, r.body)
		}
		noRawHostile(t, path, r.body)
	}
	if loc := c.get("/console/search?q=t-1").header.Get("Location"); loc != "/console/turns/t-1?c=c-one" {
		t.Errorf("search t-1 → %q", loc)
	}
	if loc := c.get("/console/search?q=resp_known").header.Get("Location"); loc != "/console/turns/t-1?c=c-one" {
		t.Errorf("search resp_known → %q", loc)
	}
	if r := c.do("DELETE", "/console/", nil); r.status != 405 && r.status != 404 && r.status != 403 {
		t.Errorf("DELETE /console/: %d", r.status)
	}
}

// TestReplayAction: a replay is a POST with the CSRF token, confirmed, and
// publishes the stored input of the chosen stage under a new turn id with
// the other model; the browser is sent to the new turn's page.
func TestReplayAction(t *testing.T) {
	e := newEnv(t)
	e.turn("c-one", "t-1", "Explain the retry policy", "Retries back off")
	c := e.server()
	path := "/console/turns/t-1/replay"
	form := url.Values{"c": {"c-one"}, "from": {"llmcaller"}, "model": {"other-model"}}
	if r := c.do("POST", path, form); r.status != http.StatusForbidden {
		t.Fatalf("replay without a CSRF token: %d", r.status)
	}
	r := c.post("/console/turns/t-1?c=c-one", path, form)
	if r.status != 200 || !strings.Contains(r.body, "Replay turn t-1 from the llmcaller") || !strings.Contains(r.body, `name="confirm" value="yes"`) {
		t.Fatalf("replay without confirmation: %d\n%s", r.status, r.body)
	}
	form.Set("confirm", "yes")
	r = c.post("/console/turns/t-1?c=c-one", path, form)
	loc := r.header.Get("Location")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/turns/") || !strings.HasSuffix(loc, "?c=c-one") {
		t.Fatalf("replay: %d %q\n%s", r.status, loc, r.body)
	}
	turn := strings.TrimSuffix(strings.TrimPrefix(loc, "/console/turns/"), "?c=c-one")
	s, _ := e.js.Stream(context.Background(), contracts.StreamName)
	m, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageEnveloped, "c-one", turn))
	if err != nil {
		t.Fatalf("replayed event: %v", err)
	}
	var got contracts.Turn
	_ = json.Unmarshal(m.Data, &got)
	if m.Header.Get(contracts.HeaderReplayOf) != "t-1" || got.Envelope.Model != "other-model" || !strings.Contains(string(got.Envelope.Body), `"model":"other-model"`) {
		t.Fatalf("replayed event: headers %v envelope %+v", m.Header, got.Envelope)
	}
	// The new turn's page shows it in flight (its next stages have not run here).
	if r := c.get(loc); r.status != 200 || !strings.Contains(r.body, `id="in-flight"`) || !strings.Contains(r.body, "Replay of") {
		t.Fatalf("new turn page: %d\n%s", r.status, r.body)
	}
	// A stage that does not exist is a 400.
	if r := c.post("/console/turns/t-1?c=c-one", path, url.Values{"c": {"c-one"}, "from": {"nowhere"}, "confirm": {"yes"}}); r.status != 400 {
		t.Fatalf("replay from nowhere: %d", r.status)
	}
}

// TestDeadActions: retry one, retry all and purge are confirmed POSTs that
// do what `aptix dead` does.
func TestDeadActions(t *testing.T) {
	e := newEnv(t)
	e.dead("c-d", "t-a", "boom a")
	e.dead("c-d", "t-b", "boom b")
	e.dead("c-d", "t-c", "boom c")
	c := e.server()
	seqs := deadSeqs(t, e)
	retry := "/console/dead/" + seqs[0] + "/retry"
	if r := c.do("POST", retry, url.Values{"confirm": {"yes"}}); r.status != 403 {
		t.Fatalf("retry without CSRF: %d", r.status)
	}
	if r := c.post("/console/dead", retry, nil); r.status != 200 || !strings.Contains(r.body, "Retry dead letter "+seqs[0]) {
		t.Fatalf("retry unconfirmed: %d\n%s", r.status, r.body)
	}
	if len(deadSeqs(t, e)) != 3 {
		t.Fatal("an unconfirmed retry changed something")
	}
	r := c.post("/console/dead", retry, url.Values{"confirm": {"yes"}})
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "retried") {
		t.Fatalf("retry: %d %s", r.status, r.header.Get("Location"))
	}
	q, _ := e.js.Stream(context.Background(), contracts.QueueStreamName)
	m, err := q.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageRequested, "c-d", "t-a"))
	if err != nil || m.Header.Get(contracts.HeaderRedrive) != seqs[0] || m.Header.Get(contracts.HeaderDeadReason) != "" {
		t.Fatalf("retried event: %v %v", err, m)
	}
	if left := deadSeqs(t, e); len(left) != 2 {
		t.Fatalf("dead letters after one retry: %v", left)
	}
	if r := c.post("/console/dead", "/console/dead/retry", url.Values{"stage": {"retriever"}, "confirm": {"yes"}}); r.status != 303 || !strings.Contains(r.header.Get("Location"), "2+dead+letter") {
		t.Fatalf("retry all: %d %s", r.status, r.header.Get("Location"))
	}
	if left := deadSeqs(t, e); len(left) != 0 {
		t.Fatalf("dead letters after retry all: %v", left)
	}
	e.dead("c-d", "t-e", "boom e")
	if r := c.post("/console/dead", "/console/dead/purge", url.Values{"stage": {"retriever"}}); r.status != 200 || !strings.Contains(r.body, "Delete every dead letter of the retriever") {
		t.Fatalf("purge unconfirmed: %d", r.status)
	}
	if r := c.post("/console/dead", "/console/dead/purge", url.Values{"stage": {"retriever"}, "confirm": {"yes"}}); r.status != 303 || !strings.Contains(r.header.Get("Location"), "Purged+1") {
		t.Fatalf("purge: %d %s", r.status, r.header.Get("Location"))
	}
	if r := c.get("/console/dead"); !strings.Contains(r.body, `id="no-dead"`) {
		t.Fatalf("dead page after purge:\n%s", r.body)
	}
	// A form posted from another site is refused even with a token.
	form := url.Values{"csrf": {c.csrf("/console/dead")}, "confirm": {"yes"}}
	if r := c.do("POST", "/console/dead/purge", form, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); r.status != 403 {
		t.Fatalf("cross-site purge: %d", r.status)
	}
}

// TestAdminOnly: with authentication on, the console needs a credential
// with the admin role: none is sent to sign in, a bad one is 401, an
// ordinary key 403 with nothing of the data; an admin signs in once (the
// credential kept in an HttpOnly cookie, never shown on a page).
func TestAdminOnly(t *testing.T) {
	e := newEnv(t)
	e.turn("c-secret", "t-1", "secret prompt", "secret reply")
	const adminKey, userKey = "sk-aptix-admin-credential", "sk-aptix-user-credential"
	c := e.server(func(cfg *Config) {
		cfg.Auth = keyAuth{adminKey: {ID: "key:ops", Via: "key", Roles: []string{auth.RoleAdmin}}, userKey: {ID: "key:app", Via: "key"}}
	})
	for _, path := range []string{"/console/", "/console/conversations/c-secret", "/console/turns/t-1?c=c-secret", "/console/dead", "/console/live"} {
		r := c.get(path)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/login?next=") {
			t.Fatalf("%s without a credential: %d %s", path, r.status, r.header.Get("Location"))
		}
	}
	if r := c.get("/console/live/events"); r.status != 401 {
		t.Fatalf("SSE without a credential: %d", r.status)
	}
	c.token = "sk-aptix-wrong"
	if r := c.get("/console/"); r.status != 401 || strings.Contains(r.body, "c-secret") {
		t.Fatalf("bad key: %d", r.status)
	}
	c.token = userKey
	for _, path := range []string{"/console/", "/console/conversations/c-secret", "/console/turns/t-1?c=c-secret", "/console/dead", "/console/live/events"} {
		if r := c.get(path); r.status != 403 || strings.Contains(r.body, "secret") {
			t.Fatalf("%s with an ordinary key: %d\n%s", path, r.status, r.body)
		}
	}
	if r := c.post("/console/login", "/console/dead/purge", url.Values{"confirm": {"yes"}}); r.status != 403 {
		t.Fatalf("purge with an ordinary key: %d", r.status)
	}
	c.token = adminKey
	if r := c.get("/console/conversations/c-secret"); r.status != 200 || !strings.Contains(r.body, "secret reply") {
		t.Fatalf("admin by header: %d", r.status)
	}
	// Sign in with the form: an ordinary key is refused, the admin's kept.
	c.token = ""
	if r := c.post("/console/login", "/console/login", url.Values{"credential": {userKey}}); r.status != 401 || !strings.Contains(r.body, "no admin role") {
		t.Fatalf("sign in with an ordinary key: %d", r.status)
	}
	r := c.post("/console/login", "/console/login", url.Values{"credential": {adminKey}, "next": {"/console/conversations/c-secret"}})
	if r.status != 303 || r.header.Get("Location") != "/console/conversations/c-secret" {
		t.Fatalf("sign in: %d %q", r.status, r.header.Get("Location"))
	}
	if sc := r.header.Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Fatalf("session cookie: %s", sc)
	}
	for _, path := range []string{"/console/", "/console/conversations/c-secret", "/console/turns/t-1?c=c-secret", "/console/dead", "/console/live"} {
		r := c.get(path)
		if r.status != 200 {
			t.Fatalf("%s signed in: %d", path, r.status)
		}
		if strings.Contains(r.body, adminKey) || strings.Contains(r.body, "credential\" value") {
			t.Fatalf("%s shows the credential", path)
		}
	}
	// An open redirect is not: next must stay in the console.
	r = c.post("/console/login", "/console/login", url.Values{"credential": {adminKey}, "next": {"//evil.example/x"}})
	if r.header.Get("Location") != "/console/" {
		t.Fatalf("next //evil.example: %q", r.header.Get("Location"))
	}
	if r := c.post("/console/", "/console/logout", nil); r.status != 303 {
		t.Fatalf("sign out: %d", r.status)
	}
	if r := c.get("/console/"); r.status != 303 {
		t.Fatalf("after sign out: %d", r.status)
	}
}

// TestLiveSSE: the live stream sends each stored event as a "stage" event;
// the text stream relays a turn's deltas and ends when it completes.
func TestLiveSSE(t *testing.T) {
	e := newEnv(t)
	c := e.server()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(path string) *bufio.Reader {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("%s: %d %s %s", path, res.StatusCode, res.Header.Get("Content-Type"), b)
		}
		return bufio.NewReader(res.Body)
	}
	until := func(r *bufio.Reader, want string) string {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if strings.Contains(line, want) {
				return line
			}
		}
	}
	events := open("/console/live/events")
	text := open("/console/live/text?conversation=c-live&turn=t-live")
	time.Sleep(100 * time.Millisecond) // the consumers are in place once the headers came; let the subscription settle
	t0 := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c-live", TurnId: "t-live", Instruction: hostile})
	e.publish(contracts.StageRetrieved, t0, nil)
	line := until(events, `"turn":"t-live"`)
	if !strings.Contains(line, `"stage":"retrieved"`) || !strings.Contains(line, `"conversation":"c-live"`) {
		t.Fatalf("stage event: %s", line)
	}
	b, _ := json.Marshal(map[string]any{"type": "text", "text": hostile, "seq": 1})
	if err := e.nc.Publish(contracts.DeltaSubject("c-live", "t-live"), b); err != nil {
		t.Fatal(err)
	}
	if line := until(text, "data:"); !strings.Contains(line, `"type":"text"`) {
		t.Fatalf("delta: %s", line)
	}
	t0.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: "done"}
	e.publish(contracts.StageCompleted, t0, nil)
	until(text, "event: done")
	until(events, `"stage":"completed"`)
	_ = nats.ErrTimeout
}
