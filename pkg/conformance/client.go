package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// suite is the shared state of one Run: where to send, and the two clients.
type suite struct {
	base, model string
	opts        Options
	sdk         openai.Client
	v           Validator
}

func newSuite(base, model string, o Options) *suite {
	return &suite{base: base, model: model, opts: o, sdk: openai.NewClient(
		option.WithBaseURL(base+"/"), option.WithAPIKey(o.APIKey), option.WithHTTPClient(o.HTTPClient), option.WithMaxRetries(0))}
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), s.opts.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// post sends body as JSON to base+path and returns the status, headers and body.
func (s *suite) post(t *testing.T, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("encode request: %v", err)
	}
	req, err := http.NewRequestWithContext(s.ctx(t), http.MethodPost, s.base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatalf("build request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, resp.Header, out
}

// get sends GET base+path and returns the status and body.
func (s *suite) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(s.ctx(t), http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatalf("build request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, out
}

// create POSTs a /responses body and returns the validated response.
func (s *suite) create(t *testing.T, body map[string]any) response {
	t.Helper()
	body["model"] = s.model
	status, _, b := s.post(t, "/responses", body)
	if status != http.StatusOK {
		t.Fatalf("POST /responses: HTTP %d: %s", status, b)
	}
	if err := s.v.Response(b); err != nil {
		t.Fatalf("response fails the Open Responses schema: %v\nbody: %s", err, b)
	}
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	r.raw = b
	return r
}

// stream POSTs a /responses body with stream: true and returns the stream,
// after checking its framing, every event's schema and the event order.
func (s *suite) stream(t *testing.T, body map[string]any) (Stream, response) {
	t.Helper()
	body["model"], body["stream"] = s.model, true
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(s.ctx(t), http.MethodPost, s.base+"/responses", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("POST /responses (stream): %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		eb, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /responses (stream): HTTP %d: %s", resp.StatusCode, eb)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("stream Content-Type %q, want text/event-stream", ct)
	}
	st, err := ReadSSE(resp.Body)
	if err != nil {
		t.Errorf("SSE framing: %v", err)
	}
	if err := s.v.CheckEvents(st); err != nil {
		t.Errorf("stream events fail the Open Responses schemas: %v", err)
	}
	if err := CheckLifecycle(st); err != nil {
		t.Errorf("stream event order: %v", err)
	}
	if st.Final == nil {
		t.Fatalf("stream has no terminal event; types: %v", types(st))
	}
	if !st.Done {
		t.Errorf("stream does not end with data: [DONE] (Open Responses' terminal SSE event); last event %s", st.Events[len(st.Events)-1].Type)
	}
	var r response
	if err := json.Unmarshal(st.Final, &r); err != nil {
		t.Fatalf("decode terminal response: %v", err)
	}
	r.raw = st.Final
	return st, r
}

func types(st Stream) []string {
	out := make([]string, len(st.Events))
	for i, e := range st.Events {
		out[i] = e.Type
	}
	return out
}

// response is the part of a response object the checks read.
type response struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	Model              string  `json:"model"`
	Instructions       *string `json:"instructions"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []item  `json:"output"`
	raw                []byte
}

type item struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Role      string `json:"role"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	EncryptedContent string `json:"encrypted_content"`
	raw              json.RawMessage
}

// UnmarshalJSON keeps each item's raw JSON, to send it back as input.
func (it *item) UnmarshalJSON(b []byte) error {
	type plain item
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("decode output item: %w", err)
	}
	*it = item(p)
	it.raw = append(json.RawMessage(nil), b...)
	return nil
}

// text is the output text of all assistant messages.
func (r response) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type != "message" {
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

func (r response) itemsOf(typ string) []item {
	var out []item
	for _, it := range r.Output {
		if it.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// completedWithMessage is the compliance tests' hasOutput + completedStatus,
// tightened: the output holds an assistant message with text.
func completedWithMessage(t *testing.T, r response) {
	t.Helper()
	if r.Status != "completed" {
		t.Errorf("status %q, want completed", r.Status)
	}
	if len(r.Output) == 0 {
		t.Fatalf("no output items: %s", r.raw)
	}
	if r.text() == "" {
		t.Errorf("no assistant output_text in %s", r.raw)
	}
}

// userMsg is a user message item with string content, as the compliance tests send.
func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": text}
}
