package caller

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/toolemu"
)

// Tool-call emulation (docs/tool-emulation.md) on the caller's side: the envelope put the
// function tools into the prompt; here the model's <tool_call> blocks become
// function_call items again.
//
// Where the bodies live: LLMResult.Body is the rewritten body (text without
// the accepted blocks, one function_call item per call, ids generated), so
// the mapper, the span's finish reason and the done delta read it as they
// would a native answer; LLMResult.UpstreamBody keeps the backend's body
// verbatim, and the mapper hands that one to the client as rawResponseJson.
// The replayed history of a backend without previous_response_id stores the
// verbatim output too: the backend is shown its own words, not function_call
// items it cannot read.

// newParser prepares the parser for a turn whose envelope emulates tools.
func newParser(e *contracts.ToolEmulation) (*toolemu.Parser, error) {
	tools, err := toolemu.DecodeTools(e.Tools)
	if err != nil {
		return nil, fmt.Errorf("tool emulation: %w", err)
	}
	choice, err := toolemu.ParseChoice(e.ToolChoice)
	if err != nil {
		return nil, fmt.Errorf("tool emulation: %w", err)
	}
	p, err := toolemu.NewParser(tools, choice)
	if err != nil {
		return nil, fmt.Errorf("tool emulation: %w", err)
	}
	return p, nil
}

// textFilter is the hold-back filter of one streamed output_text part.
type textFilter struct {
	itemID string
	s      *toolemu.Stream
}

// emulatedText passes a streamed text delta through its part's hold-back
// filter and publishes only what is certain to be visible text: a tag is
// never published half, and a call's JSON never as text.
func (t *turn) emulatedText(ctx context.Context, itemID string, contentIndex int, delta string) {
	key := itemID + "/" + strconv.Itoa(contentIndex)
	f, ok := t.filters[key]
	if !ok {
		f = &textFilter{itemID: itemID, s: t.emu.Stream()}
		t.filters[key] = f
		t.filterOrder = append(t.filterOrder, key)
	}
	if text := f.s.Write(delta); text != "" {
		t.emit(ctx, Delta{Type: DeltaText, ItemID: itemID, Text: text})
	}
}

// closeText ends one part's filter when its output_text.done arrives, or
// every open one when the response ends (key ""), publishing what they held
// back: text that was not a tag after all, and blocks left as text.
func (t *turn) closeText(ctx context.Context, key string) {
	for _, k := range t.filterOrder {
		f := t.filters[k]
		if f == nil || (key != "" && k != key) {
			continue
		}
		delete(t.filters, k)
		if text := f.s.Close(); text != "" {
			t.emit(ctx, Delta{Type: DeltaText, ItemID: f.itemID, Text: text})
		}
	}
}

// rewrite turns a successful result's <tool_call> blocks into function_call
// items and, for a streaming call, publishes each call as one arguments
// delta, as emitWhole does for a native answer.
func (t *turn) rewrite(ctx context.Context, res *contracts.LLMResult, sse bool) {
	rw, err := t.emu.Rewrite([]byte(res.Body))
	if err != nil {
		res.Warnings = append(res.Warnings, "tool emulation: the response was not searched for <tool_call> blocks: "+err.Error())
		t.log.Warn("tool emulation could not read the response", "err", err)
		return
	}
	res.Warnings = append(res.Warnings, rw.Warnings...)
	if rw.Body != nil {
		res.UpstreamBody, res.Body = res.Body, string(rw.Body)
	}
	if len(rw.Calls) > 0 || len(rw.Warnings) > 0 {
		t.log.Info("tool emulation", "calls", len(rw.Calls), "warnings", len(rw.Warnings))
	}
	if !t.in.Stream {
		return
	}
	if !sse { // the backend ignored "stream": publish the rewritten answer whole
		t.emitWhole(ctx, []byte(res.Body))
		return
	}
	for _, c := range rw.Calls {
		t.emit(ctx, Delta{Type: DeltaArguments, ItemID: c.ItemID, CallID: c.ID, Name: c.Name, Text: c.Arguments})
	}
}
