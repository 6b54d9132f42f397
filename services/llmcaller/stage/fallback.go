package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// Fallbacks between backends (docs/backends.md#fallbacks): a call whose
// backend failed in a way another backend may not (429, 5xx, 529, a
// connection error, a timeout), after its own retries and before any of
// its output reached the client, is made again on the next profile of the
// first one's "fallbacks". Each fallback is a call of its own, with its
// own pay-once key (fallbackKey): its call record is written before its
// request is sent, so a redelivery that finds one resumes the chain there
// and never calls that backend, or one before it, a second time.

// fallbackKey is the pay-once key of the n-th fallback (1-based) of the
// call keyed callKey, on profile backend: dot-separated like
// contracts.CallKey's round, as a KV key must be (profile names are).
func fallbackKey(callKey string, n int, backend string) string {
	return callKey + ".fallback" + strconv.Itoa(n) + "." + backend
}

// mayFallBack reports whether a failed call may move to another backend:
// what another backend may not share (its rate limit, its outage, its
// network), never what the request itself caused (400, 401, 413, …), nor a
// cancellation, an answer too large or a malformed one (paid for).
func mayFallBack(res contracts.LLMResult) bool {
	e := res.Error
	if e == nil {
		return false
	}
	switch e.Type {
	case "connection_error", "timeout":
		return true
	}
	s := res.Status
	if s == 0 {
		s = e.Status
	}
	return s == http.StatusTooManyRequests || s >= 500 && s != http.StatusLoopDetected
}

// callWithFallbacks makes the call of in and, while it fails in a way
// that may fall back and nothing reached the client, the calls of the
// profile's fallbacks. fallbackCtx carries what the first call's context
// does except a Chat Completions client's own body, which only the first
// backend is sent as is. The result is the last call's, with the failed
// ones in Fallbacks and, when every one failed, an error naming them all.
func (l *LLMCaller) callWithFallbacks(ctx, callCtx, fallbackCtx context.Context, t *contracts.Turn, in caller.Input) contracts.LLMResult {
	first, err := l.Caller.Profile(in.Backend)
	if err != nil || len(first.Fallbacks) == 0 {
		return l.Caller.Call(callCtx, in)
	}
	chain := []profiles.Profile{first}
	for _, name := range first.Fallbacks {
		if p, err := l.Caller.Profile(name); err == nil {
			chain = append(chain, p)
		}
	}
	var held *heldDone
	if in.Deltas != nil {
		held = &heldDone{next: in.Deltas}
		in.Deltas = held
	}
	var tried []contracts.BackendAttempt
	start := 0
	if !in.FirstDelivery {
		// A redelivery resumes where an earlier delivery left the chain:
		// a fallback with a call record may have been paid, so neither it
		// nor a backend before it is called again.
		for i := len(chain) - 1; i >= 1 && start == 0; i-- {
			paid, err := l.Caller.MayBePaid(ctx, fallbackKey(in.TurnID, i, chain[i].Name))
			if err == nil && paid {
				start = i
			}
		}
		for _, p := range chain[:start] {
			tried = append(tried, contracts.BackendAttempt{Backend: p.Name, Skipped: "failed in an earlier delivery of the turn"})
		}
	}
	requested := requestedModel(t)
	var notes []string           // warnings of the chain, for the final result
	var last contracts.LLMResult // the last call's failed result
	if start > 0 {
		last = contracts.LLMResult{Backend: chain[start-1].Name, Streamed: in.Stream,
			Error: &contracts.UpstreamError{Type: "aptix_fallback", Message: "failed in an earlier delivery"}}
	}
	for i := start; ; i++ {
		cur, cctx := in, callCtx
		if i > 0 {
			var skip string
			cur, skip = fallbackInput(in, first, chain[i], i, requested)
			if skip != "" {
				tried = append(tried, contracts.BackendAttempt{Backend: chain[i].Name, Model: cur.Model, Skipped: skip})
				if i == len(chain)-1 {
					// Nothing left to call: the turn ends with the last failure,
					// which is the last attempt but one or more skipped ones.
					if held != nil {
						held.release(ctx)
					}
					return noted(skippedToTheEnd(tried, last), notes)
				}
				continue
			}
			cctx = fallbackCtx
		}
		end := i == len(chain)-1
		if held != nil {
			held.hold(!end)
		}
		res := l.Caller.Call(cctx, cur)
		if end || !mayFallBack(res) || held != nil && held.emitted() || ctx.Err() != nil || callCtx.Err() != nil {
			if held != nil {
				held.release(ctx)
			}
			if len(tried) == 0 {
				return res
			}
			return noted(exhausted(tried, res), notes)
		}
		// A held done stays held until the next call starts (hold), so a
		// chain whose remaining members are all skipped still ends with it.
		last = res
		// A background call that timed out is still generating, and
		// billing, upstream: stop it before another backend is paid.
		if up, err := l.Caller.CancelUpstream(ctx, cur.TurnID); err == nil && up != "" {
			notes = append(notes, fmt.Sprintf("upstream response %s of backend %s cancelled before falling back", up, res.Backend))
		}
		tried = append(tried, contracts.BackendAttempt{Backend: res.Backend, Model: res.Model, Status: res.Status,
			Error: res.Error, Attempts: res.Attempts, DurationMs: res.DurationMs})
	}
}

// fallbackInput is the call of in on the n-th fallback p: its own
// pay-once key, p's model for the one requested, written into the body.
// skip says why p cannot take the call: the body was shaped for the first
// profile's tool mode, or continues a response only the first holds.
func fallbackInput(in caller.Input, first, p profiles.Profile, n int, requested string) (caller.Input, string) {
	out := in
	out.Backend, out.Model = p.Name, p.FallbackModel(requested)
	out.TurnID = fallbackKey(in.TurnID, n, p.Name)
	out.Fallback = n
	out.LegacyKey = ""
	if p.Capabilities.ToolMode != first.Capabilities.ToolMode {
		return out, fmt.Sprintf("its tool mode %q is not %s's %q the request was built for", p.Capabilities.ToolMode, first.Name, first.Capabilities.ToolMode)
	}
	var b map[string]json.RawMessage
	if err := json.Unmarshal(in.Body, &b); err != nil {
		return out, "the request body is not a JSON object"
	}
	if prev, ok := b["previous_response_id"]; ok && string(prev) != "null" {
		return out, "the turn continues a response (previous_response_id) that only " + first.Name + " holds"
	}
	b["model"], _ = json.Marshal(out.Model)
	body, err := json.Marshal(b)
	if err != nil {
		return out, "the request body could not be written: " + err.Error()
	}
	out.Body = body
	return out, ""
}

// requestedModel is the model as the client named it, which a fallback
// profile maps with its own aliases: the agent context's (its profile
// prefix dropped), else the one the envelope resolved.
func requestedModel(t *contracts.Turn) string {
	if ac := t.Request.AgentContext; ac != nil && ac.Model != "" {
		if _, m, ok := strings.Cut(ac.Model, "/"); ok && m != "" {
			return m
		}
		return ac.Model
	}
	return t.Envelope.Model
}

// exhausted is the last call's result with the ones before it; when it
// failed too, its error names every attempt, so a client sees why each
// backend of the chain was left.
func exhausted(tried []contracts.BackendAttempt, res contracts.LLMResult) contracts.LLMResult {
	res.Fallbacks = tried
	if res.Error == nil {
		return res
	}
	parts := make([]string, 0, len(tried)+1)
	for _, a := range append(tried, contracts.BackendAttempt{Backend: res.Backend, Model: res.Model, Status: res.Status, Error: res.Error}) {
		parts = append(parts, describe(a))
	}
	e := *res.Error
	e.Message = fmt.Sprintf("every backend failed (%d tried): %s", len(parts), strings.Join(parts, "; "))
	res.Error = &e
	return res
}

func noted(res contracts.LLMResult, notes []string) contracts.LLMResult {
	res.Warnings = append(res.Warnings, notes...)
	return res
}

// skippedToTheEnd is the result of a chain whose members after the last
// failed call were all skipped: that call's result, still naming the
// backend that answered it, with every attempt in its error.
func skippedToTheEnd(tried []contracts.BackendAttempt, last contracts.LLMResult) contracts.LLMResult {
	last.Fallbacks = tried
	parts := make([]string, 0, len(tried))
	for _, a := range tried {
		parts = append(parts, describe(a))
	}
	e := contracts.UpstreamError{Type: "aptix_fallback"}
	if last.Error != nil {
		e = *last.Error
	}
	e.Message = fmt.Sprintf("every backend failed or was skipped (%d): %s", len(parts), strings.Join(parts, "; "))
	last.Error = &e
	return last
}

func describe(a contracts.BackendAttempt) string {
	s := a.Backend
	if a.Model != "" {
		s += " (" + a.Model + ")"
	}
	switch {
	case a.Skipped != "":
		return s + ": skipped, " + a.Skipped
	case a.Error != nil && a.Status != 0:
		return fmt.Sprintf("%s: HTTP %d %s", s, a.Status, a.Error.Message)
	case a.Error != nil:
		return s + ": " + a.Error.Message
	}
	return s
}

// heldDone passes a streamed call's deltas on, except that while a
// fallback may follow it holds back the call's final "done" delta of a
// failed call: a client must not see the turn end in an error that the
// next backend answers. It also tells whether any output reached the
// client, after which the turn can no longer fall back.
type heldDone struct {
	next caller.DeltaSink

	mu      sync.Mutex
	holding bool
	out     bool // a delta other than done went on
	done    *caller.Delta
}

func (h *heldDone) Delta(ctx context.Context, d caller.Delta) {
	h.mu.Lock()
	if d.Type == caller.DeltaDone && h.holding && d.Status == "error" && !h.out {
		h.done = &d
		h.mu.Unlock()
		return
	}
	if d.Type != caller.DeltaDone {
		h.out = true
	}
	h.mu.Unlock()
	h.next.Delta(ctx, d)
}

// hold starts a call: a done delta held for the one before is forgotten
// (the next backend answers instead), and on holds this call's.
func (h *heldDone) hold(on bool) {
	h.mu.Lock()
	h.holding, h.done = on, nil
	h.mu.Unlock()
}

func (h *heldDone) emitted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out
}

// release sends a held done delta: the turn ends with that call's result.
func (h *heldDone) release(ctx context.Context) {
	h.mu.Lock()
	d := h.done
	h.done, h.holding = nil, false
	h.mu.Unlock()
	if d != nil {
		h.next.Delta(context.WithoutCancel(ctx), *d)
	}
}
