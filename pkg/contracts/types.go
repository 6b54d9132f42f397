// Package contracts holds the types every Aptix stage and client shares: the
// seed types of AGN-003 and AGN-004 with camelCase JSON, the Turn document that
// travels through the pipeline, subject and header names, and validation.
//
// It imports nothing but the standard library and oresponse (the typed
// Responses document, on the v2 JSON engine) so any client can depend on
// it; clients in other languages use the JSON Schemas in schema/ instead.
package contracts

import "encoding/json"

// AgentContext selects server-side configuration for a turn. It never carries
// credentials: Backend names a profile whose API key lives in the server's
// environment, so secrets never travel on the bus or land in the stream.
type AgentContext struct {
	// Id identifies this agent context for logging and AgentExecuteResponse.AgentContextId.
	Id string `json:"id,omitempty"`
	// Backend is the name of an LLM backend profile (e.g. "openai", "sandbox").
	Backend string `json:"backend,omitempty"`
	// Model overrides the conversation's model for this agent, if set.
	Model string `json:"model,omitempty"`
	// Index names the retrieval index (defaults to the request's WorkspaceId).
	Index string `json:"index,omitempty"`
}

// ConversationContext is the static reasoning profile of a conversation
// (AGN-003 §2): the boot prompt sent on the first turn only, the default model
// and the default tools.
type ConversationContext struct {
	Id string `json:"id,omitempty"`
	// SystemPrompt is the boot prompt, sent as a system message on the first turn only.
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// DefaultModel is used when neither the request nor the agent context names a model.
	DefaultModel string `json:"defaultModel,omitempty"`
	// DefaultTools is a JSON array of tool definitions (Responses or Chat Completions shape)
	// merged under the request's ToolsJson.
	DefaultTools json.RawMessage `json:"defaultTools,omitempty"`
	// Mode is the conceptual mode used when the request names none.
	Mode string `json:"mode,omitempty"`
}

// Framings accepted in AgentExecuteRequest.Framing.
const (
	FramingAGN003 = "agn003"
	FramingNone   = "none"
)

// Framed reports whether the envelope applies AGN-003's framing: every
// execute event does unless it asks for none.
func (r *AgentExecuteRequest) Framed() bool { return r.Framing != FramingNone }

// RAG scopes accepted in AgentExecuteRequest.RagScope.
const (
	RagScopeNone        = "none"
	RagScopeActiveFiles = "activeFiles"
	RagScopeRepo        = "repo"
	RagScopeWorkspace   = "workspace" // the default
)

// AgentExecuteRequest is the client-facing execute event (AGN-003 §3).
type AgentExecuteRequest struct {
	AgentContext        *AgentContext        `json:"agentContext,omitempty"`
	ConversationContext *ConversationContext `json:"conversationContext,omitempty"`
	// ConversationContextId refers to a server-side ConversationContext when none is inline.
	ConversationContextId string `json:"conversationContextId,omitempty"`

	ConversationId string `json:"conversationId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,maxLength=128"`
	// TurnId identifies this turn; clients generate it (ULID/UUIDv7) and it
	// de-duplicates re-published events.
	TurnId string `json:"turnId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,maxLength=128"`
	// ResponseContinuationId is the previous /responses id; empty on the first turn.
	ResponseContinuationId string `json:"responseContinuationId,omitempty"`
	// ContinuationConversation is the conversation ResponseContinuationId
	// was made in when that is not ConversationId (a branch: the HTTP
	// gateway's continuation of a response that is no longer its
	// conversation's newest, or a replay into another conversation that
	// keeps the original's continuation). Conversation recovery reads that
	// conversation's events for the calls before the branch.
	ContinuationConversation string `json:"continuationConversation,omitempty" jsonschema:"pattern=^[A-Za-z0-9_-]+$,maxLength=128"`
	// NewConversation says the client generated ConversationId for this
	// turn, so there is nothing to continue: the envelope skips looking up
	// the conversation's record and newest completion (two store round trips
	// on the turn's path). A conversation id used before is then not
	// continued; its later turns continue from this one.
	NewConversation bool `json:"newConversation,omitempty"`

	Mode        string `json:"mode,omitempty"`
	Instruction string `json:"instruction" jsonschema:"minLength=1,maxLength=262144"`

	WorkspaceId string   `json:"workspaceId,omitempty"`
	Repo        string   `json:"repo,omitempty"`
	Language    string   `json:"language,omitempty"`
	RagScope    string   `json:"ragScope,omitempty" jsonschema:"enum=none,enum=activeFiles,enum=repo,enum=workspace"`
	Tags        []string `json:"tags,omitempty"`
	ActiveFiles []string `json:"activeFiles,omitempty"`

	// ToolsJson is a serialized JSON array of tool definitions, in the
	// Responses shape or the Chat Completions shape.
	ToolsJson string `json:"toolsJson,omitempty" jsonschema:"maxLength=524288"`
	// ToolChoiceName forces a tool by name, or is one of auto, none, required.
	ToolChoiceName string `json:"toolChoiceName,omitempty"`

	// Framing says how the envelope builds the model's input: FramingAGN003
	// (the default, also when empty) frames the instruction as AGN-003's
	// [MODE]/[INSTRUCTION] user message with the system prompt on the first
	// turn; FramingNone sends the client's input items and instructions as
	// the client wrote them (docs/request.md#which-rule-applies-when).
	Framing string `json:"framing,omitempty" jsonschema:"enum=agn003,enum=none"`

	// Stream asks the LLM caller to publish text deltas while the call runs.
	Stream bool `json:"stream,omitempty"`
	// MaxOutputTokens caps the model's output; 0 leaves it to the backend.
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`

	// OpenAI is what a client of the HTTP gateway said in its OpenAI
	// Responses request beyond the fields above, so nothing it sent is lost
	// on the way upstream (docs/request.md#what-an-http-client-adds). Nil for clients of the bus.
	OpenAI *OpenAIPassthrough `json:"openai,omitempty"`

	// Principal is the authenticated caller the HTTP gateway submitted the
	// turn for ("key:<name>" or "jwt:<sub>"; never a key or token). Empty
	// for clients of the bus and for a gateway without authentication.
	Principal string `json:"principal,omitempty" jsonschema:"maxLength=512"`
	// Budgets are the principal's spending caps, copied in by the gateway
	// from its key or JWT mapping; the LLM caller refuses the turn with
	// budget_exceeded when one is already spent (docs/usage-and-budgets.md).
	Budgets []Budget `json:"budgets,omitempty"`
	// KeyId is the public id of the API key the gateway authenticated the
	// turn with (never the key), so usage is also counted per key.
	KeyId string `json:"keyId,omitempty" jsonschema:"maxLength=64"`
	// GatewayRecord is the HTTP gateway's record of the response this turn
	// answers (its id, owner and echoed parameters), opaque to the stages.
	// Every event carries it, so any gateway replica reads the response
	// from the turn's own events and the create waits for no record write
	// (docs/http-api.md#where-a-response-is-kept). Set by the gateway only;
	// nil for clients of the bus.
	GatewayRecord json.RawMessage `json:"gatewayRecord,omitempty"`
}

// OpenAIPassthrough carries the parts of a client's OpenAI Responses request
// that an AgentExecuteRequest does not model. The envelope merges them into
// the /responses body it builds; AGN-003 still decides what it governs (the
// system prompt, the [MODE]/[INSTRUCTION] and [CONTEXT] parts, tools,
// tool_choice, previous_response_id, max_output_tokens).
type OpenAIPassthrough struct {
	// Fields are top-level request fields (temperature, top_p, text,
	// reasoning, include, …) as a JSON object, copied into the body where the
	// envelope set nothing of that name.
	Fields json.RawMessage `json:"fields,omitempty"`
	// Input is the client's input item list (a string input is one user
	// message): earlier messages, function_call and function_call_output
	// items, images and files travel upstream as the client wrote them.
	Input json.RawMessage `json:"input,omitempty"`
	// InstructionItem is the index in Input of the user message whose text is
	// the turn's Instruction: the envelope puts its AGN-003 user message there,
	// followed by that message's non-text parts (images, files). -1 means the
	// input ends with no user message (a round of function_call_output items):
	// Input is sent as it is and the Instruction only names the round.
	InstructionItem int `json:"instructionItem"`
	// Instructions are the client's own instructions for this request: sent
	// as the body's instructions on this turn and no other (OpenAI never
	// carries them over previous_response_id). Only a turn with Framing
	// none reads them; under AGN-003 they are the conversation's system prompt.
	Instructions string `json:"instructions,omitempty"`
	// WholeHistory says Input already holds everything the model is to see
	// before this turn (an OpenAI conversation object's items): the turn
	// continues no earlier response, not even the latest one on record for
	// its conversation, so that history is never sent twice.
	WholeHistory bool `json:"wholeHistory,omitempty"`
	// Chat is a Chat Completions client's request body as it sent it
	// (POST /v1/chat/completions), set when a Chat Completions backend
	// serves the turn: the LLM caller sends it upstream in place of the
	// translation of the Responses body, changing only the routing (the
	// model) and the stream flags its call needs, so the model gets what
	// the client sent. The rest of this passthrough still says the same
	// request in Responses terms, for the envelope, the console and a
	// backend it cannot be sent to.
	Chat json.RawMessage `json:"chat,omitempty"`
	// Messages is an Anthropic Messages client's request body as it sent
	// it (POST /v1/messages), set when an Anthropic Messages backend serves
	// the turn: sent upstream in place of the translation, changing only
	// the model and stream, so thinking blocks and their signatures reach
	// Anthropic byte for byte. Bytes, not json.RawMessage: encoding/json
	// would re-escape a raw message's < > & on the way through the bus.
	// AnthropicVersion and AnthropicBeta are the client's headers, passed
	// to an Anthropic backend.
	Messages         []byte `json:"messages,omitempty"`
	AnthropicVersion string `json:"anthropicVersion,omitempty"`
	AnthropicBeta    string `json:"anthropicBeta,omitempty"`
}

// RagChunk is one retrieved piece of source, ready for the AGN-002 formatter.
type RagChunk struct {
	Id        string  `json:"id"`
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Language  string  `json:"language,omitempty"`
	Content   string  `json:"content"`
	Score     float64 `json:"score,omitempty"`
	Repo      string  `json:"repo,omitempty"`
	// Matches say why the retriever chose the chunk: which of the query's
	// terms matched which of the chunk's fields. Optional: older retrievers
	// leave it out, and nothing downstream depends on it but the console.
	Matches []RagMatch `json:"matches,omitempty"`
	// Uses counts the chunks of the index that use what this chunk
	// declares (a call, a qualified name; for a method, the calls of that
	// name per method so named): the retriever lifts the declarations the
	// code leans on. Optional, like Matches.
	Uses float64 `json:"uses,omitempty"`
	// Near is the chunk's rank among those that lie nearest the question in
	// meaning (word vectors of its doc comment and its text; among the chunks in scope that
	// share a word with it, found approximately), which the retriever adds
	// to the candidates it reranks; 0 when it is not among them. Optional,
	// like Matches.
	Near int `json:"near,omitempty"`
	// Akin are the question's words the chunk's symbol and doc comment do
	// not hold but say in a near word (their word vectors' cosine 0.4 or
	// more), each with that word, the nearest first: why a chunk that
	// shares few of the question's words was chosen. Optional, like
	// Matches.
	Akin []RagAkin `json:"akin,omitempty"`
}

// RagAkin is one of the question's words and the chunk's word nearest it
// in meaning, both as the index analyzes them (lower case, stemmed).
type RagAkin struct {
	Term   string  `json:"term"`
	Word   string  `json:"word"`
	Cosine float64 `json:"cosine"`
}

// RagMatch is one field of a chunk that matched the query.
type RagMatch struct {
	// Field is symbol, doc (the leading comment), summary (the doc
	// comment's first sentence), path or content.
	Field string `json:"field"`
	// Terms are the query's terms (analyzed: lower case, stemmed) found there.
	Terms []string `json:"terms"`
	// Expanded are the terms among them the retriever added to the question
	// (a learned equivalent, a respelling), not typed in it.
	Expanded []string `json:"expanded,omitempty"`
}

// SourceRef tells the client which chunk the model was shown (AGN-004 §2.8).
type SourceRef struct {
	Id        string  `json:"id"`
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Language  string  `json:"language,omitempty"`
	Score     float64 `json:"score,omitempty"`
}

// Ref returns the SourceRef naming this chunk.
func (c RagChunk) Ref() SourceRef {
	return SourceRef{Id: c.Id, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine, Language: c.Language, Score: c.Score}
}

// Response kinds (AGN-004 §4).
const (
	KindOK       = "ok"
	KindToolOnly = "tool-only"
	KindError    = "error"
	KindEmpty    = "empty"
)

// Finish reasons derived from a Responses result (docs/mapping.md#finish-reason).
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolUse       = "tool_use"
	FinishContentFilter = "content_filter"
	FinishError         = "error"
)

// AgentExecuteResponse is the typed result a client receives (AGN-004 §1).
type AgentExecuteResponse struct {
	Kind string `json:"kind" jsonschema:"enum=ok,enum=tool-only,enum=error,enum=empty"`

	ConversationId         string `json:"conversationId"`
	TurnId                 string `json:"turnId"`
	AgentContextId         string `json:"agentContextId,omitempty"`
	ConversationContextId  string `json:"conversationContextId,omitempty"`
	ResponseContinuationId string `json:"responseContinuationId,omitempty"`
	Mode                   string `json:"mode,omitempty"`
	ModelId                string `json:"modelId,omitempty"`
	// Backend is the backend profile that served the turn's model call:
	// another than the one asked for when the first failed and a fallback
	// answered (docs/backends.md#fallbacks). The HTTP gateway also sends it
	// as the X-Aptix-Backend header.
	Backend string `json:"backend,omitempty"`

	Text         string `json:"text,omitempty"`
	FinishReason string `json:"finishReason,omitempty"`

	Usage LlmUsage `json:"usage"`
	// Cost is what the turn's model calls cost at the profile's prices, or
	// {"unpriced":true} when the model has no price.
	Cost       *Cost       `json:"cost,omitempty"`
	Sources    []SourceRef `json:"sources"`
	FileBundle *FileBundle `json:"fileBundle,omitempty"`
	Warnings   []string    `json:"warnings"`

	ErrorCode       string `json:"errorCode,omitempty"`
	ErrorMessage    string `json:"errorMessage,omitempty"`
	RawResponseJson string `json:"rawResponseJson,omitempty"`

	ToolCalls []AgentToolCall `json:"toolCalls"`
}

// AgentToolCall is one function call the model made. CallId is the item's
// call_id, the id a function_call_output must echo.
type AgentToolCall struct {
	CallId        string `json:"callId"`
	Name          string `json:"name"`
	ArgumentsJson string `json:"argumentsJson"`
}

// LlmUsage is token usage in AGN-004's names.
type LlmUsage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
	TotalTokens      int `json:"totalTokens"`
	// CachedTokens are the prompt tokens served from the backend's cache
	// (part of PromptTokens); ReasoningTokens the output tokens spent
	// reasoning (part of CompletionTokens). Both priced on their own.
	CachedTokens    int `json:"cachedTokens,omitempty"`
	ReasoningTokens int `json:"reasoningTokens,omitempty"`
	// CacheWriteTokens are the prompt tokens the backend wrote to its cache
	// (part of PromptTokens, Anthropic's cache_creation_input_tokens),
	// priced at Price.CacheWrite.
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
}

// FileBundle carries file edits produced by later phases (code patching tools).
type FileBundle struct {
	Files []BundleFile `json:"files"`
}

// BundleFile is one file of a FileBundle: full content, a unified diff, or both.
type BundleFile struct {
	Path     string `json:"path"`
	Language string `json:"language,omitempty"`
	Content  string `json:"content,omitempty"`
	Patch    string `json:"patch,omitempty"`
}
