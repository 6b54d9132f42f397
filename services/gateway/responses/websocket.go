package responses

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// WebSocket mode (Open Responses 2026-04-24, docs/http-api.md#websocket-mode): a client sends
// {"type":"response.create", …the body of a POST /v1/responses…} and gets
// the events of the SSE stream, one JSON text frame each. This file is the
// part of it that is plain rules: the message, the fields it refuses, the
// error event, and the tool-output check a continuation gets.

// Error codes of WebSocket mode.
const (
	// CodeConnectionLimit ends a socket older than the connection limit
	// (OpenAI's and Open Responses': 60 minutes).
	CodeConnectionLimit = "websocket_connection_limit_reached"
	// CodeResponseInProgress refuses a response.create while the socket's
	// previous response is still running (one response in flight per socket).
	CodeResponseInProgress = "response_in_progress"
	// CodeUnknownEvent refuses a message whose type is not response.create.
	CodeUnknownEvent = "unknown_event_type"
)

// wsRefused are the create parameters that make no sense over a socket: a
// response on a socket is not a background job.
var wsRefused = []string{"background"}

// wsMoot are parameters a socket accepts and ignores: the socket is the
// stream. Codex sends "stream": true in every response.create.
var wsMoot = []string{"stream", "stream_options"}

// ParseSocketCreate reads one WebSocket message: a response.create event
// whose other fields are a create request. background is refused (an
// error naming the field). previousID is the
// message's previous_response_id as far as it could be read, also when the
// message is refused, so the adapter can evict it from its cache. stream
// and stream_options are ignored (the socket streams every response).
func ParseSocketCreate(data []byte) (req *CreateRequest, previousID string, e *Error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, "", jsonError(data, err)
	}
	if raw == nil {
		return nil, "", invalid("", CodeInvalidJSON, "The message must be a JSON object.")
	}
	_ = json.Unmarshal(raw["previous_response_id"], &previousID)
	var typ string
	if json.Unmarshal(raw["type"], &typ) != nil || typ == "" {
		return nil, previousID, invalid("type", CodeMissingParameter, "Missing required parameter: 'type' (a WebSocket message is {\"type\":\"response.create\", …}).")
	}
	if typ != "response.create" {
		return nil, previousID, invalid("type", CodeUnknownEvent, "Unsupported message type '%s': the only client event is 'response.create'.", typ)
	}
	for _, k := range wsRefused {
		if _, ok := raw[k]; ok {
			return nil, previousID, invalid(k, CodeUnknownParameter,
				"Parameter '%s' is not supported in WebSocket mode: a response runs while the socket waits for it.", k)
		}
	}
	delete(raw, "type")
	for _, k := range wsMoot {
		delete(raw, k)
	}
	body, err := json.Marshal(raw)
	if err != nil {
		return nil, previousID, invalid("", CodeInvalidJSON, "The message could not be read: %v", err)
	}
	req, e = Parse(body)
	return req, previousID, e
}

// ErrorEvent is the `error` event of a socket: OpenAI's error object plus
// the HTTP status the same failure has over HTTP, sequence_number 0 (it is
// the whole answer to the message that caused it). The status is given
// twice: status, and status_code, which is what Codex reads to take the
// event as the failed request's answer (without it Codex waits for a
// response.completed that never comes).
func ErrorEvent(e *Error) Event {
	return Event{Type: "error", Seq: 0, Data: map[string]any{"status": e.Status, "status_code": e.Status, "error": e}}
}

// ConnectionLimit is the error that closes a socket at its age limit.
func ConnectionLimit(limit string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: ptr(CodeConnectionLimit),
		Message: fmt.Sprintf("Responses WebSocket connection limit reached (%s). Create a new WebSocket connection to continue.", limit)}
}

// ResponseInProgress refuses a second response.create on a busy socket.
func ResponseInProgress() *Error {
	return &Error{Status: http.StatusConflict, Type: TypeInvalidRequest, Code: ptr(CodeResponseInProgress),
		Message: "A response is already in progress on this WebSocket: send the next response.create after its terminal event (one response in flight per connection)."}
}

// CallIDs are the call_ids of the function_call items of a response's output.
func CallIDs(output []json.RawMessage) map[string]bool {
	ids := map[string]bool{}
	for _, raw := range output {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" && it.CallID != "" {
			ids[it.CallID] = true
		}
	}
	return ids
}

// CheckCallOutputs checks that every function_call_output of input answers
// a call: one of the previous response's (calls) or a function_call earlier
// in the same input. A continuation that answers no call fails like
// OpenAI's (400, param input) instead of reaching the model.
func CheckCallOutputs(input []json.RawMessage, calls map[string]bool) *Error {
	local := map[string]bool{}
	for i, raw := range input {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "function_call":
			local[it.CallID] = true
		case "function_call_output":
			if !calls[it.CallID] && !local[it.CallID] {
				return invalid(fmt.Sprintf("input[%d].call_id", i), CodeInvalidValue,
					"No tool call found for function call output with call_id '%s'.", it.CallID)
			}
		}
	}
	return nil
}
