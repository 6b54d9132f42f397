package loop

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

var testLoop = &contracts.ToolLoop{MaxDepth: 8, Tools: []contracts.LoopTool{
	{Name: "add", Server: "calc", Tool: "add"},
	{Name: "docs__search", Server: "docs", Tool: "search"},
}}

const roundBody = `{"id":"resp_1","output":[
 {"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Let me add."}]},
 {"type":"function_call","id":"fc_a","call_id":"call_a","name":"add","arguments":"{\"a\":1}"},
 {"type":"function_call","id":"fc_b","call_id":"call_b","name":"lookup","arguments":"{}"},
 {"type":"function_call","id":"fc_c","call_id":"call_c","name":"docs__search","arguments":"{\"q\":\"x\"}"}],
 "usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`

func TestRead(t *testing.T) {
	r, err := Read(roundBody, testLoop)
	if err != nil {
		t.Fatal(err)
	}
	if r.ResponseID != "resp_1" || len(r.Items) != 4 || r.Usage.TotalTokens != 15 {
		t.Fatalf("%+v", r)
	}
	if len(r.Server) != 2 || r.Server[0].Tool.Tool != "add" || r.Server[1].Tool.Server != "docs" || r.Server[1].Tool.Tool != "search" {
		t.Fatalf("server calls %+v", r.Server)
	}
	if len(r.Client) != 1 || r.Client[0].Name != "lookup" {
		t.Fatalf("client calls %+v", r.Client)
	}
	if testLoop.ServerCalls(roundBody) != 2 {
		t.Fatal("ServerCalls disagrees with Read")
	}
	if _, err := Read("not json", testLoop); err == nil {
		t.Fatal("a body that is not JSON was read")
	}
	// Chat Completions usage names.
	r, _ = Read(`{"id":"x","output":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, testLoop)
	if r.Usage != (contracts.LlmUsage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}) {
		t.Fatalf("usage %+v", r.Usage)
	}
}

func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		round, maxDepth, done int
		maxCalls, n           int
		wantErr               bool
		wantIn                string
	}{
		{"first round", 0, 8, 0, 0, 3, false, ""},
		{"last allowed round", 7, 8, 7, 0, 1, false, ""},
		{"one round too many", 8, 8, 8, 0, 1, true, "maximum depth"},
		{"depth 1", 1, 1, 1, 0, 1, true, "limit is 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &contracts.ToolLoop{Round: tc.round, MaxDepth: tc.maxDepth, MaxCalls: tc.maxCalls, Executions: make([]contracts.ToolExecution, tc.done)}
			err := CheckDepth(l)
			if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("err %v", err)
			}
			if err != nil && err.(*DepthError).Code() != "max_depth_exceeded" {
				t.Fatal("code")
			}
		})
	}
}

func TestTemplateAndNext(t *testing.T) {
	first := json.RawMessage(`{"model":"m","instructions":"be brief","input":[{"type":"message","role":"user","content":[]}],"previous_response_id":"resp_0","tools":[{"type":"function","name":"add"}],"tool_choice":"required","temperature":0.2}`)
	tpl, err := Template(first)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(tpl), "input") || strings.Contains(string(tpl), "resp_0") || !strings.Contains(string(tpl), "be brief") {
		t.Fatalf("template %s", tpl)
	}
	next, err := Next(tpl, "resp_1", []Output{{CallID: "call_a", Output: "2"}, {CallID: "call_c", Output: "error: <boom> & more"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(next, &b); err != nil {
		t.Fatal(err)
	}
	in := b["input"].([]any)
	if b["previous_response_id"] != "resp_1" || b["tool_choice"] != "auto" || b["temperature"] != 0.2 || b["instructions"] != "be brief" || len(in) != 2 {
		t.Fatalf("next %s", next)
	}
	if o := in[1].(map[string]any); o["type"] != "function_call_output" || o["call_id"] != "call_c" || o["output"] != "error: <boom> & more" {
		t.Fatalf("output item %v", o)
	}
	if strings.Contains(string(next), `\u003c`) {
		t.Fatalf("HTML-escaped: %s", next)
	}
	// A tool_choice of none or auto stays as it was.
	next, _ = Next(json.RawMessage(`{"tool_choice":"none"}`), "r", nil, false)
	if !strings.Contains(string(next), `"tool_choice":"none"`) || !strings.Contains(string(next), `"input":[]`) {
		t.Fatalf("next %s", next)
	}
}

func TestItems(t *testing.T) {
	r, _ := Read(roundBody, testLoop)
	execs := map[string]contracts.ToolExecution{
		"call_a": {Status: contracts.ExecCompleted, Output: "2"},
		"call_c": {Status: contracts.ExecTimeout, Error: "timed out after 1s"},
	}
	items := RoundItems(r, execs, nil)
	var types []string
	for _, it := range items {
		var h struct{ Type, ID string }
		_ = json.Unmarshal(it, &h)
		types = append(types, h.Type+":"+h.ID)
	}
	if got := strings.Join(types, ","); got != "message:msg_1,mcp_call:mcp_a,function_call:fc_b,mcp_call:mcp_c" {
		t.Fatalf("items %s", got)
	}
	var ok, timeout map[string]any
	_ = json.Unmarshal(items[1], &ok)
	_ = json.Unmarshal(items[3], &timeout)
	if ok["server_label"] != "calc" || ok["name"] != "add" || ok["output"] != "2" || ok["error"] != nil || ok["status"] != "completed" {
		t.Fatalf("completed item %v", ok)
	}
	e := timeout["error"].(map[string]any)
	if timeout["name"] != "search" || timeout["status"] != "failed" || e["type"] != "mcp_protocol_error" || e["code"] != float64(-32001) {
		t.Fatalf("timeout item %v", timeout)
	}
	failed := CallItem(r.Server[0], contracts.ToolExecution{Status: contracts.ExecFailed, Output: "bad input", Error: "bad input"})
	if !strings.Contains(string(failed), `"type":"mcp_tool_execution_error"`) || !strings.Contains(string(failed), `"output":"bad input"`) {
		t.Fatalf("tool error item %s", failed)
	}
	list := ListItem("mcpl_1", "down", nil, "connection refused")
	if !strings.Contains(string(list), `"tools":[]`) || !strings.Contains(string(list), `"error":"connection refused"`) {
		t.Fatalf("list item %s", list)
	}
}

// TestLimit: max_tool_calls runs the calls it still allows, in order; the
// next call is the last once it is used up.
func TestLimit(t *testing.T) {
	calls := []Call{{CallID: "a"}, {CallID: "b"}, {CallID: "c"}}
	for _, tc := range []struct {
		name           string
		maxCalls, done int
		run, over      int
		exhausted      bool
	}{
		{"no limit", 0, 5, 3, 0, false},
		{"within", 5, 1, 3, 0, false},
		{"exactly", 4, 1, 3, 0, true},
		{"past it", 2, 1, 1, 2, true},
		{"already used up", 2, 2, 0, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &contracts.ToolLoop{MaxCalls: tc.maxCalls, Executions: make([]contracts.ToolExecution, tc.done)}
			run, over := Limit(l, calls)
			if len(run) != tc.run || len(over) != tc.over || (len(run) > 0 && run[0].CallID != "a") {
				t.Fatalf("run %v over %v", run, over)
			}
			l.Executions = append(l.Executions, make([]contracts.ToolExecution, len(run))...)
			if Exhausted(l) != tc.exhausted {
				t.Fatalf("exhausted %v", Exhausted(l))
			}
		})
	}
	next, err := Next(json.RawMessage(`{"tool_choice":"auto"}`), "r", nil, true)
	if err != nil || !strings.Contains(string(next), `"tool_choice":"none"`) {
		t.Fatalf("last call %s %v", next, err)
	}
}

// TestSplitAndApprovalItems: calls of a server that requires approval wait;
// the round shows them as mcp_approval_request items in the model's order.
func TestSplitAndApprovalItems(t *testing.T) {
	l := &contracts.ToolLoop{Servers: []contracts.MCPServerUse{{Label: "calc", RequireApproval: "filter", ApprovalNever: []string{"add"}}}}
	add := Call{ItemID: "fc_1", CallID: "call_1", Name: "add", Arguments: `{}`, Tool: contracts.LoopTool{Name: "add", Server: "calc", Tool: "add"}}
	echo := Call{ItemID: "fc_2", CallID: "call_2", Name: "echo", Arguments: `{"text":"hi"}`, Tool: contracts.LoopTool{Name: "echo", Server: "calc", Tool: "echo"}}
	run, ask := Split(l, []Call{add, echo})
	if len(run) != 1 || run[0].Name != "add" || len(ask) != 1 || ask[0].Name != "echo" {
		t.Fatalf("run %v ask %v", run, ask)
	}
	p := Pending(echo)
	if p.ID != "mcpr_2" || Resumed(p).Tool != echo.Tool || Resumed(p).CallID != "call_2" {
		t.Fatalf("pending %+v", p)
	}
	r := Result{Server: []Call{add, echo}, Items: []json.RawMessage{
		json.RawMessage(`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"add","arguments":"{}"}`),
		json.RawMessage(`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"echo","arguments":"{\"text\":\"hi\"}"}`)}}
	items := RoundItems(r, map[string]contracts.ToolExecution{"call_1": {Status: contracts.ExecCompleted, Output: "3"}},
		map[string]contracts.PendingApproval{"call_2": p})
	if !strings.Contains(string(items[0]), `"type":"mcp_call"`) ||
		string(items[1]) != `{"arguments":"{\"text\":\"hi\"}","id":"mcpr_2","name":"echo","server_label":"calc","type":"mcp_approval_request"}` {
		t.Fatalf("items %s", items)
	}
	if got := string(ApprovedCallItem(echo, contracts.ToolExecution{Status: contracts.ExecCompleted, Output: "hi"}, "mcpr_2")); !strings.Contains(got, `"approval_request_id":"mcpr_2"`) {
		t.Fatalf("approved call item %s", got)
	}
}
