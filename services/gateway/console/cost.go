package console

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// Cost on the console: each turn's cost (from its completed event) and
// the overview's spend today, from the usage totals every turn is folded
// into (docs/usage-and-budgets.md).

// usageStore opens the accounting once, on first use.
type usageStore struct {
	mu sync.Mutex
	u  *store.Usage
}

func (c *Console) usage(ctx context.Context) (*store.Usage, error) {
	c.spend.mu.Lock()
	defer c.spend.mu.Unlock()
	if c.spend.u == nil {
		u, err := store.OpenUsage(ctx, c.js, 0)
		if err != nil {
			return nil, err
		}
		c.spend.u = u
	}
	return c.spend.u, nil
}

// spendToday is every principal's spend on the current UTC day.
func (c *Console) spendToday(ctx context.Context, now time.Time) (spend.Report, error) {
	u, err := c.usage(ctx)
	if err != nil {
		return spend.Report{}, err
	}
	day := spend.DayWindow(now)
	return u.Report(ctx, spend.Filter{All: true, From: day, To: day})
}

// formatCost is a cost as the console shows it.
func formatCost(cost *contracts.Cost) string {
	switch {
	case cost == nil:
		return ""
	case cost.Unpriced:
		return "unpriced"
	}
	return "$" + strconv.FormatFloat(cost.Total, 'f', -1, 64)
}

// CostText is the turn's cost for the templates ("" before it completes).
func (ts turnSummary) CostText() string { return formatCost(ts.Cost) }

// TodayCost is the overview's spend today for its template.
func (d overviewData) TodayCost() string {
	return "$" + strconv.FormatFloat(d.Today.Cost.Total, 'f', -1, 64)
}
