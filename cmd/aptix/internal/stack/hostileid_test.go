package stack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// errorOf decodes an OpenAI-shaped error body.
func errorOf(t *testing.T, body string) (param, code string) {
	t.Helper()
	var doc struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Error == nil || doc.Error.Type != "invalid_request_error" || doc.Error.Code == nil {
		t.Fatalf("not an OpenAI error body: %v: %.300s", err, body)
	}
	if len(body) > 2000 {
		t.Fatalf("the error echoes the whole id (%d bytes)", len(body))
	}
	if doc.Error.Param != nil {
		param = *doc.Error.Param
	}
	return param, *doc.Error.Code
}

// TestGatewayHostileIDs: an id from outside that is no subject token (5,000
// characters, a dot, a wildcard) is refused before it reaches a subject or
// a key, on every path and body field that carries one: 404 for a response
// id in a path, 400 naming the field in a body. A 5,000-character id once
// became a subject longer than NATS' control line: the server closed the
// process's shared connection, which never came back, and `aptix up` exited.
// After every refusal the same connection still serves a normal response.
func TestGatewayHostileIDs(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	long := "resp_" + strings.Repeat("a", 5000)
	stillServes := func(after string) {
		t.Helper()
		if !e.nc.IsConnected() {
			t.Fatalf("after %s the NATS connection is %s", after, e.nc.Status())
		}
		r, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("still there?")}})
		if err != nil || r.Status != responses.ResponseStatusCompleted {
			t.Fatalf("after %s a normal create failed: %v", after, err)
		}
	}
	for _, id := range []string{long, "resp_a.b", "resp_a*", "resp_%3E", "resp_a%20b"} {
		for _, p := range []struct{ method, path string }{
			{"GET", "/v1/responses/" + id},
			{"GET", "/v1/responses/" + id + "?stream=true"},
			{"DELETE", "/v1/responses/" + id},
			{"POST", "/v1/responses/" + id + "/cancel"},
			{"GET", "/v1/responses/" + id + "/input_items"},
		} {
			st, _, body := call(t, p.method, url+p.path, "", nil)
			if _, code := errorOf(t, body); st != http.StatusNotFound || code != "not_found" {
				t.Fatalf("%s %.60s: %d %s, want 404 not_found", p.method, p.path, st, code)
			}
		}
	}
	stillServes("hostile path ids")

	bodies := []struct {
		path, body, param, code string
	}{
		{"/v1/responses", `{"model":"sandbox-1","input":"x","previous_response_id":"` + long + `"}`, "previous_response_id", "string_above_max_length"},
		{"/v1/responses", `{"model":"sandbox-1","input":"x","previous_response_id":"resp_a.>"}`, "previous_response_id", "invalid_value"},
		{"/v1/responses", `{"model":"sandbox-1","input":"x","stream":true,"previous_response_id":"` + long + `"}`, "previous_response_id", "string_above_max_length"},
		{"/v1/responses", `{"model":"sandbox-1","input":"x","background":true,"previous_response_id":"` + long + `"}`, "previous_response_id", "string_above_max_length"},
		{"/v1/responses", `{"model":"sandbox-1","input":"x","conversation":"` + long + `"}`, "conversation", "string_above_max_length"},
		{"/v1/responses", `{"model":"sandbox-1","input":"x","conversation":{"id":"c.*"}}`, "conversation", "invalid_value"},
		{"/v1/responses/compact", `{"model":"sandbox-1","previous_response_id":"` + long + `"}`, "previous_response_id", "string_above_max_length"},
		{"/v1/responses/compact", `{"model":"sandbox-1","input":"x","previous_response_id":"` + long + `"}`, "previous_response_id", "string_above_max_length"},
		{"/v1/aptix/execute", `{"conversationId":"` + long + `","instruction":"x"}`, "", "invalid_value"},
		{"/v1/aptix/execute", `{"turnId":"` + long + `","instruction":"x"}`, "", "invalid_value"},
		{"/v1/aptix/execute?stream=true", `{"turnId":"t.>","instruction":"x"}`, "", "invalid_value"},
	}
	for _, b := range bodies {
		st, _, body := call(t, "POST", url+b.path, b.body, nil)
		param, code := errorOf(t, body)
		if st != http.StatusBadRequest || param != b.param || code != b.code {
			t.Fatalf("POST %s %.80s: %d param %q code %q, want 400 %q %q: %.300s", b.path, b.body, st, param, code, b.param, b.code, body)
		}
	}
	stillServes("hostile body ids")

	// WebSocket: the refusal is the create's error event, and the socket
	// and the connection stay usable.
	c := wsDial(t, url)
	wsRefused(t, wsCreate(t, c, map[string]any{"input": "x", "previous_response_id": long}), "string_above_max_length")
	wsRefused(t, wsCreate(t, c, map[string]any{"input": "x", "previous_response_id": "resp_>"}), "invalid_value")
	wsRefused(t, wsCreate(t, c, map[string]any{"input": "x", "conversation": long}), "string_above_max_length")
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "and on the socket?"}))
	stillServes("hostile WebSocket ids")
	if e.nc.Status() != nats.CONNECTED {
		t.Fatal("connection lost")
	}
}
