package sandbox

import (
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"slices"
	"strings"
)

// maxSchemaDepth stops generation on recursive or absurdly deep schemas.
const maxSchemaDepth = 12

// argumentsFor generates a JSON arguments string that conforms to a tool's
// parameters schema: every required property with a type-appropriate value,
// preferring const, default, example(s) and the first enum value. It covers
// the JSON Schema subset function tools use (type, properties, required,
// items, enum, const, default, examples, anyOf/oneOf, min*/format); $ref and
// pattern are not resolved.
func argumentsFor(parameters json.RawMessage) (string, error) {
	schema := map[string]any{"type": "object"}
	if len(parameters) > 0 && string(parameters) != "null" {
		if err := json.Unmarshal(parameters, &schema); err != nil {
			return "", fmt.Errorf("tool parameters are not a JSON object: %w", err)
		}
	}
	b, err := json.Marshal(valueFor(schema, 0))
	if err != nil {
		return "", fmt.Errorf("encode generated arguments: %w", err)
	}
	return string(b), nil
}

func valueFor(s map[string]any, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	for _, k := range []string{"const", "default", "example"} {
		if v, ok := s[k]; ok {
			return v
		}
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && typeOf(m) != "null" {
					return valueFor(m, depth+1)
				}
			}
		}
	}
	switch typeOf(s) {
	case "object":
		return objectFor(s, depth)
	case "array":
		n := 1
		if mi, ok := s["minItems"].(float64); ok && int(mi) > n {
			n = int(mi)
		}
		itemSchema, _ := s["items"].(map[string]any)
		if itemSchema == nil {
			itemSchema = map[string]any{"type": "string"}
		}
		out := make([]any, n)
		for i := range out {
			out[i] = valueFor(itemSchema, depth+1)
		}
		return out
	case "integer":
		return numberFor(s, true)
	case "number":
		return numberFor(s, false)
	case "boolean":
		return true
	case "null":
		return nil
	default:
		return stringFor(s)
	}
}

// typeOf returns the schema's type, the first non-null one of a type list,
// or "object" when it has properties.
func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
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
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return ""
}

func objectFor(s map[string]any, depth int) map[string]any {
	props, _ := s["properties"].(map[string]any)
	out := map[string]any{}
	var required []string
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required = append(required, name)
			}
		}
	}
	slices.Sort(required)
	for _, name := range required {
		ps, _ := props[name].(map[string]any)
		if ps == nil {
			ps = map[string]any{"type": "string"}
		}
		out[name] = valueFor(ps, depth+1)
	}
	return out
}

func numberFor(s map[string]any, integer bool) any {
	v := 1.0
	if m, ok := s["minimum"].(float64); ok {
		v = m
	} else if m, ok := s["exclusiveMinimum"].(float64); ok {
		v = m + 1
	}
	if m, ok := s["maximum"].(float64); ok && v > m {
		v = m
	}
	if integer {
		return int64(v)
	}
	return v
}

func stringFor(s map[string]any) string {
	var v string
	switch s["format"] {
	case "date-time":
		v = "2025-01-01T00:00:00Z"
	case "date":
		v = "2025-01-01"
	case "email":
		v = "sandbox@example.com"
	case "uri", "url":
		v = "https://example.com/sandbox"
	case "uuid":
		v = "00000000-0000-4000-8000-000000000000"
	default:
		v = "sandbox"
	}
	if mn, ok := s["minLength"].(float64); ok && len(v) < int(mn) {
		v += strings.Repeat("x", int(mn)-len(v))
	}
	if mx, ok := s["maxLength"].(float64); ok && len(v) > int(mx) {
		v = v[:int(mx)]
	}
	return v
}
