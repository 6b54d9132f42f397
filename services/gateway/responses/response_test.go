package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

const upstreamOK = `{"id":"resp_upstream","object":"response","status":"completed","model":"sandbox-1",
"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]},
{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"lookup","arguments":"{\"q\":1}"}],
"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`

// requiredFields are the Open Responses ResponseResource's required fields.
var requiredFields = strings.Fields(`id object created_at completed_at status incomplete_details model previous_response_id
instructions output error tools tool_choice truncation parallel_tool_calls text top_p presence_penalty frequency_penalty
top_logprobs temperature reasoning usage max_output_tokens max_tool_calls store background service_tier metadata
safety_identifier prompt_cache_key`)

// TestFromTurn: the response object (docs/http-api.md): Aptix's own id (not
// the upstream's), output as items, usage as input/output/total, every
// required field, and a failed turn as status failed with its error.
func TestFromTurn(t *testing.T) {
	r, e := Parse([]byte(`{"model":"sandbox-1","input":"hi","instructions":"Be brief.","temperature":0.2,"metadata":{"k":"v"},"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]}`))
	if e != nil {
		t.Fatal(e)
	}
	echo, e := Echo(r)
	if e != nil {
		t.Fatal(e)
	}
	meta := Meta{ID: "resp_aptix1", CreatedAt: 100, Model: "sandbox-1", PreviousID: "resp_aptix0", Echo: echo}
	cases := []struct {
		name   string
		turn   contracts.Turn
		status string
		code   string
		items  int
		usage  int
	}{
		{"completed", contracts.Turn{LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}}, StatusCompleted, "", 2, 15},
		{"incomplete", contracts.Turn{LLM: &contracts.LLMResult{Status: 200, Body: `{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`}}, StatusIncomplete, "", 0, 7},
		{"upstream 429", contracts.Turn{LLM: &contracts.LLMResult{Status: 429, Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			Error: &contracts.UpstreamError{Status: 429, Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached"}}}, StatusFailed, "rate_limit_exceeded", 0, 0},
		{"stage rejection", contracts.Turn{Failure: &contracts.Failure{Stage: "envelope", Code: "invalid_tools", Message: "bad"}}, StatusFailed, "invalid_tools", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromTurn(meta, &tc.turn, 200)
			if got.ID != "resp_aptix1" || got.Status != tc.status || len(got.Output) != tc.items {
				t.Errorf("id %s status %s items %d", got.ID, got.Status, len(got.Output))
			}
			if got.Usage == nil || got.Usage.TotalTokens != tc.usage {
				t.Errorf("usage %+v", got.Usage)
			}
			if (got.Error != nil) != (tc.code != "") || (got.Error != nil && got.Error.Code != tc.code) {
				t.Errorf("error %+v, want code %q", got.Error, tc.code)
			}
			b, _ := json.Marshal(got)
			var m map[string]json.RawMessage
			_ = json.Unmarshal(b, &m)
			for _, f := range requiredFields {
				if _, ok := m[f]; !ok {
					t.Errorf("required field %s missing", f)
				}
			}
			if string(m["temperature"]) != "0.2" || string(m["instructions"]) != `"Be brief."` || !strings.Contains(string(m["tools"]), `"strict":`) {
				t.Errorf("echo: temperature %s instructions %s tools %s", m["temperature"], m["instructions"], m["tools"])
			}
			if string(m["previous_response_id"]) != `"resp_aptix0"` || string(m["id"]) == `"resp_upstream"` {
				t.Errorf("ids: %s %s", m["id"], m["previous_response_id"])
			}
		})
	}
}

// TestFailure: a model error keeps the upstream's status and error body (a
// 429 stays a 429); an Aptix failure is a 500 (400 when the input caused it).
func TestFailure(t *testing.T) {
	cases := []struct {
		name   string
		turn   contracts.Turn
		status int
		code   string
		msg    string
	}{
		{"ok", contracts.Turn{LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}}, 0, "", ""},
		{"429 stays 429", contracts.Turn{LLM: &contracts.LLMResult{Status: 429, Body: `{"error":{"message":"Slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			Error: &contracts.UpstreamError{Status: 429, Message: "Slow down"}}}, 429, "rate_limit_exceeded", "Slow down"},
		{"transport failure", contracts.Turn{LLM: &contracts.LLMResult{Error: &contracts.UpstreamError{Type: "timeout", Message: "deadline"}}}, 504, "timeout", "deadline"},
		{"client cause", contracts.Turn{Failure: &contracts.Failure{Code: "unknown_tool_choice", Message: "nope"}}, 400, "unknown_tool_choice", "nope"},
		{"aptix failure", contracts.Turn{Failure: &contracts.Failure{Code: "llm_failed", Message: "boom"}}, 500, "llm_failed", "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Failure(&tc.turn)
			if tc.status == 0 {
				if e != nil {
					t.Fatalf("error %v for a good turn", e)
				}
				return
			}
			if e == nil || e.Status != tc.status || deref(e.Code) != tc.code || e.Message != tc.msg {
				t.Errorf("got %+v", e)
			}
		})
	}
}

// TestStreamer: OpenAI's event order with increasing sequence numbers; a
// call the backend sent whole still gets its added/done events.
func TestStreamer(t *testing.T) {
	s := NewStreamer()
	meta := Meta{ID: "resp_x", CreatedAt: 1, Model: "m"}
	var evs []Event
	evs = append(evs, s.Start(Pending(meta, StatusQueued))...)
	evs = append(evs, s.Delta(Delta{Type: "text", ItemID: "msg_1", Text: "Hel"})...)
	evs = append(evs, s.Delta(Delta{Type: "text", ItemID: "msg_1", Text: "lo"})...)
	evs = append(evs, s.Delta(Delta{Type: "done"})...)
	final := FromTurn(meta, &contracts.Turn{LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}}, 2)
	evs = append(evs, s.Finish(final)...)
	var types []string
	for i, e := range evs {
		if e.Seq != i {
			t.Errorf("event %d has sequence_number %d", i, e.Seq)
		}
		types = append(types, e.Type)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	b, _ := json.Marshal(evs[len(evs)-1])
	if !strings.HasPrefix(string(b), `{"type":"response.completed","sequence_number":13,"response":{`) || !json.Valid(b) {
		t.Errorf("terminal event %s", b)
	}
}

// TestResolve: model picks the backend profile (a model, a listed model,
// an alias, "profile/model" or the profile's name), the upstream model has
// aliases resolved and the prefix removed; an unknown model is OpenAI's 404
// model_not_found naming the known ones; a profile whose API key is missing
// is neither listed nor routed to by a bare model.
func TestResolve(t *testing.T) {
	t.Setenv("APTIX_TEST_MISSING_KEY", "")
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "openai", DefaultModel: "gpt-5.1", Aliases: map[string]string{"fast": "gpt-5.1-mini"}})
	set.Put(profiles.Profile{Name: "sandbox", DefaultModel: "sandbox-1"})
	set.Put(profiles.Profile{Name: "deepseek", API: profiles.APIChatCompletions, DefaultModel: "deepseek-chat", Models: []string{"deepseek-reasoner", "sandbox-1"}})
	set.Put(profiles.Profile{Name: "nokey", APIKeyEnv: "APTIX_TEST_MISSING_KEY", DefaultModel: "hidden-1"})
	set.Default = "sandbox"
	type want struct{ backend, model string }
	for model, w := range map[string]want{
		"": {"sandbox", ""}, "sandbox-1": {"sandbox", "sandbox-1"}, "fast": {"openai", "gpt-5.1-mini"},
		"gpt-5.1-mini": {"openai", "gpt-5.1-mini"}, "openai": {"openai", ""}, "deepseek-reasoner": {"deepseek", "deepseek-reasoner"},
		"deepseek/deepseek-chat": {"deepseek", "deepseek-chat"}, "deepseek/sandbox-1": {"deepseek", "sandbox-1"},
		"openai/fast": {"openai", "gpt-5.1-mini"}, "nokey/hidden-1": {"nokey", "hidden-1"},
	} {
		if got, up, e := Resolve(set, model); e != nil || got != w.backend || up != w.model {
			t.Errorf("%q → %q %q (%v), want %q %q", model, got, up, e, w.backend, w.model)
		}
	}
	for _, model := range []string{"gpt-2", "hidden-1", "nobody/gpt-5.1"} {
		if _, _, e := Resolve(set, model); e == nil || e.Status != 404 || deref(e.Code) != CodeModelNotFound || !strings.Contains(e.Message, model) || !strings.Contains(e.Message, "deepseek-reasoner") {
			t.Errorf("unknown model %q: %v", model, e)
		}
	}
	var ids []string
	for _, m := range Models(set) {
		ids = append(ids, m.OwnedBy+":"+m.ID)
	}
	if got := strings.Join(ids, " "); got != "sandbox:sandbox-1 deepseek:deepseek-chat deepseek:deepseek-reasoner openai:gpt-5.1 openai:fast openai:gpt-5.1-mini" {
		t.Errorf("models %s", got)
	}
}

// TestFileSearchCall: the output gains a file_search_call item listing the
// chunks used (path, lines, chunk id, score) when include asks for results.
func TestFileSearchCall(t *testing.T) {
	turn := contracts.Turn{Request: contracts.AgentExecuteRequest{Instruction: "Where is the retry?"},
		Envelope: &contracts.Envelope{Sources: []contracts.SourceRef{{Id: "ck_1", Path: "retry.go", StartLine: 3, EndLine: 9, Score: 0.5}}},
		LLM:      &contracts.LLMResult{Status: 200, Body: upstreamOK}}
	for _, results := range []bool{false, true} {
		r := FromTurn(Meta{ID: "resp_1", FileSearch: true, FileSearchResults: results}, &turn, 1)
		if len(r.Output) != 3 {
			t.Fatalf("output %d items", len(r.Output))
		}
		var item struct {
			Type    string
			Queries []string
			Results []struct {
				FileID   string `json:"file_id"`
				Filename string
				Score    float64
			}
		}
		_ = json.Unmarshal(r.Output[0], &item)
		if item.Type != "file_search_call" || item.Queries[0] != "Where is the retry?" {
			t.Errorf("item %s", r.Output[0])
		}
		if results && (len(item.Results) != 1 || item.Results[0].FileID != "ck_1" || item.Results[0].Filename != "retry.go") {
			t.Errorf("results %s", r.Output[0])
		}
		if !results && item.Results != nil {
			t.Errorf("results without include: %s", r.Output[0])
		}
	}
}
