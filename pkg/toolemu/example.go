package toolemu

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxExampleDepth stops example generation on recursive ($ref) or absurdly
// deep schemas.
const maxExampleDepth = 16

// exampleString is the type fallback for a string, as in the seed's
// example call (`"content":"example"`).
const exampleString = "example"

// exampleArguments builds the example arguments of a tool's per-tool
// guidance from its parameters schema. Per the seed, each value comes from
// the schema's default, then example, then the first of examples, then the
// first enum value, and otherwise from its type. An object lists its
// required properties only, in the schema's property order: the seed's
// template shows `paramA (required)` in the example and `paramB (optional)`
// left out.
func exampleArguments(schema value) value {
	return exampleFor(schema, schema, 0)
}

func exampleFor(s, root value, depth int) value {
	if depth > maxExampleDepth || s.kind != kindObject {
		return exampleByType(s, root, depth, "")
	}
	for _, k := range []string{"default", "example"} {
		if v, ok := s.get(k); ok {
			return v
		}
	}
	for _, k := range []string{"examples", "enum"} {
		if v, ok := s.get(k); ok && v.kind == kindArray && len(v.arr) > 0 {
			return v.arr[0]
		}
	}
	if v, ok := s.get("const"); ok {
		return v
	}
	if ref, ok := s.get("$ref"); ok && ref.kind == kindString {
		if target, ok := resolvePointer(root, ref.str); ok {
			return exampleFor(target, root, depth+1)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s.get(k); ok && alts.kind == kindArray {
			for _, alt := range alts.arr {
				if schemaType(alt) != "null" {
					return exampleFor(alt, root, depth+1)
				}
			}
		}
	}
	return exampleByType(s, root, depth, schemaType(s))
}

// exampleByType is the type fallback.
func exampleByType(s, root value, depth int, typ string) value {
	if depth > maxExampleDepth {
		return value{}
	}
	switch typ {
	case "object":
		out := value{kind: kindObject, obj: []member{}}
		props, _ := s.get("properties")
		required := requiredNames(s)
		for _, p := range props.obj {
			if slices.Contains(required, p.key) {
				out.set(p.key, exampleFor(p.val, root, depth+1))
			}
		}
		for _, name := range required {
			if _, ok := out.get(name); !ok { // required but not described
				out.set(name, stringValue(exampleString))
			}
		}
		return out
	case "array":
		out := value{kind: kindArray, arr: []value{}}
		n := 0
		if m, ok := s.get("minItems"); ok {
			if f, ok := m.float(); ok && f > 0 {
				n = int(math.Min(f, 8))
			}
		}
		items, _ := s.get("items")
		for range n {
			out.arr = append(out.arr, exampleFor(items, root, depth+1))
		}
		return out
	case "integer", "number":
		return value{kind: kindNumber, num: exampleNumber(s, typ == "integer")}
	case "boolean":
		return value{kind: kindBool, b: true}
	case "null":
		return value{}
	default: // "string" and schemas that say nothing about the type
		return stringValue(exampleText(s))
	}
}

// schemaType is the schema's type: the first non-null entry of a type list,
// "null" for a null-only type, else inferred from properties or items.
func schemaType(s value) string {
	t, _ := s.get("type")
	switch t.kind {
	case kindString:
		return t.str
	case kindArray:
		for _, e := range t.arr {
			if e.kind == kindString && e.str != "null" {
				return e.str
			}
		}
		return "null"
	}
	if _, ok := s.get("properties"); ok {
		return "object"
	}
	if _, ok := s.get("items"); ok {
		return "array"
	}
	return ""
}

// requiredNames lists the schema's required property names.
func requiredNames(s value) []string {
	req, _ := s.get("required")
	var names []string
	for _, e := range req.arr {
		if e.kind == kindString {
			names = append(names, e.str)
		}
	}
	return names
}

// exampleNumber is 0 moved into the schema's bounds.
func exampleNumber(s value, integer bool) string {
	v := 0.0
	if m, ok := s.get("minimum"); ok {
		if f, ok := m.float(); ok && v < f {
			v = f
		}
	}
	if m, ok := s.get("exclusiveMinimum"); ok {
		if f, ok := m.float(); ok && v <= f {
			v = f + 1
		}
	}
	if m, ok := s.get("maximum"); ok {
		if f, ok := m.float(); ok && v > f {
			v = f
		}
	}
	if m, ok := s.get("exclusiveMaximum"); ok {
		if f, ok := m.float(); ok && v >= f {
			v = f - 1
		}
	}
	if integer {
		v = math.Ceil(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// exampleText is "example", or a value of the declared format, fitted to
// minLength/maxLength.
func exampleText(s value) string {
	v := exampleString
	if f, ok := s.get("format"); ok {
		switch f.str {
		case "date-time":
			v = "2025-01-01T00:00:00Z"
		case "date":
			v = "2025-01-01"
		case "email":
			v = "user@example.com"
		case "uri", "url":
			v = "https://example.com"
		case "uuid":
			v = "00000000-0000-4000-8000-000000000000"
		}
	}
	if m, ok := s.get("minLength"); ok {
		if f, ok := m.float(); ok && len(v) < int(f) {
			v += strings.Repeat("x", int(f)-len(v))
		}
	}
	if m, ok := s.get("maxLength"); ok {
		if f, ok := m.float(); ok && f >= 0 && len(v) > int(f) {
			v = v[:int(f)]
		}
	}
	return v
}

// resolvePointer resolves a local reference ("#", "#/$defs/x") in root.
func resolvePointer(root value, ref string) (value, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return value{}, false
	}
	cur := root
	if frag == "" {
		return cur, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch cur.kind {
		case kindObject:
			next, ok := cur.get(tok)
			if !ok {
				return value{}, false
			}
			cur = next
		case kindArray:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur.arr) {
				return value{}, false
			}
			cur = cur.arr[i]
		default:
			return value{}, false
		}
	}
	return cur, true
}
