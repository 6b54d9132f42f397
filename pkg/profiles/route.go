package profiles

import (
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Routing by model name (docs/backends.md): a request names a model, not a
// backend, and the set finds the profile serving it. The order is fixed so
// two profiles listing one model always resolve the same way: the default
// profile first, then the others by name.

// Route is one model a client may name and the profile that serves it.
type Route struct {
	// Model is the name a client sends (a model, an alias, or a profile name).
	Model string
	// Profile owns the model.
	Profile string
}

// Route finds the profile serving model, before any fallback to the default:
//   - "profile/model" names both (an alias of that profile is resolved);
//   - a profile's default model, one of its models, one of its aliases or an
//     alias's target routes to that profile, the default profile winning
//     when several serve it;
//   - a profile's own name routes to it with its default model ("" upstream).
//
// Only a profile named outright ("profile/model", its name) is chosen when
// it is not Configured; a bare model never routes to a profile that could
// not answer, as Routes never lists one.
//
// upstream is the model to send: aliases resolved, the profile prefix
// removed. ok is false for a model no profile serves; "" is never routed.
func (s *Set) Route(model string) (p Profile, upstream string, ok bool) {
	if model == "" {
		return Profile{}, "", false
	}
	if name, m, found := strings.Cut(model, "/"); found && m != "" {
		if p, known := s.profiles[name]; known {
			return p, p.Model(m), true
		}
	}
	for _, name := range s.order() {
		p := s.profiles[name]
		if p.Name == model {
			return p, "", true
		}
		if p.Configured() && p.serves(model) {
			return p, p.Model(model), true
		}
	}
	return Profile{}, "", false
}

// serves reports whether model is p's default model, one of its models, or
// an alias or alias target.
func (p Profile) serves(model string) bool {
	if model == p.DefaultModel || slices.Contains(p.Models, model) {
		return true
	}
	for a, m := range p.Aliases {
		if a == model || m == model {
			return true
		}
	}
	return false
}

// Routes lists every model a client may name, each once, owned by the
// profile Route picks for it, in routing order (the default profile's
// first): per profile its default model, its models, then its aliases and
// their targets sorted. Profiles that are not Configured (their API key is
// missing) are left out: they could not answer.
func (s *Set) Routes() []Route {
	var out []Route
	seen := map[string]bool{}
	for _, name := range s.order() {
		p := s.profiles[name]
		if !p.Configured() {
			continue
		}
		aliases := make([]string, 0, 2*len(p.Aliases))
		for a, m := range p.Aliases {
			aliases = append(aliases, a, m)
		}
		slices.Sort(aliases)
		ids := append(append([]string{p.DefaultModel}, p.Models...), aliases...)
		for _, id := range ids {
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, Route{Model: id, Profile: p.Name})
		}
	}
	return out
}

// order is the routing order: the default profile, then the rest by name.
func (s *Set) order() []string {
	names := s.Names()
	if i := slices.Index(names, s.Default); i > 0 {
		names = append([]string{s.Default}, slices.Delete(names, i, i+1)...)
	}
	return names
}

// ForAgent is the profile a turn's agent context picks, as the envelope
// picks it: the one ac.Backend names, else the one serving ac.Model
// (Route), else the default. A routed model comes back rewritten in a copy
// of ac (aliases resolved, a "profile/" prefix removed); otherwise ac is
// returned as it is. The error is Get's, for a backend no profile has.
func (s *Set) ForAgent(ac *contracts.AgentContext) (Profile, *contracts.AgentContext, error) {
	if ac != nil && ac.Backend == "" && ac.Model != "" {
		if p, model, ok := s.Route(ac.Model); ok {
			routed := *ac
			routed.Model = model
			return p, &routed, nil
		}
	}
	backend := ""
	if ac != nil {
		backend = ac.Backend
	}
	p, err := s.Get(backend)
	return p, ac, err
}
