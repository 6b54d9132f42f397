package responses

import (
	"strings"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// Model is one entry of GET /v1/models: a model (or alias) a profile serves.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Models lists every model a request may name, each once, owned by the
// profile it routes to (profiles.Set.Routes: configured profiles only, the
// default profile's first).
func Models(set *profiles.Set) []Model {
	var out []Model
	for _, r := range set.Routes() {
		out = append(out, Model{ID: r.Model, Object: "model", OwnedBy: r.Profile})
	}
	return out
}

// Resolve picks the backend profile serving model (profiles.Set.Route: a
// model, an alias, "profile/model" or a profile's name). An empty model
// takes the default profile. An unknown model is OpenAI's 404
// model_not_found naming the known ones, never a silent fallback.
// The returned model is what the turn asks the profile for: aliases
// resolved, the profile prefix removed ("" for its default when the client
// named the profile itself).
func Resolve(set *profiles.Set, model string) (backend, upstreamModel string, e *Error) {
	if model == "" {
		p, err := set.Get("")
		if err != nil {
			return "", "", Internal("no_default_backend", err.Error())
		}
		return p.Name, "", nil
	}
	if p, up, ok := set.Route(model); ok {
		return p.Name, up, nil
	}
	return "", "", ModelNotFound(set, model)
}

// ModelNotFound is OpenAI's 404 for a model nobody serves, naming the ones
// that are served.
func ModelNotFound(set *profiles.Set, model string) *Error {
	var ids []string
	for _, r := range set.Routes() {
		ids = append(ids, r.Model)
	}
	e := invalid("model", CodeModelNotFound, "The model '%s' does not exist or is not served by this gateway (known: %s).", model, strings.Join(ids, ", "))
	e.Status = 404
	return e
}
