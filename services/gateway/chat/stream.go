package chat

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Chunk is a chat.completion.chunk.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is on the last chunk of a stream with include_usage (whose
	// choices are empty), as OpenAI sends it.
	Usage *Usage `json:"usage,omitempty"`
}

// ChunkChoice is the one choice's delta.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// Delta is what a chunk adds to the message.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Streamer turns a response's Responses events (the ones the gateway's
// responses.Streamer makes from the live deltas and the completion, so a
// chat stream shows exactly what a Responses stream does) into chunks:
// the role first, content deltas, each function call as a tool_call delta
// with its index, id and name, then its arguments' deltas; the finish
// reason; with include_usage a last chunk of usage and no choices.
type Streamer struct {
	id, model    string
	created      int64
	includeUsage bool
	calls        map[string]int // output item id → tool call index
	refused      bool
}

// NewStreamer starts the chunks of the response with Aptix id responseID.
func NewStreamer(responseID, model string, created int64, includeUsage bool) *Streamer {
	return &Streamer{id: ID(responseID), model: model, created: created, includeUsage: includeUsage, calls: map[string]int{}}
}

func (s *Streamer) chunk(d Delta, finish *string) Chunk {
	return Chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []ChunkChoice{{Index: 0, Delta: d, FinishReason: finish, Logprobs: json.RawMessage("null")}}}
}

// Start is the first chunk: the assistant role, empty content.
func (s *Streamer) Start() Chunk {
	empty := ""
	return s.chunk(Delta{Role: "assistant", Content: &empty}, nil)
}

// Events returns what evs add: chunks, and at the terminal event either
// the finish (and usage) chunks or, for a response that failed or was
// cancelled, an error body ({"error":…}, which the SDKs raise). end says
// the terminal event was seen.
func (s *Streamer) Events(evs []responses.Event) (out []any, end bool) {
	for _, ev := range evs {
		switch ev.Type {
		case "response.output_text.delta":
			if d, _ := ev.Data["delta"].(string); d != "" {
				out = append(out, s.chunk(Delta{Content: &d}, nil))
			}
		case "response.output_item.added":
			item, _ := ev.Data["item"].(map[string]any)
			if t, _ := item["type"].(string); t != "function_call" {
				continue
			}
			itemID, _ := item["id"].(string)
			callID, _ := item["call_id"].(string)
			name, _ := item["name"].(string)
			args, _ := item["arguments"].(string)
			i := len(s.calls)
			s.calls[itemID] = i
			out = append(out, s.chunk(Delta{ToolCalls: []ToolCall{{Index: &i, ID: callID, Type: "function", Function: Function{Name: name, Arguments: args}}}}, nil))
		case "response.function_call_arguments.delta":
			itemID, _ := ev.Data["item_id"].(string)
			i, ok := s.calls[itemID]
			d, _ := ev.Data["delta"].(string)
			if ok && d != "" {
				out = append(out, s.chunk(Delta{ToolCalls: []ToolCall{{Index: &i, Function: Function{Arguments: d}}}}, nil))
			}
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			r, _ := ev.Data["response"].(responses.Response)
			return append(out, s.finish(r)...), true
		}
	}
	return out, false
}

// finish ends the stream for the final response r.
func (s *Streamer) finish(r responses.Response) []any {
	if e := Failed(r); e != nil {
		return []any{e.Body()}
	}
	var out []any
	if a := answerOf(r); a.refusal != "" && !s.refused {
		s.refused = true
		out = append(out, s.chunk(Delta{Refusal: &a.refusal}, nil))
	}
	reason := FinishReason(r)
	out = append(out, s.chunk(Delta{}, &reason))
	if s.includeUsage {
		u := UsageOf(r)
		if u == nil {
			u = &Usage{}
		}
		out = append(out, Chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []ChunkChoice{}, Usage: u})
	}
	return out
}
