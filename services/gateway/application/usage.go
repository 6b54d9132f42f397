package application

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Usage and budgets (docs/usage-and-budgets.md): the gateway copies the
// caller's budgets into each turn it submits and refuses a turn whose
// budget has no room left (spent plus what calls in flight hold) before it
// is published, so the model is never called for it. The reservation
// itself, which makes a budget a hard limit, is the LLM caller's: it knows
// each call's input, output limit and price. The totals are the shared KV
// ones the mapper folds turns into: every gateway replica reads the same
// spend and holds.

// CodeBudgetExceeded is the error code of a turn refused by a budget.
const CodeBudgetExceeded = "budget_exceeded"

// TypeInsufficientQuota is the error type OpenAI gives a spent quota.
const TypeInsufficientQuota = "insufficient_quota"

// checkBudgets returns the caller's budgets (to copy into its turn) when
// none is spent, or the 429 to answer. A totals store that cannot be read
// refuses the turn as unavailable rather than letting it spend unchecked.
// It runs before anything of the turn is written.
func (a *App) checkBudgets(ctx context.Context, p auth.Principal) ([]contracts.Budget, *responses.Error) {
	if len(p.Budgets) == 0 || a.usage == nil {
		return p.Budgets, nil
	}
	refusal, err := a.usage.Check(ctx, p.ID, p.Budgets)
	if err != nil {
		a.log.Warn("budget check failed", "principal", p.ID, "err", err)
		return nil, responses.Unavailable("The usage totals are unavailable; retry later.")
	}
	if refusal != nil {
		return nil, budgetRefusal(refusal, a.cfg.Now())
	}
	return p.Budgets, nil
}

// budgetFailure is the 429 of a turn the LLM caller refused because its
// call's worst case did not fit in the budget (the reservation rule is
// applied there, where the call's input and price are known), or nil: an
// execute answers it as a create does (responses.Failure). Its Retry-After
// is the default: the room may come back as soon as calls in flight
// settle, not only when the budget resets.
func budgetFailure(r *contracts.AgentExecuteResponse) *responses.Error {
	if r == nil || r.Kind != contracts.KindError || r.ErrorCode != CodeBudgetExceeded {
		return nil
	}
	return &responses.Error{Status: statusTooManyRequests, Type: TypeInsufficientQuota,
		Code: ptr(CodeBudgetExceeded), Message: r.ErrorMessage}
}

// budgetRefusal is the 429 of a spent budget, with Retry-After until it resets.
func budgetRefusal(r *spend.Refusal, now time.Time) *responses.Error {
	return &responses.Error{Status: statusTooManyRequests, Type: TypeInsufficientQuota,
		Code: ptr(CodeBudgetExceeded), Message: r.Message(), RetryAfter: max(1, int(math.Ceil(r.ResetAt.Sub(now).Seconds())))}
}

// UsageQuery narrows a usage report: whose (Principal: another's is for
// an admin only; an admin naming none reads every principal's), the
// model, and From/To, UTC dates as YYYY-MM-DD, inclusive.
type UsageQuery struct {
	Principal, Model, From, To string
	// Admin says the caller may read every principal's usage (decided by
	// the door that authenticated it).
	Admin bool
}

// Usage is the answer of a usage report.
type Usage struct {
	Object    string `json:"object"`
	Principal string `json:"principal,omitempty"`
	All       bool   `json:"all_principals,omitempty"`
	spend.Report
	// Pending counts completed turns (of anyone) not yet added to the
	// totals: the answer is exact once it is 0, a moment after a turn ends.
	Pending uint64 `json:"pending_turns"`
}

// Usage reports the caller's own totals, or for an admin every
// principal's, optionally one principal's.
func (a *App) Usage(ctx context.Context, who auth.Principal, q UsageQuery) (*Usage, *responses.Error) {
	if a.usage == nil {
		return nil, responses.Unavailable("usage accounting is not available")
	}
	f := spend.Filter{Principal: who.ID, Model: q.Model}
	if q.Principal != "" {
		if !q.Admin && q.Principal != who.ID {
			return nil, &responses.Error{Status: statusForbidden, Type: responses.TypeInvalidRequest, Param: ptr("principal"),
				Code: ptr("forbidden"), Message: "Only an admin may read another principal's usage."}
		}
		f.Principal = q.Principal
	} else if q.Admin {
		// Every principal's totals are nobody's in particular: labelled
		// with the admin's own principal they read as the admin's spend.
		f.All, f.Principal = true, ""
	}
	for _, d := range []struct {
		param, v string
		dst      *string
	}{{"from", q.From, &f.From}, {"to", q.To, &f.To}} {
		if d.v == "" {
			continue
		}
		day, err := time.Parse(time.DateOnly, d.v)
		if err != nil {
			return nil, responses.BadRequest(d.param, responses.CodeInvalidValue,
				fmt.Sprintf("%s: want a UTC date as YYYY-MM-DD, got %q.", d.param, d.v))
		}
		*d.dst = day.Format("20060102")
	}
	rep, err := a.usage.Report(ctx, f)
	if err != nil {
		return nil, a.BusError(err)
	}
	pending, _ := a.usage.Pending(ctx)
	out := &Usage{Report: rep, Object: "aptix.usage", Principal: f.Principal, All: f.All, Pending: pending}
	out.From, out.To = dashed(f.From), dashed(f.To)
	if !f.All {
		out.ByPrincipal = nil
	}
	return out, nil
}

func dashed(day string) string {
	if len(day) != 8 {
		return day
	}
	return strings.Join([]string{day[:4], day[4:6], day[6:]}, "-")
}
