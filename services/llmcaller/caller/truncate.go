package caller

import (
	"encoding/json"
	"fmt"
)

// Truncation "auto" (OpenAI's parameter): when the request does not fit the
// profile's context window, the oldest input items are dropped until it
// does, instead of the call failing upstream. Kept whatever the size: the
// system and developer messages that open the input (the conversation's
// instructions), the last user message and everything after it (the turn
// itself). A tool output whose call was dropped goes with it, since a
// backend refuses an output that answers no call. The size is an estimate
// (~4 bytes a token over the body, the same rule as the sandbox's billing);
// max_output_tokens is reserved.

// truncation is what truncateAuto did.
type truncation struct {
	dropped          int
	before, after, w int // estimated tokens, and the window
}

const bytesPerToken = 4

// truncateAuto drops the oldest input items of b when b asks for
// truncation "auto" and is estimated over window tokens (0: no window known,
// nothing is done). It rewrites b["input"] only when it drops something.
func truncateAuto(b body, window int) (truncation, error) {
	var mode string
	if window <= 0 || json.Unmarshal(b["truncation"], &mode) != nil || mode != "auto" {
		return truncation{}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(b["input"], &items) != nil || len(items) == 0 {
		return truncation{}, nil // a string input is one message: nothing older to drop
	}
	var maxOut int
	_ = json.Unmarshal(b["max_output_tokens"], &maxOut)
	size := 0
	for k, v := range b {
		size += len(k) + len(v) + 4
	}
	tokens := func(n int) int { return (n + bytesPerToken - 1) / bytesPerToken }
	tr := truncation{before: tokens(size) + maxOut, w: window}
	tr.after = tr.before
	if tr.before <= window {
		return tr, nil
	}
	type head struct {
		Type   string `json:"type"`
		Role   string `json:"role"`
		CallID string `json:"call_id"`
	}
	heads := make([]head, len(items))
	lastUser := -1
	for i, it := range items {
		_ = json.Unmarshal(it, &heads[i])
		if (heads[i].Type == "message" || heads[i].Type == "") && heads[i].Role == "user" {
			lastUser = i
		}
	}
	first := 0 // the opening system and developer messages stay
	for first < len(items) && (heads[first].Role == "system" || heads[first].Role == "developer") {
		first++
	}
	if lastUser < 0 {
		lastUser = len(items) - 1 // a tool round: its outputs are the turn
	}
	drop := map[int]bool{}
	droppedCalls := map[string]bool{}
	for i := first; i < lastUser && tr.after > window; i++ {
		if drop[i] {
			continue
		}
		drop[i] = true
		tr.after -= tokens(len(items[i]) + 1)
		if h := heads[i]; h.CallID != "" && (h.Type == "function_call" || h.Type == "custom_tool_call") {
			droppedCalls[h.CallID] = true
		}
		// The outputs of the calls dropped so far, wherever they are
		// before the turn, go too.
		for j := i + 1; j < lastUser; j++ {
			if h := heads[j]; !drop[j] && h.CallID != "" && droppedCalls[h.CallID] &&
				(h.Type == "function_call_output" || h.Type == "custom_tool_call_output") {
				drop[j] = true
				tr.after -= tokens(len(items[j]) + 1)
			}
		}
	}
	if len(drop) == 0 {
		return tr, nil
	}
	kept := make([]json.RawMessage, 0, len(items)-len(drop))
	for i, it := range items {
		if !drop[i] {
			kept = append(kept, it)
		}
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return tr, fmt.Errorf("encode truncated input: %w", err)
	}
	b["input"] = raw
	tr.dropped = len(drop)
	return tr, nil
}

// note is the result's warning for a truncation that dropped items.
func (tr truncation) note() string {
	s := fmt.Sprintf("truncation auto: dropped the %d oldest input items (about %d tokens estimated against a context window of %d; %d after)",
		tr.dropped, tr.before, tr.w, tr.after)
	if tr.after > tr.w {
		s += "; still over: nothing older was left to drop"
	}
	return s
}
