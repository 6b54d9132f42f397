// Package tokens counts the input tokens of a Responses request the way
// OpenAI's models read it: the text with OpenAI's own BPE ranks (o200k_base,
// or cl100k_base for the GPT-4 and GPT-3.5 families), embedded in the
// binary so nothing is downloaded at run time. The text is counted exactly;
// the framing around it (a few tokens per item, the rendering of tool
// schemas, images) follows OpenAI's published chat-format rules and is an
// estimate, as every count of another server's prompt format is.
package tokens

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Per-item framing (OpenAI's chat format: a message costs its text plus
// about 3 tokens, a reply is primed with 3) and the fixed cost of an image
// at low detail.
const (
	perItem    = 3
	priming    = 3
	perTool    = 8
	imageLow   = 85
	fileMarker = 10
)

// The encoders are built on first use (parsing the o200k ranks takes a few
// hundred milliseconds) and kept.
var (
	once sync.Once
	mu   sync.Mutex
	encs = map[string]*tiktoken.Tiktoken{}
)

// Encoding is the BPE name a model is counted with.
func Encoding(model string) string {
	m := strings.ToLower(model)
	if strings.HasPrefix(m, "gpt-4") && !strings.HasPrefix(m, "gpt-4o") && !strings.HasPrefix(m, "gpt-4.1") ||
		strings.HasPrefix(m, "gpt-3.5") || strings.HasPrefix(m, "text-embedding") {
		return tiktoken.MODEL_CL100K_BASE
	}
	return tiktoken.MODEL_O200K_BASE
}

func encoder(name string) (*tiktoken.Tiktoken, error) {
	once.Do(func() { tiktoken.SetBpeLoader(loader.NewOfflineLoader()) })
	mu.Lock()
	defer mu.Unlock()
	if e, ok := encs[name]; ok {
		return e, nil
	}
	e, err := tiktoken.GetEncoding(name)
	if err != nil {
		return nil, fmt.Errorf("load %s ranks: %w", name, err)
	}
	encs[name] = e
	return e, nil
}

// Text is the token count of s in the model's encoding.
func Text(model, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	e, err := encoder(Encoding(model))
	if err != nil {
		return 0, err
	}
	return len(e.Encode(s, nil, nil)), nil
}

// Request is what a count covers: the system prompt, the input items in
// order (replayed history first), and the tools as sent upstream.
type Request struct {
	Model        string
	Instructions string
	Items        []json.RawMessage
	Tools        json.RawMessage
}

// Count is the input tokens of r.
func Count(r Request) (int, error) {
	n, _, err := count(r)
	return n, err
}

// Bound is a count of r meant not to fall short of the serving backend's
// own, for what must not be undercounted (a budget's reservation): the
// larger of Count and the same framing with a token for every 4 bytes of
// text. Other tokenizers (the Llama and Mistral families, the sandbox,
// which counts 4 bytes a token) read English at about 4 bytes a token
// where o200k reads 4.5 to 6; text that o200k splits finer (code, CJK)
// is counted by Count.
func Bound(r Request) (int, error) {
	n, size, err := count(r)
	if err != nil {
		return 0, err
	}
	return max(n, size.framing+(size.bytes+3)/4), nil
}

// textSize is what count read besides the tokens: the text's bytes, and
// the tokens of framing (items, priming, tools, images, files).
type textSize struct{ bytes, framing int }

func count(r Request) (int, textSize, error) {
	var size textSize
	e, err := encoder(Encoding(r.Model))
	if err != nil {
		return 0, size, err
	}
	n := 0
	text := func(s string) {
		if s != "" {
			k := len(e.Encode(s, nil, nil))
			n += k
			size.bytes += len(s)
			size.framing -= k
		}
	}
	if r.Instructions != "" {
		n += perItem
		text("system")
		text(r.Instructions)
	}
	for _, raw := range r.Items {
		n += perItem
		itemTokens(raw, text, &n)
	}
	if len(r.Items) > 0 || r.Instructions != "" {
		n += priming
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(r.Tools, &tools) == nil {
		for _, t := range tools {
			n += perTool
			for _, k := range []string{"name", "description", "parameters", "format", "function"} {
				if v, ok := t[k]; ok {
					var s string
					if json.Unmarshal(v, &s) == nil {
						text(s)
					} else {
						text(string(v))
					}
				}
			}
		}
	}
	size.framing += n // n less the text's tokens
	return n, size, nil
}

// itemTokens counts the text of one input item: a message's role and
// text parts (an image or file part at a fixed cost), a function call's
// name and arguments, a tool output, a reasoning item's summary (its
// encrypted_content is the server's own state, not prompt text it can be
// read as).
func itemTokens(raw json.RawMessage, text func(string), n *int) {
	var it struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		Output    json.RawMessage `json:"output"`
		Summary   []struct {
			Text string `json:"text"`
		} `json:"summary"`
	}
	if json.Unmarshal(raw, &it) != nil {
		text(string(raw))
		return
	}
	switch it.Type {
	case "", "message":
		text(it.Role)
		contentTokens(it.Content, text, n)
	case "function_call", "custom_tool_call":
		text(it.Name)
		text(it.Arguments)
		text(it.Input)
	case "function_call_output", "custom_tool_call_output":
		contentTokens(it.Output, text, n)
	case "reasoning":
		for _, s := range it.Summary {
			text(s.Text)
		}
	default:
		text(string(raw))
	}
}

// contentTokens counts a string, or a list of parts.
func contentTokens(c json.RawMessage, text func(string), n *int) {
	var s string
	if json.Unmarshal(c, &s) == nil {
		text(s)
		return
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) != nil {
		text(string(c))
		return
	}
	for _, p := range parts {
		switch p.Type {
		case "input_image":
			*n += imageLow
		case "input_file":
			*n += fileMarker
		default:
			text(p.Text)
		}
	}
}
