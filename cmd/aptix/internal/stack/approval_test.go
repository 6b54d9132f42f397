package stack

import (
	"context"
	"net/http/httptest"
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
	srv, err := httpapi.New(context.Background(), httpapi.Config{NC: g.e.nc, Profiles: g.e.cfg.Profiles, Logger: quiet, SyncTimeout: 15 * time.Second})
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
// shows the mcp_approval_request as an output item (added, done) and ends
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
