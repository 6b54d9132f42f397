// Package mapping turns a raw /responses result into an AgentExecuteResponse
// (AGN-004). Every AGN-004 rule lives in this file; where the seed's example
// differs from the real Responses API (usage names, finish_reason, tool call
// ids), the comment at that line says what is read instead and why.
package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
)

// Error codes Aptix itself assigns (upstream codes pass through as sent).
const (
	CodeMalformedResponse = "malformed_response"
	CodeUpstream          = "upstream_error"
	CodeResponseFailed    = "response_failed"
	CodeNotFinished       = "response_not_finished"
)

// Input is what the mapper knows about a turn.
type Input struct {
	Request contracts.AgentExecuteRequest
	// LLM is the caller's result: status, verbatim body, or an upstream error.
	LLM contracts.LLMResult
	// Sources are the chunks the envelope put in the context block (§2.8).
	Sources []contracts.SourceRef
	// Warnings from earlier stages (§2.8).
	Warnings []string
	// Result is LLM.Body decoded (contracts.Turn.Result), so the stage
	// decodes the body once; nil decodes LLM.Body here.
	Result *oresponse.Response
}

// result is in's decoded body, or why the body is not a response object.
func (in Input) result() (*oresponse.Response, error) {
	if in.Result != nil {
		return in.Result, nil
	}
	return oresponse.ParseString(in.LLM.Body)
}

// Map applies AGN-004 to one LLM result. It never fails: whatever came back,
// the client gets a response that says what happened.
func Map(in Input) contracts.AgentExecuteResponse {
	r := contracts.BaseResponse(in.Request, in.Sources, in.Warnings)
	// §2.7: verbatim, including fields Aptix does not use. Under tool
	// emulation Body is the rewritten body this mapping reads (function_call
	// items for the model's <tool_call> blocks) and UpstreamBody what the
	// backend really sent, which is what the client gets here.
	r.RawResponseJson = firstNonEmpty(in.LLM.UpstreamBody, in.LLM.Body)

	// §3: HTTP or transport error.
	if in.LLM.Error != nil || in.LLM.Status < 200 || in.LLM.Status > 299 {
		return upstreamError(r, in)
	}
	resp, err := in.result()
	if err != nil || resp == nil {
		if err == nil {
			err = errors.New("empty body")
		}
		return errorKind(r, CodeMalformedResponse, fmt.Sprintf("the backend answered %d with a body that is not a /responses object: %v", in.LLM.Status, err))
	}

	r.ResponseContinuationId = resp.ID      // §2.1: the next turn's previous_response_id
	r.ModelId = resp.Model                  // §2.2
	r.Usage = contracts.UsageOf(resp.Usage) // §2.3

	var texts []string
	for _, item := range resp.Output {
		switch item.Type {
		case "message": // §2.5: every text part, in order
			for _, part := range item.Content {
				switch part.Type {
				case "output_text":
					if part.Text != "" {
						texts = append(texts, part.Text)
					}
				case "refusal":
					texts = append(texts, part.Refusal)
					r.Warnings = append(r.Warnings, "the model refused: the text is its refusal")
				}
			}
		case "function_call": // §2.6, with call_id: the id a function_call_output must echo
			r.ToolCalls = append(r.ToolCalls, contracts.AgentToolCall{
				CallId:        firstNonEmpty(item.CallID, item.ID),
				Name:          item.Name,
				ArgumentsJson: item.Arguments, // exactly as emitted
			})
		}
	}
	r.Text = strings.Join(texts, "\n\n") // §2.5: joined with single blank lines

	switch resp.Status {
	case "failed":
		code, msg := CodeResponseFailed, "the response failed"
		if resp.Error != nil {
			code, msg = firstNonEmpty(resp.Error.CodeString(), resp.Error.Type, code), firstNonEmpty(resp.Error.Message, msg)
		}
		return errorKind(r, code, msg)
	case "queued", "in_progress":
		return errorKind(r, CodeNotFinished, "the response is still "+resp.Status+" (background responses are not awaited)")
	case "cancelled":
		return errorKind(r, "cancelled", "the response was cancelled")
	}
	if resp.Error != nil && resp.Status == "" {
		// An error object in a 200 body (some proxies do this).
		return errorKind(r, firstNonEmpty(resp.Error.CodeString(), resp.Error.Type, CodeUpstream),
			firstNonEmpty(resp.Error.Message, "the backend answered 200 with an error object and no message"))
	}

	r.FinishReason = resp.FinishReason() // §2.4, from status, incomplete_details and the items
	if r.FinishReason == contracts.FinishLength {
		r.Warnings = append(r.Warnings, "output truncated: the model hit max_output_tokens")
	}
	r.Kind = kind(r.Text, len(r.ToolCalls))
	return r
}

// kind classifies the result (§4).
func kind(text string, toolCalls int) string {
	switch {
	case text != "":
		return contracts.KindOK
	case toolCalls > 0:
		return contracts.KindToolOnly
	default:
		return contracts.KindEmpty
	}
}

// upstreamError maps an HTTP or transport failure (§3): ErrorCode is the API's
// error code, else its type, else the HTTP status; ErrorMessage is the
// server's message, from {"error":{…}} or {"detail":…}.
func upstreamError(r contracts.AgentExecuteResponse, in Input) contracts.AgentExecuteResponse {
	llm := in.LLM
	var code, msg string
	if e := llm.Error; e != nil {
		code, msg = firstNonEmpty(e.Code, e.Type), e.Message
	}
	if body, err := in.result(); err == nil && body != nil {
		if body.Error != nil {
			code = firstNonEmpty(code, body.Error.CodeString(), body.Error.Type)
			msg = firstNonEmpty(msg, body.Error.Message)
		}
		msg = firstNonEmpty(msg, detailString(body.Detail))
	}
	status := strconv.Itoa(llm.Status)
	if llm.Error != nil && llm.Error.Status != 0 {
		status = strconv.Itoa(llm.Error.Status)
	}
	if code == "" {
		code = "http_" + status
		if status == "0" {
			code = CodeUpstream
		}
	}
	if msg == "" {
		msg = "the backend answered HTTP " + status + " with no error message"
	}
	return errorKind(r, code, msg)
}

func errorKind(r contracts.AgentExecuteResponse, code, msg string) contracts.AgentExecuteResponse {
	r.Kind, r.FinishReason, r.ErrorCode, r.ErrorMessage = contracts.KindError, contracts.FinishError, code, msg
	return r
}

// detailString reads FastAPI-style {"detail": "…"} or {"detail": [{…}]}.
func detailString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
