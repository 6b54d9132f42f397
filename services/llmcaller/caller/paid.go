package caller

import "context"

// MayBePaid reports whether an earlier delivery of the call keyed turnID
// left a stored result or a "call started" record (which stays beside a
// result kept elsewhere, Input.Stored): the model may already
// have been paid for it. The LLM caller stage does not refuse such a call
// for a spent budget (docs/usage-and-budgets.md#budgets): refusing would
// throw away what was paid and leave it unaccounted.
func (c *Caller) MayBePaid(ctx context.Context, turnID string) (bool, error) {
	if c.o.Results == nil {
		return false, nil
	}
	if cr := c.records(); cr != nil {
		res, started, _, err := cr.Lookup(ctx, turnID)
		return res != nil || started != nil, err
	}
	res, err := c.o.Results.Get(ctx, turnID)
	return res != nil, err
}
