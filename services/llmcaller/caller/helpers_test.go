package caller_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

var quiet = slog.New(slog.DiscardHandler)

// startSandbox serves a sandbox over httptest.
func startSandbox(t testing.TB, o sandbox.Options) (*httptest.Server, *sandbox.Server) {
	t.Helper()
	o.Logger = quiet
	srv := sandbox.New(o)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, srv
}

// profileSet returns a set whose default profile "sb" points at url; edit
// adjusts it before it is added.
func profileSet(url string, edit func(p *profiles.Profile)) *profiles.Set {
	p := profiles.Profile{
		Name: "sb", BaseURL: url + "/v1", DefaultModel: "sandbox-1", Sandbox: true,
		AttemptTimeout: 5 * time.Second, TurnTimeout: 10 * time.Second, MaxRetries: 3, MaxConcurrent: 8,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true},
	}
	if edit != nil {
		edit(&p)
	}
	set := &profiles.Set{}
	set.Put(p)
	set.Default = p.Name
	return set
}

// faultSequence is an http.Client whose i-th request carries faults[i] as
// X-Sandbox-Fault (later requests carry none), so a test scripts a failure
// followed by recovery without touching the caller.
func faultSequence(faults ...string) *http.Client {
	var mu sync.Mutex
	n := 0
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		if n < len(faults) && faults[n] != "" {
			r.Header.Set(sandbox.HeaderFault, faults[n])
		}
		n++
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// message builds an input message item.
func message(role string, texts ...string) map[string]any {
	var parts []map[string]string
	for _, s := range texts {
		parts = append(parts, map[string]string{"type": "input_text", "text": s})
	}
	return map[string]any{"type": "message", "role": role, "content": parts}
}

// requestBody builds a /responses body from fields.
func requestBody(t testing.TB, fields map[string]any) json.RawMessage {
	t.Helper()
	if _, ok := fields["model"]; !ok {
		fields["model"] = "sandbox-1"
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func simpleBody(t testing.TB, instruction string) json.RawMessage {
	return requestBody(t, map[string]any{"input": []any{message("user", "[MODE: TEST]\n\n[INSTRUCTION]\n"+instruction)}})
}

// outputText extracts the concatenated output_text of a response body.
func outputText(t *testing.T, body string) string {
	t.Helper()
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("body is not a response: %v: %s", err, body)
	}
	s := ""
	for _, o := range r.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				s += c.Text
			}
		}
	}
	return s
}

func responseID(t *testing.T, body string) string {
	t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == "" {
		t.Fatalf("no response id in %s", body)
	}
	return r.ID
}

// startJetStream runs an embedded NATS server with JetStream.
func startJetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// recorder is a DeltaSink that keeps every delta.
type recorder struct {
	mu     sync.Mutex
	deltas []caller.Delta
}

func (r *recorder) Delta(_ context.Context, d caller.Delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deltas = append(r.deltas, d)
}

func (r *recorder) all() []caller.Delta {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]caller.Delta(nil), r.deltas...)
}

// fixedServer answers every request with the given status, headers and body.
func fixedServer(t *testing.T, status int, header map[string]string, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	count := &atomic.Int32{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		count.Add(1)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts, count
}

// callLog is a caller.CallLog over the calls made through wrap, as the
// stage's reads a conversation's calls from its events.
type callLog struct {
	mu    sync.Mutex
	calls map[string][]caller.LoggedCall
}

func (l *callLog) Calls(_ context.Context, conv string) ([]caller.LoggedCall, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]caller.LoggedCall(nil), l.calls[conv]...), nil
}

func (l *callLog) add(conv string, call caller.LoggedCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string][]caller.LoggedCall{}
	}
	l.calls[conv] = append(l.calls[conv], call)
}

// wrap logs every call c makes with its result, as the pipeline stores the
// enveloped event and the result's event.
func (l *callLog) wrap(c *caller.Caller) loggedCaller { return loggedCaller{c, l} }

type loggedCaller struct {
	c   *caller.Caller
	log *callLog
}

func (lc loggedCaller) Call(ctx context.Context, in caller.Input) contracts.LLMResult {
	res := lc.c.Call(ctx, in)
	lc.log.add(in.ConversationID, caller.LoggedCall{Backend: in.Backend, Body: in.Body, Result: res})
	return res
}
