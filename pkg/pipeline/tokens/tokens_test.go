package tokens

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestText: OpenAI's BPE, exactly (values from OpenAI's tokenizer for these
// strings in each encoding).
func TestText(t *testing.T) {
	for _, tc := range []struct {
		model, s string
		want     int
	}{
		{"gpt-4o", "hello world", 2},
		{"gpt-5", "tiktoken is great!", 6},
		{"gpt-4", "tiktoken is great!", 6},
		{"gpt-4o", "", 0},
	} {
		got, err := Text(tc.model, tc.s)
		if err != nil || got != tc.want {
			t.Errorf("%s %q: %d %v, want %d", tc.model, tc.s, got, err, tc.want)
		}
	}
	if Encoding("gpt-4-turbo") != "cl100k_base" || Encoding("gpt-4o-mini") != "o200k_base" || Encoding("sandbox-1") != "o200k_base" {
		t.Fatal("encoding choice")
	}
}

// TestCount: each part of a request adds what it carries; framing per item.
func TestCount(t *testing.T) {
	msg := json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":"hello world"}]}`)
	base, err := Count(Request{Model: "gpt-4o", Items: []json.RawMessage{msg}})
	if err != nil {
		t.Fatal(err)
	}
	// 3 framing + "user" (1) + "hello world" (2) + 3 priming.
	if base != 9 {
		t.Fatalf("one message: %d, want 9", base)
	}
	withSystem, _ := Count(Request{Model: "gpt-4o", Instructions: "hello world", Items: []json.RawMessage{msg}})
	if withSystem != base+3+1+2 {
		t.Fatalf("instructions: %d", withSystem)
	}
	call := json.RawMessage(`{"type":"function_call","name":"lookup","arguments":"{\"q\":\"x\"}","call_id":"c1"}`)
	out := json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"hello world"}`)
	reasoning := json.RawMessage(`{"type":"reasoning","summary":[],"encrypted_content":"gAAAA-long-opaque-state-that-is-not-prompt-text"}`)
	hist, _ := Count(Request{Model: "gpt-4o", Items: []json.RawMessage{call, out, reasoning, msg}})
	if hist <= base || hist > base+30 {
		t.Fatalf("history: %d (one message %d)", hist, base)
	}
	tools, _ := Count(Request{Model: "gpt-4o", Items: []json.RawMessage{msg},
		Tools: json.RawMessage(`[{"type":"function","name":"lookup","description":"Looks a word up.","parameters":{"type":"object"}}]`)})
	if tools <= base+perTool {
		t.Fatalf("tools: %d", tools)
	}
	img, _ := Count(Request{Model: "gpt-4o", Items: []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}`)}})
	if img != 3+1+imageLow+3 {
		t.Fatalf("image: %d", img)
	}
}

// TestBound: a reservation's count is never under Count, and never under a
// token for every 4 bytes of text plus the framing (the sandbox's rule).
func TestBound(t *testing.T) {
	text := strings.Repeat("budget burst filler text ", 400)
	r := Request{Model: "gpt-4o", Instructions: "Be brief.", Items: []json.RawMessage{json.RawMessage(`{"role":"user","content":` + strconv.Quote(text) + `}`)}}
	n, err := Count(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bound(r)
	if err != nil {
		t.Fatal(err)
	}
	if b < n || b < (len(text)+len("Be brief.")+3)/4 {
		t.Fatalf("bound %d, count %d, %d bytes of text", b, n, len(text))
	}
	if b > n*2 {
		t.Fatalf("bound %d is more than twice the count %d", b, n)
	}
	code := Request{Model: "gpt-4o", Items: []json.RawMessage{json.RawMessage(`{"role":"user","content":"{}[]()<>{}[]()<>{}[]()<>"}`)}}
	if n, _ := Count(code); n > 0 {
		if b, _ := Bound(code); b != n {
			t.Fatalf("text split finer than 4 bytes a token: bound %d, count %d", b, n)
		}
	}
}
