package caller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// outcome is one HTTP attempt's result.
type outcome struct {
	status    int
	body      string
	err       *contracts.UpstreamError
	retryable bool
	wait      time.Duration // the server's Retry-After, when hasWait
	hasWait   bool
	sse       bool // the body came from an event stream
}

// attempt sends the body once, bounded by the profile's AttemptTimeout
// (which, for a stream, covers reading the whole stream).
func (t *turn) attempt(turnCtx context.Context, client openai.Client, body []byte) outcome {
	actx, cancel := context.WithTimeout(turnCtx, t.prof.AttemptTimeout)
	defer cancel()
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithHeader("Content-Type", "application/json")}
	if t.in.Stream || t.bg {
		opts = append(opts, option.WithHeader("Accept", "text/event-stream"))
	}
	// With a **http.Response target openai-go hands back the raw response
	// unread on 2xx, and on >= 400 with the body buffered, so the bytes are
	// kept verbatim either way.
	var raw *http.Response
	err := client.Post(actx, "responses", body, &raw, opts...)
	if raw == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return t.transportFailure(turnCtx, actx, err)
	}
	defer raw.Body.Close()

	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		return t.errorOutcome(raw)
	}
	if (t.in.Stream || t.bg) && isEventStream(raw.Header) {
		return t.readStream(turnCtx, actx, cancel, raw)
	}
	b, err := io.ReadAll(raw.Body)
	if err != nil {
		out := t.transportFailure(turnCtx, actx, fmt.Errorf("reading the response body: %w", err))
		out.status = raw.StatusCode
		if out.err.Code != CodeResponseTooLarge {
			out.body = string(b)
		}
		return out
	}
	out := outcome{status: raw.StatusCode, body: t.red.Secrets(string(b))}
	if !json.Valid(b) {
		// Paid for and not repeatable with any confidence: final, not retried.
		out.err = &contracts.UpstreamError{Status: raw.StatusCode, Type: "malformed_response",
			Message: fmt.Sprintf("upstream answered HTTP %d with a body that is not valid JSON (%d bytes)", raw.StatusCode, len(b))}
		return out
	}
	if t.in.Stream && t.emu == nil { // under emulation, rewrite publishes the rewritten answer
		t.emitWhole(actx, b)
	}
	return out
}

// emitWhole serves a streaming call whose backend ignored "stream" and sent
// one JSON response: each output text and each function call's arguments
// go to the sink as one delta, so a live subscriber still sees the answer.
func (t *turn) emitWhole(ctx context.Context, body []byte) {
	var r struct {
		Output []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if json.Unmarshal(body, &r) != nil {
		return
	}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				if c.Type == "output_text" && c.Text != "" {
					t.emit(ctx, Delta{Type: DeltaText, ItemID: it.ID, Text: c.Text})
				}
			}
		case "function_call":
			t.emit(ctx, Delta{Type: DeltaArguments, ItemID: it.ID, CallID: it.CallID, Name: it.Name, Text: it.Arguments})
		}
	}
}

// transportFailure classifies an attempt that got no (complete) response:
// the caller's cancellation, the turn deadline and an answer past the
// profile's cap (limit.go) are final, an attempt timeout or a connection
// error is retried.
func (t *turn) transportFailure(turnCtx, actx context.Context, err error) outcome {
	return t.scrub(t.classify(turnCtx, actx, err))
}

func (t *turn) classify(turnCtx, actx context.Context, err error) outcome {
	if ue, ok := tooLarge(err); ok && t.parent.Err() == nil {
		return outcome{err: ue}
	}
	switch {
	case t.parent.Err() != nil:
		return outcome{err: &contracts.UpstreamError{Type: "cancelled", Message: fmt.Sprintf("call cancelled: %v", err)}}
	case turnCtx.Err() != nil:
		return outcome{err: &contracts.UpstreamError{Type: "timeout", Code: "turn_timeout",
			Message: fmt.Sprintf("turn timed out after %s: %v", t.prof.TurnTimeout, err)}}
	case actx.Err() != nil:
		return outcome{retryable: true, err: &contracts.UpstreamError{Type: "timeout", Code: "attempt_timeout",
			Message: fmt.Sprintf("attempt timed out after %s: %v", t.prof.AttemptTimeout, err)}}
	default:
		return outcome{retryable: true, err: &contracts.UpstreamError{Type: "connection_error", Message: err.Error()}}
	}
}

// errorOutcome reads an HTTP error answer: its body (cut at the cap,
// limit.go) and message, scrubbed of credentials.
func (t *turn) errorOutcome(raw *http.Response) outcome {
	b, _ := io.ReadAll(raw.Body)
	out := outcome{status: raw.StatusCode, body: string(b), err: parseUpstreamError(raw.StatusCode, string(b)),
		retryable: retryableStatus(raw.StatusCode)}
	out.wait, out.hasWait = retryAfter(raw.Header, time.Now())
	return t.scrub(out)
}

// scrub is where upstream error text enters Aptix: a failed outcome's
// message and body are masked of the profile's credentials and of
// anything shaped like a credential (pkg/redact). A backend echoing the
// request's Authorization in its error had the key relayed to the client,
// the log (each retry and the failure), the stream's error event and the
// trace. A successful body only has the exact credentials masked: it may
// be large, and its text is the model's.
func (t *turn) scrub(out outcome) outcome {
	if out.err == nil && out.status >= 200 && out.status <= 299 {
		out.body = t.red.Secrets(out.body)
		return out
	}
	if out.err != nil {
		e := *out.err // never change an error another outcome shares
		e.Message, e.Code, e.Type = t.red.String(e.Message), t.red.String(e.Code), t.red.String(e.Type)
		out.err = &e
	}
	out.body = t.red.String(out.body)
	return out
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}
