package contracts

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Budget periods: a budget resets at 00:00 UTC each day, or on the first
// of each month.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Budget caps what one principal may spend in a period: USD (cost) or
// Tokens (input plus output), one of the two. The gateway copies the
// caller's budgets (its API key's, or its JWT mapping's) into the turn it
// submits; before each model call the LLM caller holds the call's worst
// case against them and refuses the call when it does not fit, so a
// budget is a hard limit (docs/usage-and-budgets.md#the-reservation-rule).
type Budget struct {
	USD    float64 `json:"usd,omitempty"`
	Tokens int64   `json:"tokens,omitempty"`
	Period string  `json:"period" jsonschema:"enum=day,enum=month"`
}

// ParseBudget reads "0.10/day" or "5/month" (USD; a leading $ is allowed),
// or with tokens set "100000/day".
func ParseBudget(s string, tokens bool) (Budget, error) {
	amount, period, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Budget{}, fmt.Errorf("budget %q: want AMOUNT/day or AMOUNT/month, e.g. 0.10/day", s)
	}
	b := Budget{Period: strings.ToLower(strings.TrimSpace(period))}
	if b.Period != PeriodDay && b.Period != PeriodMonth {
		return Budget{}, fmt.Errorf("budget %q: the period must be day or month", s)
	}
	amount = strings.TrimSpace(amount)
	if tokens {
		n, err := strconv.ParseInt(amount, 10, 64)
		if err != nil || n <= 0 {
			return Budget{}, fmt.Errorf("token budget %q: want a positive whole number of tokens, e.g. 100000/day", s)
		}
		b.Tokens = n
		return b, nil
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(amount, "$"), 64)
	if err != nil || v <= 0 || v != v || v > 1e9 {
		return Budget{}, fmt.Errorf("budget %q: want a positive amount of USD, e.g. 0.10/day", s)
	}
	b.USD = v
	return b, nil
}

// String writes the budget as ParseBudget reads it ("0.1/day", "100000 tokens/day").
func (b Budget) String() string {
	if b.Tokens > 0 {
		return strconv.FormatInt(b.Tokens, 10) + " tokens/" + b.Period
	}
	return "$" + strconv.FormatFloat(b.USD, 'f', -1, 64) + "/" + b.Period
}

// Window is the period a budget counts at now: its key ("20261127" for a
// day, "202611" for a month, the keys usage totals are kept under) and when
// it resets.
func (b Budget) Window(now time.Time) (key string, reset time.Time) {
	now = now.UTC()
	y, m, d := now.Date()
	if b.Period == PeriodMonth {
		return now.Format("200601"), time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return now.Format("20060102"), time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}
