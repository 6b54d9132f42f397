// Package responses translates between OpenAI's Responses API and Aptix
// turns (docs/http-api.md): it parses and validates a create request,
// turns it into a contracts.AgentExecuteRequest that keeps everything the
// client said, and builds the Responses `response` object and its streaming
// events from a turn. It has no HTTP or NATS import, so every rule here is
// table-tested as plain Go and any adapter (HTTP, WebSocket) reuses it.
package responses

import "fmt"

// Error types and codes of OpenAI's error body that the gateway uses.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
	// TypeExecution is the seed's error type of a tool loop that could not finish.
	TypeExecution = "execution_error"

	CodeUnknownParameter   = "unknown_parameter"
	CodeInvalidType        = "invalid_type"
	CodeInvalidValue       = "invalid_value"
	CodeMissingParameter   = "missing_required_parameter"
	CodeInvalidJSON        = "invalid_json"
	CodePreviousNotFound   = "previous_response_not_found"
	CodeModelNotFound      = "model_not_found"
	CodeNotFound           = "not_found"
	CodeRequestTooLarge    = "request_too_large"
	CodeUnavailable        = "service_unavailable"
	CodePreviousInProgress = "previous_response_in_progress"
	// CodeInvalidEncryptedContent is a compaction item that does not open.
	CodeInvalidEncryptedContent = "invalid_encrypted_content"
)

// Error is an API error in OpenAI's shape with the HTTP status it goes with.
// The adapter writes it as {"error":{"message","type","param","code"}}.
type Error struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, when set, is the Retry-After of a 429 or 503 in seconds
	// (a spent budget says when it resets).
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string {
	code := ""
	if e.Code != nil {
		code = *e.Code
	}
	return fmt.Sprintf("%d %s: %s", e.Status, code, e.Message)
}

// Body is the JSON error document: {"error":{…}}.
func (e *Error) Body() any {
	return struct {
		Error *Error `json:"error"`
	}{e}
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid is a 400 invalid_request_error naming the parameter at fault.
func invalid(param, code, format string, args ...any) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Param: ptr(param), Code: ptr(code), Message: fmt.Sprintf(format, args...)}
}

// NotFound is OpenAI's 404 for an unknown response id.
func NotFound(id string) *Error {
	return &Error{Status: 404, Type: TypeInvalidRequest, Code: ptr(CodeNotFound),
		Message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// PreviousNotFound is OpenAI's 400 for an unknown previous_response_id: never
// a silent fresh start (docs/http-api.md#continuation-and-branching).
func PreviousNotFound(id string) *Error {
	return invalid("previous_response_id", CodePreviousNotFound, "Previous response with id '%s' not found.", id)
}

// PreviousInProgress: a continuation of a response that has no result yet
// cannot say what it continues from.
func PreviousInProgress(id string) *Error {
	e := invalid("previous_response_id", CodePreviousInProgress, "Previous response with id '%s' is still in progress; continue from it once it has completed.", id)
	e.Status = 409
	return e
}

// Unavailable is a 503: the bus is down or the admission queue is full. The
// adapter adds Retry-After.
func Unavailable(msg string) *Error {
	return &Error{Status: 503, Type: TypeServer, Code: ptr(CodeUnavailable), Message: msg}
}

// TooLarge is a 413 for a body over the gateway's limit.
func TooLarge(limit int64) *Error {
	return &Error{Status: 413, Type: TypeInvalidRequest, Code: ptr(CodeRequestTooLarge),
		Message: fmt.Sprintf("Request body too large: the limit is %d bytes.", limit)}
}

// Internal is a 500 with an Aptix error code.
func Internal(code, msg string) *Error {
	return &Error{Status: 500, Type: TypeServer, Code: ptr(code), Message: msg}
}

// BadRequest is a 400 for the adapter's own checks (e.g. query parameters).
func BadRequest(param, code, msg string) *Error { return invalid(param, code, "%s", msg) }

// JSONError is the 400 for a body that is not JSON, naming the position
// where parsing stopped: every front door (the Chat Completions codec too)
// says it the same way.
func JSONError(data []byte, err error) *Error { return jsonError(data, err) }
