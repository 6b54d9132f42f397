package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// streamEvent is the union of the stream event fields the caller reads.
type streamEvent struct {
	Type         string `json:"type"`
	Seq          *int   `json:"sequence_number"`
	ItemID       string `json:"item_id"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
	Item         struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"item"`
	Response json.RawMessage `json:"response"`
	// "error" events: OpenAI puts code/message at the top level; some
	// servers nest them under "error".
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   json.RawMessage `json:"error"`
}

// readStream consumes an SSE response with openai-go's decoder, hands text
// and argument deltas to the sink, and returns the final response object
// (from response.completed|incomplete|failed) verbatim as the body, the same
// shape a non-streaming call returns. A data: [DONE] before that event is a
// cut stream; after it, the stream is read to its end (drainEnd).
func (t *turn) readStream(turnCtx, actx context.Context, cancel context.CancelFunc, raw *http.Response) outcome {
	dec := ssestream.NewDecoder(raw)
	defer dec.Close()
	out := outcome{status: raw.StatusCode, sse: true}
	clear(t.filters) // a retried attempt starts its text afresh
	t.filterOrder = t.filterOrder[:0]
	for dec.Next() {
		ev := dec.Event()
		data := bytes.TrimSpace(ev.Data)
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		var e streamEvent
		if err := json.Unmarshal(data, &e); err != nil {
			out.body = string(data)
			out.err = &contracts.UpstreamError{Status: raw.StatusCode, Type: "malformed_response",
				Message: fmt.Sprintf("stream event %q is not valid JSON: %v", ev.Type, err)}
			return t.scrub(out)
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		seq := -1
		t.upSeq = -1
		if e.Seq != nil {
			seq = *e.Seq
			t.upSeq = t.seqBase + seq
		}
		switch e.Type {
		case "response.created":
			t.created(actx, e.Response, seq)
		case "response.output_item.added":
			if e.Item.Type == "function_call" {
				t.names[e.Item.ID] = fnCall{callID: e.Item.CallID, name: e.Item.Name}
			}
		case "response.output_text.delta":
			if t.emu != nil {
				t.emulatedText(actx, e.ItemID, e.ContentIndex, e.Delta)
				break
			}
			t.emit(actx, Delta{Type: DeltaText, ItemID: e.ItemID, Text: e.Delta})
		case "response.output_text.done":
			if t.emu != nil {
				t.closeText(actx, e.ItemID+"/"+strconv.Itoa(e.ContentIndex))
			}
		case "response.function_call_arguments.delta":
			fc := t.names[e.ItemID]
			t.emit(actx, Delta{Type: DeltaArguments, ItemID: e.ItemID, CallID: fc.callID, Name: fc.name, Text: e.Delta})
		case "response.completed", "response.incomplete", "response.failed":
			if t.emu != nil {
				t.closeText(actx, "")
			}
			out.body = string(e.Response)
			if e.Type == "response.failed" {
				out.body = t.red.String(out.body) // its error message is upstream error text
			}
			drainEnd(dec, cancel)
			return t.scrub(out)
		case "error":
			out.body = string(data)
			out.err = streamError(raw.StatusCode, e)
			drainEnd(dec, cancel)
			return t.scrub(out)
		}
	}
	err := dec.Err()
	if err == nil {
		err = errors.New("stream ended without response.completed, response.incomplete or response.failed")
	}
	failed := t.transportFailure(turnCtx, actx, fmt.Errorf("reading the event stream: %w", err))
	failed.status = raw.StatusCode
	return failed
}

// drainGrace bounds how long the end of a stream (its data: [DONE], or
// EOF) is waited for once the terminal event has been read.
const drainGrace = 250 * time.Millisecond

// drainEnd reads what follows a stream's terminal event (nothing but the
// data: [DONE] sentinel Open Responses servers send) to EOF. A body read
// to its end lets the connection go back to the pool; one left unread is
// closed. A server that keeps the stream open longer than drainGrace has
// its request cancelled (the connection is dropped, the answer is kept).
func drainEnd(dec ssestream.Decoder, cancel context.CancelFunc) {
	timer := time.AfterFunc(drainGrace, cancel)
	defer timer.Stop()
	for dec.Next() { // to EOF: a body closed before it cannot be reused
	}
}

func streamError(status int, e streamEvent) *contracts.UpstreamError {
	ue := &contracts.UpstreamError{Status: status, Type: "stream_error", Code: scalar(e.Code), Message: e.Message}
	if len(e.Error) > 0 {
		var inner struct {
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil {
			ue.Message = inner.Message
			if inner.Type != "" {
				ue.Type = inner.Type
			}
			if c := scalar(inner.Code); c != "" {
				ue.Code = c
			}
		} else {
			ue.Message = scalar(e.Error)
		}
	}
	if ue.Message == "" {
		ue.Message = "upstream sent an error event"
	}
	return ue
}
