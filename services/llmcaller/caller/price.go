package caller

import (
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// Price is the price of model on the backend profile named backend, as
// this caller's profiles define it: the backend that serves the call.
// ok is false for a backend this caller does not know (the call fails
// anyway); price is nil for an unpriced model.
func (c *Caller) Price(backend, model string) (price *contracts.Price, ok bool) {
	p, err := c.set.Get(backend)
	if err != nil {
		return nil, false
	}
	return p.Price(model), true
}

// Profile is the backend profile named name ("" for the default), as
// this caller's profiles define it: the stage reads a profile's
// fallbacks from it (docs/backends.md#fallbacks).
func (c *Caller) Profile(name string) (profiles.Profile, error) { return c.set.Get(name) }
