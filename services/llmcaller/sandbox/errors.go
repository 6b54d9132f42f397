package sandbox

import (
	json "github.com/go-json-experiment/json/v1"
	"net/http"
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

// badRequest is a request the sandbox rejects the way OpenAI would (400).
type badRequest struct {
	param, code, msg string
}

func (e *badRequest) Error() string { return e.msg }

func invalid(param, code, msg string) *badRequest {
	return &badRequest{param: param, code: code, msg: msg}
}
