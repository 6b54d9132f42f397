package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
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
func (s *Server) checkBudgets(ctx context.Context) ([]contracts.Budget, *responses.Error) {
	p := auth.From(ctx)
	if len(p.Budgets) == 0 || s.usage == nil {
		return p.Budgets, nil
	}
	refusal, err := s.usage.Check(ctx, p.ID, p.Budgets)
	if err != nil {
		s.log.Warn("budget check failed", "principal", p.ID, "err", err)
		return nil, responses.Unavailable("The usage totals are unavailable; retry later.")
	}
	if refusal != nil {
		return nil, budgetRefusal(refusal, s.cfg.Now())
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
	return &responses.Error{Status: http.StatusTooManyRequests, Type: TypeInsufficientQuota,
		Code: ptr(CodeBudgetExceeded), Message: r.ErrorMessage}
}

// keyID is the id of the API key the caller used, for per-key usage.
func keyID(ctx context.Context) string { return auth.From(ctx).KeyID }

// budgetRefusal is the 429 of a spent budget, with Retry-After until it resets.
func budgetRefusal(r *spend.Refusal, now time.Time) *responses.Error {
	return &responses.Error{Status: http.StatusTooManyRequests, Type: TypeInsufficientQuota,
		Code: ptr(CodeBudgetExceeded), Message: r.Message(), RetryAfter: max(1, int(math.Ceil(r.ResetAt.Sub(now).Seconds())))}
}

// usageReport answers GET /v1/aptix/usage: the caller's own totals, or for
// an admin (any caller when authentication is off) every principal's,
// optionally one principal's (principal=); model= and from=/to= (UTC
// dates, YYYY-MM-DD, inclusive) narrow both.
func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) {
	if s.usage == nil {
		s.fail(w, responses.Unavailable("usage accounting is not available"))
		return
	}
	q := r.URL.Query()
	p := auth.From(r.Context())
	admin := s.cfg.Auth == nil || p.Has(auth.RoleAdmin)
	f := spend.Filter{Principal: p.ID, Model: q.Get("model")}
	if who := q.Get("principal"); who != "" {
		if !admin && who != p.ID {
			s.fail(w, &responses.Error{Status: http.StatusForbidden, Type: responses.TypeInvalidRequest, Param: ptr("principal"),
				Code: ptr("forbidden"), Message: "Only an admin may read another principal's usage."})
			return
		}
		f.Principal = who
	} else if admin {
		// Every principal's totals are nobody's in particular: labelled
		// with the admin's own principal they read as the admin's spend.
		f.All, f.Principal = true, ""
	}
	for _, d := range []struct {
		param string
		dst   *string
	}{{"from", &f.From}, {"to", &f.To}} {
		v := q.Get(d.param)
		if v == "" {
			continue
		}
		day, err := time.Parse(time.DateOnly, v)
		if err != nil {
			s.fail(w, responses.BadRequest(d.param, responses.CodeInvalidValue,
				fmt.Sprintf("%s: want a UTC date as YYYY-MM-DD, got %q.", d.param, v)))
			return
		}
		*d.dst = day.Format("20060102")
	}
	rep, err := s.usage.Report(r.Context(), f)
	if err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	pending, _ := s.usage.Pending(r.Context())
	out := usageAnswer{Report: rep, Object: "aptix.usage", Principal: f.Principal, All: f.All, Pending: pending}
	out.From, out.To = dashed(f.From), dashed(f.To)
	if !f.All {
		out.ByPrincipal = nil
	}
	writeJSON(w, http.StatusOK, out)
}

// usageAnswer is the JSON of GET /v1/aptix/usage.
type usageAnswer struct {
	Object    string `json:"object"`
	Principal string `json:"principal,omitempty"`
	All       bool   `json:"all_principals,omitempty"`
	spend.Report
	// Pending counts completed turns (of anyone) not yet added to the
	// totals: the answer is exact once it is 0, a moment after a turn ends.
	Pending uint64 `json:"pending_turns"`
}

func dashed(day string) string {
	if len(day) != 8 {
		return day
	}
	return strings.Join([]string{day[:4], day[4:6], day[6:]}, "-")
}
