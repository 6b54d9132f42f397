package reply

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Format is the output format a request asks for.
type Format struct {
	// Type is "text" (also when empty), "json_object" or "json_schema".
	Type string
	// Name is the json_schema format's name.
	Name string
	// Schema is the json_schema format's schema.
	Schema json.RawMessage
}

// ErrNoSchema is a json_schema format without a schema.
var ErrNoSchema = errors.New("a json_schema format needs a schema")

// ResponsesFormat reads the Responses API's text parameter
// ({"format":{"type":"json_schema","name":…,"schema":{…}}}).
func ResponsesFormat(text json.RawMessage) (Format, error) {
	if len(text) == 0 || string(text) == "null" {
		return Format{Type: "text"}, nil
	}
	var t struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}
	if err := json.Unmarshal(text, &t); err != nil {
		return Format{}, fmt.Errorf("text: %w", err)
	}
	if t.Format == nil {
		return Format{Type: "text"}, nil
	}
	return checked(Format{Type: t.Format.Type, Name: t.Format.Name, Schema: t.Format.Schema})
}

// ChatFormat reads Chat Completions' response_format
// ({"type":"json_schema","json_schema":{"name":…,"schema":{…}}}).
func ChatFormat(responseFormat json.RawMessage) (Format, error) {
	if len(responseFormat) == 0 || string(responseFormat) == "null" {
		return Format{Type: "text"}, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(responseFormat, &rf); err != nil {
		return Format{}, fmt.Errorf("response_format: %w", err)
	}
	f := Format{Type: rf.Type}
	if rf.JSONSchema != nil {
		f.Name, f.Schema = rf.JSONSchema.Name, rf.JSONSchema.Schema
	}
	return checked(f)
}

func checked(f Format) (Format, error) {
	switch f.Type {
	case "", "text":
		f.Type = "text"
	case "json_object":
	case "json_schema":
		if len(f.Schema) == 0 || string(f.Schema) == "null" {
			return f, ErrNoSchema
		}
		if _, err := Value(f.Schema, ""); err != nil {
			return f, fmt.Errorf("invalid schema for format %q: %w", f.Name, err)
		}
	default:
		return f, fmt.Errorf("unknown format type %q (text, json_object or json_schema)", f.Type)
	}
	return f, nil
}

// Text is the text answer in the format: the sentence itself ("text"),
// {"sandbox":true,"reply":sentence} ("json_object"), or a document that
// validates against the schema with the values the request names
// ("json_schema", built as Value builds it).
func Text(f Format, sentence, request string) (string, error) {
	switch f.Type {
	case "json_object":
		b, err := json.Marshal(struct {
			Sandbox bool   `json:"sandbox"`
			Reply   string `json:"reply"`
		}{true, sentence})
		if err != nil {
			return "", fmt.Errorf("encode the json_object reply: %w", err)
		}
		return string(b), nil
	case "json_schema":
		return Value(f.Schema, request)
	}
	return sentence, nil
}
