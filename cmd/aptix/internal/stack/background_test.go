package stack

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// bgParams is a background create (store is OpenAI's default, true).
func bgParams(text string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "sandbox-1", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
}

// lifecycle is the seed's fields of a background response.
type lifecycle struct {
	Status      string `json:"status"`
	Background  bool   `json:"background"`
	CreatedAt   int64  `json:"created_at"`
	QueuedAt    *int64 `json:"queued_at"`
	StartedAt   *int64 `json:"started_at"`
	CompletedAt *int64 `json:"completed_at"`
	CancelledAt *int64 `json:"cancelled_at"`
}

func lifecycleOf(t *testing.T, raw string) lifecycle {
	t.Helper()
	var l lifecycle
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return l
}

// waitStatus polls GET (the test is the client; the gateway polls nothing)
// until the response has status, and returns it with when it was seen.
func waitStatus(t *testing.T, client openai.Client, id, status string) (*responses.Response, time.Time) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := client.Responses.Get(ctxT(t), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Status) == status {
			return r, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("response %s still %s, want %s", id, r.Status, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestGatewayBackground: background without store is a 400; a background
// create answers queued at once (queued_at = created_at), then GET shows
// in_progress and completed with started_at and completed_at; unknown ids
// are 404 for GET and cancel; cancelling a completed response returns it
// unchanged.
func TestGatewayBackground(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 1500 * time.Millisecond}, slowProfile)
	url, client := e.gateway()
	ctx := ctxT(t)
	if status, body := postJSON(t, url+"/v1/responses", `{"model":"sandbox-1","input":"x","background":true,"store":false}`); status != http.StatusBadRequest || !strings.Contains(body, "store") {
		t.Fatalf("background without store: %d %s", status, body)
	}
	created := time.Now()
	r, err := client.Responses.New(ctx, bgParams("Explain the retry policy"))
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Since(created)
	l := lifecycleOf(t, r.RawJSON())
	if l.Status != "queued" || !l.Background || l.QueuedAt == nil || *l.QueuedAt != l.CreatedAt || l.StartedAt != nil || l.CompletedAt != nil {
		t.Fatalf("background create: %s", r.RawJSON())
	}
	if answered > time.Second {
		t.Errorf("background create answered after %s: it must not wait for the model (1.5s)", answered)
	}
	_, inProgress := waitStatus(t, client, r.ID, "in_progress")
	t.Logf("background create answered in %s; queued → in_progress seen %s after it returned", answered.Round(time.Millisecond), inProgress.Sub(created.Add(answered)).Round(time.Millisecond))
	done, _ := waitStatus(t, client, r.ID, "completed")
	l = lifecycleOf(t, done.RawJSON())
	if l.StartedAt == nil || l.CompletedAt == nil || *l.StartedAt < *l.QueuedAt || *l.CompletedAt < *l.StartedAt || done.OutputText() == "" {
		t.Fatalf("completed background response: %s", done.RawJSON())
	}
	// Cancel of a terminal response: unchanged, 200.
	c, err := client.Responses.Cancel(ctx, r.ID)
	if err != nil || c.Status != responses.ResponseStatusCompleted || c.OutputText() != done.OutputText() {
		t.Fatalf("cancel of a completed response: %v %s", err, c.RawJSON())
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, "resp_nope", responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET unknown: %v", err)
	}
	if _, err := client.Responses.Cancel(ctx, "resp_nope"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("cancel unknown: %v", err)
	}
}

// TestGatewayBackgroundCancelQueued: a response cancelled while queued (no
// envelope runs yet: a transparent turn with a tool skips the retriever and
// waits at aptix.retrieved for the envelope) is cancelled at once, and when
// the stages get to it the model is never called; its status stays
// cancelled, with cancelled_at and no started_at.
func TestGatewayBackgroundCancelQueued(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) { c.Only = []string{"llmcaller", "mapper"} })
	url, client := e.gateway()
	ctx := ctxT(t)
	// A turn with no tool would skip the envelope too, straight to the
	// LLM caller (docs/architecture.md#entry-points).
	withTool := bgParams("Never run this")
	withTool.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "lookup", Parameters: map[string]any{"type": "object"}}}}
	r, err := client.Responses.New(ctx, withTool)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Responses.Cancel(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l := lifecycleOf(t, c.RawJSON()); l.Status != "cancelled" || l.CancelledAt == nil || l.StartedAt != nil {
		t.Fatalf("cancel of a queued response: %s", c.RawJSON())
	}
	// A background stream of a queued response ends when it is cancelled,
	// though no stage has it yet: response.queued, then response.cancelled.
	res, err := http.Post(url+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"sandbox-1","input":"Stream, then be cancelled","background":true,"stream":true,"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
				events <- ev
			}
		}
	}()
	first := <-events
	sid, _ := first["response"].(map[string]any)["id"].(string)
	if first["type"] != "response.queued" || sid == "" {
		t.Fatalf("first event %v", first)
	}
	if _, err := client.Responses.Cancel(ctx, sid); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for timeout := time.After(5 * time.Second); ; {
		select {
		case ev, open := <-events:
			if open {
				last = ev
				continue
			}
		case <-timeout:
			t.Fatal("the stream of a cancelled queued response did not end")
		}
		break
	}
	if last["type"] != "response.cancelled" {
		t.Fatalf("last event of a cancelled stream: %v", last)
	}

	cfg := e.cfg
	cfg.Only = []string{"retriever", "envelope"}
	e.run(e.nc, cfg)
	// The turn now runs to its end: the LLM caller refuses it.
	turn := awaitTurn(t, e, r.ID)
	if turn.Failure == nil || turn.Failure.Code != "cancelled" {
		t.Fatalf("completion of a cancelled turn: %+v", turn.Failure)
	}
	if n := e.sb.Requests(); n != 0 {
		t.Fatalf("the model was called %d time(s) for a cancelled turn", n)
	}
	g, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if l := lifecycleOf(t, g.RawJSON()); err != nil || l.Status != "cancelled" || l.StartedAt != nil {
		t.Fatalf("after the turn ended: %v %s", err, g.RawJSON())
	}
}

// abortSeen is an HTTP transport that records when an upstream call ends
// because its context was cancelled.
type abortSeen struct {
	mu      sync.Mutex
	started time.Time
	aborted time.Time
}

func (a *abortSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.started = time.Now()
	a.mu.Unlock()
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil && r.Context().Err() != nil {
		a.mu.Lock()
		a.aborted = time.Now()
		a.mu.Unlock()
	}
	return res, err
}

func (a *abortSeen) times() (started, aborted time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started, a.aborted
}

// TestGatewayBackgroundCancelInProgress: the sandbox answers after 3 s; a
// cancel while the call runs aborts it (its context is cancelled within a
// second), the response is cancelled at once and stays cancelled after the
// call would have finished, and the model is called once.
func TestGatewayBackgroundCancelInProgress(t *testing.T) {
	tr := &abortSeen{}
	e := newEnv(t, sandbox.Options{Latency: 3 * time.Second}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		c.Profiles.Put(p)
		c.HTTPClient = &http.Client{Transport: tr}
	})
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgParams("Take your time"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, client, r.ID, "in_progress")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, _ := tr.times(); !s.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the model was never called")
		}
	}
	cancelled := time.Now()
	c, err := client.Responses.Cancel(ctx, r.ID)
	if err != nil || c.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel in progress: %v %s", err, c.RawJSON())
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, a := tr.times(); !a.IsZero() {
			t.Logf("upstream call aborted %s after the cancel", a.Sub(cancelled).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream call was not aborted within 1s of the cancel")
		}
	}
	turn := awaitTurn(t, e, r.ID)
	if turn.Failure == nil || turn.Failure.Code != "cancelled" {
		t.Fatalf("completion of a cancelled turn: %+v", turn.Failure)
	}
	time.Sleep(3500 * time.Millisecond) // past when the call would have answered
	g, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if l := lifecycleOf(t, g.RawJSON()); err != nil || l.Status != "cancelled" || l.CancelledAt == nil || l.StartedAt == nil {
		t.Fatalf("after the call would have finished: %v %s", err, g.RawJSON())
	}
	if n := e.sb.Requests(); n > 1 {
		t.Fatalf("the model was called %d times", n)
	}
}

// sseEvents reads a raw SSE body into (type, data) pairs; the body must
// end with data: [DONE], and nothing after it.
func sseEvents(t *testing.T, body io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if done {
				t.Fatalf("data after [DONE]: %s", data)
			}
			if data == "[DONE]" {
				done = true
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			out = append(out, m)
		}
	}
	if !done {
		t.Fatalf("the stream ended without data: [DONE] after %d events", len(out))
	}
	return out
}

// TestGatewayStreamsEndWithDone: every SSE stream of a response ends with
// its terminal event and then the literal data: [DONE] (Open Responses'
// terminal event): a streamed create, a background create with stream,
// and a resumed stream (GET ?stream=true), from the start and from a
// point after the terminal event.
func TestGatewayStreamsEndWithDone(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	read := func(name string, res *http.Response) conformance.Stream {
		t.Helper()
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("%s: HTTP %d %s", name, res.StatusCode, b)
		}
		st, err := conformance.ReadSSE(res.Body)
		if err != nil || !st.Done {
			t.Fatalf("%s: done %v, framing %v", name, st.Done, err)
		}
		return st
	}
	post := func(body string) *http.Response {
		res, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	st := read("create", post(`{"model":"sandbox-1","input":"Stream me","stream":true}`))
	if last := st.Events[len(st.Events)-1]; last.Type != "response.completed" {
		t.Fatalf("create: last event %s", last.Type)
	}
	bg := read("background", post(`{"model":"sandbox-1","input":"Stream me in the background","stream":true,"background":true}`))
	last := bg.Events[len(bg.Events)-1]
	if last.Type != "response.completed" {
		t.Fatalf("background: last event %s", last.Type)
	}
	var term struct{ ID string }
	_ = json.Unmarshal(bg.Final, &term)
	for _, after := range []string{"", "&starting_after=1", "&starting_after=" + strconv.FormatInt(last.Seq, 10)} {
		res, err := http.Get(url + "/v1/responses/" + term.ID + "?stream=true" + after)
		if err != nil {
			t.Fatal(err)
		}
		read("resume"+after, res)
	}
}

// TestGatewayBackgroundStreamResume: background + stream starts with
// response.queued and ends with response.completed; GET
// ?stream=true&starting_after=N replays exactly the events after N, with
// the same sequence numbers and content.
func TestGatewayBackgroundStreamResume(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)
	stream := client.Responses.NewStreaming(ctx, bgParams("Stream this in the background"))
	var types []string
	var id string
	var full []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		full = append(full, ev.RawJSON())
		if ev.Response.ID != "" {
			id = ev.Response.ID
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 4 || types[0] != "response.queued" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Fatalf("background stream events: %v", types)
	}
	const after = 2
	res, err := http.Get(url + "/v1/responses/" + id + "?stream=true&starting_after=2")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	resumed := sseEvents(t, res.Body)
	if len(resumed) != len(full)-after-1 {
		t.Fatalf("resumed %d events after %d, want %d", len(resumed), after, len(full)-after-1)
	}
	for i, ev := range resumed {
		var want map[string]any
		_ = json.Unmarshal([]byte(full[after+1+i]), &want)
		if ev["type"] != want["type"] || ev["sequence_number"] != want["sequence_number"] || ev["delta"] != want["delta"] {
			t.Fatalf("resumed event %d: %v, want %v", i, ev, want)
		}
	}
	if _, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{}, option.WithQuery("stream", "false")); err != nil {
		t.Fatal(err)
	}
}

// turnOf is the conversation and turn of response id: its record in the
// gateway's KV when one was written, else what its id names (a response
// that starts its conversation runs in "c-<turn>", and its id is
// "resp_" and the turn's UUID in hex: docs/http-api.md#where-a-response-is-kept).
func turnOf(t *testing.T, ctx context.Context, e *env, id string) (conv, turn string) {
	t.Helper()
	kv, err := e.js.KeyValue(ctx, application.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "resp."+id)
	if err == nil {
		var meta struct{ ConversationID, TurnID string }
		if err := json.Unmarshal(entry.Value(), &meta); err != nil {
			t.Fatal(err)
		}
		return meta.ConversationID, meta.TurnID
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.TrimPrefix(id, "resp_"))
	if err != nil {
		t.Fatalf("response id %s: %v", id, err)
	}
	u, err := uuid.FromBytes(b)
	if err != nil {
		t.Fatalf("response id %s: %v", id, err)
	}
	return "c-" + u.String(), u.String()
}

// responseOfTurn is the response id of a gateway turn.
func responseOfTurn(turn string) string {
	u := uuid.MustParse(turn)
	return "resp_" + hex.EncodeToString(u[:])
}

// awaitTurn waits for the completion of a response's turn.
func awaitTurn(t *testing.T, e *env, id string) contracts.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conv, turnID := turnOf(t, ctx, e, id)
	turn, err := client.Await(ctx, e.js, conv, turnID)
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

// TestGatewayBackgroundTimeout: a background response still running after
// BackgroundTimeout (1 s here; the sandbox takes 3 s) fails with code
// timeout, its upstream call is aborted, and its webhook says
// response.failed.
func TestGatewayBackgroundTimeout(t *testing.T) {
	tr := &abortSeen{}
	e := newEnv(t, sandbox.Options{Latency: 3 * time.Second}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		c.Profiles.Put(p)
		c.HTTPClient = &http.Client{Transport: tr}
	})
	rc := newReceiver(t, 0)
	wc := &application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: 100 * time.Millisecond, Timeout: 2 * time.Second, AllowPrivate: true}
	_, client := e.gateway(func(c *httpapi.Config) { c.Webhooks, c.BackgroundTimeout = wc, time.Second })
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgWithWebhook("Run too long", rc.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := waitStatus(t, client, r.ID, "failed")
	if f.Error.Code != "timeout" || !strings.Contains(f.RawJSON(), `"failed_at"`) {
		t.Fatalf("timed-out response: %s", f.RawJSON())
	}
	d := rc.waitDeliveries(t, 1)[0]
	verifyStandardWebhook(t, d)
	if d.header.Get("X-Aptix-Event") != "response.failed" || !strings.Contains(string(d.body), `"timeout"`) {
		t.Fatalf("timeout webhook %v: %s", d.header, d.body)
	}
	if _, aborted := tr.times(); aborted.IsZero() {
		t.Fatal("the upstream call of a timed-out response was not aborted")
	}
}

// TestGatewayBackgroundDeleteCancels: DELETE of a response whose model call
// is running cancels it first: the call is aborted, not left running for
// nobody, and the response is gone.
func TestGatewayBackgroundDeleteCancels(t *testing.T) {
	tr := &abortSeen{}
	e := newEnv(t, sandbox.Options{Latency: 2 * time.Second}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		c.Profiles.Put(p)
		c.HTTPClient = &http.Client{Transport: tr}
	})
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgParams("Delete me while I run"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, _ := tr.times(); !s.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the model was never called")
		}
	}
	deleted := time.Now()
	if err := client.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, a := tr.times(); !a.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream call still runs %s after DELETE", time.Since(deleted).Round(time.Millisecond))
		}
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET after DELETE: %v", err)
	}
}

// TestGatewayCancelSyncCreate: a cancel of a response whose synchronous
// create is still waiting ends that create with the cancelled response
// (200), not an error; the model call is aborted.
func TestGatewayCancelSyncCreate(t *testing.T) {
	tr := &abortSeen{}
	e := newEnv(t, sandbox.Options{Latency: 2 * time.Second}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		c.Profiles.Put(p)
		c.HTTPClient = &http.Client{Transport: tr}
	})
	_, client := e.gateway()
	ctx := ctxT(t)
	type result struct {
		r   *responses.Response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Wait for me")}})
		done <- result{r, err}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, _ := tr.times(); !s.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the model was never called")
		}
	}
	// The waiting create has not answered yet: its turn is the only one
	// the model was called for, and names its id.
	st, err := e.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(contracts.StageFilter(contracts.StageEnveloped)))
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for subject := range info.State.Subjects {
		if _, _, turn, ok := contracts.ParseSubject(subject); ok {
			id = responseOfTurn(turn)
		}
	}
	if _, err := client.Responses.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.err != nil || res.r.Status != responses.ResponseStatusCancelled || res.r.ID != id {
			t.Fatalf("sync create after a cancel: %v %+v", res.err, res.r)
		}
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("the sync create still waits after the cancel")
	}
}

// slowProfile lets the sandbox's latency run without the test profile's
// 1 s attempt timeout cutting it.
func slowProfile(c *Config) {
	p, _ := c.Profiles.Get("sandbox")
	p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
	c.Profiles.Put(p)
}

// TestGatewayBackgroundCancelStopsUpstream: with a
// backend that keeps background responses (capability reattach), cancelling
// an in-progress response also cancels the upstream response, so the model
// stops generating (and billing) instead of finishing unseen.
func TestGatewayBackgroundCancelStopsUpstream(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 3 * time.Second}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		p.Capabilities.Reattach = true
		c.Profiles.Put(p)
	})
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgParams("Take your time upstream"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.sb.Snapshot().Background == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no background response was created upstream")
		}
	}
	time.Sleep(200 * time.Millisecond) // the caller records the upstream id before relaying
	if _, err := client.Responses.Cancel(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); e.sb.Snapshot().Cancels != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream response was not cancelled: %+v", e.sb.Snapshot().Counts)
		}
	}
	if turn := awaitTurn(t, e, r.ID); turn.Failure == nil || turn.Failure.Code != "cancelled" {
		t.Fatalf("completion of a cancelled turn: %+v", turn.Failure)
	}
}
