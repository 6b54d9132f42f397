package responses

import (
	"encoding/json"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/pipeline"
)

// Response statuses (OpenAI's, and Open Responses').
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Response is the Responses API `response` object, every field the Open
// Responses schema requires present (null where it has no value), in the
// order OpenAI documents them. Echoed request parameters are raw JSON so a
// value the client sent comes back exactly.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *ResponseError    `json:"error"`
	IncompleteDetails  json.RawMessage   `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    json.RawMessage   `json:"max_output_tokens"`
	MaxToolCalls       json.RawMessage   `json:"max_tool_calls"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	PromptCacheKey     json.RawMessage   `json:"prompt_cache_key"`
	// PromptCacheRetention is echoed when the request set it.
	PromptCacheRetention json.RawMessage   `json:"prompt_cache_retention,omitempty"`
	Reasoning            json.RawMessage   `json:"reasoning"`
	SafetyIdentifier     json.RawMessage   `json:"safety_identifier"`
	ServiceTier          json.RawMessage   `json:"service_tier"`
	Store                bool              `json:"store"`
	Temperature          json.RawMessage   `json:"temperature"`
	Text                 json.RawMessage   `json:"text"`
	ToolChoice           json.RawMessage   `json:"tool_choice"`
	Tools                json.RawMessage   `json:"tools"`
	TopLogprobs          json.RawMessage   `json:"top_logprobs"`
	TopP                 json.RawMessage   `json:"top_p"`
	PresencePenalty      json.RawMessage   `json:"presence_penalty"`
	FrequencyPenalty     json.RawMessage   `json:"frequency_penalty"`
	Truncation           json.RawMessage   `json:"truncation"`
	Usage                *Usage            `json:"usage"`
	User                 json.RawMessage   `json:"user"`
	Metadata             map[string]string `json:"metadata"`
	// Conversation is set when the request named one (OpenAI's shape).
	Conversation *ConversationRef `json:"conversation,omitempty"`
	// The seed's lifecycle times of a background response (background.go).
	QueuedAt    *int64 `json:"queued_at,omitempty"`
	StartedAt   *int64 `json:"started_at,omitempty"`
	CancelledAt *int64 `json:"cancelled_at,omitempty"`
	FailedAt    *int64 `json:"failed_at,omitempty"`
	// Webhook is the delivery of metadata.webhook_url's webhook, once tried.
	Webhook *WebhookStatus `json:"webhook,omitempty"`
	// The seed's record of a server-side tool loop (toolloop.go).
	ToolExecutions    []ToolExecution    `json:"tool_executions,omitempty"`
	ExecutionMetadata *ExecutionMetadata `json:"execution_metadata,omitempty"`
	// TruncatedInputItems is how many of the oldest input items truncation
	// "auto" dropped to fit the backend profile's context window.
	TruncatedInputItems int `json:"truncated_input_items,omitempty"`

	// items are the typed result's output items (FromTurn): Items reads
	// them instead of decoding Output's bytes again.
	items []oresponse.Item
}

// Items are Output's items typed, for a front door that answers in
// another shape (Chat Completions, Messages): those of the turn's typed
// result as it decoded them, and only the ones the gateway added (a
// file_search_call, a tool loop's items) decoded here. An item that does
// not decode is left out.
func (r Response) Items() []oresponse.Item {
	out := make([]oresponse.Item, 0, len(r.Output))
	j := 0
	for _, raw := range r.Output {
		if j < len(r.items) && sameBytes(r.items[j].Raw, raw) {
			out = append(out, r.items[j])
			j++
			continue
		}
		if it, err := oresponse.ParseItem(raw); err == nil {
			out = append(out, it)
		}
	}
	return out
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// WebhookStatus is how a response's webhook delivery went: delivered, or
// failed (dead-lettered) with the last error, and after how many attempts.
type WebhookStatus struct {
	Status   string `json:"status"`
	Event    string `json:"event"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
}

// ConversationRef is the response's conversation: {"id": …}.
type ConversationRef struct {
	ID string `json:"id"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Type is set where the seed names one (execution_error).
	Type string `json:"type,omitempty"`
}

// Usage is the response's token usage.
type Usage struct {
	InputTokens         int          `json:"input_tokens"`
	InputTokensDetails  InputDetail  `json:"input_tokens_details"`
	OutputTokens        int          `json:"output_tokens"`
	OutputTokensDetails OutputDetail `json:"output_tokens_details"`
	TotalTokens         int          `json:"total_tokens"`
}

// InputDetail is usage.input_tokens_details.
type InputDetail struct {
	CachedTokens int `json:"cached_tokens"`
	// CacheWriteTokens are input tokens an Anthropic backend wrote to its
	// prompt cache (no OpenAI field: absent unless there are some), so the
	// Messages door can say cache_creation_input_tokens.
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// OutputDetail is usage.output_tokens_details.
type OutputDetail struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Meta is what the gateway records about a response when it is created (in
// KV, so any replica can answer for it): its Aptix id, when, the model the
// client named, the response it continues, and the request parameters a
// response echoes.
type Meta struct {
	ID             string          `json:"id"`
	ConversationID string          `json:"conversationId"`
	TurnID         string          `json:"turnId"`
	CreatedAt      int64           `json:"createdAt"`
	Model          string          `json:"model"`
	PreviousID     string          `json:"previousId,omitempty"`
	Echo           json.RawMessage `json:"echo,omitempty"`
	// ContinuedFrom is the upstream response id this turn continued (so a
	// continuation of a failed response can skip it).
	ContinuedFrom string `json:"continuedFrom,omitempty"`
	// FileSearch: the output starts with a file_search_call item; with
	// FileSearchResults it lists the chunks used.
	FileSearch        bool `json:"fileSearch,omitempty"`
	FileSearchResults bool `json:"fileSearchResults,omitempty"`
	// NamedConversation is the conversation parameter, echoed as conversation.id.
	NamedConversation string `json:"namedConversation,omitempty"`
	// HistoryItems is how many items of the turn's input came from its
	// conversation object, before the client's own (input_items skips them).
	HistoryItems int `json:"historyItems,omitempty"`
	// Background: created with background true (status starts queued).
	Background bool `json:"background,omitempty"`
	// Owner is the principal that created the response ("" without
	// authentication): only it can read, cancel, delete or continue it.
	Owner string `json:"owner,omitempty"`
}

// MetaFor is the Meta of a new response to r (the adapter adds the ids,
// time and conversation).
func MetaFor(r *CreateRequest) (Meta, *Error) {
	echo, e := Echo(r)
	if e != nil {
		return Meta{}, e
	}
	m := Meta{Model: r.Model, PreviousID: r.PreviousID, Echo: echo, FileSearch: r.FileSearch != nil, NamedConversation: r.Conversation,
		Background: r.Background}
	for _, inc := range r.Include {
		if inc == "file_search_call.results" {
			m.FileSearchResults = true
		}
	}
	return m, nil
}

// Echo returns the request parameters a response object repeats, keyed by
// their response field names: tools normalized to the flat Responses shape
// with strict explicit, tool_choice as sent, and the sampling parameters.
func Echo(r *CreateRequest) (json.RawMessage, *Error) {
	m := map[string]any{"store": r.Store, "background": r.Background}
	if r.Instructions != "" {
		m["instructions"] = r.Instructions
	}
	if r.MaxOutputTokens > 0 {
		m["max_output_tokens"] = r.MaxOutputTokens
	}
	if len(r.ToolsEcho) > 0 {
		tools, err := r.echoTools, r.echoToolsErr
		if tools == nil && err == nil { // not made by Parse
			tools, err = tooldef.Parse("tools", string(r.ToolsEcho))
		}
		if err != nil {
			return nil, invalid("tools", CodeInvalidValue, "Invalid 'tools': %v.", err)
		}
		m["tools"] = echoTools(tools)
	}
	if len(r.ToolChoiceRaw) > 0 {
		m["tool_choice"] = r.ToolChoiceRaw
	}
	if r.Metadata != nil {
		m["metadata"] = r.Metadata
	}
	for _, k := range []string{"temperature", "top_p", "text", "reasoning", "parallel_tool_calls", "truncation",
		"user", "prompt_cache_key", "prompt_cache_retention", "service_tier", "top_logprobs", "safety_identifier", "max_tool_calls",
		"presence_penalty", "frequency_penalty"} {
		if v, ok := r.Fields[k]; ok {
			m[k] = echoShape(k, v)
		}
	}
	b, err := encodeEcho(m)
	if err != nil {
		return nil, Internal("encode_echo", err.Error())
	}
	return b, nil
}

// base is the response with OpenAI's defaults, then the echoed parameters.
func base(meta Meta) Response {
	r := Response{
		ID: meta.ID, Object: "response", CreatedAt: meta.CreatedAt, Model: meta.Model,
		Output: []json.RawMessage{}, ParallelToolCalls: true, Store: true,
		Reasoning:   json.RawMessage(`{"effort":null,"summary":null}`),
		ServiceTier: json.RawMessage(`"default"`), Temperature: json.RawMessage(`1`),
		Text: json.RawMessage(`{"format":{"type":"text"}}`), ToolChoice: json.RawMessage(`"auto"`),
		Tools: json.RawMessage(`[]`), TopLogprobs: json.RawMessage(`0`), TopP: json.RawMessage(`1`),
		PresencePenalty: json.RawMessage(`0`), FrequencyPenalty: json.RawMessage(`0`),
		Truncation: json.RawMessage(`"disabled"`), Metadata: map[string]string{},
	}
	if meta.PreviousID != "" {
		prev := meta.PreviousID
		r.PreviousResponseID = &prev
	}
	if meta.NamedConversation != "" {
		r.Conversation = &ConversationRef{ID: meta.NamedConversation}
	}
	if len(meta.Echo) > 0 {
		_ = decodeBody(meta.Echo, &r) // produced by Echo: valid
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	return r
}

// Pending is the response of a turn that has not completed: queued until
// the LLM caller has its request, in_progress after.
func Pending(meta Meta, status string) Response {
	r := base(meta)
	r.Status = status
	return r
}

// FromTurn builds the response of a completed turn. The id is Aptix's, never
// the upstream's; output items, status and usage come from the upstream body
// the mapper's result holds (turn.ResultBody: response.rawResponseJson, or
// under tool emulation the llm section's rewrite with function_call items);
// a stage rejection or an upstream error makes it failed with error.
func FromTurn(meta Meta, t *contracts.Turn, completedAt int64) Response {
	r := base(meta)
	r.Status = StatusCompleted
	r.CompletedAt = &completedAt
	doc, err := t.Result() // the typed result: decoded once, with the turn
	fromBody := t.LLM != nil && t.LLM.Error == nil && doc != nil && err == nil
	if fromBody {
		if doc.Status != "" {
			r.Status = doc.Status
		}
		if doc.Model != "" {
			r.Model = doc.Model
		}
		if doc.Output != nil {
			r.Output, r.items = doc.OutputItems(), doc.Output
		}
		if d := doc.IncompleteDetails; d != nil {
			r.IncompleteDetails = d.Raw
		}
		if u := doc.Usage; u != nil {
			in, out := max(u.InputTokens, u.PromptTokens), max(u.OutputTokens, u.CompletionTokens)
			r.Usage = &Usage{InputTokens: in, OutputTokens: out, TotalTokens: max(u.TotalTokens, in+out)}
			if d := u.InputTokensDetails; d != nil {
				r.Usage.InputTokensDetails = InputDetail{CachedTokens: d.CachedTokens, CacheWriteTokens: d.CacheWriteTokens}
			}
			if d := u.OutputTokensDetails; d != nil {
				r.Usage.OutputTokensDetails = OutputDetail{ReasoningTokens: d.ReasoningTokens}
			}
		}
		if doc.Error != nil && doc.Status == StatusFailed {
			r.Error = &ResponseError{Code: doc.Error.CodeString(), Message: doc.Error.Message}
		}
	} else if t.Response != nil && t.Response.Kind != contracts.KindError {
		u := t.Response.Usage
		r.Usage = &Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	}
	if r.Model == "" && t.LLM != nil {
		r.Model = t.LLM.Model
	}
	if t.LLM != nil {
		r.TruncatedInputItems = t.LLM.TruncatedItems
	}
	// The upstream body's usage is its last call's; the mapper's already
	// sums a tool loop's rounds.
	loopItems := withToolLoop(&r, t, fromBody)
	e := Failure(t)
	if meta.FileSearch && e == nil {
		r.Output = append([]json.RawMessage{fileSearchCall(meta, t)}, r.Output...)
	}
	if e != nil {
		r.Status = StatusFailed
		code := ""
		if e.Code != nil {
			code = *e.Code
		}
		r.Error = &ResponseError{Code: code, Message: e.Message}
		if e.Type == TypeExecution {
			r.Error.Type = TypeExecution
		}
		r.Output = loopItems // the tool calls that ran are kept (docs/http-api.md#server-side-mcp-tools)
	}
	if r.Status == StatusFailed && r.Usage == nil {
		r.Usage = &Usage{}
	}
	return r
}

// clientCodes are the stage rejections a client caused: 400, not 500.
var clientCodes = map[string]bool{
	tooldef.CodeInvalidTools: true, tooldef.CodeUnknownToolChoice: true, pipeline.CodeInvalidRequest: true,
	"unknown_backend": true, "unknown_conversation_context": true, "invalid_event": true,
	"unknown_mcp_server": true,
}

// codeBudgetExceeded is the LLM caller's refusal of a call whose worst case
// does not fit in what is left of its budget.
const codeBudgetExceeded = "budget_exceeded"

// Failure is the HTTP error a sync create answers for a failed turn, or nil
// when the turn succeeded. A model error keeps the upstream's status and its
// error body (a 429 stays a 429, with the upstream's own message); an Aptix
// failure is a 500 with its code (400 when the client's input caused it).
func Failure(t *contracts.Turn) *Error {
	if f := t.Failure; f != nil {
		status := 500
		if clientCodes[f.Code] {
			status = 400
		}
		typ := TypeServer
		if status == 400 {
			typ = TypeInvalidRequest
		}
		if f.Code == contracts.LoopMaxDepthExceeded {
			typ = TypeExecution
		}
		if f.Code == codeAtCapacity {
			status = 503 // queued, then refused for room: retry later (Retry-After)
		}
		if f.Code == codeBudgetExceeded {
			// The LLM caller's reservation found no room for the call's
			// worst case: the 429 the gateway gives itself.
			status, typ = 429, "insufficient_quota"
		}
		return &Error{Status: status, Type: typ, Code: ptr(f.Code), Message: f.Message}
	}
	if t.LLM == nil || t.LLM.Error == nil {
		if t.Response != nil && t.Response.Kind == contracts.KindError {
			return Internal(firstNonEmpty(t.Response.ErrorCode, "aptix_error"), t.Response.ErrorMessage)
		}
		return nil
	}
	ue := t.LLM.Error
	status := ue.Status
	if status < 400 {
		status = 502 // the upstream gave no usable answer (transport failure, timeout)
		if strings.Contains(strings.ToLower(ue.Type+ue.Code), "timeout") {
			status = 504
		}
	}
	e := &Error{Status: status, Type: firstNonEmpty(ue.Type, TypeServer), Code: ptr(firstNonEmpty(ue.Code, ue.Type, "upstream_error")), Message: ue.Message}
	if doc, err := t.Result(); err == nil && doc != nil && doc.Error != nil && doc.Error.Message != "" {
		var code *string
		if c := doc.Error.CodeString(); c != "" {
			code = &c
		}
		e.Message, e.Type, e.Param, e.Code = doc.Error.Message, firstNonEmpty(doc.Error.Type, e.Type), doc.Error.Param, code
	}
	return e
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// StatusOf derives a response's status from the latest stage event stored
// for its turn (docs/http-api.md#status): none yet or requested/retrieved → queued;
// enveloped (the LLM caller has it) or responded → in_progress. A completed
// event is read in full instead (FromTurn).
func StatusOf(latestStage string) string {
	switch latestStage {
	case contracts.StageEnveloped, contracts.StageResponded:
		return StatusInProgress
	}
	return StatusQueued
}

// OutputText is the concatenated output_text of the response's messages,
// like the SDKs' convenience property.
func (r Response) OutputText() string {
	var b strings.Builder
	for _, it := range r.Items() {
		if it.Type != oresponse.TypeMessage {
			continue
		}
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// fileSearchCall is the file_search_call item of a turn that retrieved:
// the query and, when the request included file_search_call.results, the
// chunks the model was shown (path, lines, chunk id, score).
func fileSearchCall(meta Meta, t *contracts.Turn) json.RawMessage {
	return fileSearchItem(meta, RetrievalQuery(t), turnSources(t), "completed")
}

// turnSources are the chunks the model was shown: the mapper's list (the
// completed event's envelope no longer carries it), else the envelope's.
func turnSources(t *contracts.Turn) []contracts.SourceRef {
	if t.Response != nil && len(t.Response.Sources) > 0 {
		return t.Response.Sources
	}
	if t.Envelope != nil {
		return t.Envelope.Sources
	}
	return nil
}

// RetrievalQuery is the query a file_search_call item shows for the turn:
// the retriever's, else the turn's instruction.
func RetrievalQuery(t *contracts.Turn) string {
	if t.Retrieval != nil && t.Retrieval.Query != "" {
		return t.Retrieval.Query
	}
	return t.Request.Instruction
}

// FileSearchID is the id of the file_search_call item of response id.
func FileSearchID(responseID string) string { return "fs_" + strings.TrimPrefix(responseID, "resp_") }

// fileSearchItem is a file_search_call item with status; results are
// listed when the request included file_search_call.results.
func fileSearchItem(meta Meta, query string, sources []contracts.SourceRef, status string) json.RawMessage {
	item := map[string]any{"id": FileSearchID(meta.ID), "type": "file_search_call",
		"status": status, "queries": []string{query}, "results": nil}
	if meta.FileSearchResults {
		results := []map[string]any{}
		for _, s := range sources {
			results = append(results, map[string]any{"file_id": s.Id, "filename": s.Path, "score": s.Score,
				"attributes": map[string]any{"path": s.Path, "start_line": s.StartLine, "end_line": s.EndLine, "language": s.Language, "chunk_id": s.Id}})
		}
		item["results"] = results
	}
	b, _ := json.Marshal(item)
	return b
}

// echoTools is the response's tools: function tools flat with every field
// the Open Responses schema requires (a missing description is null, not
// absent), other tools as sent.
func echoTools(tools []tooldef.Tool) []any {
	out := make([]any, 0, len(tools))
	for _, t := range tools {
		if !t.IsFunction() {
			out = append(out, t)
			continue
		}
		var desc any
		if t.Description != "" {
			desc = t.Description
		}
		out = append(out, echoFunction{Description: desc, Name: t.Name, Parameters: t.Parameters, Strict: t.Strict, Type: "function"})
	}
	return out
}

// echoFunction is an echoed function tool: the fields a map of them encodes,
// in the same (name) order, without the map.
type echoFunction struct {
	Description any             `json:"description"`
	Name        string          `json:"name"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
	Type        string          `json:"type"`
}

// codeAtCapacity is pipeline.CodeAtCapacity: a queued turn the pipeline had
// no room for within its admission timeout.
const codeAtCapacity = "at_capacity"
