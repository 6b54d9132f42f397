// Package conformance is a reusable Open Responses conformance suite: Run
// sends the requests of the public Open Responses HTTP compliance tests
// (openresponses/openresponses, bin/compliance-test.ts and its test
// definitions) to any server and checks the answers the way those tests
// intend, plus what they leave implicit: every response body, compaction and
// stream event is validated against the Open Responses schemas (embedded,
// see README.md), streams follow the event-order and sequence rules, and the
// SDK (openai-go) decodes and rebuilds what the server sent.
//
// It lives in non-test files and takes a *testing.T so that any module's
// tests can run it: the sandbox model's tests run it against the sandbox,
// the gateway's against the gateway.
package conformance

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// Options tune a run. The zero value suits any Open Responses server.
type Options struct {
	// APIKey is sent as the bearer token (default "conformance").
	APIKey string
	// HTTPClient sends every request (default: a client with Timeout).
	HTTPClient *http.Client
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
	// Deterministic says the server answers like Aptix's sandbox model
	// (directly or behind the gateway): the suite then also checks the
	// sandbox's deterministic reply texts, which prove that images, tool
	// outputs and compacted history reached the model.
	Deterministic bool
	// Stateless says the model behind the server keeps no state (a Chat
	// Completions backend behind the gateway): the sandbox cannot name the
	// response a turn continues or the compaction it made, so those two
	// sentences are not checked; continuation and compaction still are.
	Stateless bool
	// Skip lists test names (e.g. "compaction") the server is known not to
	// support; they are reported as skipped, never as passed.
	Skip []string
}

func (o Options) withDefaults() Options {
	if o.APIKey == "" {
		o.APIKey = "conformance"
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.Timeout}
	}
	return o
}

// Test is one conformance test. Names match the compliance tests' ids.
type Test struct {
	Name string
	// Intent says what the test proves, in the words of its compliance test.
	Intent string
	run    func(t *testing.T, s *suite)
}

// Tests lists the suite in the order Run runs it.
func Tests() []Test {
	return []Test{
		{"basic-response", "a simple user message gets a completed response with output, schema-valid", basicResponse},
		{"system-prompt", "a system message (and instructions) in the input is accepted and instructions are echoed", systemPrompt},
		{"streaming-response", "SSE events are schema-valid, ordered, numbered, named like their type, and rebuild the final response", streamingResponse},
		{"tool-calling", "a function tool yields a function_call item; its function_call_output yields a text answer", toolCalling},
		{"tool-calling-streaming", "a streamed function call has output_item.added/done and arguments delta/done events", toolCallingStreaming},
		{"function-call-roundtrip", "a call forced by a named tool_choice, and its function_call_output sent back by previous_response_id, yield a completed answer", functionCallRoundTrip},
		{"image-input", "an input_image part (data URL) is accepted", imageInput},
		{"file-input", "a small base64 input_file part is accepted", fileInput},
		{"multi-turn", "a conversation continues from explicit history and from previous_response_id", multiTurn},
		{"previous-response-id", "a second response that names the first by previous_response_id completes", previousResponseID},
		{"get-response", "a stored response reads back with GET /responses/{id}; an unknown id is a 404 (not a compliance test: the Responses API's)", getResponse},
		{"previous-response-not-found", "an unknown previous_response_id is a 400 previous_response_not_found, not a fresh start", previousNotFound},
		{"assistant-phase", "assistant messages labelled commentary/final_answer are accepted as history", assistantPhase},
		{"compaction", "POST /responses/compact returns a response.compaction whose compaction item the next request accepts", compaction},
		{"compaction-without-model", "a compact request without the required model is rejected with 400/422", compactionWithoutModel},
	}
}

// Public lists the ids of the public Open Responses HTTP compliance tests
// (those that need no vector store or search index), all of which Tests
// reproduces.
func Public() []string {
	return []string{"basic-response", "streaming-response", "system-prompt", "tool-calling", "tool-calling-streaming",
		"function-call-roundtrip", "image-input", "file-input", "multi-turn", "previous-response-id"}
}

// Run runs every test against baseURL (ending in /v1) as subtests of t,
// with model as the request's model.
func Run(t *testing.T, baseURL, model string, opts Options) {
	t.Helper()
	s := newSuite(strings.TrimRight(baseURL, "/"), model, opts.withDefaults())
	for _, tc := range Tests() {
		t.Run(tc.Name, func(t *testing.T) {
			if slices.Contains(s.opts.Skip, tc.Name) {
				t.Skipf("skipped by Options.Skip (intent not checked: %s)", tc.Intent)
			}
			tc.run(t, s)
		})
	}
}
