package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
)

// Exposed is a tool under the name the model sees.
type Exposed struct {
	Name string
	Tool Tool
}

// maxNameLen is the longest function name OpenAI accepts (^[A-Za-z0-9_-]{1,64}$).
const maxNameLen = 64

// Expose names every tool of servers for the model. A tool keeps its own name
// unless two of the given servers offer that name or it is reserved (a
// function tool of the client's): then it is "<label>__<name>". Characters a
// function name may not hold become '_', a name longer than 64 is cut and
// given a short hash suffix, and a name still taken gets a hash suffix too.
// The result is sorted by server, then tool, and the same input always gives
// the same names, so a redelivered round maps names back identically.
func Expose(servers []ServerTools, reserved map[string]bool) []Exposed {
	type key struct{ server, name string }
	seen := map[key]bool{}
	var tools []Tool
	for _, st := range servers {
		for _, t := range st.Tools {
			if t.Server == "" {
				t.Server = st.Server
			}
			if k := (key{t.Server, t.Name}); !seen[k] {
				seen[k] = true
				tools = append(tools, t)
			}
		}
	}
	sort.Slice(tools, func(i, j int) bool {
		if tools[i].Server != tools[j].Server {
			return tools[i].Server < tools[j].Server
		}
		return tools[i].Name < tools[j].Name
	})

	offeredBy := map[string]map[string]bool{} // sanitized name → servers
	for _, t := range tools {
		n := sanitizeName(t.Name)
		if offeredBy[n] == nil {
			offeredBy[n] = map[string]bool{}
		}
		offeredBy[n][t.Server] = true
	}

	taken := map[string]bool{}
	out := make([]Exposed, 0, len(tools))
	for _, t := range tools {
		id := t.Server + "\x00" + t.Name
		name := sanitizeName(t.Name)
		if len(offeredBy[name]) > 1 || reserved[name] {
			name = sanitizeName(t.Server + "__" + t.Name)
		}
		if len(name) > maxNameLen {
			name = hashed(name, id)
		}
		for i, base := 1, name; taken[name] || reserved[name]; i++ {
			name = hashed(base, id+"\x00"+strconv.Itoa(i))
		}
		taken[name] = true
		out = append(out, Exposed{Name: name, Tool: t})
	}
	return out
}

// sanitizeName replaces every character outside [A-Za-z0-9_-] with '_'.
func sanitizeName(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// hashed cuts name so that "_" and 8 hex digits of id's hash fit in 64.
func hashed(name, id string) string {
	sum := sha256.Sum256([]byte(id))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return name[:min(len(name), maxNameLen-len(suffix))] + suffix
}
