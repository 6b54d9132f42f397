package profiles

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Alias is what an alias in a profiles file says: the model it names, and,
// when the operator wants Aptix's own turn for it, the AGN-003 framing and
// retrieval a request naming the alias gets (docs/request.md#which-rule-applies-when).
// A plain alias ("fast": "gpt-5.1-mini") only renames: its requests reach
// the model as the client sent them.
type Alias struct {
	Model string `json:"model"`
	// Framing is "agn003" for the [MODE]/[INSTRUCTION] user message and the
	// system prompt once; empty or "none" sends the client's input as sent.
	Framing string `json:"framing,omitempty"`
	// Mode fills [MODE: …] under AGN-003 framing when the request names none.
	Mode string `json:"mode,omitempty"`
	// Retrieval, when set, retrieves context for every request naming the alias.
	Retrieval *AliasRetrieval `json:"retrieval,omitempty"`
}

// AliasRetrieval is the retrieval an alias asks for, as an execute
// request's fields say it (scope none, activeFiles, repo or workspace).
type AliasRetrieval struct {
	Scope     string   `json:"scope,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	Repo      string   `json:"repo,omitempty"`
	Language  string   `json:"language,omitempty"`
	Index     string   `json:"index,omitempty"`
	Tags      []string `json:"tags,omitempty"`
}

// UnmarshalJSON reads an alias as a model name or as an object.
func (a *Alias) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		*a = Alias{}
		return json.Unmarshal(data, &a.Model)
	}
	type plain Alias
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("an alias is a model name or {model, framing, mode, retrieval}: %w", err)
	}
	*a = Alias(p)
	return nil
}

// check names what is wrong with an alias of a profiles file.
func (a Alias) check(name string) error {
	switch {
	case a.Model == "":
		return fmt.Errorf("alias %q: model is required", name)
	case a.Framing != "" && a.Framing != "agn003" && a.Framing != "none":
		return fmt.Errorf("alias %q: framing must be agn003 or none, got %q", name, a.Framing)
	}
	if r := a.Retrieval; r != nil {
		switch r.Scope {
		case "", "none", "activeFiles", "repo", "workspace":
		default:
			return fmt.Errorf("alias %q: retrieval.scope must be none, activeFiles, repo or workspace, got %q", name, r.Scope)
		}
	}
	return nil
}

// Rule is the alias rule a request naming model gets on p: ok is false for
// a model that is no alias of p, or an alias that only renames.
func (p Profile) Rule(model string) (Alias, bool) {
	if _, m, found := strings.Cut(model, "/"); found && strings.HasPrefix(model, p.Name+"/") {
		model = m
	}
	a, ok := p.AliasRules[model]
	return a, ok
}

// aliasMaps splits a file's aliases into the model map every alias has
// and the rules of those that ask for more than a rename.
func aliasMaps(in map[string]Alias) (models map[string]string, rules map[string]Alias, err error) {
	if len(in) == 0 {
		return nil, nil, nil
	}
	models = make(map[string]string, len(in))
	for name, a := range in {
		if err := a.check(name); err != nil {
			return nil, nil, err
		}
		models[name] = a.Model
		if a.Framing != "" || a.Mode != "" || a.Retrieval != nil {
			if rules == nil {
				rules = map[string]Alias{}
			}
			rules[name] = a
		}
	}
	return models, rules, nil
}
