package contracts

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
)

// TurnVersion is the version of the Turn document this package writes.
//
// Version 2 carries what the next stage needs, once: after the envelope,
// retrieval has no chunk list (envelope.sources lists the chunks used); the
// completed event's llm section has no body when response.rawResponseJson
// holds the same bytes (always, except for tool emulation's rewrite, which
// stays in llm.body while rawResponseJson is the verbatim body), and its
// envelope no sources (response.sources). A version 1 event carries them
// too; readers take a section's own copy when it is there
// (Turn.ResultBody), so both versions read alike.
const TurnVersion = 2

// Turn is the document that travels through the stages. Each stage fills its
// own section, so the completed event holds the turn's whole story and any
// stage can be re-driven from the event it consumed.
type Turn struct {
	Version        int    `json:"version"`
	ConversationId string `json:"conversationId"`
	TurnId         string `json:"turnId"`

	Request   AgentExecuteRequest   `json:"request"`
	Retrieval *Retrieval            `json:"retrieval,omitempty"`
	Envelope  *Envelope             `json:"envelope,omitempty"`
	LLM       *LLMResult            `json:"llm,omitempty"`
	Response  *AgentExecuteResponse `json:"response,omitempty"`
	// Tools is the server-side tool loop, when the request enabled MCP tools.
	Tools *ToolLoop `json:"tools,omitempty"`

	// Warnings accumulate across stages and end up in AgentExecuteResponse.Warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Failure is set when a stage rejected the turn; later stages pass it
	// through and the client receives a kind "error" completion.
	Failure *Failure `json:"failure,omitempty"`

	// result is ResultBody decoded (Result): each stage and front door
	// decodes the upstream body once, whoever reads it.
	result *decodedResult
}

// decodedResult is a body and its typed document (or why it has none).
type decodedResult struct {
	body string
	doc  *oresponse.Response
	err  error
}

// Retrieval is the retriever's section. The envelope stage drops Chunks
// once the context block in Envelope.Body carries their text and
// Envelope.Sources lists them, so only the retrieved event holds the chunks
// (version 1 events keep their metadata in every later event).
type Retrieval struct {
	Index  string     `json:"index,omitempty"`
	Query  string     `json:"query,omitempty"`
	Scope  string     `json:"scope,omitempty"`
	Chunks []RagChunk `json:"chunks,omitempty"`
	TookMs float64    `json:"tookMs,omitempty"`
}

// Envelope is the envelope stage's section: the exact /responses body.
type Envelope struct {
	Backend string `json:"backend"`
	Model   string `json:"model"`
	// Body is cleared by the LLM caller once sent (only the enveloped event
	// carries it), like the chunk text after the envelope stage.
	Body json.RawMessage `json:"body,omitempty"`
	// Sources are the chunks that made it into the context block. The
	// mapper drops them from the completed event: Response.Sources is the
	// same list.
	Sources []SourceRef `json:"sources,omitempty"`
	// Tools is the normalized tool list of this turn (sent or retained), recorded
	// by the mapper so the next turn knows what the backend already holds.
	Tools json.RawMessage `json:"tools,omitempty"`
	// ContextChars is the size of the [CONTEXT] block sent.
	ContextChars int `json:"contextChars,omitempty"`
	// ToolEmulation is set when the backend has no native function calling
	// (profile toolMode "prompt"): Body carries the function tools as
	// instructions instead, and the LLM caller needs them back to parse the
	// model's <tool_call> blocks.
	ToolEmulation *ToolEmulation `json:"toolEmulation,omitempty"`
	// Price is the backend profile's price for Model when it has one; the
	// mapper charges the turn's usage at it (nil: the turn is unpriced).
	Price *Price `json:"price,omitempty"`
	// HistoryTokens bounds the input a continued conversation's backend
	// (or the LLM caller's history replay) adds to Body: what the
	// conversation's last turn counted in and out. A budget's reservation
	// adds it to the body's count (docs/usage-and-budgets.md).
	HistoryTokens int `json:"historyTokens,omitempty"`
}

// ToolEmulation is what the LLM caller needs to turn <tool_call> blocks in
// the output text into function calls (docs/tool-emulation.md).
type ToolEmulation struct {
	// Tools are the function tools removed from Body, in the Responses shape.
	Tools json.RawMessage `json:"tools"`
	// ToolChoice is the turn's tool_choice as the client asked for it: "auto",
	// "none", "required" or {"type":"function","name":…}; absent means auto.
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

// LLMResult is the LLM caller's section. Body is the upstream body verbatim
// (a string, not json.RawMessage, so it survives byte-for-byte even when the
// upstream sent malformed JSON), except under tool emulation: there Body is
// the body with the model's <tool_call> blocks turned into function_call
// items, which is what the mapper reads, and UpstreamBody is the verbatim one.
//
// The mapper's Response.RawResponseJson is the verbatim body, so the
// completed event drops the copy here that equals it: Body, or under tool
// emulation UpstreamBody (Body, the rewrite, stays: the gateway's output
// items come from it). Turn.ResultBody reads whichever the event holds.
type LLMResult struct {
	Backend    string         `json:"backend"`
	Model      string         `json:"model,omitempty"`
	Status     int            `json:"status"`
	Body       string         `json:"body,omitempty"`
	Error      *UpstreamError `json:"error,omitempty"`
	Attempts   int            `json:"attempts"`
	DurationMs float64        `json:"durationMs,omitempty"`
	Streamed   bool           `json:"streamed,omitempty"`
	// Cached is true when the result came from the pay-once store, not a new call.
	Cached bool `json:"cached,omitempty"`
	// TurnId is the turn the call was made for. A replay from the mapper
	// re-maps a result made for another turn: no model was paid for it, so
	// the usage accounting does not count it.
	TurnId string `json:"turnId,omitempty"`
	// UpstreamBody is the upstream body verbatim when tool emulation rewrote
	// Body; empty when Body is verbatim.
	UpstreamBody string `json:"upstreamBody,omitempty"`
	// Warnings are the caller's notes for the client, e.g. a <tool_call>
	// block left as text and why.
	Warnings []string `json:"warnings,omitempty"`
	// TruncatedItems is how many of the oldest input items the caller
	// dropped to fit the profile's context window (truncation "auto").
	TruncatedItems int `json:"truncatedItems,omitempty"`
	// Fallbacks are the backends tried before this one, in order, each of
	// which failed before any output reached the client: the result is
	// the next profile's of the first one's "fallbacks"
	// (docs/backends.md#fallbacks). Empty when the first backend served.
	Fallbacks []BackendAttempt `json:"fallbacks,omitempty"`
}

// BackendAttempt is one backend's failed call of a turn that fell back to
// another: what was asked of whom, and how it failed.
type BackendAttempt struct {
	Backend    string         `json:"backend"`
	Model      string         `json:"model,omitempty"`
	Status     int            `json:"status,omitempty"`
	Error      *UpstreamError `json:"error,omitempty"`
	Attempts   int            `json:"attempts"`
	DurationMs float64        `json:"durationMs,omitempty"`
	// Skipped says why the backend was not called at all (its tool mode
	// differs, or the turn continues a response only the first backend holds).
	Skipped string `json:"skipped,omitempty"`
}

// UpstreamError describes a call that produced no usable response body:
// a transport failure, a timeout or an HTTP error.
type UpstreamError struct {
	Status  int    `json:"status,omitempty"`
	Type    string `json:"type,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// Failure records why a stage rejected a turn.
type Failure struct {
	Stage   string `json:"stage"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ResultBody is the upstream body the turn's answer was read from: the LLM
// section's Body while the event holds it (a responded event, a version 1
// completion, tool emulation's rewrite, a completion a stage other than the
// mapper wrote), else the mapper's Response.RawResponseJson, which holds
// the same bytes. An upstream error's body is here too. Empty when the
// turn has no body.
func (t *Turn) ResultBody() string {
	if t.LLM != nil && t.LLM.Body != "" {
		return t.LLM.Body
	}
	if t.LLM != nil && t.Response != nil {
		return t.Response.RawResponseJson
	}
	return ""
}

// Result is the typed upstream body the turn's answer is read from
// (ResultBody): the mapper's AGN-004 fields and every front door's answer
// (output items, status, usage, incomplete details, error) come from it.
// The event carries the body once, as its bytes (response.rawResponseJson,
// or llm.body): Result decodes them the first time a process asks and
// keeps the document with the turn, so no stage or door parses the
// upstream body twice. nil with no error when the turn has no body.
func (t *Turn) Result() (*oresponse.Response, error) {
	body := t.ResultBody()
	if body == "" {
		return nil, nil
	}
	if r := t.result; r != nil && r.body == body {
		return r.doc, r.err
	}
	doc, err := oresponse.ParseString(body)
	t.result = &decodedResult{body: body, doc: doc, err: err}
	return doc, err
}

// NewTurn starts a Turn document from an execute request.
func NewTurn(req AgentExecuteRequest) Turn {
	return Turn{Version: TurnVersion, ConversationId: req.ConversationId, TurnId: req.TurnId, Request: req}
}
