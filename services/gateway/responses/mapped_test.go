package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// carried is the completed event the mapper stores for a turn (version 2):
// response.rawResponseJson is the only copy of the verbatim body (tool
// emulation's rewrite stays in llm.body), and response.sources the only
// list of sources. v1 is the same turn as a version 1 completion carried it.
func carried(v1 contracts.Turn) contracts.Turn {
	t := v1
	t.Version = contracts.TurnVersion
	if v1.LLM != nil && v1.Response != nil {
		l := *v1.LLM
		if l.UpstreamBody != "" {
			l.UpstreamBody = ""
		} else {
			l.Body = ""
		}
		t.LLM = &l
	}
	if v1.Envelope != nil && v1.Response != nil {
		e := *v1.Envelope
		e.Sources = nil
		t.Envelope = &e
	}
	return t
}

// TestFromMappedTurn: the response is built from the mapper's result (its
// rawResponseJson, sources and usage) plus the LLM section's small fields,
// and is the same whether the completion is a version 2 event (the body
// once) or a version 1 event (the body in llm.body too).
func TestFromMappedTurn(t *testing.T) {
	p := newMappedParts()
	sources, usage15, loop := p.sources, p.usage15, p.loop
	badParam, incomplete, verbatim, rewritten := p.badParam, p.incomplete, p.verbatim, p.rewritten
	ok, env := p.ok, p.env

	cases := []struct {
		name     string
		v1       contracts.Turn
		status   string
		items    []string // output item types, in order
		usage    int
		code     string // response error code
		httpCode int    // Failure's status, 0: no failure
		param    string
	}{
		{name: "completed", v1: contracts.Turn{Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Model: "sandbox-1", Body: upstreamOK, TruncatedItems: 2}, Response: ok(upstreamOK, usage15)},
			status: StatusCompleted, items: []string{"file_search_call", "message", "function_call"}, usage: 15},
		{name: "upstream error with param and code", v1: contracts.Turn{Envelope: env(),
			LLM:      &contracts.LLMResult{Status: 400, Body: badParam, Error: &contracts.UpstreamError{Status: 400, Message: "HTTP 400"}},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "invalid_value", ErrorMessage: "Invalid 'temperature': must be at most 2.", Sources: sources, RawResponseJson: badParam}},
			status: StatusFailed, items: []string{}, code: "invalid_value", httpCode: 400, param: "temperature"},
		{name: "stage failure after mapping", v1: contracts.Turn{Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK},
			Failure:  &contracts.Failure{Stage: "mapper", Code: "usage_unavailable", Message: "could not record"},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "usage_unavailable", Sources: sources, RawResponseJson: upstreamOK}},
			status: StatusFailed, items: []string{}, usage: 15, code: "usage_unavailable", httpCode: 500},
		{name: "tool loop", v1: contracts.Turn{Envelope: env(), Tools: loop, LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK},
			Response: ok(upstreamOK, usage15.Plus(usage15))},
			status: StatusCompleted, items: []string{"file_search_call", "mcp_list_tools", "mcp_call", "message", "function_call"}, usage: 30},
		{name: "emulated tool calls", v1: contracts.Turn{Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: rewritten, UpstreamBody: verbatim},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindToolOnly, Sources: sources, RawResponseJson: verbatim,
				ToolCalls: []contracts.AgentToolCall{{CallId: "call_e1", Name: "lookup", ArgumentsJson: "{}"}}}},
			status: StatusCompleted, items: []string{"file_search_call", "function_call"}, usage: 6},
		{name: "incomplete", v1: contracts.Turn{Envelope: env(), LLM: &contracts.LLMResult{Status: 200, Body: incomplete},
			Response: &contracts.AgentExecuteResponse{Kind: contracts.KindEmpty, FinishReason: contracts.FinishLength, Sources: sources, RawResponseJson: incomplete}},
			status: StatusIncomplete, items: []string{"file_search_call"}, usage: 7},
	}
	meta := Meta{ID: "resp_aptix2", CreatedAt: 100, Model: "asked", FileSearch: true, FileSearchResults: true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v2 := carried(tc.v1)
			if v2.LLM.Body != "" && v2.LLM.UpstreamBody != "" {
				t.Fatal("test setup: the version 2 event carries two bodies")
			}
			got := FromTurn(meta, &v2, 200)
			var types []string
			for _, it := range got.Output {
				var item struct{ Type string }
				_ = json.Unmarshal(it, &item)
				types = append(types, item.Type)
			}
			if got.Status != tc.status || strings.Join(types, ",") != strings.Join(tc.items, ",") {
				t.Errorf("status %s, output %v; want %s, %v", got.Status, types, tc.status, tc.items)
			}
			if got.Usage == nil || got.Usage.TotalTokens != tc.usage {
				t.Errorf("usage %+v, want total %d", got.Usage, tc.usage)
			}
			if (got.Error != nil) != (tc.code != "") || (got.Error != nil && got.Error.Code != tc.code) {
				t.Errorf("error %+v, want code %q", got.Error, tc.code)
			}
			if tc.name == "completed" && (got.Model != "sandbox-1" || got.TruncatedInputItems != 2) {
				t.Errorf("model %q, truncated items %d", got.Model, got.TruncatedInputItems)
			}
			if tc.status != StatusFailed && !strings.Contains(string(got.Output[0]), `"chunk_id":"ck_1"`) {
				t.Errorf("file_search_call without the turn's sources: %s", got.Output[0])
			}
			e := Failure(&v2)
			if tc.httpCode == 0 {
				if e != nil {
					t.Errorf("failure %+v for a good turn", e)
				}
			} else if e == nil || e.Status != tc.httpCode || deref(e.Code) != tc.code || deref(e.Param) != tc.param {
				t.Errorf("failure %+v, want %d %q param %q", e, tc.httpCode, tc.code, tc.param)
			} else if tc.param != "" && e.Message != "Invalid 'temperature': must be at most 2." {
				t.Errorf("failure message %q: not the upstream's", e.Message)
			}

			// A version 1 completion (the body in llm.body too) reads alike.
			old := FromTurn(meta, &tc.v1, 200)
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(old)
			if string(a) != string(b) {
				t.Errorf("version 2 and version 1 differ:\n%s\n%s", a, b)
			}
			if fe1, fe2 := Failure(&tc.v1), Failure(&v2); (fe1 == nil) != (fe2 == nil) || fe1 != nil && (*fe1).Message != (*fe2).Message {
				t.Errorf("failures differ: %+v %+v", fe1, fe2)
			}
		})
	}
}
