package stage_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeBackend is a sandbox behind a handler that counts the calls made
// (POST /v1/responses) and runs onPost, if set, on each.
type fakeBackend struct {
	url    string
	sb     *sandbox.Server
	posts  atomic.Int32
	onPost atomic.Pointer[func()]
}

func newFakeBackend(t *testing.T, latency time.Duration) *fakeBackend {
	t.Helper()
	b := &fakeBackend{sb: sandbox.New(sandbox.Options{Logger: quiet, Latency: latency})}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/responses" {
			b.posts.Add(1)
			if f := b.onPost.Load(); f != nil {
				(*f)()
			}
		}
		b.sb.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	b.url = hs.URL + "/v1"
	return b
}

// fallbackSet is "first" (faults sent with each of its calls) falling
// back to "second" on the backend second; each priced on its own.
func fallbackSet(first, second *fakeBackend, fault string, edit func(first, second *profiles.Profile)) *profiles.Set {
	caps := profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}
	f := profiles.Profile{Name: "first", BaseURL: first.url, DefaultModel: "sandbox-1", Sandbox: true, MaxRetries: 1,
		AttemptTimeout: 5 * time.Second, TurnTimeout: 10 * time.Second, Capabilities: caps,
		Headers: map[string]string{"X-Sandbox-Fault": fault}, Fallbacks: []string{"second"},
		Prices: profiles.Prices{"*": {Input: 1, Output: 1}}}
	s := profiles.Profile{Name: "second", BaseURL: second.url, DefaultModel: "sandbox-2", Sandbox: true, MaxRetries: 1,
		AttemptTimeout: 5 * time.Second, TurnTimeout: 10 * time.Second, Capabilities: caps,
		Prices: profiles.Prices{"*": {Input: 5, Output: 5}}}
	if edit != nil {
		edit(&f, &s)
	}
	set := &profiles.Set{}
	set.Put(f)
	set.Put(s)
	set.Default = "first"
	return set
}

func fallbackTurn(id string) *contracts.Turn {
	return &contracts.Turn{ConversationId: "c-" + id, TurnId: id,
		Request:  contracts.AgentExecuteRequest{ConversationId: "c-" + id, TurnId: id, Instruction: "hi"},
		Envelope: &contracts.Envelope{Backend: "first", Model: "sandbox-1", Body: []byte(`{"model":"sandbox-1","input":"hi"}`)}}
}

func fastCaller(set *profiles.Set, o caller.Options) *caller.Caller {
	o.Logger, o.BaseBackoff, o.MaxBackoff = quiet, time.Millisecond, time.Millisecond
	return caller.New(set, o)
}

// TestFallbacks: a backend answering 529 and one timing out each fall
// back once, after their own retries, to the next profile, which serves
// the turn at its own price and model; a 400 or 401 never falls back; a
// chain whose last member fails too ends in an error naming every attempt.
func TestFallbacks(t *testing.T) {
	for name, c := range map[string]struct {
		fault      string
		edit       func(first, second *profiles.Profile)
		firstPosts int32 // calls the first backend got (its retries)
		served     string
		errHas     []string
	}{
		"529 falls back once": {fault: "529", firstPosts: 2, served: "second"},
		"timeout falls back once": {fault: "latency=2s", firstPosts: 1, served: "second",
			edit: func(f, _ *profiles.Profile) { f.AttemptTimeout, f.MaxRetries = 100*time.Millisecond, 0 }},
		"400 does not fall back": {fault: "400", firstPosts: 1, served: "first", errHas: []string{"400"}},
		"401 does not fall back": {fault: "401", firstPosts: 1, served: "first"},
		"every backend fails": {fault: "529", firstPosts: 2, served: "second",
			edit:   func(_, s *profiles.Profile) { s.Headers, s.MaxRetries = map[string]string{"X-Sandbox-Fault": "500"}, 0 },
			errHas: []string{"every backend failed (2 tried)", "first (sandbox-1): HTTP 529", "second (sandbox-2): HTTP 500"}},
	} {
		t.Run(name, func(t *testing.T) {
			first, second := newFakeBackend(t, 0), newFakeBackend(t, 0)
			set := fallbackSet(first, second, c.fault, c.edit)
			l := &stage.LLMCaller{Caller: fastCaller(set, caller.Options{})}
			turn := fallbackTurn(strings.ReplaceAll(name, " ", "-"))
			if err := l.Handle(context.Background(), turn); err != nil {
				t.Fatal(err)
			}
			res := turn.LLM
			if res == nil || res.Backend != c.served {
				t.Fatalf("served by %+v, want %s", res, c.served)
			}
			if got := first.posts.Load(); got != c.firstPosts {
				t.Errorf("the first backend got %d calls, want %d", got, c.firstPosts)
			}
			fellBack := c.served == "second"
			if got := second.posts.Load(); fellBack != (got > 0) {
				t.Errorf("the second backend got %d calls", got)
			}
			if fellBack != (len(res.Fallbacks) == 1) || fellBack && res.Fallbacks[0].Backend != "first" {
				t.Errorf("fallbacks %+v", res.Fallbacks)
			}
			if len(c.errHas) == 0 && fellBack {
				if res.Error != nil || res.Model != "sandbox-2" {
					t.Fatalf("the fallback failed: %+v", res)
				}
				if p := turn.Envelope.Price; p == nil || p.Input != 5 || turn.Envelope.Backend != "second" || turn.Envelope.Model != "sandbox-2" {
					t.Errorf("charged at %+v on %s/%s, want the serving backend's", p, turn.Envelope.Backend, turn.Envelope.Model)
				}
			}
			if !fellBack && res.Error == nil {
				t.Fatalf("a %s was answered: %+v", c.fault, res)
			}
			for _, s := range c.errHas {
				if res.Error == nil || !strings.Contains(res.Error.Message, s) {
					t.Errorf("error %+v does not say %q", res.Error, s)
				}
			}
		})
	}
}

// TestFallbackHoldsTheFailedDone: a streamed turn whose first backend
// fails before any output shows the client the fallback's answer only,
// never the first call's error.
func TestFallbackHoldsTheFailedDone(t *testing.T) {
	first, second := newFakeBackend(t, 0), newFakeBackend(t, 0)
	set := fallbackSet(first, second, "529", nil)
	sink := &deltaLog{}
	l := &stage.LLMCaller{Caller: fastCaller(set, caller.Options{}), Deltas: sink}
	turn := fallbackTurn("stream")
	turn.Request.Stream = true
	if err := l.Handle(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	if turn.LLM.Error != nil || turn.LLM.Backend != "second" {
		t.Fatalf("%+v", turn.LLM)
	}
	var dones []string
	text := 0
	for _, d := range sink.deltas {
		switch d.Type {
		case caller.DeltaDone:
			dones = append(dones, d.Status)
		case caller.DeltaText:
			text++
		}
	}
	if len(dones) != 1 || dones[0] != "completed" || text == 0 {
		t.Fatalf("done deltas %v, %d text deltas: want the fallback's completion only", dones, text)
	}
}

type deltaLog struct {
	mu     sync.Mutex
	deltas []caller.Delta
}

func (l *deltaLog) Delta(_ context.Context, d caller.Delta) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deltas = append(l.deltas, d)
}

// TestFallbackCrashPaysOnce: the process dies while the fallback's call is
// in flight (its upstream response created and paid for). The redelivery,
// in another process over the same call records, neither calls the first
// backend again nor creates a second response on the fallback: it
// re-attaches to the one the crashed delivery started.
func TestFallbackCrashPaysOnce(t *testing.T) {
	first, second := newFakeBackend(t, 0), newFakeBackend(t, 600*time.Millisecond)
	reattach := func(_, s *profiles.Profile) { s.Capabilities.Reattach = true }
	set := fallbackSet(first, second, "529", reattach)
	results := caller.NewMemResultStore()

	ctx, crash := context.WithCancel(context.Background())
	cut := func() { time.AfterFunc(200*time.Millisecond, crash) }
	second.onPost.Store(&cut)
	turn := fallbackTurn("crash")
	if err := (&stage.LLMCaller{Caller: fastCaller(set, caller.Options{Results: results})}).Handle(ctx, turn); err == nil {
		t.Fatalf("the crashed handling returned no error: %+v", turn.LLM)
	}
	firstCalls := first.posts.Load()
	if got := second.sb.Snapshot().Created; got != 1 {
		t.Fatalf("the fallback created %d responses before the crash, want 1", got)
	}
	second.onPost.Store(nil)

	turn = fallbackTurn("crash")
	if err := (&stage.LLMCaller{Caller: fastCaller(set, caller.Options{Results: results})}).Handle(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	if turn.LLM.Error != nil || turn.LLM.Backend != "second" {
		t.Fatalf("the redelivery: %+v", turn.LLM)
	}
	if got := first.posts.Load(); got != firstCalls {
		t.Errorf("the first backend was called again: %d calls, %d before the crash", got, firstCalls)
	}
	if st := second.sb.Snapshot(); st.Created != 1 || st.Resumes != 1 {
		t.Errorf("the fallback created %d responses (want 1) and resumed %d (want 1)", st.Created, st.Resumes)
	}
	if len(turn.LLM.Fallbacks) != 1 || turn.LLM.Fallbacks[0].Skipped == "" {
		t.Errorf("fallbacks %+v: want the first backend named as tried before", turn.LLM.Fallbacks)
	}
}

// TestNoFallbackAfterOutput: a streamed call cut off after its first delta
// reached the client (a connection error, which may fall back before any
// output) ends the turn with its error: the client has seen part of an
// answer, and another backend's would follow it.
func TestNoFallbackAfterOutput(t *testing.T) {
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n"+
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"partial\"}\n\n")
	}))
	defer cut.Close()
	first, second := newFakeBackend(t, 0), newFakeBackend(t, 0)
	set := fallbackSet(first, second, "", func(f, _ *profiles.Profile) { f.BaseURL, f.Headers = cut.URL+"/v1", nil })
	sink := &deltaLog{}
	l := &stage.LLMCaller{Caller: fastCaller(set, caller.Options{}), Deltas: sink}
	turn := fallbackTurn("cut")
	turn.Request.Stream = true
	if err := l.Handle(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	if turn.LLM.Error == nil || turn.LLM.Error.Type != "connection_error" || turn.LLM.Backend != "first" || len(turn.LLM.Fallbacks) != 0 {
		t.Fatalf("%+v %+v", turn.LLM, turn.LLM.Error)
	}
	if n := second.posts.Load(); n != 0 {
		t.Fatalf("the fallback was called %d times after output reached the client", n)
	}
	if d := sink.deltas; len(d) != 2 || d[0].Text != "partial" || d[1].Type != caller.DeltaDone || d[1].Status != "error" {
		t.Fatalf("deltas %+v: want the partial text and the error's done", d)
	}
}

// TestNoFallbackAcrossAContinuation: a request continuing a response by
// previous_response_id continues what only its backend holds; the
// fallback is listed as skipped, never called, and the error says why.
func TestNoFallbackAcrossAContinuation(t *testing.T) {
	first, second := newFakeBackend(t, 0), newFakeBackend(t, 0)
	set := fallbackSet(first, second, "529", nil)
	sink := &deltaLog{}
	l := &stage.LLMCaller{Caller: fastCaller(set, caller.Options{}), Deltas: sink}
	turn := fallbackTurn("cont")
	turn.Request.Stream = true
	turn.Envelope.Body = []byte(`{"model":"sandbox-1","input":"hi","previous_response_id":"resp_1"}`)
	if err := l.Handle(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	res := turn.LLM
	if res.Error == nil || second.posts.Load() != 0 || len(res.Fallbacks) != 2 || res.Fallbacks[1].Skipped == "" ||
		res.Backend != "first" || res.Status != 529 ||
		!strings.Contains(res.Error.Message, "previous_response_id") || !strings.Contains(res.Error.Message, "HTTP 529") {
		t.Fatalf("%+v: %+v", res.Fallbacks, res.Error)
	}
	// A streamed client still sees the turn end.
	if d := sink.deltas; len(d) != 1 || d[0].Type != caller.DeltaDone || d[0].Status != "error" {
		t.Fatalf("deltas %+v: want the failed call's done", d)
	}
}

// TestFallbackSpans: each attempt of a turn that fell back is a span of
// its own, naming its backend, the fallback's numbered.
func TestFallbackSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	first, second := newFakeBackend(t, 0), newFakeBackend(t, 0)
	l := &stage.LLMCaller{Caller: fastCaller(fallbackSet(first, second, "529", nil), caller.Options{})}
	if err := l.Handle(context.Background(), fallbackTurn("spans")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rec.Ended() {
		desc := s.Name()
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "aptix.backend", "aptix.fallback":
				desc += " " + string(kv.Key) + "=" + kv.Value.Emit()
			}
		}
		got = append(got, desc)
	}
	want := []string{"chat sandbox-1 aptix.backend=first", "chat sandbox-2 aptix.backend=second aptix.fallback=1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("spans %q, want %q", got, want)
	}
}
