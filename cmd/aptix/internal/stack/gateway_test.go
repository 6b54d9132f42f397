package stack

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/sealbox"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/gateway/app"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// gateway serves the HTTP gateway over e's pipeline and returns its URL and
// an openai-go client for it (no SDK retries: a test sees each status once).
func (e *env) gateway(mutate ...func(*httpapi.Config)) (string, openai.Client) {
	e.t.Helper()
	srv, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) {
		c.MaxBodyBytes, c.SyncTimeout = 64<<10, 15*time.Second
		c.Stream = e.cfg.Stream // admission past the queue at the stages' mark
		for _, m := range mutate {
			m(c)
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	e.t.Cleanup(hs.Close)
	return hs.URL, openai.NewClient(option.WithBaseURL(hs.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// buildGateway builds a gateway the way every process does (app.FromEnv:
// the environment's settings, authentication for a loopback listener) on
// nc, with the test's own settings over them.
func buildGateway(nc *nats.Conn, set *profiles.Set, edit func(*httpapi.Config)) (*httpapi.Server, error) {
	gw, err := app.FromEnv(context.Background(), app.Options{NC: nc, Profiles: set, Addr: "127.0.0.1:0", Logger: quiet, Edit: edit})
	if err != nil {
		return nil, err
	}
	return gw.Server, nil
}

// lastUpstreamID is the upstream response id of the newest completed turn
// (tests run their turns one at a time).
func (e *env) lastUpstreamID() string { up, _ := e.lastCompleted(); return up }

// lastCompleted is the upstream response id and the Aptix conversation of
// the newest completed turn.
func (e *env) lastCompleted() (upstreamID, conversationID string) {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), "aptix.completed.>")
	if err != nil {
		e.t.Fatal(err)
	}
	var turn contracts.Turn
	if err := json.Unmarshal(m.Data, &turn); err != nil || turn.Response == nil {
		e.t.Fatalf("completed event: %v", err)
	}
	return turn.Response.ResponseContinuationId, turn.ConversationId
}

func apiError(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var ae *openai.Error
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error %d %s, got %v", status, code, err)
	}
	if ae.StatusCode != status || ae.Code != code {
		t.Fatalf("got %d %q (%s), want %d %q", ae.StatusCode, ae.Code, ae.Message, status, code)
	}
	return ae
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestGatewayCreateGetDelete: Create Response, Get Response,
// List Input Items and Delete Response, with openai-go as the client and the
// whole pipeline behind the gateway.
func TestGatewayCreateGetDelete(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Explain the retry policy")},
		Instructions: openai.String("You are terse."),
		Temperature:  openai.Float(0.25),
		Metadata:     map[string]string{"ticket": "42"},
	}, option.WithJSONSet("aptix", map[string]any{"mode": "ANALYZE", "ragScope": "none"}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "resp_") || r.Status != responses.ResponseStatusCompleted || r.Object != "response" {
		t.Fatalf("response %s status %s", r.ID, r.Status)
	}
	if txt := r.OutputText(); !strings.Contains(txt, "Explain the retry policy") || !strings.Contains(txt, "ANALYZE") {
		t.Fatalf("output text %q", txt)
	}
	if r.Usage.TotalTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Fatalf("usage %+v", r.Usage)
	}
	if r.Temperature != 0.25 || r.Metadata["ticket"] != "42" || r.Instructions.OfString != "You are terse." {
		t.Fatalf("echo: temperature %v metadata %v instructions %+v", r.Temperature, r.Metadata, r.Instructions)
	}
	// What the client said reached the model: the passthrough temperature,
	// the instructions as AGN-003's first-turn system message.
	sent := sentBody(t, e.sb.LastRequest())
	if sent["temperature"] != 0.25 || sent["input"].([]any)[0].(map[string]any)["role"] != "system" {
		t.Fatalf("upstream body %v", sent)
	}
	if up := e.lastUpstreamID(); up == r.ID || up == "" {
		t.Fatal("the response id must be Aptix's, not the upstream's")
	}

	got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.OutputText() != r.OutputText() || got.Status != r.Status {
		t.Fatalf("GET %s: %s %q", got.ID, got.Status, got.OutputText())
	}

	items, err := client.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Data) != 1 || items.Data[0].Type != "message" || items.Data[0].ID == "" || items.HasMore {
		t.Fatalf("input items %+v", items.Data)
	}

	if err := client.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiError(t, err, 404, "not_found")
	e.settled()
}

// TestGatewayStream: streaming (stream: true, docs/http-api.md#streaming): OpenAI's event
// sequence with increasing sequence numbers, and the SDK's accumulator
// rebuilds the same final response a GET returns.
func TestGatewayStream(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream me an answer")},
	})
	var acc responses.ResponseAccumulator
	var types []string
	last := int64(-1)
	text := ""
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber <= last {
			t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("accumulator rejected %s: %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(final.OutputText(), "Stream me an answer") || text != final.OutputText() {
		t.Fatalf("deltas %q, final %q", text, final.OutputText())
	}
	got, err := client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != final.OutputText() || got.Status != responses.ResponseStatusCompleted {
		t.Fatalf("GET after stream: %s %q", got.Status, got.OutputText())
	}
}

// TestGatewayContinuationAndBranching: previous_response_id (docs/http-api.md#continuation-and-branching)
// continues the conversation; continuing from an older response branches
// and sees history up to that response only, never the later turn.
func TestGatewayContinuationAndBranching(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	turn := func(prev, text string) (*responses.Response, map[string]any) {
		t.Helper()
		p := responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		up, conv := e.lastCompleted()
		body := sentBody(t, e.sb.LastRequest())
		body["_upstream_id"], body["_conversation"] = up, conv
		return r, body
	}
	r1, b1 := turn("", "first")
	r2, b2 := turn(r1.ID, "second")
	if b2["previous_response_id"] != b1["_upstream_id"] || r2.PreviousResponseID != r1.ID {
		t.Fatalf("continuation: upstream previous %v, want %v; previous_response_id %s", b2["previous_response_id"], b1["_upstream_id"], r2.PreviousResponseID)
	}
	// A branch from r1, after r2 exists: its upstream history is r1's chain.
	r3, b3 := turn(r1.ID, "branch")
	if b3["previous_response_id"] != b1["_upstream_id"] {
		t.Fatalf("branch continued from %v, want r1's upstream %v (not r2's %v)", b3["previous_response_id"], b1["_upstream_id"], b2["_upstream_id"])
	}
	// Continuing the branch follows the branch; continuing r2 follows r2.
	_, b4 := turn(r3.ID, "branch two")
	if b4["previous_response_id"] != b3["_upstream_id"] {
		t.Fatalf("branch continuation from %v, want %v", b4["previous_response_id"], b3["_upstream_id"])
	}
	_, b5 := turn(r2.ID, "third")
	if b5["previous_response_id"] != b2["_upstream_id"] {
		t.Fatalf("main line continuation from %v, want %v", b5["previous_response_id"], b2["_upstream_id"])
	}
	// The branch is its own Aptix conversation; the main line stays one.
	if b2["_conversation"] != b1["_conversation"] || b5["_conversation"] != b1["_conversation"] ||
		b3["_conversation"] == b1["_conversation"] || b4["_conversation"] != b3["_conversation"] {
		t.Fatalf("conversations: r1 %v r2 %v branch %v branch2 %v r5 %v", b1["_conversation"], b2["_conversation"], b3["_conversation"], b4["_conversation"], b5["_conversation"])
	}
	// An unknown previous_response_id is OpenAI's 400, never a fresh start.
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}, PreviousResponseID: openai.String("resp_nope")})
	ae := apiError(t, err, 400, "previous_response_not_found")
	if ae.Param != "previous_response_id" {
		t.Fatalf("param %q", ae.Param)
	}
}

// TestGatewayBadRequests: error handling (docs/http-api.md#errors): an unknown model is
// OpenAI's 404 model_not_found; an unknown parameter, malformed JSON, a body over the limit,
// and none of them reaches the pipeline.
func TestGatewayBadRequests(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-nope",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	apiError(t, err, 404, "model_not_found")
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}}, option.WithJSONSet("temprature", 1))
	ae := apiError(t, err, 400, "unknown_parameter")
	if ae.Param != "temprature" || ae.Message != "Unknown parameter: 'temprature'." {
		t.Fatalf("unknown parameter error %+v", ae)
	}

	post := func(body []byte) (int, map[string]any) {
		resp, err := http.Post(url+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%d: not JSON: %s", resp.StatusCode, b)
		}
		return resp.StatusCode, m["error"].(map[string]any)
	}
	status, body := post([]byte(`{"model":"sandbox-1","input": oops}`))
	if status != 400 || body["code"] != "invalid_json" || !strings.Contains(body["message"].(string), "position 30") {
		t.Fatalf("malformed JSON: %d %v", status, body)
	}
	big := `{"model":"sandbox-1","input":"` + strings.Repeat("a", 70<<10) + `"}`
	status, body = post([]byte(big))
	if status != 413 || body["code"] != "request_too_large" {
		t.Fatalf("oversized body: %d %v", status, body)
	}
	if n := e.sb.Requests(); n != 0 {
		t.Fatalf("%d upstream calls for bad requests", n)
	}
}

// TestGatewayUpstream429: the error table (docs/http-api.md#errors): a model error keeps the
// upstream's status and error body (a 429 stays a 429), and the stored
// response is failed with that error.
func TestGatewayUpstream429(t *testing.T) {
	e := newEnv(t, sandbox.Options{Faults: "429,retry-after-ms=1"})
	_, client := e.gateway()
	_, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Message == "" {
		t.Fatalf("want the upstream's 429, got %v", err)
	}
}

// TestGatewayEndpoints: /v1/models lists the profiles' models, the health
// endpoints answer, and /v1/aptix/execute speaks the seed's own shapes.
func TestGatewayEndpoints(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)
	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "sandbox-1" {
		t.Fatalf("models %+v", models.Data)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Post(url+"/v1/aptix/execute", "application/json",
		strings.NewReader(`{"mode":"DDR_CREATION","instruction":"Document it","ragScope":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Kind, Text, ConversationId string
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("execute: %d %v", resp.StatusCode, err)
	}
	if out.Kind != "ok" || !strings.Contains(out.Text, "DDR_CREATION") || out.ConversationId == "" {
		t.Fatalf("execute: %+v", out)
	}
}

// TestGatewayFileSearch: RAG from a stock SDK: a file_search tool naming an
// Aptix workspace makes the retriever run (the AGN-002 block reaches the
// model), and the output starts with a file_search_call item listing the
// chunks used when include asks for them.
func TestGatewayFileSearch(t *testing.T) {
	var asked contracts.AgentExecuteRequest
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Searcher = retrieverstage.SearchFunc(func(_ context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
			asked = req
			return contracts.Retrieval{Index: req.WorkspaceId, Query: req.Instruction, Chunks: []contracts.RagChunk{
				{Id: "ck_retry", Path: "retry.go", StartLine: 19, EndLine: 41, Language: "Go", Content: "func backoff() {}", Score: 0.7}}}, nil
		})
	})
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{
		Model:   "sandbox-1",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("Where are retries scheduled?")},
		Tools:   []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{"aptix"}}}},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableFileSearchCallResults},
	})
	if err != nil {
		t.Fatal(err)
	}
	if asked.WorkspaceId != "aptix" || asked.RagScope != contracts.RagScopeWorkspace {
		t.Fatalf("retriever asked %+v", asked)
	}
	if !strings.Contains(r.OutputText(), "ck_retry") {
		t.Fatalf("the model did not get the context block: %q", r.OutputText())
	}
	fs := r.Output[0].AsFileSearchCall()
	if r.Output[0].Type != "file_search_call" || len(fs.Results) != 1 || fs.Results[0].FileID != "ck_retry" || fs.Results[0].Filename != "retry.go" {
		t.Fatalf("file_search_call %s", r.Output[0].RawJSON())
	}
	if sent := string(e.sb.LastRequest()); strings.Contains(sent, "file_search") {
		t.Fatalf("the file_search tool reached the upstream: %s", sent)
	}
}

// TestGatewayToolRound: tools, client side: a forced function
// tool comes back as a function_call item (call_id, arguments), streamed too
// (the accumulator rebuilds the call); the client's function_call_output
// continues the response without an AGN-003 user message.
func TestGatewayToolRound(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "lookup", Strict: openai.Bool(true),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}, "additionalProperties": false}}}
	params := responses.ResponseNewParams{Model: "sandbox-1", Tools: []responses.ToolUnionParam{tool},
		Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("Look it up")},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "lookup"}}}
	r, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := r.Output[0].AsFunctionCall()
	if r.Output[0].Type != "function_call" || call.Name != "lookup" || !strings.HasPrefix(call.CallID, "call_") || !json.Valid([]byte(call.Arguments)) {
		t.Fatalf("output %s", r.Output[0].RawJSON())
	}
	if len(r.Tools) != 1 || !r.Tools[0].AsFunction().Strict {
		t.Fatalf("tools echo %+v", r.Tools)
	}

	stream := client.Responses.NewStreaming(ctx, params)
	var acc responses.ResponseAccumulator
	for stream.Next() {
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(stream.Current().RawJSON()), &se); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("accumulator: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	snap := acc.Snapshot()
	if len(snap.Output) != 1 || snap.Output[0].Type != "function_call" || snap.Output[0].Name != "lookup" || !json.Valid([]byte(snap.Output[0].Arguments)) {
		t.Fatalf("streamed call %+v", snap.Output)
	}

	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{functionOutput(call.CallID, `{"answer":42}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Status != responses.ResponseStatusCompleted || r2.PreviousResponseID != r.ID {
		t.Fatalf("round 2: %s prev %s", r2.Status, r2.PreviousResponseID)
	}
	sent := sentBody(t, e.sb.LastRequest())
	input := sent["input"].([]any)
	if len(input) != 1 || input[0].(map[string]any)["type"] != "function_call_output" || input[0].(map[string]any)["call_id"] != call.CallID {
		t.Fatalf("round 2 upstream input %v", input)
	}
}

// TestGatewayReplicas: gateways are stateless (behind a load
// balancer): a response created on one replica is read, listed and
// continued on another.
func TestGatewayReplicas(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, a := e.gateway()
	_, b := e.gateway()
	ctx := ctxT(t)
	r, err := a.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("on replica A")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != r.OutputText() {
		t.Fatalf("GET on B: %v %q", err, got.OutputText())
	}
	r2, err := b.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("on replica B")}})
	if err != nil || r2.PreviousResponseID != r.ID {
		t.Fatalf("continue on B: %v", err)
	}
}

// TestGatewayClientDisconnect: a streaming client that goes away does not
// cancel its turn: it completes and GET returns it.
func TestGatewayClientDisconnect(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 300 * time.Millisecond})
	_, client := e.gateway()
	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("I will hang up")}})
	if !stream.Next() || stream.Current().Type != "response.created" {
		t.Fatalf("first event: %v", stream.Err())
	}
	id := stream.Current().Response.ID
	cancel()
	_ = stream.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := client.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == responses.ResponseStatusCompleted {
			if !strings.Contains(got.OutputText(), "I will hang up") {
				t.Fatalf("output %q", got.OutputText())
			}
			break
		}
		if got.Status != responses.ResponseStatusQueued && got.Status != responses.ResponseStatusInProgress {
			t.Fatalf("status %s", got.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 10s", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGatewayBusDown: with NATS gone the gateway answers 503 with
// Retry-After (clients retry), never a half-written 200.
func TestGatewayBusDown(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	nc, _ := natstest.Connect(t, e.url)
	url, _ := e.gateway(func(c *httpapi.Config) { c.NC = nc; c.SubmitTimeout = time.Second })
	nc.Close()
	for _, p := range []string{"/v1/responses", "/readyz"} {
		var resp *http.Response
		var err error
		if p == "/readyz" {
			resp, err = http.Get(url + p)
		} else {
			resp, err = http.Post(url+p, "application/json", strings.NewReader(`{"model":"sandbox-1","input":"x"}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"service_unavailable"`) {
			t.Fatalf("%s with NATS down: %d %q %s", p, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
}

func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

// TestGatewayCompact: POST /v1/responses/compact (AGN-003's "context size
// growth" risk): the model's summary of the chain comes back as a
// compaction item; a new request that sends it as input starts a fresh
// chain carrying the summary, and the compaction moved no head.
func TestGatewayCompact(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The deploy key is K-77")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID)})
	if err != nil {
		t.Fatal(err)
	}
	last := c.Output[len(c.Output)-1]
	if c.Object != "response.compaction" || last.Type != "compaction" || last.AsCompaction().EncryptedContent == "" || c.Usage.TotalTokens == 0 {
		t.Fatalf("compaction %s", c.RawJSON())
	}
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] == nil {
		t.Fatalf("the summary turn must continue r1's chain: %v", sent)
	}
	var input responses.ResponseInputParam
	if err := json.Unmarshal([]byte(`[`+last.RawJSON()+`,{"type":"message","role":"user","content":"What is the key?"}]`), &input); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}); err != nil {
		t.Fatal(err)
	}
	if sent := string(e.sb.LastRequest()); !strings.Contains(sent, "[COMPACTED CONVERSATION]") || strings.Contains(sent, "previous_response_id") {
		t.Fatalf("request after compaction: %s", sent)
	}
	// The compaction is no turn of r1's conversation: continuing r1 still
	// continues its conversation (no branch).
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("go on")}}); err != nil {
		t.Fatal(err)
	}
	_, conv := e.lastCompleted()
	s, err := e.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("aptix.completed."+conv+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(info.State.Subjects); n != 2 {
		t.Fatalf("r1's conversation has %d completed turns, want 2 (r1 and its continuation)", n)
	}
}

// TestGatewayCompactionSealed: the compaction item the gateway makes hides
// what the user said, opens on a gateway holding its key (also after a
// rotation that keeps it), and is a 400 on the item when altered or when
// its key is gone.
func TestGatewayCompactionSealed(t *testing.T) {
	e := newEnv(t, sandbox.Options{Script: []string{"Noted.", "Summary: the deploy key is K-77."}})
	keyA, keyB := sealbox.Generate(), sealbox.Generate()
	ring := func(list string) func(*httpapi.Config) {
		k, err := sealbox.Parse(list)
		if err != nil {
			t.Fatal(err)
		}
		return func(c *httpapi.Config) { c.CompactionKeys = k }
	}
	_, clientA := e.gateway(ring(keyA))
	ctx := ctxT(t)
	r1, err := clientA.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The deploy key is K-77")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientA.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID)})
	if err != nil {
		t.Fatal(err)
	}
	blob := c.Output[len(c.Output)-1].AsCompaction().EncryptedContent
	if !strings.HasPrefix(blob, "aptix3.") || strings.Contains(blob, "K-77") || strings.Contains(string(mustB64(blob)), "K-77") {
		t.Fatalf("the compaction item is readable: %s", blob)
	}
	var last *responses.Response
	send := func(client openai.Client, blob string) error {
		var input responses.ResponseInputParam
		if err := json.Unmarshal([]byte(`[{"type":"compaction","encrypted_content":"`+blob+`"},{"type":"message","role":"user","content":"What is the key?"}]`), &input); err != nil {
			t.Fatal(err)
		}
		var err error
		last, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		return err
	}
	if err := send(clientA, blob); err != nil {
		t.Fatal(err)
	}
	if sent := string(e.sb.LastRequest()); !strings.Contains(sent, "[COMPACTED CONVERSATION]") || !strings.Contains(sent, "K-77") {
		t.Fatalf("the summary did not reach the model: %s", sent)
	}
	// The response's input items list the compaction sealed, not its summary.
	page, err := clientA.Responses.InputItems.List(ctx, last.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if raw := page.RawJSON(); strings.Contains(raw, "K-77") || len(page.Data) != 2 || !strings.Contains(raw, `"type":"compaction"`) {
		t.Fatalf("input_items shows the summary: %s", raw)
	}
	if page.Data[0].Type != "compaction" && page.Data[1].Type != "compaction" {
		t.Fatalf("input_items %s", page.RawJSON())
	}
	_, rotated := e.gateway(ring(keyB + "," + keyA))
	if err := send(rotated, blob); err != nil {
		t.Fatalf("keys B,A must open an item sealed under A: %v", err)
	}
	_, onlyB := e.gateway(ring(keyB))
	for name, tc := range map[string]struct {
		client openai.Client
		blob   string
	}{
		"key retired": {onlyB, blob},
		"tampered":    {clientA, blob[:len(blob)-4] + flip4(blob[len(blob)-4:])},
		"unsealed":    {clientA, "aptix1:" + base64.StdEncoding.EncodeToString([]byte("forged summary"))},
	} {
		ae := apiError(t, send(tc.client, tc.blob), 400, "invalid_encrypted_content")
		if ae.Param != "input[0]" || ae.Type != "invalid_request_error" {
			t.Errorf("%s: %s", name, ae.RawJSON())
		}
	}
}

// TestGatewayInlineCompaction: context_management's compact_threshold
// through the gateway (passed to the backend, the sandbox here): below the
// threshold nothing happens; past it the response's output starts with a
// sealed compaction item (the user's messages, 2, and the reply, 1), and a
// continuation sees the compacted history.
func TestGatewayInlineCompaction(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	cm := []responses.ResponseNewParamsContextManagement{{Type: "compaction", CompactThreshold: openai.Int(60)}}
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", ContextManagement: cm,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The deploy key is K-77")}})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Output[0].Type == "compaction" {
		t.Fatalf("compacted below the threshold: %s", r1.RawJSON())
	}
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", ContextManagement: cm, PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("Here is a long note about the launch plan. ", 8))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r2.Output) != 2 || r2.Output[0].Type != "compaction" || r2.Output[1].Type != "message" {
		t.Fatalf("past the threshold, want a compaction item then the reply: %s", r2.RawJSON())
	}
	if blob := r2.Output[0].AsCompaction().EncryptedContent; strings.Contains(blob, "K-77") || strings.Contains(string(mustB64(blob)), "K-77") {
		t.Fatalf("the inline compaction item is readable: %s", blob)
	}
	if !strings.Contains(r2.OutputText(), "Compacted history: 3 item(s)") {
		t.Fatalf("the reply must come from the compacted context: %q", r2.OutputText())
	}
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r2.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the key?")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r3.OutputText(), "Compacted history: 3 item(s)") {
		t.Fatalf("a continuation must see the compacted history: %q", r3.OutputText())
	}
}

// mustB64 decodes the base64url tail of a sealed blob (empty if it is not).
func mustB64(blob string) []byte {
	i := strings.LastIndex(blob, ".")
	b, _ := base64.RawURLEncoding.DecodeString(blob[i+1:])
	return b
}

func flip4(s string) string {
	if s == "AAAA" {
		return "BBBB"
	}
	return "AAAA"
}

// TestGatewayStreamFailure: streaming with a model error: the
// stream ends with response.failed carrying the upstream's error, and the
// stored response is failed too.
func TestGatewayStreamFailure(t *testing.T) {
	e := newEnv(t, sandbox.Options{Faults: "429,retry-after-ms=1"})
	_, client := e.gateway()
	ctx := ctxT(t)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if last.Type != "response.failed" || last.Response.Status != responses.ResponseStatusFailed || last.Response.Error.Code == "" {
		t.Fatalf("last event %s", last.RawJSON())
	}
	got, err := client.Responses.Get(ctx, last.Response.ID, responses.ResponseGetParams{})
	if err != nil || got.Status != responses.ResponseStatusFailed || got.Error.Message == "" {
		t.Fatalf("stored response: %v %+v", err, got)
	}
}

// TestGatewayStoreFalse: store: false answers without keeping the response.
func TestGatewayStoreFalse(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("forget me")}})
	if err != nil || !strings.Contains(r.RawJSON(), `"store":false`) || !strings.Contains(r.OutputText(), "forget me") {
		t.Fatalf("create: %v %s", err, r.RawJSON())
	}
	_, err = client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiError(t, err, 404, "not_found")
}

// TestGatewayInputItems: Open Responses' multi-turn, system prompt, image
// input and assistant phase cases: a client-kept history (system, user,
// assistant with a phase, user with an image) reaches the model item for
// item, the last user message becoming AGN-003's with its image kept.
func TestGatewayInputItems(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	body := `{"model":"sandbox-1","input":[
	{"role":"system","content":"You are a pirate."},
	{"role":"user","content":"My name is Ada."},
	{"type":"message","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"Ahoy Ada."}]},
	{"role":"user","content":[{"type":"input_text","text":"What is in this picture, and what is my name?"},{"type":"input_image","image_url":"https://example.com/cat.png","detail":"low"}]}]}`
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "What is in this picture") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	input := sentBody(t, e.sb.LastRequest())["input"].([]any)
	if len(input) != 4 {
		t.Fatalf("upstream input %v", input)
	}
	roles := ""
	for _, it := range input {
		roles += it.(map[string]any)["role"].(string) + " "
	}
	last, _ := json.Marshal(input[3])
	asst, _ := json.Marshal(input[2])
	// Transparent (docs/request.md#which-rule-applies-when): the client's message as sent, no [INSTRUCTION] framing.
	if roles != "system user assistant user " || strings.Contains(string(last), `[INSTRUCTION]`) || !strings.Contains(string(last), `"text":"What is in this picture, and what is my name?"`) ||
		!strings.Contains(string(last), `"input_image"`) || !strings.Contains(string(asst), `"phase":"final_answer"`) {
		t.Fatalf("upstream input: %s / %s / %s", roles, asst, last)
	}
}

// TestGatewayWatchRotation: the shared completion watch is replaced (here
// on every request) without a waiting request missing its completion, so a
// long-running replica does not keep every completion of the bus.
func TestGatewayWatchRotation(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 20 * time.Millisecond})
	_, client := e.gateway(func(c *httpapi.Config) { c.RotateCompletions = time.Nanosecond })
	ctx := ctxT(t)
	errs := make(chan error, 12)
	for i := range 12 {
		go func() {
			r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("turn %d", i))}})
			if err == nil && !strings.Contains(r.OutputText(), fmt.Sprintf("turn %d", i)) {
				err = fmt.Errorf("turn %d got %q", i, r.OutputText())
			}
			errs <- err
		}()
	}
	for range 12 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestGatewayExecuteStream: POST /v1/aptix/execute?stream=true, the seed's
// own shapes over HTTP: the LLM caller's text deltas, then the
// AgentExecuteResponse.
func TestGatewayExecuteStream(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	resp, err := http.Post(url+"/v1/aptix/execute?stream=true", "application/json",
		strings.NewReader(`{"conversationId":"exec-1","mode":"DDR","instruction":"Stream the seed shapes","ragScope":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	events := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if resp.StatusCode != 200 || len(events) < 2 || !strings.HasPrefix(events[0], "event: delta\n") || !strings.HasPrefix(events[len(events)-1], "event: response\n") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var out struct{ Kind, Text, ConversationId string }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[len(events)-1], "event: response\ndata: ")), &out); err != nil {
		t.Fatal(err)
	}
	if out.Kind != "ok" || out.ConversationId != "exec-1" || !strings.Contains(out.Text, "Stream the seed shapes") {
		t.Fatalf("response %+v", out)
	}
}

// TestGatewayConversation: OpenAI's conversation parameter names the Aptix
// conversation: the second request continues the first's response and the
// response echoes conversation.id.
func TestGatewayConversation(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	ask := func(text string) *responses.Response {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String("ide-thread-7")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ask("first")
	up1, conv := e.lastCompleted()
	r2 := ask("second")
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != up1 || conv != "ide-thread-7" {
		t.Fatalf("conversation %s; second turn continued %v, want %s", conv, sent["previous_response_id"], up1)
	}
	if r2.Conversation.ID != "ide-thread-7" {
		t.Fatalf("conversation echo %+v", r2.Conversation)
	}
}

// TestGatewaySSEWire: Open Responses' streaming rules on the raw wire: the
// `event:` line equals the JSON type, sequence numbers run 0, 1, 2, …, and
// each item is added before its deltas and done after them, every item of
// the final response done exactly once, and data: [DONE] last.
func TestGatewaySSEWire(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	body := `{"model":"sandbox-1","input":"Wire check","stream":true,"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false},"strict":true}],"tool_choice":"required"}`
	for _, b := range []string{`{"model":"sandbox-1","input":"Wire check","stream":true}`, body} {
		resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("%d %s", resp.StatusCode, ct)
		}
		added, done := map[string]int{}, map[string]int{}
		var final struct {
			Output []struct{ ID string }
		}
		blocks := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
		if blocks[len(blocks)-1] != "data: [DONE]" {
			t.Fatalf("the stream ends with %q, want data: [DONE]", blocks[len(blocks)-1])
		}
		for i, block := range blocks[:len(blocks)-1] {
			lines := strings.SplitN(block, "\n", 2)
			name, _ := strings.CutPrefix(lines[0], "event: ")
			data, _ := strings.CutPrefix(lines[1], "data: ")
			var ev struct {
				Type           string
				SequenceNumber int    `json:"sequence_number"`
				ItemID         string `json:"item_id"`
				Item           struct{ ID string }
				Response       json.RawMessage
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %d: %v: %s", i, err, data)
			}
			if ev.Type != name || ev.SequenceNumber != i {
				t.Fatalf("event %d: event: %q, type %q, sequence_number %d", i, name, ev.Type, ev.SequenceNumber)
			}
			switch {
			case ev.Type == "response.output_item.added":
				added[ev.Item.ID] = i
			case ev.Type == "response.output_item.done":
				if _, ok := added[ev.Item.ID]; !ok || done[ev.Item.ID] != 0 {
					t.Fatalf("item %s done before added or twice", ev.Item.ID)
				}
				done[ev.Item.ID] = i
			case ev.ItemID != "":
				if a, ok := added[ev.ItemID]; !ok || a > i || done[ev.ItemID] != 0 {
					t.Fatalf("%s for item %s outside its lifecycle", ev.Type, ev.ItemID)
				}
			case ev.Type == "response.completed":
				_ = json.Unmarshal(ev.Response, &final)
			}
		}
		if len(final.Output) == 0 || len(done) != len(final.Output) {
			t.Fatalf("%d items done, final output %d", len(done), len(final.Output))
		}
		for _, it := range final.Output {
			if _, ok := done[it.ID]; !ok {
				t.Fatalf("final item %s never done", it.ID)
			}
		}
	}
}

// TestGatewayConcurrentContinuations: a new conversation writes no head
// (its first response is its head), yet concurrent continuations of that
// first response still fork: exactly one continues its conversation, the
// others branch into conversations of their own, and so does a later
// continuation of the first response; the winner's continuation continues.
func TestGatewayConcurrentContinuations(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	kv, err := e.js.KeyValue(ctx, application.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	conversation := func(id string) string {
		t.Helper()
		conv, _ := turnOf(t, ctx, e, id)
		return conv
	}
	create := func(prev string) (string, error) {
		p := responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn")}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			return "", err
		}
		return r.ID, nil
	}
	first, err := create("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "head."+conversation(first)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a new conversation wrote its head: %v", err)
	}
	const n = 4
	ids, errs := make([]string, n), make([]error, n)
	done := make(chan int, n)
	for i := range n {
		go func() { ids[i], errs[i] = create(first); done <- i }()
	}
	for range n {
		<-done
	}
	var same []string
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if conversation(ids[i]) == conversation(first) {
			same = append(same, ids[i])
		}
	}
	if len(same) != 1 {
		t.Fatalf("%d of %d concurrent continuations of the first response continued its conversation, want 1: %v", len(same), n, same)
	}
	late, err := create(first)
	if err != nil {
		t.Fatal(err)
	}
	if conversation(late) == conversation(first) {
		t.Fatal("a continuation of a response that is no longer the head continued its conversation")
	}
	next, err := create(same[0])
	if err != nil {
		t.Fatal(err)
	}
	if conversation(next) != conversation(first) {
		t.Fatal("a continuation of the head branched")
	}
}

// TestGatewayMarksNewConversations: a create that starts a conversation (no
// previous response, no conversation named, or a branch) tells the
// envelope there is nothing on record to read; one that continues a
// conversation does not.
func TestGatewayMarksNewConversations(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, client := e.gateway()
	ctx := ctxT(t)
	turn := func(prev string, opts ...option.RequestOption) (*responses.Response, bool) {
		t.Helper()
		p := responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctx, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.js.Stream(ctx, contracts.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetLastMsgForSubject(ctx, "aptix.completed.>")
		if err != nil {
			t.Fatal(err)
		}
		var done contracts.Turn
		if err := json.Unmarshal(m.Data, &done); err != nil {
			t.Fatal(err)
		}
		return r, done.Request.NewConversation
	}
	r1, fresh := turn("")
	if !fresh {
		t.Error("a create with no previous response and no conversation is not marked new")
	}
	if _, fresh = turn(r1.ID); fresh {
		t.Error("a continuation is marked new")
	}
	if _, fresh = turn(r1.ID); !fresh {
		t.Error("a branch (r1 continued twice) is not marked new")
	}
	if _, fresh = turn("", option.WithJSONSet("conversation", "named")); fresh {
		t.Error("a turn of a named conversation is marked new")
	}
}
