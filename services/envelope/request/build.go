// Package request builds the OpenAI /responses request body of a turn
// (AGN-003), on the real wire format (docs/request.md#the-wire-format). Every AGN-003 rule lives
// in Build; where the seed's conceptual JSON differs from what OpenAI accepts,
// the comment at that line says what is sent instead and why.
package request

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/responsesbody"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// DefaultMode fills [MODE: …] when neither the request nor the conversation
// context names a mode, so the header AGN-003 §3.1 requires is never blank.
const DefaultMode = "DEFAULT"

// Tool choice modes accepted in ToolChoiceName besides a tool name.
const (
	ChoiceAuto     = "auto"
	ChoiceNone     = "none"
	ChoiceRequired = "required"
)

// Input is everything a turn's request is built from.
type Input struct {
	Request contracts.AgentExecuteRequest
	// Conversation is the resolved ConversationContext (inline or by id).
	Conversation contracts.ConversationContext
	// ContextBlock is the AGN-002 block; empty leaves the [CONTEXT] part out.
	ContextBlock string
	// Capabilities of the backend the turn goes to.
	Capabilities profiles.Capabilities
	// PriorTools are the tools the conversation's previous turn sent or kept;
	// nil when unknown (first turn, or no record).
	PriorTools []tooldef.Tool
	// DefaultModel is the global fallback when no context names a model.
	DefaultModel string

	// What the envelope stage merges into the same body beyond AGN-003
	// (zero values: nothing). Request.OpenAI, an HTTP client's passthrough,
	// is always merged (passthrough.go).

	// MCP, when set, takes the body's mcp tools out into a server-side tool
	// loop (mcp.go); nil sends them as they are.
	MCP *MCPOptions
	// Approvals are the calls the conversation's last turn left waiting for
	// the client's approval (approvals.go).
	Approvals []contracts.PendingApproval
	// Pending are the function_call_output items of the last turn's
	// server-side calls, sent first in the input.
	Pending []json.RawMessage
}

// Result is the built request and what the stages after it need to know.
type Result struct {
	// Body is the /responses request body.
	Body  json.RawMessage
	Model string
	// Tools is the conversation's tool set after this turn, sent or retained.
	Tools []tooldef.Tool
	// ToolsSent is false when tools were omitted because the backend retains them.
	ToolsSent bool
	// Emulation is set when the backend's function tools are emulated in the
	// prompt (toolMode prompt) and the turn has function tools.
	Emulation *Emulation
	// Loop is the turn's server-side tool loop (Input.MCP), nil when the
	// turn has no server-side tools.
	Loop *contracts.ToolLoop
	// Decisions answer each of Input.Approvals (nil when none waited).
	Decisions []contracts.ApprovalDecision
}

// The body's parts and encoding are responsesbody's, shared with the
// gateway's entrance (docs/architecture.md#entry-points).
type (
	Body    = responsesbody.Body
	Item    = responsesbody.Item
	Message = responsesbody.Message
	Part    = responsesbody.Part
	Field   = responsesbody.Field
)

// InstructionText is the first user part (AGN-003 §3.1).
func InstructionText(mode, instruction string) string {
	return "[MODE: " + mode + "]\n\n[INSTRUCTION]\n" + instruction
}

// Build constructs the /responses body for a turn (AGN-003 §2-§5), merges
// into it what the envelope adds beyond AGN-003 (an HTTP client's
// passthrough, the server-side tool loop, the answers to waiting approvals,
// the pending server-side outputs), and encodes it once.
func Build(in Input) (Result, error) {
	req := in.Request
	framed := req.Framed()
	if framed && strings.TrimSpace(req.Instruction) == "" {
		return Result{}, &InvalidRequestError{Field: "instruction", Reason: "is empty"}
	}
	continuation := req.ResponseContinuationId != ""

	// §2: model from the context, with a global fallback.
	model := firstNonEmpty(agentModel(req), in.Conversation.DefaultModel, in.DefaultModel, profiles.DefaultModel)
	// The continuation, the output limit and a transparent turn's own
	// instructions (transparent.go), as responsesbody.Plain starts them.
	body := responsesbody.Start(req, model, 2+len(in.Pending))

	// §2 / §4: the boot prompt as a system message on the first turn only; a
	// continuation threads by previous_response_id, which carries turn 1's
	// system message forward.
	if !continuation && framed && in.Conversation.SystemPrompt != "" {
		body.Input = append(body.Input, responsesbody.TextMessage("system", in.Conversation.SystemPrompt))
	}

	if framed {
		// §3: the user message, [MODE]/[INSTRUCTION] first, [CONTEXT] second or left out.
		mode := firstNonEmpty(req.Mode, in.Conversation.Mode, DefaultMode)
		parts := []string{InstructionText(mode, req.Instruction)}
		if in.ContextBlock != "" {
			parts = append(parts, in.ContextBlock)
		}
		body.Input = append(body.Input, responsesbody.TextMessage("user", parts...))
	}

	// §5: tools from ToolsJson merged with the context's defaults.
	requestTools, err := tooldef.Parse("toolsJson", req.ToolsJson)
	if err != nil {
		return Result{}, err
	}
	defaultTools, err := tooldef.Parse("conversationContext.defaultTools", string(in.Conversation.DefaultTools))
	if err != nil {
		return Result{}, err
	}
	tools := tooldef.Merge(requestTools, defaultTools)
	if framed && continuation && len(tools) == 0 && len(in.PriorTools) > 0 {
		// The conversation's tools persist: a client that sent them on turn 1
		// only still has them on turn 2, on every backend. A transparent
		// turn sends the tools its request has, as OpenAI would.
		tools = in.PriorTools
	}

	// §4.2: omit unchanged tools only where the backend keeps them across
	// previous_response_id; OpenAI does not, so by default they are re-sent.
	res := Result{Model: model, Tools: tools}
	omit := continuation && in.Capabilities.RetainsTools && in.PriorTools != nil && tooldef.Same(tools, in.PriorTools)
	if len(tools) > 0 && !omit {
		body.Tools = tools
		res.ToolsSent = true
	}

	// §5: tool_choice. The seed's {"type":"tool"} is not accepted by OpenAI;
	// the function form is.
	if body.ToolChoice, err = toolChoice(req.ToolChoiceName, tools); err != nil {
		return Result{}, err
	}

	// docs/tool-emulation.md: a backend without native function calling gets its function
	// tools as instructions, with the tool_choice folded into them.
	if in.Capabilities.ToolMode == profiles.ToolModePrompt {
		if res.Emulation, err = emulate(&body, tools); err != nil {
			return Result{}, err
		}
	}

	// Beyond AGN-003, in this order: the client's fields and items
	// (passthrough.go), the mcp tools Aptix runs (mcp.go), the client's
	// answers to waiting approvals (approvals.go), the pending outputs.
	if framed {
		err = mergeClient(&body, req.OpenAI)
	} else {
		err = body.MergeVerbatim(req.OpenAI, in.ContextBlock)
	}
	if err != nil {
		return Result{}, err
	}
	if in.MCP != nil {
		var rest []tooldef.Tool
		if res.Loop, rest, err = toolLoop(body.Tools, field(&body, "max_tool_calls"), *in.MCP); err != nil {
			return Result{}, err
		}
		if res.Loop != nil {
			body.Tools = rest
		}
	}
	if res.Decisions, err = takeApprovals(&body, in.Approvals); err != nil {
		return Result{}, err
	}
	if len(in.Pending) > 0 {
		lead := make([]Item, 0, len(in.Pending)+len(body.Input))
		for _, raw := range in.Pending {
			lead = append(lead, Item{Raw: raw})
		}
		body.Input = append(lead, body.Input...)
	}

	res.Body, err = body.Encode()
	if err != nil {
		return Result{}, fmt.Errorf("encode /responses body: %w", err)
	}
	return res, nil
}

// toolChoice maps ToolChoiceName: empty → omitted (the API's default, auto);
// auto/none/required → that mode; anything else must name a function tool.
func toolChoice(name string, tools []tooldef.Tool) (json.RawMessage, error) {
	switch name {
	case "":
		return nil, nil
	case ChoiceAuto, ChoiceNone, ChoiceRequired:
		return marshal(name)
	}
	for _, t := range tools {
		if t.IsFunction() && t.Name == name {
			return marshal(struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}{"function", name})
		}
	}
	return nil, &tooldef.UnknownChoiceError{Name: name, Known: tooldef.FunctionNames(tools)}
}

func agentModel(req contracts.AgentExecuteRequest) string {
	if req.AgentContext == nil {
		return ""
	}
	return req.AgentContext.Model
}

func firstNonEmpty(s ...string) string {
	if i := slices.IndexFunc(s, func(v string) bool { return v != "" }); i >= 0 {
		return s[i]
	}
	return ""
}

// marshal and unmarshal are responsesbody's: no HTML escaping, the v2
// engine with v1 semantics.
var (
	marshal   = responsesbody.Marshal
	unmarshal = responsesbody.Unmarshal
	stdError  = responsesbody.StdError
)
