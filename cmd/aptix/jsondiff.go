package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// jsonDiff lists how JSON value b differs from a, one line per changed leaf:
// "~ path: old → new", "- path: old" (only in a), "+ path: new" (only in b).
// Objects are compared key by key and arrays index by index, which is what
// two /responses bodies of the same turn need (the same shape, a few changed
// fields or an added input item); it is not a minimal edit script.
func jsonDiff(a, b []byte) ([]string, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return nil, fmt.Errorf("left side is not JSON: %w", err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return nil, fmt.Errorf("right side is not JSON: %w", err)
	}
	var out []string
	diffValue("", va, vb, &out)
	return out, nil
}

func diffValue(path string, a, b any, out *[]string) {
	switch ta := a.(type) {
	case map[string]any:
		if tb, ok := b.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range ta {
				keys[k] = true
			}
			for k := range tb {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				p := k
				if path != "" {
					p = path + "." + k
				}
				va, ina := ta[k]
				vb, inb := tb[k]
				switch {
				case !inb:
					*out = append(*out, "- "+p+": "+short(va))
				case !ina:
					*out = append(*out, "+ "+p+": "+short(vb))
				default:
					diffValue(p, va, vb, out)
				}
			}
			return
		}
	case []any:
		if tb, ok := b.([]any); ok {
			for i := 0; i < max(len(ta), len(tb)); i++ {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(tb):
					*out = append(*out, "- "+p+": "+short(ta[i]))
				case i >= len(ta):
					*out = append(*out, "+ "+p+": "+short(tb[i]))
				default:
					diffValue(p, ta[i], tb[i], out)
				}
			}
			return
		}
	}
	if ja, jb := short(a), short(b); ja != jb {
		if path == "" {
			path = "(root)"
		}
		*out = append(*out, "~ "+path+": "+ja+" → "+jb)
	}
}

// short is a value's compact JSON, cut to 120 runes.
func short(v any) string {
	j, _ := json.Marshal(v)
	if r := []rune(string(j)); len(r) > 120 {
		return string(r[:119]) + "…"
	}
	return string(j)
}
