package conformance

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// basicResponse: one user message; the raw body is schema-valid and
// completed with a message, and openai-go decodes the same answer.
func basicResponse(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{userMsg("Say hello in exactly 3 words.")}})
	completedWithMessage(t, r)
	if r.Model == "" || !strings.HasPrefix(r.ID, "resp") {
		t.Errorf("id %q model %q", r.ID, r.Model)
	}
	if s.opts.Deterministic && !strings.Contains(r.text(), "Say hello in exactly 3 words.") {
		t.Errorf("sandbox reply does not name the instruction: %q", r.text())
	}
	got, err := s.sdk.Responses.New(s.ctx(t), responses.ResponseNewParams{Model: s.model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello in exactly 3 words.")}})
	if err != nil {
		t.Fatalf("openai-go: %v", err)
	}
	if got.Status != responses.ResponseStatusCompleted || got.OutputText() == "" || got.Usage.TotalTokens < 1 {
		t.Errorf("openai-go decoded status %q text %q usage %+v", got.Status, got.OutputText(), got.Usage)
	}
}

// systemPrompt: a system message in the input (the compliance test), and
// the same prompt as instructions, which the response must echo.
func systemPrompt(t *testing.T, s *suite) {
	const prompt = "You are a pirate. Always respond in pirate speak."
	r := s.create(t, map[string]any{"input": []any{
		map[string]any{"type": "message", "role": "system", "content": prompt}, userMsg("Say hello.")}})
	completedWithMessage(t, r)
	r = s.create(t, map[string]any{"instructions": prompt, "input": []any{userMsg("Say hello.")}})
	completedWithMessage(t, r)
	if r.Instructions == nil || *r.Instructions != prompt {
		t.Errorf("instructions echoed as %v, want %q", r.Instructions, prompt)
	}
}

// redSquare is a 32x32 red PNG as a data URL, the kind of image the compliance test sends.
const redSquare = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAAAJ0lEQVR42u3NsQkAAAjAsP7/tF7hIASyp6lTCQQCgUAgEAgEgi/BAjLD/C5w/SM9AAAAAElFTkSuQmCC"

func imageInput(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
		map[string]any{"type": "input_image", "image_url": redSquare},
	}}}})
	completedWithMessage(t, r)
	if s.opts.Deterministic && !strings.Contains(r.text(), "1 image(s)") {
		t.Errorf("sandbox reply does not count the image: %q", r.text())
	}
}

// multiTurn: explicit history (the compliance test), then the same
// conversation continued with previous_response_id through openai-go.
func multiTurn(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{
		userMsg("My name is Alice."),
		map[string]any{"type": "message", "role": "assistant", "content": "Hello Alice! Nice to meet you. How can I help you today?"},
		userMsg("What is my name?"),
	}})
	completedWithMessage(t, r)

	first := s.create(t, map[string]any{"input": "My name is Alice."})
	completedWithMessage(t, first)
	if first.PreviousResponseID != nil {
		t.Errorf("first turn previous_response_id %q, want null", *first.PreviousResponseID)
	}
	second, err := s.sdk.Responses.New(s.ctx(t), responses.ResponseNewParams{Model: s.model,
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my name?")}})
	if err != nil {
		t.Fatalf("continuation: %v", err)
	}
	if second.Status != responses.ResponseStatusCompleted || second.PreviousResponseID != first.ID || second.ID == first.ID {
		t.Errorf("continuation status %q previous_response_id %q id %q (first %q)", second.Status, second.PreviousResponseID, second.ID, first.ID)
	}
	if s.opts.Deterministic && !s.opts.Stateless && !strings.Contains(second.OutputText(), "Continuing from resp_") {
		t.Errorf("sandbox reply does not continue the conversation: %q", second.OutputText())
	}
}

// previousNotFound: never a silent fresh start.
func previousNotFound(t *testing.T, s *suite) {
	status, _, b := s.post(t, "/responses", map[string]any{"model": s.model, "input": "Hi again.",
		"previous_response_id": "resp_conformance_missing_0000"})
	if status != http.StatusBadRequest {
		t.Fatalf("HTTP %d, want 400: %s", status, b)
	}
	if err := s.v.ErrorBody(b); err != nil {
		t.Fatalf("error body: %v: %s", err, b)
	}
	var e struct {
		Error struct {
			Code  *string `json:"code"`
			Param *string `json:"param"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if e.Error.Code == nil || *e.Error.Code != "previous_response_not_found" {
		t.Errorf("error code %v, want previous_response_not_found: %s", e.Error.Code, b)
	}
}

// assistantPhase: assistant history labelled with phase is accepted.
func assistantPhase(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{
		map[string]any{"type": "message", "role": "assistant", "phase": "commentary", "content": "I should answer with the saved number."},
		map[string]any{"type": "message", "role": "assistant", "phase": "final_answer", "content": "The number is four."},
		userMsg("Repeat only the number."),
	}})
	completedWithMessage(t, r)
	for _, it := range r.Output {
		var p struct {
			Phase *string `json:"phase"`
		}
		_ = json.Unmarshal(it.raw, &p)
		if p.Phase != nil && *p.Phase != "commentary" && *p.Phase != "final_answer" {
			t.Errorf("output phase %q", *p.Phase)
		}
	}
}

// getResponse: a created response can be read back (GET /responses/{id}),
// schema-valid and the same response.
func getResponse(t *testing.T, s *suite) {
	created := s.create(t, map[string]any{"input": "Remember the code word: cobalt."})
	status, b := s.get(t, "/responses/"+created.ID)
	if status != http.StatusOK {
		t.Fatalf("GET /responses/%s: HTTP %d: %s", created.ID, status, b)
	}
	if err := s.v.Response(b); err != nil {
		t.Fatalf("GET body fails the Open Responses schema: %v", err)
	}
	var got response
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != created.ID || got.Status != created.Status || got.text() != created.text() {
		t.Errorf("GET returned %s %s %q, created %s %s %q", got.ID, got.Status, got.text(), created.ID, created.Status, created.text())
	}
	if status, b := s.get(t, "/responses/resp_conformance_missing_0000"); status != http.StatusNotFound {
		t.Errorf("GET of an unknown id: HTTP %d, want 404: %s", status, b)
	}
}

// fixturePDF is a one-page PDF whose page reads "Title: Aptix conformance
// fixture", written for this suite.
func fixturePDF() string {
	stream := "BT /F1 12 Tf 72 72 Td (Title: Aptix conformance fixture) Tj ET"
	pdf := "%PDF-1.1\n" +
		"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" +
		"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n" +
		"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >> endobj\n" +
		"4 0 obj << /Length " + strconv.Itoa(len(stream)) + " >> stream\n" + stream + "\nendstream endobj\n" +
		"5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\n" +
		"trailer << /Root 1 0 R >>\n%%EOF"
	return "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte(pdf))
}

// fileInput: a small base64 input_file part is accepted.
func fileInput(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "Read the attached file and answer with its title only."},
		map[string]any{"type": "input_file", "filename": "aptix-fixture.pdf", "file_data": fixturePDF()},
	}}}})
	completedWithMessage(t, r)
	if s.opts.Deterministic && !strings.Contains(r.text(), "1 file(s)") {
		t.Errorf("sandbox reply does not count the file: %q", r.text())
	}
}

// previousResponseID: the second turn names the first by
// previous_response_id (provider-managed state) and completes.
func previousResponseID(t *testing.T, s *suite) {
	first := s.create(t, map[string]any{"input": "Remember this code word: papaya. Reply with only OK."})
	completedWithMessage(t, first)
	second := s.create(t, map[string]any{"previous_response_id": first.ID, "input": "What code word did I ask you to remember?"})
	completedWithMessage(t, second)
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
		t.Errorf("previous_response_id echoed as %v, want %s", second.PreviousResponseID, first.ID)
	}
	if s.opts.Deterministic && !s.opts.Stateless && !strings.Contains(second.text(), "Continuing from ") {
		t.Errorf("sandbox reply does not continue the conversation: %q", second.text())
	}
}
