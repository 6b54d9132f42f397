package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// hostile is what an attacker puts in a prompt (and everything else a turn carries).
const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`

// env is an embedded NATS with the APTIX streams and the stages' consumers,
// holding synthetic turns (no stage runs: the console only reads what is stored).
type env struct {
	t  testing.TB
	nc *nats.Conn
	js jetstream.JetStream
}

func newEnv(t testing.TB) *env {
	t.Helper()
	nc, js := natstest.JetStream(t)
	if err := pipeline.Provision(context.Background(), js, layout.StreamConfig{}, pipeline.SubscriberConfig{}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, js: js}
}

// publish stores one event of turn at stage.
func (e *env) publish(stage string, t contracts.Turn, h nats.Header) {
	e.t.Helper()
	data, err := json.Marshal(t)
	if err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(contracts.Subject(stage, t.ConversationId, t.TurnId))
	m.Data = data
	m.Header.Set(contracts.HeaderTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	m.Header.Set(contracts.HeaderCEType, contracts.CEType(stage))
	for k, v := range h {
		m.Header[k] = v
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

var chunks = []contracts.RagChunk{
	{Id: "ck_retry", Path: "internal/retry/policy.go", StartLine: 10, EndLine: 24, Language: "go", Content: "func Backoff() {}\n</pre><script>alert(2)</script>", Score: 1.5, Repo: "aptix",
		Matches: []contracts.RagMatch{{Field: "symbol", Terms: []string{"backoff"}}, {Field: "doc", Terms: []string{"retri", "<script>"}, Expanded: []string{"retri"}}}, Uses: 12, Near: 3, Akin: []contracts.RagAkin{{Term: "again", Word: "retri", Cosine: 0.512}, {Term: "<b>", Word: "wait", Cosine: 0.4}}},
	{Id: "ck_hostile", Path: `x/"><img src=x onerror=alert(3)>.go`, StartLine: 1, EndLine: 2, Language: "go", Content: "package x"},
}

// turn stores a whole turn: retrieved, enveloped (with a [CONTEXT] block),
// responded and completed, each 5 ms after the last.
func (e *env) turn(conv, id, instruction, reply string) contracts.Turn {
	e.t.Helper()
	req := contracts.AgentExecuteRequest{ConversationId: conv, TurnId: id, Instruction: instruction, Mode: "ANALYZE",
		AgentContext: &contracts.AgentContext{Backend: "sandbox", Model: "sandbox-1"}}
	t := contracts.NewTurn(req)
	t.Retrieval = &contracts.Retrieval{Index: "default", Query: instruction, Chunks: chunks, TookMs: 1.25}
	e.publish(contracts.StageRetrieved, t, nil)
	block := contextblock.Format(chunks, contextblock.Options{})
	body, _ := json.Marshal(map[string]any{"model": "sandbox-1", "input": []any{map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "[MODE]\nANALYZE\n[INSTRUCTION]\n" + instruction}, map[string]any{"type": "input_text", "text": block.Text}}}}})
	t.Envelope = &contracts.Envelope{Backend: "sandbox", Model: "sandbox-1", Body: body}
	for _, c := range chunks {
		t.Envelope.Sources = append(t.Envelope.Sources, contracts.SourceRef{Id: c.Id, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine})
	}
	e.publish(contracts.StageEnveloped, t, nil)
	raw, _ := json.Marshal(map[string]any{"id": "resp_up_" + id, "status": "completed", "output": []any{map[string]any{"type": "message", "content": []any{map[string]any{"type": "output_text", "text": reply}}}}})
	t.LLM = &contracts.LLMResult{Backend: "sandbox", Model: "sandbox-1", Status: 200, Body: string(raw), Attempts: 1, DurationMs: 3.5}
	e.publish(contracts.StageResponded, t, nil)
	t.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, ConversationId: conv, TurnId: id, ModelId: "sandbox-1", Text: reply,
		FinishReason: contracts.FinishStop, Usage: contracts.LlmUsage{PromptTokens: 12, CompletionTokens: 7, TotalTokens: 19},
		Warnings: []string{"warning " + hostile}, ToolCalls: []contracts.AgentToolCall{{CallId: "call_1", Name: "lookup" + hostile, ArgumentsJson: `{"q":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}`}}}
	e.publish(contracts.StageCompleted, t, nil)
	return t
}

// dead stores a dead letter of the retriever for conv/turn.
func (e *env) dead(conv, turn, reason string) {
	e.t.Helper()
	data, _ := json.Marshal(contracts.AgentExecuteRequest{ConversationId: conv, TurnId: turn, Instruction: "dead " + hostile})
	m := nats.NewMsg(contracts.DeadSubject("retriever"))
	m.Data = data
	m.Header.Set(contracts.HeaderDeadReason, reason)
	m.Header.Set(contracts.HeaderDeadStage, "retriever")
	m.Header.Set(contracts.HeaderDeadSubject, contracts.Subject(contracts.StageRequested, conv, turn))
	m.Header.Set(contracts.HeaderDeadDeliveries, "3")
	m.Header.Set(contracts.HeaderMsgID, turn+".dead.retriever")
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

// keyAuth is an Authenticator over fixed bearer credentials.
type keyAuth map[string]auth.Principal

func (k keyAuth) Mode() string { return "keys" }
func (k keyAuth) Authenticate(r *http.Request) (auth.Principal, *auth.Failure) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Principal{}, &auth.Failure{Code: auth.CodeInvalidKey, Reason: "no credentials", Missing: true}
	}
	p, ok := k[strings.TrimPrefix(h, "Bearer ")]
	if !ok {
		return auth.Principal{}, &auth.Failure{Code: auth.CodeInvalidKey, Reason: "unknown"}
	}
	return p, nil
}

// server serves a console over e; mutate adjusts the config.
func (e *env) server(mutate ...func(*Config)) *client {
	e.t.Helper()
	set := profiles.Builtin()
	cfg := Config{NC: e.nc, Profiles: set, Logger: quiet,
		Responses: func(_ context.Context, id string) (string, string, bool, error) {
			if id == "resp_known" {
				return "c-one", "t-1", true, nil
			}
			return "", "", false, nil
		}}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	hs := httptest.NewServer(c)
	e.t.Cleanup(hs.Close)
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, base: hs.URL, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// client is a browser-like client: a cookie jar, redirects not followed.
type client struct {
	t     testing.TB
	base  string
	hc    *http.Client
	token string // an Authorization bearer credential, if set
}

type reply struct {
	status int
	body   string
	header http.Header
}

func (c *client) do(method, path string, form url.Values, hdr ...string) reply {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: string(b), header: res.Header}
}

func (c *client) get(path string) reply { c.t.Helper(); return c.do("GET", path, nil) }

var csrfField = regexp.MustCompile(`name="aptix-csrf" content="([^"]+)"`)

// csrf reads the CSRF token of a page (GET path first, which sets the cookie).
func (c *client) csrf(path string) string {
	c.t.Helper()
	r := c.get(path)
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s (%d):\n%s", path, r.status, r.body)
	}
	return m[1]
}

// post submits a form with the page's CSRF token.
func (c *client) post(page, path string, form url.Values) reply {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", c.csrf(page))
	return c.do("POST", path, form)
}

// noRawHostile fails when a page carries the hostile markup unescaped.
func noRawHostile(t testing.TB, page, body string) {
	t.Helper()
	for _, bad := range []string{"<script>alert", "<img src=x", "onerror=alert(1)>", "</pre><script>"} {
		if strings.Contains(body, bad) {
			i := strings.Index(body, bad)
			t.Fatalf("%s renders %q unescaped: …%s…", page, bad, body[max(0, i-120):min(len(body), i+120)])
		}
	}
}

func waitFor(t testing.TB, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var _ = fmt.Sprint
