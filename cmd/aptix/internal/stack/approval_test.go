package stack

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/gateway/httpapi"
)

// approvalTool is an mcp tool for calc under a require_approval policy.
func approvalTool(setting string, filter *responses.ToolMcpRequireApprovalMcpToolApprovalFilterParam) responses.ToolUnionParam {
	p := &responses.ToolMcpParam{ServerLabel: "calc"}
	if filter != nil {
		p.RequireApproval.OfMcpToolApprovalFilter = filter
	} else {
		p.RequireApproval.OfMcpToolApprovalSetting = openai.String(setting)
	}
	return responses.ToolUnionParam{OfMcp: p}
}

func approve(id string, yes bool) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMcpApprovalResponse(id, yes)}}
}

// restartableGateway is a gateway over e's pipeline that a test can stop
// and start again: nothing of a turn lives in its memory.
type restartableGateway struct {
	e    *env
	stop func()
}

func (g *restartableGateway) start() openai.Client {
	g.e.t.Helper()
	srv, err := buildGateway(g.e.nc, g.e.cfg.Profiles, func(c *httpapi.Config) { c.SyncTimeout = 15 * time.Second })
	if err != nil {
		g.e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	g.stop = func() { hs.Close(); srv.Close() }
	g.e.t.Cleanup(g.stop)
	return openai.NewClient(option.WithBaseURL(hs.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// TestToolLoopApproval: with require_approval "always" a call ends the
// response with an mcp_approval_request and does not run; the gateway is
// restarted; the client's approval (previous_response_id and an
// mcp_approval_response) runs it and the loop goes on to an answer quoting
// its output. A denial does not run the call, and the model is told.
func TestToolLoopApproval(t *testing.T) {
	e, srv := toolEnv(t)
	g := &restartableGateway{e: e}
	client := g.start()
	ctx := ctxT(t)
	tools := []responses.ToolUnionParam{approvalTool("always", nil)}
	params := loopParams(`Add them [call:add {"a":2,"b":3}]`, tools...)
	r1, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r1), ","); got != "mcp_list_tools,mcp_approval_request" || r1.Status != responses.ResponseStatusCompleted {
		t.Fatalf("status %s output %s", r1.Status, got)
	}
	req := r1.Output[1].AsMcpApprovalRequest()
	if req.ID == "" || req.ServerLabel != "calc" || req.Name != "add" || req.Arguments != `{"a":2,"b":3}` || srv.Calls("add") != 0 {
		t.Fatalf("approval request %+v; add ran %d times before approval", req, srv.Calls("add"))
	}

	g.stop() // the pending approval is the conversation's, not the gateway's
	client = g.start()

	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID),
		Tools: tools, Input: approve(req.ID, true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r2), ","); got != "mcp_list_tools,mcp_call,message" {
		t.Fatalf("after approval: output %s", got)
	}
	call := r2.Output[1].AsMcpCall()
	if call.ApprovalRequestID != req.ID || call.Output != "5" || srv.Calls("add") != 1 || !strings.Contains(r2.OutputText(), `"5"`) {
		t.Fatalf("mcp_call %+v, add ran %d, answer %q", call, srv.Calls("add"), r2.OutputText())
	}

	// Denied: the call does not run, the model reads that it was denied.
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r2.ID),
		Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`Again [call:add {"a":4,"b":4}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r3), ","); got != "mcp_list_tools,mcp_approval_request" {
		t.Fatalf("second call: output %s", got)
	}
	r4, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r3.ID),
		Tools: tools, Input: approve(r3.Output[1].AsMcpApprovalRequest().ID, false)})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Calls("add") != 1 || !strings.Contains(r4.OutputText(), "denied") || strings.Contains(strings.Join(itemTypes(r4), ","), "mcp_call") {
		t.Fatalf("denied: add ran %d, output %v, answer %q", srv.Calls("add"), itemTypes(r4), r4.OutputText())
	}

	// An answer to a request nothing waits for is the client's error.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r4.ID),
		Tools: tools, Input: approve(req.ID, true)})
	if ae := apiError(t, err, 400, "invalid_request"); !strings.Contains(ae.Message, req.ID) {
		t.Fatalf("message %q", ae.Message)
	}
	e.settled()
}

// TestToolLoopApprovalFilter: {"never": {"tool_names": ["add"]}} runs add at
// once and asks for echo; allowed_tools limits what the model is offered.
func TestToolLoopApprovalFilter(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	ctx := ctxT(t)
	tool := approvalTool("", &responses.ToolMcpRequireApprovalMcpToolApprovalFilterParam{
		Never: responses.ToolMcpRequireApprovalMcpToolApprovalFilterNeverParam{ToolNames: []string{"add"}}})
	tool.OfMcp.AllowedTools = responses.ToolMcpAllowedToolsUnionParam{OfMcpAllowedTools: []string{"add", "echo"}}
	r, err := client.Responses.New(ctx, loopParams(`[call:add {"a":1,"b":2}] [call:echo {"text":"hi"}]`, tool))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r), ","); got != "mcp_list_tools,mcp_call,mcp_approval_request" {
		t.Fatalf("output %s", got)
	}
	if srv.Calls("add") != 1 || srv.Calls("echo") != 0 || r.Output[2].AsMcpApprovalRequest().Name != "echo" {
		t.Fatalf("add ran %d, echo ran %d, request %+v", srv.Calls("add"), srv.Calls("echo"), r.Output[2])
	}
	var names []string
	for _, tl := range r.Output[0].AsMcpListTools().Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "add,echo" {
		t.Fatalf("allowed_tools: offered %v", names)
	}
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Tools: []responses.ToolUnionParam{tool}, Input: approve(r.Output[2].AsMcpApprovalRequest().ID, true)})
	if err != nil {
		t.Fatal(err)
	}
	// The model gets both outputs: add's, run in the first turn, and echo's.
	if txt := r2.OutputText(); srv.Calls("echo") != 1 || !strings.Contains(txt, `"3"`) || !strings.Contains(txt, `"hi"`) {
		t.Fatalf("echo ran %d, answer %q", srv.Calls("echo"), txt)
	}
	e.settled()
}

// TestToolLoopMaxToolCalls: max_tool_calls ends the loop where it says: a
// model that would call a tool forever gets that many calls, then answers;
// the response completes.
func TestToolLoopMaxToolCalls(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	p := loopParams(`[repeat:add {"a":1,"b":1}]`, mcpTool("calc"))
	p.MaxToolCalls = openai.Int(3)
	r, err := client.Responses.New(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	f := loopOf(t, r.RawJSON())
	if r.Status != responses.ResponseStatusCompleted || len(f.ToolExecutions) != 3 || srv.Calls("add") != 3 {
		t.Fatalf("status %s, %d executions, add ran %d times, error %+v", r.Status, len(f.ToolExecutions), srv.Calls("add"), f.Error)
	}
	if got := strings.Join(itemTypes(r), ","); got != "mcp_list_tools,mcp_call,mcp_call,mcp_call,message" {
		t.Fatalf("output %s", got)
	}
	// Two calls in one round with one call left: the first runs, the
	// second does not and is not shown; the model reads why.
	p = loopParams(`[call:add {"a":1,"b":2}] [call:add {"a":3,"b":4}]`, mcpTool("calc"))
	p.MaxToolCalls = openai.Int(1)
	r, err = client.Responses.New(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r), ","); got != "mcp_list_tools,mcp_call,message" || !strings.Contains(r.OutputText(), "max_tool_calls (1) is reached") {
		t.Fatalf("output %s, answer %q", got, r.OutputText())
	}
	e.settled()
}

// TestToolLoopApprovalStream: a streamed response that ends for approval
// shows the mcp_approval_request as an output item (added, done, in
// OpenAI's shape: no status) and ends
// with response.completed holding it.
func TestToolLoopApprovalStream(t *testing.T) {
	e, srv := toolEnv(t)
	_, client := e.gateway()
	stream := client.Responses.NewStreaming(ctxT(t), loopParams(`[call:add {"a":2,"b":2}]`, approvalTool("always", nil)))
	var added, done bool
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			added = added || ev.Item.Type == "mcp_approval_request"
			if ev.Item.Type == "mcp_approval_request" && strings.Contains(ev.Item.RawJSON(), `"status"`) {
				t.Fatalf("an mcp_approval_request has no status in OpenAI's shape: %s", ev.Item.RawJSON())
			}
		case "response.output_item.done":
			done = done || ev.Item.Type == "mcp_approval_request" && ev.Item.AsMcpApprovalRequest().Name == "add"
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !added || !done || strings.Join(itemTypes(&final), ",") != "mcp_list_tools,mcp_approval_request" || srv.Calls("add") != 0 {
		t.Fatalf("added %v done %v final %v, add ran %d", added, done, itemTypes(&final), srv.Calls("add"))
	}
	e.settled()
}

// wsApproval is the approval request a WebSocket response ended with.
func wsApproval(t *testing.T, w wsTurn) (responseID, requestID string) {
	t.Helper()
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Output []struct {
			Type, ID, Name, Arguments string
			ServerLabel               string `json:"server_label"`
		} `json:"output"`
	}
	if w.err != nil {
		t.Fatalf("error event: %s", w.err)
	}
	if err := json.Unmarshal(w.final, &r); err != nil {
		t.Fatal(err)
	}
	n := len(r.Output)
	if r.Status != "completed" || n == 0 || r.Output[n-1].Type != "mcp_approval_request" {
		t.Fatalf("want a response ending for approval: %s", w.final)
	}
	req := r.Output[n-1]
	if req.ID == "" || req.ServerLabel != "calc" || req.Name != "add" {
		t.Fatalf("approval request %+v", req)
	}
	return r.ID, req.ID
}

// TestWebSocketApproval: TestToolLoopApproval's round over WebSocket mode.
// response.create with require_approval "always" ends with an
// mcp_approval_request (streamed as an item, in OpenAI's shape) and runs
// nothing; a response.create continuing it with an mcp_approval_response
// runs the call (approved) or tells the model it was denied; an answer to
// a request nothing waits for fails that response, and the socket goes on.
func TestWebSocketApproval(t *testing.T) {
	e, srv := toolEnv(t)
	url, _ := e.gateway()
	c := wsDial(t, url)
	tools := []any{map[string]any{"type": "mcp", "server_label": "calc", "require_approval": "always"}}
	answer := func(id string, yes bool) []any {
		return []any{map[string]any{"type": "mcp_approval_response", "approval_request_id": id, "approve": yes}}
	}

	w1 := wsCreate(t, c, map[string]any{"input": `Add them [call:add {"a":2,"b":3}]`, "tools": tools})
	r1, req1 := wsApproval(t, w1)
	if srv.Calls("add") != 0 {
		t.Fatalf("add ran %d times before approval", srv.Calls("add"))
	}
	for _, ev := range w1.events {
		if ev.Type == "response.output_item.added" || ev.Type == "response.output_item.done" {
			var it struct {
				Item map[string]any `json:"item"`
			}
			_ = json.Unmarshal(ev.Data, &it)
			if _, has := it.Item["status"]; it.Item["type"] == "mcp_approval_request" && has {
				t.Fatalf("%s: an mcp_approval_request has no status in OpenAI's shape: %s", ev.Type, ev.Data)
			}
		}
	}

	w2 := wsCreate(t, c, map[string]any{"previous_response_id": r1, "tools": tools, "input": answer(req1, true)})
	r2 := wsCompleted(t, w2)
	if srv.Calls("add") != 1 || !strings.Contains(r2.text(), `"5"`) {
		t.Fatalf("approved: add ran %d, answer %q: %s", srv.Calls("add"), r2.text(), w2.final)
	}
	var call struct {
		Output []struct {
			Type              string
			Output            string
			ApprovalRequestID string `json:"approval_request_id"`
		} `json:"output"`
	}
	_ = json.Unmarshal(w2.final, &call)
	if i := slices.IndexFunc(call.Output, func(o struct {
		Type              string
		Output            string
		ApprovalRequestID string `json:"approval_request_id"`
	}) bool {
		return o.Type == "mcp_call"
	}); i < 0 || call.Output[i].ApprovalRequestID != req1 || call.Output[i].Output != "5" {
		t.Fatalf("approved: no mcp_call for %s: %s", req1, w2.final)
	}

	w3 := wsCreate(t, c, map[string]any{"previous_response_id": r2.ID, "tools": tools, "input": `Again [call:add {"a":4,"b":4}]`})
	r3, req3 := wsApproval(t, w3)
	w4 := wsCreate(t, c, map[string]any{"previous_response_id": r3, "tools": tools, "input": answer(req3, false)})
	r4 := wsCompleted(t, w4)
	if srv.Calls("add") != 1 || !strings.Contains(r4.text(), "denied") || strings.Contains(string(w4.final), `"mcp_call"`) {
		t.Fatalf("denied: add ran %d, answer %q: %s", srv.Calls("add"), r4.text(), w4.final)
	}

	// An answer to a request nothing waits for: the pipeline finds it out
	// once the response is under way (the waiting calls are the
	// conversation's record), so, as in any stream, the response fails
	// with invalid_request; nothing runs and the socket goes on.
	w5 := wsCreate(t, c, map[string]any{"previous_response_id": r4.ID, "tools": tools, "input": answer(req1, true)})
	var failed struct {
		Status string
		Error  struct{ Code, Message string }
	}
	_ = json.Unmarshal(w5.final, &failed)
	if w5.err != nil || failed.Status != "failed" || failed.Error.Code != "invalid_request" || !strings.Contains(failed.Error.Message, req1) || srv.Calls("add") != 1 {
		t.Fatalf("stale answer: %s %s, add ran %d", w5.err, w5.final, srv.Calls("add"))
	}
	wsCompleted(t, wsCreate(t, c, map[string]any{"previous_response_id": r4.ID, "input": "Thanks."}))
	e.settled()
}
