package responses

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// decodeFixtures are completed events as the gateway receives them: the
// cases of TestFromMappedTurn (each as a version 1 and a version 2 event)
// and upstream bodies that test the edges of encoding/json's decode (names
// in another case, duplicate names, invalid UTF-8, wrong types, a body that
// is not JSON, chat-completions usage, an error with a null param).
func decodeFixtures() map[string]contracts.Turn {
	p := newMappedParts()
	sources, usage15, loop := p.sources, p.usage15, p.loop
	badParam, incomplete, verbatim, rewritten := p.badParam, p.incomplete, p.verbatim, p.rewritten
	ok, env := p.ok, p.env
	// Raw items with spacing and a tool input, which the decode must keep
	// byte for byte.
	loop = &contracts.ToolLoop{MaxDepth: loop.MaxDepth, Round: loop.Round, Status: loop.Status, Usage: loop.Usage,
		Items:      []json.RawMessage{json.RawMessage(`{"type":"mcp_list_tools","id":"mcpl_1"}`), json.RawMessage(`{"type":"mcp_call", "id":"mcp_1"}`)},
		Executions: []contracts.ToolExecution{{ID: "mcp_1", Tool: "search", Server: "aptix", CallID: "call_s", Round: 1, Status: "completed", Input: json.RawMessage(`{"q": "retry"}`)}}}
	upErr := func(body string, status int) contracts.Turn {
		return contracts.Turn{Envelope: env(),
			LLM:      &contracts.LLMResult{Status: status, Body: body, Error: &contracts.UpstreamError{Status: status, Message: fmt.Sprintf("HTTP %d", status), Type: "upstream_error"}},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "upstream_error", ErrorMessage: "HTTP", Sources: sources, RawResponseJson: body}}
	}
	good := func(body string) contracts.Turn {
		return contracts.Turn{Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Model: "sandbox-1", Body: body}, Response: ok(body, usage15)}
	}
	v1 := map[string]contracts.Turn{
		"completed":                           {Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Model: "sandbox-1", Body: upstreamOK, TruncatedItems: 2}, Response: ok(upstreamOK, usage15)},
		"upstream error with param and code":  upErr(badParam, 400),
		"upstream error, null param and code": upErr(`{"error":{"message":"Rate limit","type":"rate_limit_error","param":null,"code":null}}`, 429),
		"upstream error without a body":       upErr(``, 0),
		"upstream error, body not JSON":       upErr(`<html>bad gateway</html>`, 502),
		"upstream error, names in other case": upErr(`{"Error":{"Message":"Slow down","TYPE":"rate_limit_error","Code":"rate"}}`, 429),
		"stage failure after mapping": {Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK},
			Failure:  &contracts.Failure{Stage: "mapper", Code: "usage_unavailable", Message: "could not record"},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "usage_unavailable", Sources: sources, RawResponseJson: upstreamOK}},
		"tool loop": {Envelope: env(), Tools: loop, LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}, Response: ok(upstreamOK, usage15.Plus(usage15))},
		"tool loop at max depth": {Envelope: env(), Tools: &contracts.ToolLoop{MaxDepth: 1, Round: 1, Items: loop.Items, Executions: loop.Executions},
			Failure: &contracts.Failure{Stage: "toolrunner", Code: contracts.LoopMaxDepthExceeded, Message: "depth"},
			LLM:     &contracts.LLMResult{Status: 200, Body: upstreamOK}, Response: ok(upstreamOK, usage15)},
		"emulated tool calls": {Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: rewritten, UpstreamBody: verbatim},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindToolOnly, Sources: sources, RawResponseJson: verbatim,
				ToolCalls: []contracts.AgentToolCall{{CallId: "call_e1", Name: "lookup", ArgumentsJson: "{}"}}}},
		"incomplete": {Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: incomplete},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindEmpty, FinishReason: contracts.FinishLength, Sources: sources, RawResponseJson: incomplete}},
		"failed upstream status":  good(`{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[],"usage":null}`),
		"names in another case":   good(`{"Status":"incomplete","MODEL":"m2","Output":[{"type":"message","content":[]}],"Usage":{"Input_Tokens":3,"output_tokens":1}}`),
		"duplicate names":         good(`{"status":"failed","status":"completed","model":"a","model":"b","output":[],"output":[{"type":"x"}]}`),
		"invalid UTF-8":           good("{\"status\":\"completed\",\"model\":\"m\xff\",\"output\":[{\"type\":\"message\",\"text\":\"caf\xe9\"}]}"),
		"escapes and spacing":     good("{ \"status\" : \"completed\" ,\n \"output\" : [ {\"type\" : \"message\", \"text\" : \"<a href=\\\"x\\\">&amp;\\u2028\\ud83d\\ude00</a>\"} ] }"),
		"wrong type of a field":   good(`{"status":"completed","model":"m","output":[{"type":"message"}],"usage":{"input_tokens":"9"}}`),
		"fractional token count":  good(`{"status":"completed","output":[],"usage":{"input_tokens":1.5}}`),
		"trailing data":           good(`{"status":"completed","output":[]} {}`),
		"truncated":               good(`{"status":"completed","output":[{"type":"message"`),
		"not an object":           good(`[1,2]`),
		"null output and details": good(`{"status":"completed","output":null,"incomplete_details":null,"error":null}`),
		"chat usage":              good(`{"status":"completed","output":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"input_tokens_details":{"cached_tokens":3},"output_tokens_details":{"reasoning_tokens":1}}}`),
		"rejected by a stage":     {Failure: &contracts.Failure{Stage: "envelope", Code: "invalid_tools", Message: "bad tools"}},
		"answer error":            {LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}, Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "mapping_failed", ErrorMessage: "x"}},
	}
	out := map[string]contracts.Turn{}
	for name, t := range v1 {
		out[name+" (v1)"] = t
		out[name+" (v2)"] = carried(t)
	}
	return out
}

// decodeMetas are response records with the echoed parameters of a rich
// request and of none.
func decodeMetas(t *testing.T) []Meta {
	r, e := Parse([]byte(`{"model":"m","input":"hi","instructions":"be brief","max_output_tokens":64,"store":false,
		"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true},{"type":"web_search"},{"type":"file_search","vector_store_ids":["vs_1"]}],
		"tool_choice":{"type":"function","name":"f"},"metadata":{"k":"v","é":"<&>"},"temperature":0.5,"top_p":1.0,"text":{"verbosity":"low"},
		"reasoning":{"effort":"high"},"parallel_tool_calls":false,"truncation":"auto","user":"u","prompt_cache_key":"pk","service_tier":"flex",
		"top_logprobs":2,"safety_identifier":"s","max_tool_calls":3,"presence_penalty":0.1,"frequency_penalty":-0.1,
		"include":["file_search_call.results"]}`))
	if e != nil {
		t.Fatal(e.Message)
	}
	rich, e := MetaFor(r)
	if e != nil {
		t.Fatal(e.Message)
	}
	rich.ID, rich.CreatedAt, rich.PreviousID = "resp_a", 100, "resp_prev"
	return []Meta{{ID: "resp_b", CreatedAt: 100, Model: "asked"}, rich}
}

// TestDecodeMatchesEncodingJSON: the responses (and the sync create's
// errors) built from completed events are byte for byte those built with
// encoding/json's decode.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	build := func(decode func([]byte, any) error) map[string]string {
		saved := decodeBody
		decodeBody = decode
		defer func() { decodeBody = saved }()
		out := map[string]string{}
		for i, meta := range decodeMetas(t) {
			for name, turn := range decodeFixtures() {
				r := FromTurn(meta, &turn, 200)
				a, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				b, err := encodeJSON(r) // as writeJSON answers it
				if err != nil {
					t.Fatal(err)
				}
				f, _ := json.Marshal(Failure(&turn))
				out[fmt.Sprintf("%s, meta %d", name, i)] = string(a) + "\n" + string(b) + "\n" + string(f)
			}
		}
		return out
	}
	want := build(json.Unmarshal)
	got := build(decodeBody)
	if len(got) != len(want) || len(got) < 50 {
		t.Fatalf("%d cases, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n got %s\nwant %s", k, got[k], w)
		}
	}
}

// TestEchoMatchesEncodingJSON: the echoed parameters a response record keeps
// are the bytes encoding/json encodes.
func TestEchoMatchesEncodingJSON(t *testing.T) {
	bodies := []string{benchBody,
		`{"model":"m","input":"hi","instructions":"<be> & brief\u2028","max_output_tokens":64,"store":false,"background":false,
		"tools":[{"type":"function","name":"f","description":"d <x>","parameters":{"type":"object", "properties":{}},"strict":false},{"type":"web_search","x":[1, 2.50]},{"type":"function","function":{"name":"g","parameters":{}}}],
		"tool_choice":"required","metadata":{"k":"v","é":"<&>","Z":"","a b":"\u00e9"},"temperature":0.5,"top_p":1.0,"text":{"verbosity":"low","format":null},
		"reasoning":{"summary":"auto"},"parallel_tool_calls":false,"truncation":"auto","user":"u","prompt_cache_key":"pk","prompt_cache_retention":"24h",
		"service_tier":"flex","top_logprobs":2,"safety_identifier":"s","max_tool_calls":3,"presence_penalty":1e-1,"frequency_penalty":-0.1}`,
	}
	bodies = append(bodies, toolBodies...)
	refused := 0
	for _, body := range bodies {
		r, e := Parse([]byte(body))
		if e != nil {
			t.Fatal(e.Message)
		}
		got, ge := Echo(r)
		saved := encodeEcho
		encodeEcho = json.Marshal
		want, we := Echo(r)
		encodeEcho = saved
		// And as the tools parsed again from the bytes echo them (what Echo
		// did before Parse kept them).
		again := *r
		again.echoTools, again.echoToolsErr = nil, nil
		fresh, fe := Echo(&again)
		if ge != nil {
			refused++
		}
		if string(got) != string(want) || string(got) != string(fresh) || !reflect.DeepEqual(ge, we) || !reflect.DeepEqual(ge, fe) {
			t.Errorf("%s echo:\n got %s %+v\nwant %s %+v\nparsed again %s %+v", body, got, ge, want, we, fresh, fe)
		}
	}
	if refused != 7 {
		t.Errorf("%d echoes refused, want the 7 tool lists the envelope refuses", refused)
	}
}

// toolBodies are create requests whose tools Parse accepts: function tools
// in both shapes, with and without strict, description and parameters,
// hosted and mcp tools, and tools the envelope refuses (a duplicate name,
// a duplicate hosted tool, a bad name or parameters), which Echo reports.
var toolBodies = []string{
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","description":"<b> & \u00e9"}},"required":["a"],"additionalProperties":false},"strict":true,"description":"D"},{"type":"function","name":"g","strict":false},{"type":"function","name":"h","parameters":null,"description":""}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{ "type" : "object" },"strict":true}},{"type":"function","name":"g","parameters":{}}]}`,
	`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"deepwiki","server_url":"https://mcp.deepwiki.com/mcp","require_approval":"never","allowed_tools":["ask_question"]},{"type":"web_search_preview","search_context_size":"low"},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"web_search", "user_location" : {"type":"approximate","city":"Zürich"}}],"tool_choice":{"type":"web_search"}}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"function","function":{"name":"f"}}]}`,
	`{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"web_search"}]}`,
	`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"a","server_url":"https://a"},{"type":"mcp", "server_label":"a","server_url":"https://a"}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"bad name"}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":[1]}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f","strict":"yes"}]}`,
}

// TestParseMatchesEncodingJSON: a create request parses to the same request,
// or the same error, as with encoding/json's decode.
func TestParseMatchesEncodingJSON(t *testing.T) {
	bodies := []string{benchBody,
		`{"model":"m","input":"hi","system_prompt":"Be brief.","max_tokens":64,"tool_choice":{"type":"function","function":{"name":"lookup"}},"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"temperature":0.3}`,
		`{ "model" : "m" , "input" : [ {"role":"user","content":"x"} , {"type":"message","role":"assistant","content":[{"type":"output_text","text":"y"}]} ],
		  "metadata" : { "a" : "b" , "a" : "c" }, "include" : [ "file_search_call.results" , "reasoning.encrypted_content" ],
		  "tools" : [ { "type" : "file_search" , "vector_store_ids" : [ "vs_1" ] } , { "type" : "web_search" } ], "text" : { "format" : { "type" : "text" } } }`,
		`{"mo\u0064el":"m","input":"caf\u00e9 \ud83d\ude00","instructions":"<&>","store":null,"stream":true,"background":false,"user":"` + "\xff" + `"}`,
		"{\"model\":\"m\xff\",\"input\":\"x\",\"metadata\":{\"k\xfe\":\"v\"}}",
		`{"model":"m","model":"n","input":"a","input":"b"}`,
		`{"model":"m","input":"x","max_output_tokens":1.0}`,
		`{"model":"m","input":"x","max_output_tokens":1e2}`,
		`{"model":"m","input":"x","max_output_tokens":99999999999999999999}`,
		`{"model":"m","input":"x","max_output_tokens":-0}`,
		`{"model":"m","input":"x","max_output_tokens":-1}`,
		`{"model":"m","input":"x","store":"yes"}`,
		`{"model":"m","input":"x","metadata":{"a":1}}`,
		`{"model":"m","input":"x","include":"a"}`,
		`{"model":"m","input":"x","tools":{"type":"function"}}`,
		`{"model":"m","input":"x","tools":[1]}`,
		`{"model":"m","input":"x","tools":[{"type":1}]}`,
		`{"model":"m","input":"x","tools":[{"Type":"function","name":"f"}]}`,
		`{"model":"m","input":"x","tools":[{"type":"function","type":"web_search"}]}`,
		`{"model":"m","input":"x","tools":[{"type":"function","name":""}]}`,
		`{"model":"m","input":"x","tools":[]}`,
		`{"model":"m","input":"x","tools":[{"type":"function","name":"f","function":null}]}`,
		`{"model":"m","input":[]}`,
		`{"model":"m","input":5}`,
		`{"model":"m","input":"caf\u00e9 <&>\u2028 \ud800"}`,
		`{"model":"m","input":[1]}`,
		`{"model":"m","input":[null]}`,
		`{"model":"m","input":[{"content":"x"}]}`,
		`{"model":"m","input":[{"role":"tool","content":"x"}]}`,
		`{"model":"m","input":[{"role":"user"}]}`,
		`{"model":"m","input":[{"role":"user","content":null}]}`,
		`{"model":"m","input":[{"type":1,"role":"user","content":"x"}]}`,
		`{"model":"m","input":[{"type":"message","role":5,"content":"x"}]}`,
		`{"model":"m","input":[{"ROLE":"user","Content":"x <b>"}]}`,
		`{"model":"m","input":[{"role":"user","role":"assistant","content":"x","content":[ {"type":"input_text","text":"y"} ]}]}`,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"{\"a\": 1}"},{"type":"reasoning","summary":[]}]}`,
		`{"model":"m","input":"x","tool_choice":"auto"}`,
		`{"model":"m","input":"x","tool_choice":"sometimes"}`,
		`{"model":"m","input":"x","tool_choice":5}`,
		`{"model":"m","input":"x","tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"function","name":1}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"function"}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"custom","name":"c"}}`,
		`{"model":"m","input":"x","tool_choice":{"TYPE":"function","Function":{"NAME":"g"}}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"function","function":null,"name":"h"}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"allowed_tools","mode":"required","tools":[]}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"allowed_tools"}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"file_search"}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"mcp","server_label":"a"}}`,
		`{"model":"m","input":"x","tool_choice":{}}`,
		`{"model":"m","input":"x","tool_choice":{"type":"none","type":"required"}}`,
		`{"model":"m","input":"x","tools":null,"tool_choice":null}`,
		`{"model":"m","input":"x","conversation":{"id":"conv_1"}}`,
		`{"model":"m","input":"x","background":true,"store":false}`,
		`{"model":"m","input":"x"} trailing`,
		`{"model":"m","input":"x",}`,
		"{\"model\":\"m\",\n \"input\": hi}",
		`[1,2]`, `null`, `"s"`, ``, `{`,
		`{"model":"m","input":"x","temprature":1}`,
		`{"model":"m","input":"x","aptix":{"mode":"ANALYZE","mood":"x"}}`,
		`{"model":"m","input":"x","aptix":{"mode":"ANALYZE","tags":["a"]}}`,
	}
	bodies = append(bodies, toolBodies...)
	parse := func(decode func([]byte, any) error, body string) (*CreateRequest, *Error) {
		saved := decodeRequest
		decodeRequest = decode
		defer func() { decodeRequest = saved }()
		return Parse([]byte(body))
	}
	for _, body := range bodies {
		wr, we := parse(json.Unmarshal, body)
		gr, ge := parse(decodeRequest, body)
		if !reflect.DeepEqual(gr, wr) || !reflect.DeepEqual(ge, we) {
			t.Errorf("%s:\n got %+v %+v\nwant %+v %+v", body, gr, ge, wr, we)
		}
	}
}
