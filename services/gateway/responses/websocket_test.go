package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseSocketCreate: a response.create message is a create body with a
// type; background is refused by name, stream and stream_options ignored
// (Codex sends "stream": true); the previous_response_id is read even from
// a refused message (to evict it).
func TestParseSocketCreate(t *testing.T) {
	req, prev, e := ParseSocketCreate([]byte(`{"type":"response.create","model":"m","store":false,"previous_response_id":"resp_1","input":"hi"}`))
	if e != nil || req.Model != "m" || req.Store || req.PreviousID != "resp_1" || prev != "resp_1" || len(req.Input) != 1 {
		t.Fatalf("req %+v prev %q err %v", req, prev, e)
	}
	for _, msg := range []string{`{"type":"response.create","model":"m","input":"x","stream":true}`,
		`{"type":"response.create","model":"m","input":"x","stream":false,"stream_options":{"include_obfuscation":false}}`} {
		req, _, e := ParseSocketCreate([]byte(msg))
		if e != nil || req.Stream || req.Fields["stream_options"] != nil {
			t.Errorf("%s: %+v %v", msg, req, e)
		}
	}
	for _, tc := range []struct{ msg, param, code string }{
		{`{"type":"response.create","model":"m","input":"x","background":false,"previous_response_id":"resp_2"}`, "background", CodeUnknownParameter},
		{`{"model":"m","input":"x"}`, "type", CodeMissingParameter},
		{`{"type":"response.cancel"}`, "type", CodeUnknownEvent},
		{`{"type":"response.create","model":"m","input":"x","bogus":1}`, "bogus", CodeUnknownParameter},
		// OpenAI's multiplexing; Open Responses allows one response in flight.
		{`{"type":"response.create","model":"m","input":"x","stream_id":"lane-1"}`, "stream_id", CodeUnknownParameter},
	} {
		_, prev, e := ParseSocketCreate([]byte(tc.msg))
		if e == nil || deref(e.Param) != tc.param || deref(e.Code) != tc.code || e.Status != 400 {
			t.Errorf("%s: %v", tc.msg, e)
		}
		if strings.Contains(tc.msg, "resp_2") && prev != "resp_2" {
			t.Errorf("%s: previous id %q not read", tc.msg, prev)
		}
	}
	if _, _, e := ParseSocketCreate([]byte(`{"type":`)); e == nil || deref(e.Code) != CodeInvalidJSON {
		t.Errorf("malformed: %v", e)
	}
}

// TestErrorEvent: OpenAI's error object with status and sequence_number.
func TestErrorEvent(t *testing.T) {
	b, _ := json.Marshal(ErrorEvent(PreviousNotFound("resp_x")))
	want := `{"type":"error","sequence_number":0,"error":{"message":"Previous response with id 'resp_x' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"},"status":400,"status_code":400}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if e := ConnectionLimit("1h0m0s"); deref(e.Code) != CodeConnectionLimit || !strings.Contains(e.Message, "1h0m0s") {
		t.Fatalf("%+v", e)
	}
}

// TestCheckCallOutputs: a function_call_output must answer a call of the
// previous response or one earlier in the same input.
func TestCheckCallOutputs(t *testing.T) {
	prev := CallIDs([]json.RawMessage{
		json.RawMessage(`{"type":"message","id":"m"}`),
		json.RawMessage(`{"type":"function_call","call_id":"call_a","name":"f","arguments":"{}"}`),
	})
	out := func(id string) json.RawMessage {
		return json.RawMessage(`{"type":"function_call_output","call_id":"` + id + `","output":"x"}`)
	}
	if e := CheckCallOutputs([]json.RawMessage{out("call_a")}, prev); e != nil {
		t.Fatal(e)
	}
	local := json.RawMessage(`{"type":"function_call","call_id":"call_b","name":"f","arguments":"{}"}`)
	if e := CheckCallOutputs([]json.RawMessage{local, out("call_b")}, prev); e != nil {
		t.Fatal(e)
	}
	e := CheckCallOutputs([]json.RawMessage{out("call_a"), out("call_zz")}, prev)
	if e == nil || e.Status != 400 || deref(e.Param) != "input[1].call_id" || !strings.Contains(e.Message, "call_zz") {
		t.Fatalf("%v", e)
	}
}
