package stage

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/tokens"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// BudgetHolder holds model calls' worst cases against a principal's
// budgets in the shared totals (store.Usage), so a budget holds across
// every LLM caller replica.
type BudgetHolder interface {
	Reserve(ctx context.Context, principal string, budgets []contracts.Budget, id string, h spend.Hold) (*spend.Refusal, error)
	Settle(ctx context.Context, principal string, budgets []contracts.Budget, id string, real spend.Hold) error
	Release(ctx context.Context, principal string, budgets []contracts.Budget, id string) error
}

// reserve is the one admission of a budgeted call: every model call of a
// turn, each round of a tool loop, whether it came over HTTP or the bus,
// passes here before the model is paid. It holds the call's worst case
// under its call key and refuses the turn when that does not fit
// (spend.Totals.Reserve). It reports whether the call holds anything.
//
// A redelivered call reserves again under the same key, which renews its
// hold rather than adding one. One an earlier delivery may already have
// paid (its call record says so) is not refused: refusing would throw a
// paid result away unaccounted; its cost is counted when the turn is.
func (l *LLMCaller) reserve(ctx context.Context, t *contracts.Turn, callKey string) (bool, error) {
	if l.Budgets == nil || len(t.Request.Budgets) == 0 {
		return false, nil
	}
	if pipeline.Delivered(ctx) > 1 {
		paid, err := l.Caller.MayBePaid(ctx, callKey)
		if err != nil {
			return false, fmt.Errorf("read the call record of %s: %w", callKey, err)
		}
		if paid {
			return true, nil // settled to what it cost, if it still holds
		}
	}
	h := estimate(t)
	refusal, err := l.Budgets.Reserve(ctx, t.Request.Principal, t.Request.Budgets, callKey, h)
	if err != nil {
		return false, fmt.Errorf("reserve the budget of %q: %w", t.Request.Principal, err) // redelivered: never paid unchecked
	}
	if refusal != nil {
		return false, pipeline.Reject(CodeBudgetExceeded, "%s", refusal.Message())
	}
	return true, nil
}

// settle lowers the call's hold to its real cost, so the turns that follow
// are admitted against what it cost. A failed write leaves the worst case
// held until the turn's usage is folded in, which replaces it: it only
// refuses early, never admits too much, so it does not fail the call.
func (l *LLMCaller) settle(ctx context.Context, t *contracts.Turn, held bool, res *contracts.LLMResult) {
	if !held {
		return
	}
	real := spend.Actual(contracts.TurnKey(t.ConversationId, t.TurnId), resultUsage(res.Body), t.Envelope.Price)
	if err := l.Budgets.Settle(ctx, t.Request.Principal, t.Request.Budgets, contracts.CallKey(t), real); err != nil {
		slog.Default().Warn("budget settle failed; the hold stays until the turn is counted", "call", contracts.CallKey(t), "err", err)
	}
}

// release drops the hold of a call that was not paid (cancelled before or
// during the call: such a turn is not counted). A failed write leaves the
// hold to expire (spend.HoldTTL).
func (l *LLMCaller) release(ctx context.Context, t *contracts.Turn, held bool) {
	if !held {
		return
	}
	if err := l.Budgets.Release(ctx, t.Request.Principal, t.Request.Budgets, contracts.CallKey(t)); err != nil {
		slog.Default().Warn("budget release failed; the hold expires", "call", contracts.CallKey(t), "err", err)
	}
}

// estimate is the call's worst case: its input counted locally
// (instructions, input items, tools) with the model's tokenizer, and never
// under a token for every 4 bytes of text (tokens.Bound: the backend's
// tokenizer may not be OpenAI's), plus the history a continuation's
// backend holds, its max_output_tokens (the envelope sets
// the profile's for a budgeted turn that names none), at the price the
// envelope recorded for the serving model. A body that cannot be read is
// counted at a token a byte, which no tokenizer exceeds.
func estimate(t *contracts.Turn) spend.Hold {
	var b struct {
		Model           string          `json:"model"`
		Instructions    string          `json:"instructions"`
		Input           json.RawMessage `json:"input"`
		Tools           json.RawMessage `json:"tools"`
		MaxOutputTokens int             `json:"max_output_tokens"`
	}
	body := t.Envelope.Body
	input := len(body)
	if json.Unmarshal(body, &b) == nil {
		r := tokens.Request{Model: cmp.Or(b.Model, t.Envelope.Model), Instructions: b.Instructions, Tools: b.Tools}
		var s string
		if json.Unmarshal(b.Input, &s) == nil {
			r.Items = []json.RawMessage{mustJSON(map[string]string{"role": "user", "content": s})}
		} else {
			_ = json.Unmarshal(b.Input, &r.Items)
		}
		if n, err := tokens.Bound(r); err == nil {
			input = n
		}
	}
	// A continuation's body carries only what is new: the backend holds
	// the rest (or the caller replays it). A first call adds what the
	// conversation's last turn counted; a tool loop's later round, which
	// continues from the round before, what the loop's rounds counted.
	if t.Tools != nil && t.Tools.Round > 0 {
		input += max(t.Tools.Usage.PromptTokens, 0) + max(t.Tools.Usage.CompletionTokens, 0)
	} else {
		input += max(t.Envelope.HistoryTokens, 0)
	}
	out := b.MaxOutputTokens
	if out <= 0 {
		out = profiles.DefaultMaxOutputTokens
	}
	return spend.Estimate(contracts.TurnKey(t.ConversationId, t.TurnId), input, out, t.Envelope.Price)
}

// resultUsage is the usage a result body reports (zero when none), read
// from the typed document.
func resultUsage(body string) contracts.LlmUsage {
	r, err := oresponse.ParseString(body)
	if body == "" || err != nil || r == nil {
		return contracts.LlmUsage{}
	}
	return contracts.UsageOf(r.Usage)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
