package responses

import (
	"encoding/json"
	"slices"
	"strings"
)

// What Codex (and other agent clients of OpenAI's Responses API) send that
// Aptix has no use for, and the generate:false warm-up of WebSocket mode.

// IgnoredHeader names the request parameters the gateway accepted and
// dropped, on the response to a request that sent any.
const IgnoredHeader = "X-Aptix-Ignored-Params"

// dropped are parameters a client may send that no Aptix backend takes:
// accepted and dropped, named in IgnoredHeader, never a 400. client_metadata
// is Codex's per-request trace context (traceparent, tracestate), meaningful
// only to OpenAI's own servers.
var dropped = map[string]bool{"client_metadata": true}

// parseClientOnly reads generate and removes the dropped parameters from
// raw, recording them in r.Ignored, before raw's other fields travel
// upstream.
func (r *CreateRequest) parseClientOnly(raw map[string]json.RawMessage) *Error {
	if v, ok := raw["generate"]; ok && !isNull(v) {
		var g bool
		if json.Unmarshal(v, &g) != nil {
			return invalid("generate", CodeInvalidType, "Invalid type for 'generate': expected a boolean.")
		}
		r.Generate = &g
	}
	delete(raw, "generate")
	// Aptix writes its own events: they never carry obfuscation padding.
	var so struct {
		IncludeObfuscation *bool `json:"include_obfuscation"`
	}
	if json.Unmarshal(raw["stream_options"], &so) == nil && so.IncludeObfuscation != nil && *so.IncludeObfuscation {
		r.Ignored = append(r.Ignored, "stream_options.include_obfuscation")
	}
	for k := range raw {
		if dropped[k] {
			r.Ignored = append(r.Ignored, k)
			delete(raw, k)
		}
	}
	slices.Sort(r.Ignored)
	return nil
}

// IgnoredValue is IgnoredHeader's value ("" when nothing was dropped).
func (r *CreateRequest) IgnoredValue() string { return strings.Join(r.Ignored, ", ") }

// WarmupOnly reports a generate:false request: it prepares a response and
// calls no model.
func (r *CreateRequest) WarmupOnly() bool { return r.Generate != nil && !*r.Generate }

// WarmupEvents is the whole answer to a generate:false response.create, as
// OpenAI gives it: created, in_progress, then completed with no output and
// zero usage. No model runs and nothing is stored.
func WarmupEvents(meta Meta, now int64) []Event {
	r := base(meta)
	r.Status = StatusCompleted
	r.CompletedAt = &now
	r.Usage = &Usage{}
	st := NewStreamer()
	return append(st.Start(r), st.Finish(r)...)
}

// Warmup is what a socket keeps of its last generate:false response: the
// request's input and the response it continued, so the next
// response.create that continues the warm-up (usually with no new input,
// since the warm-up already carried the turn's input) runs the turn the
// warm-up prepared.
type Warmup struct {
	ID         string
	Input      []json.RawMessage
	PreviousID string
}

// ContinueWarmup rewrites a response.create message that continues w
// (previous_response_id w.ID): its input becomes w's input followed by its
// own, and it continues what w continued. Any other message comes back
// unchanged.
func ContinueWarmup(data []byte, w *Warmup) ([]byte, *Error) {
	if w == nil {
		return data, nil
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) != nil || raw == nil {
		return data, nil // ParseSocketCreate reports it
	}
	var prev string
	if json.Unmarshal(raw["previous_response_id"], &prev) != nil || prev != w.ID {
		return data, nil
	}
	input := slices.Clone(w.Input)
	if v := raw["input"]; !isNull(v) {
		var s string
		var items []json.RawMessage
		switch {
		case json.Unmarshal(v, &s) == nil:
			msg, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
				"content": []map[string]string{{"type": "input_text", "text": s}}})
			input = append(input, msg)
		case json.Unmarshal(v, &items) == nil:
			input = append(input, items...)
		default:
			return nil, invalid("input", CodeInvalidType, "Invalid type for 'input': expected a string or an array of input items.")
		}
	}
	raw["input"], _ = json.Marshal(input)
	if w.PreviousID != "" {
		raw["previous_response_id"], _ = json.Marshal(w.PreviousID)
	} else {
		delete(raw, "previous_response_id")
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return nil, Internal("encode_message", err.Error())
	}
	return out, nil
}

// echoShape completes an echoed object parameter to the response object's
// shape: reasoning always has effort and summary, text always has a format
// (a client that sends only {"effort":…} or {"verbosity":…}, as Codex
// does, gets OpenAI's defaults for the rest).
func echoShape(name string, v json.RawMessage) json.RawMessage {
	var defaults map[string]json.RawMessage
	switch name {
	case "reasoning":
		defaults = map[string]json.RawMessage{"effort": json.RawMessage(`null`), "summary": json.RawMessage(`null`)}
	case "text":
		defaults = map[string]json.RawMessage{"format": json.RawMessage(`{"type":"text"}`)}
	default:
		return v
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return v
	}
	for k, d := range defaults {
		if isNull(obj[k]) {
			obj[k] = d
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return v
	}
	return out
}

// ChatDropped names the parameters of r that a chat-completions backend has
// no equivalent for, which the translation there leaves out
// (services/llmcaller/chatcompletions, its handled list): include,
// truncation "auto" (unless the profile has a context window, with which
// the LLM caller applies it), max_tool_calls, context_management and
// reasoning.summary. What has an equivalent is mapped there (reasoning.effort
// to reasoning_effort, text.verbosity to verbosity, top_logprobs to
// logprobs) or passed as it is (service_tier, prompt_cache_key,
// prompt_cache_retention, safety_identifier, user).
func (r *CreateRequest) ChatDropped(contextWindow int) []string {
	var out []string
	for _, k := range []string{"context_management", "include", "max_tool_calls"} {
		if _, ok := r.Fields[k]; ok {
			out = append(out, k)
		}
	}
	var reasoning struct {
		Summary json.RawMessage `json:"summary"`
	}
	if v, ok := r.Fields["reasoning"]; ok && json.Unmarshal(v, &reasoning) == nil && !isNull(reasoning.Summary) {
		out = append(out, "reasoning.summary")
	}
	var truncation string
	if v, ok := r.Fields["truncation"]; ok && json.Unmarshal(v, &truncation) == nil && truncation == "auto" && contextWindow <= 0 {
		out = append(out, "truncation")
	}
	return out
}

// Ignore adds names to the parameters IgnoredHeader reports.
func (r *CreateRequest) Ignore(names ...string) {
	r.Ignored = append(r.Ignored, names...)
	slices.Sort(r.Ignored)
	r.Ignored = slices.Compact(r.Ignored)
}
