package sandbox

import (
	"errors"
	"net/http"

	json "github.com/go-json-experiment/json/v1"
)

// apiError is OpenAI's error envelope: {"error":{"message","type","param","code"}}.
// param and code are null when empty, as OpenAI sends them.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeError answers with an OpenAI-shaped error body.
func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Message: msg, Type: typ, Param: nullable(param), Code: nullable(code)}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "sandbox: encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeFailure answers err: a badRequest as OpenAI's 400, anything else
// as a 500 that names the sandbox.
func writeFailure(w http.ResponseWriter, err error) {
	var br *badRequest
	if errors.As(err, &br) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", br.param, br.code, br.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, "server_error", "", "", "sandbox: "+err.Error())
}

// badRequest is a request the sandbox rejects the way OpenAI would (400).
type badRequest struct {
	param, code, msg string
}

func (e *badRequest) Error() string { return e.msg }

func invalid(param, code, msg string) *badRequest {
	return &badRequest{param: param, code: code, msg: msg}
}
