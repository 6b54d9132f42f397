package stack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// env is one pipeline: an embedded NATS server, the sandbox over httptest,
// and the four stages in-process.
type env struct {
	t   testing.TB
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	sb  *sandbox.Server
	cfg Config
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testSubscriber retries fast, so failure paths finish in test time.
var testSubscriber = pipeline.SubscriberConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, DrainTimeout: 3 * time.Second}

func newEnv(t testing.TB, sb sandbox.Options, mutate ...func(*Config)) *env {
	t.Helper()
	_, url := natstest.Start(t)
	nc, js := natstest.Connect(t, url)
	sb.Logger = quiet
	srv := sandbox.New(sb)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", BaseURL: hs.URL + "/v1", DefaultModel: "sandbox-1", Sandbox: true,
		AttemptTimeout: time.Second, TurnTimeout: 4 * time.Second, MaxRetries: 2, MaxConcurrent: 64,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative, Compact: true}})
	set.Default = "sandbox"
	e := &env{t: t, url: url, nc: nc, js: js, sb: srv, cfg: Config{Profiles: set, Subscriber: testSubscriber, Logger: quiet}}
	for _, m := range mutate {
		m(&e.cfg)
	}
	e.run(e.nc, e.cfg)
	return e
}

// run starts stages on nc until the test ends.
func (e *env) run(nc *nats.Conn, cfg Config) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); _ = Run(ctx, nc, cfg, ready) }()
	e.t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		e.t.Fatal("stages not ready")
	}
}

// turn submits a request and waits for its completion.
func (e *env) turn(req contracts.AgentExecuteRequest) contracts.Turn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Submit(ctx, e.js, req); err != nil {
		e.t.Fatal(err)
	}
	return e.await(ctx, req.ConversationId, req.TurnId)
}

func (e *env) await(ctx context.Context, conv, turn string) contracts.Turn {
	e.t.Helper()
	t, err := client.Await(ctx, e.js, conv, turn)
	if err != nil {
		e.t.Fatal(err)
	}
	if t.Response == nil {
		e.t.Fatalf("completed event without a response: %+v", t)
	}
	return t
}

// count is the number of stored events on a subject.
func (e *env) count(subject string) uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// settled asserts no stage holds an unacknowledged or pending event.
func (e *env) settled() {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, st := range layout.Stages {
		for {
			c, err := e.js.Consumer(context.Background(), contracts.StreamOf(st.In), layout.Durable(st.Name))
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				break // a stage this test never ran holds nothing
			}
			if err != nil {
				e.t.Fatal(err)
			}
			info, err := c.Info(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			if info.NumAckPending == 0 && info.NumPending == 0 {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("%s: %d pending, %d unacked: something is stuck", st.Name, info.NumPending, info.NumAckPending)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

const ddrTools = `[{"type":"function","function":{"name":"ddr_document","description":"Write a DDR","parameters":{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}},"required":["title","body"]}}}]`

func sentBody(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("sandbox got a non-JSON body: %v", err)
	}
	return m
}

// TestDDRConversation is AGN-003's two-turn DDR conversation end to end.
func TestDDRConversation(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	turn1 := e.turn(contracts.AgentExecuteRequest{
		ConversationContext: &contracts.ConversationContext{Id: "ddr", SystemPrompt: "You are the Aptix Reasoner.", DefaultModel: "sandbox-1"},
		ConversationId:      "conv-ddr", TurnId: "t1", Mode: "DDR_CREATION", Instruction: "Create a DDR for invoice e-mails.",
		ToolsJson: ddrTools, ToolChoiceName: "ddr_document", RagScope: contracts.RagScopeNone,
	})
	r1 := turn1.Response
	if r1.Kind != contracts.KindToolOnly || r1.FinishReason != contracts.FinishToolUse || len(r1.ToolCalls) != 1 || r1.ToolCalls[0].Name != "ddr_document" {
		t.Fatalf("turn 1: %+v", r1)
	}
	var args struct{ Title, Body string }
	if err := json.Unmarshal([]byte(r1.ToolCalls[0].ArgumentsJson), &args); err != nil || r1.ToolCalls[0].CallId == "" {
		t.Fatalf("turn 1 tool call %+v: %v", r1.ToolCalls[0], err)
	}
	sent1 := sentBody(t, e.sb.LastRequest())
	input1 := sent1["input"].([]any)
	if input1[0].(map[string]any)["role"] != "system" || sent1["tools"] == nil || sent1["previous_response_id"] != nil {
		t.Fatalf("turn 1 body: %v", sent1)
	}
	if tc, _ := json.Marshal(sent1["tool_choice"]); string(tc) != `{"name":"ddr_document","type":"function"}` {
		t.Fatalf("turn 1 tool_choice %s", tc)
	}

	// Turn 2: the client sends no continuation id; the mapper's record supplies it.
	turn2 := e.turn(contracts.AgentExecuteRequest{
		ConversationContext: &contracts.ConversationContext{Id: "ddr", SystemPrompt: "You are the Aptix Reasoner.", DefaultModel: "sandbox-1"},
		ConversationId:      "conv-ddr", TurnId: "t2", Mode: "DDR_REFINEMENT", Instruction: "Add Risks and Open Questions.", RagScope: contracts.RagScopeNone,
	})
	r2 := turn2.Response
	sent2 := sentBody(t, e.sb.LastRequest())
	if sent2["previous_response_id"] != r1.ResponseContinuationId {
		t.Fatalf("turn 2 previous_response_id %v, want %s", sent2["previous_response_id"], r1.ResponseContinuationId)
	}
	for _, item := range sent2["input"].([]any) {
		if item.(map[string]any)["role"] == "system" {
			t.Fatal("turn 2 must not resend the system message")
		}
	}
	if sent2["tools"] == nil {
		t.Fatal("turn 2 must re-send the conversation's tools: the sandbox, like OpenAI, does not retain them")
	}
	if r2.Kind != contracts.KindOK || !strings.Contains(r2.Text, "DDR_REFINEMENT") || r2.ResponseContinuationId == r1.ResponseContinuationId {
		t.Fatalf("turn 2: %+v", r2)
	}
	if e.sb.Requests() != 2 {
		t.Fatalf("%d upstream calls for 2 turns", e.sb.Requests())
	}
	e.settled()
}

// TestRAGSources: the retrieved chunks reach the model in the [CONTEXT]
// block and come back as sources.
func TestRAGSources(t *testing.T) {
	chunks := []contracts.RagChunk{
		{Id: "ctx_1", Path: "Billing/Managers/InvoiceManager.cs", StartLine: 40, EndLine: 85, Language: "C#", Content: "public class InvoiceManager {}"},
		{Id: "ctx_2", Path: "Billing/Api/InvoiceController.cs", StartLine: 10, EndLine: 55, Language: "C#", Content: "public class InvoiceController {}"},
	}
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Searcher = retrieverstage.SearchFunc(func(context.Context, contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
			return contracts.Retrieval{Index: "billing", Scope: "workspace", Chunks: chunks}, nil
		})
	})
	done := e.turn(contracts.AgentExecuteRequest{ConversationId: "conv-rag", TurnId: "t1", Mode: "DDR_REVIEW", Instruction: "Review invoice sending."})
	r := done.Response
	// The chunks travel once: whole in the retrieved event, then their text
	// inside the context block of the envelope body and their list as the
	// envelope's sources (the response's in the completed event).
	if c := done.Retrieval.Chunks; len(c) != 0 || done.Retrieval.Index != "billing" {
		t.Errorf("completed event's retrieval: %+v", done.Retrieval)
	}
	if done.Envelope.Body != nil || len(done.Envelope.Sources) != 0 {
		t.Errorf("the completed event still carries the request body or the sources twice")
	}
	s, _ := e.js.Stream(context.Background(), contracts.StreamName)
	env, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageEnveloped, "conv-rag", "t1"))
	if err != nil || !strings.Contains(string(env.Data), "public class InvoiceManager {}") || strings.Contains(string(env.Data), `"chunks"`) {
		t.Errorf("the enveloped event's context block lacks the chunk text, or the event the chunk list (err %v)", err)
	}
	if m, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageRetrieved, "conv-rag", "t1")); err != nil || !strings.Contains(string(m.Data), "public class InvoiceController {}") {
		t.Errorf("retrieved event lacks the chunk text (err %v)", err)
	}
	// The upstream body travels once in the completion: as rawResponseJson.
	resp, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageResponded, "conv-rag", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	var responded contracts.Turn
	if err := json.Unmarshal(resp.Data, &responded); err != nil || responded.LLM == nil || responded.LLM.Body == "" {
		t.Fatalf("responded event without the upstream body (err %v)", err)
	}
	if done.LLM.Body != "" || r.RawResponseJson != responded.LLM.Body || done.ResultBody() != responded.LLM.Body || done.Version != contracts.TurnVersion {
		t.Errorf("completed event: llm.body %d bytes, rawResponseJson %d bytes (the body is %d), version %d",
			len(done.LLM.Body), len(r.RawResponseJson), len(responded.LLM.Body), done.Version)
	}
	comp, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageCompleted, "conv-rag", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if id := r.ResponseContinuationId; strings.Count(string(comp.Data), id) != 2 { // responseContinuationId, and once in rawResponseJson
		t.Errorf("the upstream id %s is %d times in the completed event, want the body once", id, strings.Count(string(comp.Data), id))
	}
	if len(r.Sources) != 2 || r.Sources[0].Id != "ctx_1" || r.Sources[1].Id != "ctx_2" {
		t.Fatalf("sources %+v", r.Sources)
	}
	if !strings.Contains(r.Text, "ctx_1") || !strings.Contains(r.Text, "ctx_2") {
		t.Fatalf("the sandbox names the chunk ids it received; text %q", r.Text)
	}
}

// TestBadEvents: every bad event gets an error completion and nothing stays stuck.
func TestBadEvents(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := context.Background()
	// Not JSON at all, published raw as a non-Go client might.
	if _, err := e.js.Publish(ctx, contracts.Subject(contracts.StageRequested, "conv-bad", "raw"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	r := e.await(ctx, "conv-bad", "raw").Response
	if r.Kind != contracts.KindError || r.ErrorCode != pipeline.CodeInvalidEvent || !strings.Contains(r.ErrorMessage, "AgentExecuteRequest") {
		t.Fatalf("invalid JSON: %+v", r)
	}
	if n := e.count(contracts.DeadSubject("retriever")); n != 1 {
		t.Fatalf("%d dead letters, want the undecodable event kept once", n)
	}
	for _, tt := range []struct {
		name    string
		req     contracts.AgentExecuteRequest
		code    string
		mention string
	}{
		{"empty instruction", contracts.AgentExecuteRequest{Instruction: " "}, pipeline.CodeInvalidRequest, "instruction"},
		{"bad toolsJson", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `{"type":"function"}`}, "invalid_tools", "toolsJson"},
		{"unknown tool choice", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: ddrTools, ToolChoiceName: "ddr_review"}, "unknown_tool_choice", "ddr_review"},
		{"unknown backend", contracts.AgentExecuteRequest{Instruction: "x", AgentContext: &contracts.AgentContext{Backend: "nope"}}, "unknown_backend", "nope"},
		{"unknown conversation context", contracts.AgentExecuteRequest{Instruction: "x", ConversationContextId: "nope"}, "unknown_conversation_context", "nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.ConversationId, tt.req.TurnId = "conv-bad", strings.ReplaceAll(tt.name, " ", "-")
			r := e.turn(tt.req).Response
			if r.Kind != contracts.KindError || r.ErrorCode != tt.code || !strings.Contains(r.ErrorMessage, tt.mention) || r.TurnId != tt.req.TurnId {
				t.Fatalf("%+v", r)
			}
		})
	}
	if e.sb.Requests() != 0 {
		t.Fatalf("bad turns reached the model %d times", e.sb.Requests())
	}
	e.settled()
}

// TestUpstreamFaults: failures are retried by the caller, then answered with
// an error completion; a recovered upstream completes normally.
func TestUpstreamFaults(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sb       sandbox.Options
		kind     string
		code     string
		requests int
	}{
		{"500 always: retried, then an error", sandbox.Options{Faults: "500"}, contracts.KindError, "server_error", 3},
		{"429 twice, then fine", sandbox.Options{FailFirst: 2, FailStatus: 429, RetryAfter: "0"}, contracts.KindOK, "", 3},
		{"timeout on every attempt", sandbox.Options{Latency: 3 * time.Second}, contracts.KindError, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.sb)
			start := time.Now()
			r := e.turn(contracts.AgentExecuteRequest{ConversationId: "conv-f", TurnId: "t1", Instruction: "hello", RagScope: contracts.RagScopeNone}).Response
			if r.Kind != tt.kind || (tt.code != "" && r.ErrorCode != tt.code) {
				t.Fatalf("%+v", r)
			}
			if tt.kind == contracts.KindError && (r.ErrorMessage == "" || r.ErrorCode == "") {
				t.Fatalf("error completion without code or message: %+v", r)
			}
			if tt.requests > 0 && e.sb.Requests() != tt.requests {
				t.Fatalf("%d upstream requests, want %d", e.sb.Requests(), tt.requests)
			}
			if tt.name == "timeout on every attempt" && (!strings.Contains(r.ErrorCode, "timeout") || time.Since(start) > 10*time.Second) {
				t.Fatalf("want a timeout error within the turn timeout: %+v after %s", r, time.Since(start))
			}
			if n := e.count(contracts.Subject(contracts.StageCompleted, "conv-f", "t1")); n != 1 {
				t.Fatalf("%d completions", n)
			}
			e.settled()
		})
	}
}

// TestStageCrashExactlyOnce: the LLM caller dies after the model answered
// and before it published (no ack). Its replacement gets the redelivered
// event, finds the stored result, and the turn completes once, with one
// upstream call.
func TestStageCrashExactlyOnce(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) { c.Only = []string{"retriever", "envelope", "mapper"} })

	doomed, _ := natstest.Connect(t, e.url)
	var crashes atomic.Int32
	crashing := e.cfg
	crashing.Only = []string{"llmcaller"}
	crashing.BeforePublish = map[string]func(*contracts.Turn) error{"llmcaller": func(*contracts.Turn) error {
		crashes.Add(1)
		doomed.Close() // the process is gone: no ack, no publish
		return errors.New("crashed")
	}}
	crashCtx, crashCancel := context.WithCancel(context.Background())
	defer crashCancel()
	ready := make(chan struct{})
	go func() { _ = Run(crashCtx, doomed, crashing, ready) }()
	<-ready

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := contracts.AgentExecuteRequest{ConversationId: "conv-crash", TurnId: "t1", Instruction: "survive", RagScope: contracts.RagScopeNone}
	if err := client.Submit(ctx, e.js, req); err != nil {
		t.Fatal(err)
	}
	for crashes.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the llmcaller never got the turn")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The restarted llmcaller, on a fresh connection.
	fresh, _ := natstest.Connect(t, e.url)
	restarted := e.cfg
	restarted.Only = []string{"llmcaller"}
	e.run(fresh, restarted)

	r := e.await(ctx, "conv-crash", "t1").Response
	if r.Kind != contracts.KindOK {
		t.Fatalf("%+v", r)
	}
	if n := e.sb.Requests(); n != 1 {
		t.Fatalf("%d upstream calls, want 1 (pay once)", n)
	}
	time.Sleep(300 * time.Millisecond) // let any duplicate land before counting
	for _, stage := range []string{contracts.StageResponded, contracts.StageCompleted} {
		if n := e.count(contracts.Subject(stage, "conv-crash", "t1")); n != 1 {
			t.Fatalf("%d %s events, want exactly 1", n, stage)
		}
	}
	e.settled()
	// The responded event is stored before the crash point, so the client
	// can have its answer before the crashed delivery comes back: count
	// again once the redelivery has been handled.
	if n := e.sb.Requests(); n != 1 {
		t.Fatalf("%d upstream calls after the redelivery, want 1 (pay once)", n)
	}
	for _, stage := range []string{contracts.StageResponded, contracts.StageCompleted} {
		if n := e.count(contracts.Subject(stage, "conv-crash", "t1")); n != 1 {
			t.Fatalf("%d %s events after the redelivery, want exactly 1", n, stage)
		}
	}
}

// TestStopLetsTheTurnInFlightComplete: stopping the stages while the LLM
// caller waits for the model still completes the turn before Run returns:
// the stages stop upstream first, and the mapper only once the LLM caller's
// answer is handled. (All stages used to stop at once, so the mapper was
// gone when the answer came, and the client waited for the next start.)
func TestStopLetsTheTurnInFlightComplete(t *testing.T) {
	_, url := natstest.Start(t)
	nc, js := natstest.Connect(t, url)
	sb := sandbox.New(sandbox.Options{Logger: quiet, Latency: 1500 * time.Millisecond})
	hs := httptest.NewServer(sb)
	t.Cleanup(hs.Close)
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", BaseURL: hs.URL + "/v1", DefaultModel: "sandbox-1", Sandbox: true,
		AttemptTimeout: 10 * time.Second, TurnTimeout: 20 * time.Second, MaxRetries: 1, MaxConcurrent: 4,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}})
	set.Default = "sandbox"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Run(ctx, nc, Config{Profiles: set, Logger: quiet, Subscriber: pipeline.SubscriberConfig{
			AckWait: 5 * time.Second, MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, DrainTimeout: 10 * time.Second}}, ready)
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("stages not ready")
	}
	if err := client.Submit(context.Background(), js, contracts.AgentExecuteRequest{ConversationId: "c-stop", TurnId: "t-stop", Instruction: "hello"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); sb.Requests() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model was never called")
		}
	}
	cancel() // Ctrl-C while the model is answering
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer acancel()
	got, err := client.Await(actx, js, "c-stop", "t-stop")
	if err != nil {
		t.Fatalf("the turn in flight did not complete before the stop: %v", err)
	}
	if got.Response == nil || got.Response.Kind != contracts.KindOK {
		t.Fatalf("completion %+v", got.Response)
	}
}
