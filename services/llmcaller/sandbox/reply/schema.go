package reply

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth stops generation on recursive or absurdly deep schemas.
const maxDepth = 12

// Arguments builds the arguments of a call to a tool whose parameters are
// schema (null or absent: an object), taking values the user's text names
// (see Rules). The result validates against the schema within the subset
// Rules lists.
func Arguments(schema json.RawMessage, text string) (string, error) {
	if len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return Value(schema, text)
}

// Value builds a JSON document that validates against schema: a structured
// output (text.format json_schema) or a call's arguments. Values of the
// top-level properties come from text where it names them (a place, a
// number, an enum value, a quoted string…), the rest from the schema.
func Value(schema json.RawMessage, text string) (string, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("the schema is not valid JSON: %w", err)
	}
	s, ok := root.(*obj)
	if !ok {
		if b, isBool := root.(bool); isBool && b {
			s = newObj() // true: anything validates
		} else {
			return "", fmt.Errorf("the schema is not a JSON object")
		}
	}
	g := &gen{root: s, find: newFinder(text)}
	b, err := json.Marshal(g.value(s, 0, nil))
	if err != nil {
		return "", fmt.Errorf("encode the generated value: %w", err)
	}
	return string(b), nil
}

// gen generates values for one schema document.
type gen struct {
	root *obj
	find *finder
}

// hint is what a top-level property tells the text finder: its name and
// description (nil below the top level: only the request's own values
// are looked up in the text).
type hint struct {
	name, description string
}

// resolve follows a local "$ref" (#, #/$defs/x, #/definitions/x, any JSON
// pointer into the document) and merges allOf, so the generator sees one
// schema object. An unresolvable reference is an empty schema.
func (g *gen) resolve(s *obj, depth int) *obj {
	for range maxDepth {
		ref := str(s, "$ref")
		if ref == "" {
			break
		}
		target := g.pointer(ref)
		if target == nil {
			return newObj()
		}
		// Keywords next to $ref (2020-12 allows them) apply too.
		merged := newObj()
		for _, k := range target.keys {
			merged.set(k, target.vals[k])
		}
		for _, k := range s.keys {
			if k != "$ref" {
				merged.set(k, s.vals[k])
			}
		}
		s = merged
	}
	if all := list(s, "allOf"); len(all) > 0 && depth < maxDepth {
		merged := newObj()
		for _, k := range s.keys {
			if k != "allOf" {
				merged.set(k, s.vals[k])
			}
		}
		for _, a := range all {
			if br, ok := a.(*obj); ok {
				mergeInto(merged, g.resolve(br, depth+1))
			}
		}
		s = merged
	}
	return s
}

// mergeInto adds branch's keywords to m: properties and required are
// united, other keywords kept where m has none.
func mergeInto(m, branch *obj) {
	for _, k := range branch.keys {
		v := branch.vals[k]
		switch k {
		case "properties":
			props := sub(m, "properties")
			if props == nil {
				props = newObj()
			}
			if bp, ok := v.(*obj); ok {
				for _, pk := range bp.keys {
					props.set(pk, bp.vals[pk])
				}
			}
			m.set("properties", props)
		case "required":
			req := list(m, "required")
			for _, r := range list(branch, "required") {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
			m.set("required", req)
		default:
			if _, ok := m.get(k); !ok {
				m.set(k, v)
			}
		}
	}
}

// pointer resolves a same-document reference; other documents are not fetched.
func (g *gen) pointer(ref string) *obj {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	var cur any = g.root
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *obj:
			cur = c.vals[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	o, _ := cur.(*obj)
	return o
}

func (g *gen) value(s *obj, depth int, h *hint) any {
	if depth > maxDepth || s == nil {
		return nil
	}
	s = g.resolve(s, depth)
	if v, ok := s.get("const"); ok {
		return v
	}
	if h != nil {
		if v, ok := g.find.valueFor(h, s); ok {
			return v
		}
	}
	for _, k := range []string{"default", "example"} {
		if v, ok := s.get(k); ok {
			return v
		}
	}
	if ex := list(s, "examples"); len(ex) > 0 {
		return ex[0]
	}
	if enum := list(s, "enum"); len(enum) > 0 {
		return enum[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		for _, a := range list(s, k) {
			if br, ok := a.(*obj); ok && typeOf(g.resolve(br, depth+1)) != "null" {
				return g.value(br, depth+1, h)
			}
		}
	}
	switch typeOf(s) {
	case "object":
		return g.object(s, depth)
	case "array":
		return g.array(s, depth)
	case "integer":
		return integerFor(s)
	case "number":
		return numberFor(s)
	case "boolean":
		return true
	case "null":
		return nil
	default:
		return stringFor(s)
	}
}

// typeOf is the schema's type: the first non-null one of a type list, or
// what its keywords imply.
func typeOf(s *obj) string {
	v, _ := s.get("type")
	switch t := v.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok && str != "null" {
				return str
			}
		}
		return "null"
	}
	switch {
	case sub(s, "properties") != nil || list(s, "required") != nil:
		return "object"
	case sub(s, "items") != nil || list(s, "prefixItems") != nil:
		return "array"
	}
	return ""
}

// object has every required property, in declared order; at the top level
// an optional property too when the text names its value, and enough
// optional ones to reach minProperties.
func (g *gen) object(s *obj, depth int) any {
	props := sub(s, "properties")
	if props == nil {
		props = newObj()
	}
	required := stringList(s, "required")
	out := newObj()
	for _, name := range props.keys {
		ps, _ := props.vals[name].(*obj)
		var h *hint
		if depth == 0 {
			h = &hint{name: name, description: str(ps, "description")}
		}
		if slices.Contains(required, name) {
			out.set(name, g.value(ps, depth+1, h))
			continue
		}
		if h != nil && ps != nil {
			if v, ok := g.find.optionalValue(h, g.resolve(ps, depth+1)); ok {
				out.set(name, v)
			}
		}
	}
	for _, name := range required {
		if _, ok := out.get(name); !ok {
			out.set(name, "sandbox") // required but not described: any value
		}
	}
	if mp, ok := num(s, "minProperties"); ok {
		for _, name := range props.keys {
			if len(out.keys) >= int(mp) {
				break
			}
			if _, ok := out.get(name); !ok {
				ps, _ := props.vals[name].(*obj)
				out.set(name, g.value(ps, depth+1, nil))
			}
		}
	}
	return out
}

// array has minItems items (one when it allows one and is shallow), tuple
// items from prefixItems first, made distinct when uniqueItems says so.
func (g *gen) array(s *obj, depth int) any {
	n := 0
	if mi, ok := num(s, "minItems"); ok {
		n = int(mi)
	}
	if mx, ok := num(s, "maxItems"); n == 0 && depth < 4 && (!ok || mx >= 1) {
		n = 1
	}
	prefix := list(s, "prefixItems")
	n = max(n, 0)
	if len(prefix) > n {
		n = len(prefix)
		if mx, ok := num(s, "maxItems"); ok {
			n = min(n, int(mx))
		}
	}
	items := sub(s, "items")
	if items == nil {
		items = newObj()
		items.set("type", "string")
	}
	out := make([]any, 0, n)
	for i := range n {
		is := items
		if i < len(prefix) {
			if p, ok := prefix[i].(*obj); ok {
				is = p
			}
		}
		v := g.value(is, depth+1, nil)
		if b, _ := s.get("uniqueItems"); b == true && i > 0 {
			v = distinct(g.resolve(is, depth+1), v, i)
		}
		out = append(out, v)
	}
	return out
}

// distinct varies the i-th item of a uniqueItems array: the i-th enum
// value, a number plus i, a string with i appended.
func distinct(s *obj, v any, i int) any {
	if enum := list(s, "enum"); len(enum) > 0 {
		return enum[i%len(enum)]
	}
	switch x := v.(type) {
	case int64:
		return x + int64(i)
	case float64:
		return x + float64(i)
	case string:
		return x + strconv.Itoa(i)
	}
	return v
}

// bounds are a number schema's limits; exclusive ones are tightened by
// step (1 for integers), draft-4 boolean exclusives included.
func bounds(s *obj, step float64) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if m, ok := num(s, "minimum"); ok {
		lo = m
		if b, _ := s.get("exclusiveMinimum"); b == true {
			lo = m + step
		}
	}
	if m, ok := num(s, "exclusiveMinimum"); ok {
		lo = max(lo, m+step)
	}
	if m, ok := num(s, "maximum"); ok {
		hi = m
		if b, _ := s.get("exclusiveMaximum"); b == true {
			hi = m - step
		}
	}
	if m, ok := num(s, "exclusiveMaximum"); ok {
		hi = min(hi, m-step)
	}
	return lo, hi
}

func integerFor(s *obj) int64 {
	lo, hi := bounds(s, 1)
	v := math.Min(math.Max(1, math.Ceil(lo)), math.Floor(hi))
	if m, ok := num(s, "multipleOf"); ok && m > 0 {
		v = math.Ceil(math.Max(v, lo)/m) * m
		if v > hi {
			v -= m
		}
	}
	return int64(v)
}

func numberFor(s *obj) float64 {
	lo, hi := bounds(s, 0)
	_, exLo := num(s, "exclusiveMinimum")
	_, exHi := num(s, "exclusiveMaximum")
	v := math.Min(math.Max(1, lo), hi)
	if (exLo && v <= lo) || (exHi && v >= hi) {
		if !math.IsInf(lo, 0) && !math.IsInf(hi, 0) {
			v = (lo + hi) / 2
		} else if exLo && !math.IsInf(lo, 0) {
			v = lo + 1
		} else if exHi && !math.IsInf(hi, 0) {
			v = hi - 1
		}
	}
	if m, ok := num(s, "multipleOf"); ok && m > 0 {
		v = math.Ceil(v/m) * m
	}
	return v
}

// formatValues are sample strings of the common formats.
var formatValues = map[string]string{
	"date-time": "2025-01-01T00:00:00Z", "date": "2025-01-01", "time": "00:00:00Z",
	"email": "sandbox@example.com", "idn-email": "sandbox@example.com",
	"uri": "https://example.com/sandbox", "url": "https://example.com/sandbox", "iri": "https://example.com/sandbox",
	"uri-reference": "https://example.com/sandbox", "uuid": "00000000-0000-4000-8000-000000000000",
	"ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "hostname": "example.com", "duration": "P1D",
}

// patternTries are what a string with a pattern tries, in order, when the
// default value does not match: patterns are not inverted in general.
var patternTries = []string{"sandbox", "a", "A", "0", "1", "abc", "ABC", "a1", "sandbox-1", "sandbox_1", "2025-01-01", "00000"}

func stringFor(s *obj) string {
	v := "sandbox"
	if f, ok := formatValues[str(s, "format")]; ok {
		v = f
	}
	if p := str(s, "pattern"); p != "" {
		if re, err := regexp.Compile(p); err == nil && !re.MatchString(v) {
			for _, try := range patternTries {
				if re.MatchString(try) && fitsLength(s, try) {
					return try
				}
			}
		}
	}
	return fitLength(s, v)
}

func fitsLength(s *obj, v string) bool {
	n := utf8.RuneCountInString(v)
	if mn, ok := num(s, "minLength"); ok && n < int(mn) {
		return false
	}
	if mx, ok := num(s, "maxLength"); ok && n > int(mx) {
		return false
	}
	return true
}

func fitLength(s *obj, v string) string {
	if mn, ok := num(s, "minLength"); ok && utf8.RuneCountInString(v) < int(mn) {
		v += strings.Repeat("x", int(mn)-utf8.RuneCountInString(v))
	}
	if mx, ok := num(s, "maxLength"); ok && utf8.RuneCountInString(v) > int(mx) {
		v = string([]rune(v)[:int(mx)])
	}
	return v
}
