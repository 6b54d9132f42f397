package caller

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// maxMessage bounds an error message taken from a non-JSON body.
const maxMessage = 512

// parseUpstreamError reads an error body in either shape servers use:
// OpenAI's {"error":{"message","type","param","code"}} or FastAPI-style
// {"detail": string | object | array}. Anything else keeps a prefix of the
// body as the message, so the cause is never lost.
func parseUpstreamError(status int, body string) *contracts.UpstreamError {
	e := &contracts.UpstreamError{Status: status}
	var env struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal([]byte(body), &env) == nil {
		if len(env.Error) > 0 && string(env.Error) != "null" {
			var inner struct {
				Message string          `json:"message"`
				Type    string          `json:"type"`
				Code    json.RawMessage `json:"code"`
			}
			if json.Unmarshal(env.Error, &inner) == nil {
				e.Message, e.Type, e.Code = inner.Message, inner.Type, scalar(inner.Code)
			} else {
				e.Message = scalar(env.Error)
			}
		} else if len(env.Detail) > 0 && string(env.Detail) != "null" {
			e.Type = "detail"
			e.Message = scalar(env.Detail)
		}
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("upstream returned HTTP %d", status)
		if b := strings.TrimSpace(body); b != "" {
			e.Message += ": " + clip(b, maxMessage)
		}
	}
	return e
}

// scalar renders a JSON value as text: strings unquoted, numbers as written,
// objects and arrays as compact JSON.
func scalar(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
