package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/request"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp/mcptest"
)

// toolEnv is a pipeline whose toolrunner reaches one real MCP server
// (go-sdk, streamable HTTP) configured as "calc", plus "down", a configured
// server nothing listens on.
func toolEnv(t testing.TB, mutate ...func(*Config)) (*env, *mcptest.Server) {
	t.Helper()
	srv := mcptest.NewHTTP(t)
	cfg, err := mcp.ParseConfig([]byte(`{"mcpServers": {"calc": {"url": "`+srv.URL+`"}, "down": {"url": "http://127.0.0.1:1/mcp"}}}`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := mcp.NewRegistry(cfg, mcp.Options{Logger: quiet, ConnectTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = reg.Close() })
	all := append([]func(*Config){func(c *Config) {
		c.Tools = reg
		c.MCP = &request.MCPOptions{MaxDepth: request.DefaultMaxToolDepth}
	}}, mutate...)
	return newEnv(t, sandbox.Options{}, all...), srv
}

// mcpTool is OpenAI's mcp tool naming a configured server.
func mcpTool(label string) responses.ToolUnionParam {
	return responses.ToolUnionParam{OfMcp: &responses.ToolMcpParam{ServerLabel: label,
		RequireApproval: responses.ToolMcpRequireApprovalUnionParam{OfMcpToolApprovalSetting: openai.String("never")}}}
}

func loopParams(text string, tools ...responses.ToolUnionParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "sandbox-1", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
}

// loopOf reads the seed's fields openai-go does not model.
type loopFields struct {
	ToolExecutions []struct {
		ID, Tool, Output, Error, Status string
		Server                          string          `json:"server_label"`
		Input                           json.RawMessage `json:"input"`
		DurationMs                      int64           `json:"duration_ms"`
	} `json:"tool_executions"`
	ExecutionMetadata struct {
		MaxDepth        int    `json:"max_depth"`
		ActualDepth     int    `json:"actual_depth"`
		TotalDurationMs int64  `json:"total_duration_ms"`
		Status          string `json:"status"`
	} `json:"execution_metadata"`
	Error *struct{ Code, Type, Message string } `json:"error"`
}

func loopOf(t testing.TB, raw string) loopFields {
	t.Helper()
	var f loopFields
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func itemTypes(r *responses.Response) []string {
	var out []string
	for _, it := range r.Output {
		out = append(out, it.Type)
	}
	return out
}

// TestToolLoopTwoRounds: the model calls an MCP tool, the toolrunner runs
// it, the model answers from its output; the response shows mcp_list_tools,
// the mcp_call and the answer, the seed's tool_executions and
// execution_metadata, and usage summed over both LLM calls.
func TestToolLoopTwoRounds(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`Add them [call:add {"a":2,"b":3}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r), ","); got != "mcp_list_tools,mcp_call,message" {
		t.Fatalf("output items %s", got)
	}
	list, call := r.Output[0].AsMcpListTools(), r.Output[1].AsMcpCall()
	if list.ServerLabel != "calc" || len(list.Tools) < 4 {
		t.Fatalf("mcp_list_tools %+v", list)
	}
	if call.ServerLabel != "calc" || call.Name != "add" || call.Output != "5" || call.Arguments != `{"a":2,"b":3}` {
		t.Fatalf("mcp_call %+v", call)
	}
	if !strings.Contains(r.OutputText(), `returned "5"`) {
		t.Fatalf("answer %q does not quote the tool output", r.OutputText())
	}
	f := loopOf(t, r.RawJSON())
	if len(f.ToolExecutions) != 1 || f.ToolExecutions[0].Tool != "add" || f.ToolExecutions[0].Output != "5" || f.ToolExecutions[0].Status != "completed" {
		t.Fatalf("tool_executions %+v", f.ToolExecutions)
	}
	if m := f.ExecutionMetadata; m.MaxDepth != 8 || m.ActualDepth != 1 || m.Status != "completed" {
		t.Fatalf("execution_metadata %+v", m)
	}
	if srv.Calls("add") != 1 {
		t.Fatalf("add ran %d times", srv.Calls("add"))
	}
	// Usage is both calls': the sum of the two upstream responses.
	turn := awaitTurn(t, e, r.ID)
	want := int64(turn.Response.Usage.TotalTokens)
	last := lastCallUsage(t, turn.ResultBody()) // the last call's body: rawResponseJson since the completion carries it once
	if r.Usage.TotalTokens != want || want <= last {
		t.Fatalf("usage %d, mapper %d, last call alone %d: not summed", r.Usage.TotalTokens, want, last)
	}
	// The GET of the stored response is the same.
	got, err := client.Responses.Get(ctxT(t), r.ID, responses.ResponseGetParams{})
	if err != nil || len(got.Output) != 3 || got.Usage.TotalTokens != want {
		t.Fatalf("GET: %v %v", err, got)
	}
	e.settled()
}

func lastCallUsage(t *testing.T, body string) int64 {
	var b struct {
		Usage struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	return b.Usage.TotalTokens
}

// TestToolLoopParallelCalls: the calls of one round run at once: a tool
// that waits for a second call in flight answers "together" only if they do.
func TestToolLoopParallelCalls(t *testing.T) {
	e, srv := toolEnv(t)
	var inFlight, peak atomic.Int32
	srv.AddTool("meet", "waits for another call", func(ctx context.Context, _ json.RawMessage) (string, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		deadline := time.After(5 * time.Second)
		for peak.Load() < 2 {
			select {
			case <-deadline:
				return "alone", nil
			case <-time.After(5 * time.Millisecond):
			}
		}
		return "together", nil
	})
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:meet {"n":1}] [call:meet {"n":2}] [call:add {"a":1,"b":1}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	f := loopOf(t, r.RawJSON())
	if len(f.ToolExecutions) != 3 || f.ExecutionMetadata.ActualDepth != 1 {
		t.Fatalf("executions %+v metadata %+v", f.ToolExecutions, f.ExecutionMetadata)
	}
	for _, x := range f.ToolExecutions[:2] {
		if x.Output != "together" {
			t.Fatalf("meet answered %q: the round's calls did not run in parallel", x.Output)
		}
	}
}

// TestToolLoopTimeoutAndErrors: a tool past APTIX_TOOL_TIMEOUT and a tool
// that fails are recorded with their status, their errors go back to the
// model as the calls' outputs, and the loop goes on to an answer.
func TestToolLoopTimeoutAndErrors(t *testing.T) {
	e, _ := toolEnv(t, func(c *Config) { c.ToolTimeout = time.Second })
	_, client := e.gateway()
	start := time.Now()
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:sleep {"ms":20000}] [call:fail]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %s: the 1s timeout did not stop the sleeping tool", time.Since(start))
	}
	f := loopOf(t, r.RawJSON())
	if len(f.ToolExecutions) != 2 || f.ToolExecutions[0].Status != "timeout" || f.ToolExecutions[1].Status != "failed" {
		t.Fatalf("executions %+v", f.ToolExecutions)
	}
	if !strings.Contains(f.ToolExecutions[1].Error, mcptest.FailMessage) {
		t.Fatalf("fail error %q", f.ToolExecutions[1].Error)
	}
	if r.Status != responses.ResponseStatusCompleted || !strings.Contains(r.OutputText(), "timed out") || !strings.Contains(r.OutputText(), mcptest.FailMessage) {
		t.Fatalf("status %s, answer %q: the errors did not reach the model", r.Status, r.OutputText())
	}
	call := r.Output[1].AsMcpCall()
	if call.Error.Type != "mcp_protocol_error" || !strings.Contains(call.Error.Message, "timed out") || r.Output[2].AsMcpCall().Error.Type != "mcp_tool_execution_error" {
		t.Fatalf("mcp_call of a timed-out tool has no error: %+v", call)
	}
}

// TestToolLoopMaxDepth: a model that always calls a tool ends at the depth
// limit with execution_error max_depth_exceeded, keeping the 8 executions.
func TestToolLoopMaxDepth(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`[repeat:add {"a":1,"b":1}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	f := loopOf(t, r.RawJSON())
	if r.Status != responses.ResponseStatusFailed || f.Error == nil || f.Error.Code != "max_depth_exceeded" || f.Error.Type != "execution_error" {
		t.Fatalf("status %s error %+v", r.Status, f.Error)
	}
	if len(f.ToolExecutions) != 8 || f.ExecutionMetadata.ActualDepth != 8 || f.ExecutionMetadata.Status != "max_depth_exceeded" || srv.Calls("add") != 8 {
		t.Fatalf("%d executions, metadata %+v, add ran %d times", len(f.ToolExecutions), f.ExecutionMetadata, srv.Calls("add"))
	}
	if n := len(itemTypes(r)); n != 9 { // mcp_list_tools + 8 mcp_call
		t.Fatalf("output %v", itemTypes(r))
	}
	e.settled()
}

// TestToolLoopCrashMidRound: the toolrunner dies after running a round's
// tool and before publishing the round: the redelivered round finds the
// recorded result and does not run the tool again.
func TestToolLoopCrashMidRound(t *testing.T) {
	var crashed atomic.Bool
	e, srv := toolEnv(t, func(c *Config) {
		c.BeforePublish = map[string]func(*contracts.Turn) error{"toolrunner": func(t *contracts.Turn) error {
			if t.Tools != nil && t.Tools.Round == 1 && crashed.CompareAndSwap(false, true) {
				return fmt.Errorf("crash after the round's tools ran")
			}
			return nil
		}}
	})
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:add {"a":20,"b":22}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if !crashed.Load() || srv.Calls("add") != 1 || !strings.Contains(r.OutputText(), `"42"`) {
		t.Fatalf("crashed %v, add ran %d times, answer %q", crashed.Load(), srv.Calls("add"), r.OutputText())
	}
	e.settled()
}

// TestToolLoopMixedRound: the model calls an MCP tool and a client function
// in one round: the MCP call runs, the function call goes to the client in
// the same response, and the client's continuation carries both outputs.
func TestToolLoopMixedRound(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	fn := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "lookup", Parameters: map[string]any{"type": "object"}}}
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:add {"a":1,"b":2}] [call:lookup {"k":"v"}]`, mcpTool("calc"), fn))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r), ","); got != "mcp_list_tools,mcp_call,function_call" {
		t.Fatalf("output %s", got)
	}
	fc := r.Output[2].AsFunctionCall()
	if fc.Name != "lookup" || srv.Calls("add") != 1 {
		t.Fatalf("function call %+v, add ran %d", fc, srv.Calls("add"))
	}
	r2, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Tools: []responses.ToolUnionParam{mcpTool("calc"), fn},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{functionOutput(fc.CallID, "found")}}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r2.OutputText(); !strings.Contains(txt, `"3"`) || !strings.Contains(txt, `"found"`) {
		t.Fatalf("continuation %q lacks the MCP or the client output", txt)
	}
}

// TestToolLoopRefusals: a client-supplied server_url is refused (an SSRF
// hole otherwise), as is a label no server has; a configured server that is
// down is reported in its mcp_list_tools item, not fatal.
func TestToolLoopRefusals(t *testing.T) {
	e, _ := toolEnv(t)
	url, client := e.gateway()
	ctx := ctxT(t)
	ssrf := responses.ToolUnionParam{OfMcp: &responses.ToolMcpParam{ServerLabel: "evil", ServerURL: openai.String("http://169.254.169.254/latest")}}
	_, err := client.Responses.New(ctx, loopParams("hi", ssrf))
	if ae := apiError(t, err, 400, tooldef.CodeInvalidTools); !strings.Contains(ae.Message, "APTIX_MCP_ALLOW_URLS") {
		t.Fatalf("message %q", ae.Message)
	}
	_, err = client.Responses.New(ctx, loopParams("hi", mcpTool("nope")))
	if ae := apiError(t, err, 400, "unknown_mcp_server"); !strings.Contains(ae.Message, "calc") {
		t.Fatalf("message %q does not list the configured servers", ae.Message)
	}
	r, err := client.Responses.New(ctx, loopParams("hello", mcpTool("down")))
	if err != nil {
		t.Fatal(err)
	}
	list := r.Output[0].AsMcpListTools()
	if r.Status != responses.ResponseStatusCompleted || list.ServerLabel != "down" || list.Error == "" || !strings.Contains(r.OutputText(), "hello") {
		t.Fatalf("status %s, list %+v, text %q", r.Status, list, r.OutputText())
	}
	_ = url
	_ = http.StatusOK
}

// TestToolLoopStream: a streamed tool loop shows OpenAI's mcp events in
// order, every event with an increasing sequence number, and ends with the
// same output the stored response has.
func TestToolLoopStream(t *testing.T) {
	e, _ := toolEnv(t)
	_, client := e.gateway()
	stream := client.Responses.NewStreaming(ctxT(t), loopParams(`[call:add {"a":2,"b":2}]`, mcpTool("calc")))
	var types []string
	seq := int64(-1)
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber <= seq {
			t.Fatalf("sequence %d after %d", ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(types, " ")
	for _, want := range []string{"response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
		"response.mcp_call_arguments.delta", "response.mcp_call_arguments.done", "response.mcp_call.in_progress",
		"response.mcp_call.completed", "response.output_text.delta", "response.completed"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("no %s in %s", want, joined)
		}
	}
	if strings.Contains(joined, "function_call_arguments") || strings.Count(joined, "response.output_item.done") != 3 {
		t.Fatalf("a server-side call leaked as a function call, or an item was closed twice: %s", joined)
	}
	if strings.Index(joined, "response.mcp_call.completed") > strings.Index(joined, "response.output_text.delta") {
		t.Fatalf("the answer streamed before the tool finished: %s", joined)
	}
	if got := strings.Join(itemTypes(&final), ","); got != "mcp_list_tools,mcp_call,message" {
		t.Fatalf("final output %s", got)
	}
}

// TestToolLoopCancel: a cancel during a round stops the running tool and
// the loop; the response is cancelled.
func TestToolLoopCancel(t *testing.T) {
	e, srv := toolEnv(t)
	url, client := e.gateway()
	ctx := ctxT(t)
	p := loopParams(`[call:sleep {"ms":15000}]`, mcpTool("calc"))
	p.Background = openai.Bool(true)
	r, err := client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.Calls("sleep") == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if code, body := postJSON(t, url+"/v1/responses/"+r.ID+"/cancel", ""); code != 200 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	got, _ := waitStatus(t, client, r.ID, "cancelled")
	if time.Since(start) > 8*time.Second {
		t.Fatalf("cancel took %s", time.Since(start))
	}
	_ = got
	e.settled()
}

// TestToolLoopOpenResponses validates a tool loop's response and its stream
// against the Open Responses schemas and stream lifecycle rules.
func TestToolLoopOpenResponses(t *testing.T) {
	e, _ := toolEnv(t)
	url, _ := e.gateway()
	body := `{"model":"sandbox-1","tools":[{"type":"mcp","server_label":"calc","require_approval":"never"}],"input":"[call:add {\"a\":1,\"b\":1}] [call:fail]"}`
	code, resp := postJSON(t, url+"/v1/responses", body)
	var v conformance.Validator
	if code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	if err := v.Response([]byte(resp)); err != nil {
		t.Fatalf("response: %v\n%s", err, resp)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	st, err := conformance.ReadSSE(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	// OpenAI's mcp_* events are not in the Open Responses schema: the rest
	// is validated by it, those by the fields OpenAI documents for them.
	std := conformance.Stream{Final: st.Final}
	mcpEvents := 0
	for _, ev := range st.Events {
		if !strings.HasPrefix(ev.Type, "response.mcp_") {
			std.Events = append(std.Events, ev)
			continue
		}
		mcpEvents++
		var f struct {
			ItemID      *string `json:"item_id"`
			OutputIndex *int    `json:"output_index"`
		}
		if err := json.Unmarshal(ev.Data, &f); err != nil || f.ItemID == nil || f.OutputIndex == nil || ev.Name != ev.Type {
			t.Fatalf("%s lacks item_id or output_index: %s", ev.Type, ev.Data)
		}
	}
	if mcpEvents != 10 {
		t.Fatalf("%d mcp events", mcpEvents)
	}
	if err := v.CheckEvents(std); err != nil {
		t.Fatalf("events: %v", err)
	}
	if err := conformance.CheckLifecycle(st); err != nil {
		t.Fatalf("lifecycle: %v", err)
	}
}

// TestToolLoopAllowedURL: where APTIX_MCP_ALLOW_URLS lists its prefix, a
// client-named server_url is reached under the request's label.
func TestToolLoopAllowedURL(t *testing.T) {
	srv := mcptest.NewHTTP(t)
	e, _ := toolEnv(t, func(c *Config) {
		c.MCP = &request.MCPOptions{MaxDepth: 2, AllowURLs: []string{srv.URL}}
	})
	_, client := e.gateway()
	tool := responses.ToolUnionParam{OfMcp: &responses.ToolMcpParam{ServerLabel: "mine", ServerURL: openai.String(srv.URL),
		RequireApproval: responses.ToolMcpRequireApprovalUnionParam{OfMcpToolApprovalSetting: openai.String("never")}}}
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:echo {"text":"via url"}]`, tool))
	if err != nil {
		t.Fatal(err)
	}
	if call := r.Output[1].AsMcpCall(); call.ServerLabel != "mine" || call.Output != "via url" || srv.Calls("echo") != 1 {
		t.Fatalf("mcp_call %+v, echo ran %d", call, srv.Calls("echo"))
	}
	if f := loopOf(t, r.RawJSON()); f.ExecutionMetadata.MaxDepth != 2 {
		t.Fatalf("metadata %+v", f.ExecutionMetadata)
	}
}

// TestToolLoopReplayedHistory: on a backend without previous_response_id
// the loop's later calls carry the conversation's items from Aptix's own
// history instead, and the loop ends the same way.
func TestToolLoopReplayedHistory(t *testing.T) {
	e, srv := toolEnv(t, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.Capabilities.SupportsPreviousResponseID = false
		c.Profiles.Put(p)
	})
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:add {"a":40,"b":2}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.OutputText(), `"42"`) || srv.Calls("add") != 1 {
		t.Fatalf("answer %q, add ran %d", r.OutputText(), srv.Calls("add"))
	}
	last := sentBody(t, e.sb.LastRequest())
	if _, ok := last["previous_response_id"]; ok || len(last["input"].([]any)) < 3 {
		t.Fatalf("the second call did not replay the items: %v", last)
	}
}

// TestToolLoopKilledMidRound: the toolrunner's process dies while a round
// runs (its connection gone, its context cancelled), one call finished and
// one still sleeping. A new toolrunner gets the redelivered round, runs only
// the unfinished call again, and the turn completes once.
func TestToolLoopKilledMidRound(t *testing.T) {
	e, srv := toolEnv(t, func(c *Config) { c.Only = []string{"retriever", "envelope", "llmcaller", "mapper"} })
	doomed, _ := natstest.Connect(t, e.url)
	dying := e.cfg
	dying.Only = []string{"toolrunner"}
	dctx, kill := context.WithCancel(context.Background())
	defer kill()
	ready := make(chan struct{})
	go func() { _ = Run(dctx, doomed, dying, ready) }()
	<-ready

	_, client := e.gateway()
	p := loopParams(`[call:add {"a":1,"b":1}] [call:sleep {"ms":1500}]`, mcpTool("calc"))
	p.Background = openai.Bool(true)
	r, err := client.Responses.New(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for (srv.Calls("add") == 0 || srv.Calls("sleep") == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // add's result is recorded
	doomed.Close()                     // the process is gone: no ack, no publish
	kill()

	fresh, _ := natstest.Connect(t, e.url)
	restarted := e.cfg
	restarted.Only = []string{"toolrunner"}
	e.run(fresh, restarted)
	got, _ := waitStatus(t, client, r.ID, "completed")
	f := loopOf(t, got.RawJSON())
	if srv.Calls("add") != 1 || srv.Calls("sleep") != 2 {
		t.Fatalf("add ran %d times (want 1: it had finished), sleep %d (want 2: it had not)", srv.Calls("add"), srv.Calls("sleep"))
	}
	if len(f.ToolExecutions) != 2 || f.ToolExecutions[0].Output != "2" || f.ToolExecutions[1].Status != "completed" {
		t.Fatalf("executions %+v", f.ToolExecutions)
	}
	if n := e.count(contracts.Subject(contracts.StageCompleted, awaitTurn(t, e, r.ID).ConversationId, awaitTurn(t, e, r.ID).TurnId)); n != 1 {
		t.Fatalf("%d completions", n)
	}
}

// TestToolLoopNeedsNativeTools: a backend that emulates function calling
// (toolMode prompt) would never see the MCP tools: 400 invalid_tools.
func TestToolLoopNeedsNativeTools(t *testing.T) {
	e, _ := toolEnv(t, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.Capabilities.ToolMode = profiles.ToolModePrompt
		c.Profiles.Put(p)
	})
	_, client := e.gateway()
	_, err := client.Responses.New(ctxT(t), loopParams("hi", mcpTool("calc")))
	if ae := apiError(t, err, 400, tooldef.CodeInvalidTools); !strings.Contains(ae.Message, "native function calling") {
		t.Fatalf("message %q", ae.Message)
	}
}
