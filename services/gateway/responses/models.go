package responses

import (
	"slices"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// Model is one entry of GET /v1/models: a model (or alias) a profile serves.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Models lists every profile's default model and aliases, default profile
// first, each id once (the first profile that serves it wins, as in Resolve).
func Models(set *profiles.Set) []Model {
	var out []Model
	seen := map[string]bool{}
	for _, name := range profileOrder(set) {
		p, err := set.Get(name)
		if err != nil {
			continue
		}
		ids := []string{p.DefaultModel}
		aliases := make([]string, 0, len(p.Aliases))
		for a, m := range p.Aliases {
			aliases = append(aliases, a, m)
		}
		slices.Sort(aliases)
		for _, id := range append(ids, aliases...) {
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, Model{ID: id, Object: "model", OwnedBy: p.Name})
		}
	}
	return out
}

// Resolve picks the backend profile serving model: the first profile (the
// default first) whose default model, alias or alias target it is, or the
// profile of that name. An empty model takes the default profile. An unknown
// model is a 400 naming the known ones, never a silent fallback.
// The returned model is what the turn asks the profile for ("" for its
// default when the client named the profile itself).
func Resolve(set *profiles.Set, model string) (backend, upstreamModel string, e *Error) {
	if model == "" {
		p, err := set.Get("")
		if err != nil {
			return "", "", Internal("no_default_backend", err.Error())
		}
		return p.Name, "", nil
	}
	for _, name := range profileOrder(set) {
		p, err := set.Get(name)
		if err != nil {
			continue
		}
		if p.Name == model {
			return p.Name, "", nil
		}
		if p.DefaultModel == model {
			return p.Name, model, nil
		}
		for a, m := range p.Aliases {
			if a == model || m == model {
				return p.Name, model, nil
			}
		}
	}
	var ids []string
	for _, m := range Models(set) {
		ids = append(ids, m.ID)
	}
	e = invalid("model", CodeModelNotFound, "The model '%s' does not exist or is not served by this gateway (known: %v).", model, ids)
	return "", "", e
}

func profileOrder(set *profiles.Set) []string {
	names := set.Names()
	if i := slices.Index(names, set.Default); i > 0 {
		names = append([]string{set.Default}, slices.Delete(names, i, i+1)...)
	}
	return names
}
