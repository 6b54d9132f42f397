package reply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// obj is a JSON object that keeps its members' order: a schema's
// properties are generated, and written, in the order they were declared,
// as a model's structured output is.
type obj struct {
	keys []string
	vals map[string]any
}

func newObj() *obj { return &obj{vals: map[string]any{}} }

func (o *obj) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

func (o *obj) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// MarshalJSON writes the members in order.
func (o *obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("encode key %q: %w", k, err)
		}
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, fmt.Errorf("encode %q: %w", k, err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered decodes JSON with objects as *obj and numbers as
// json.Number, so a const or enum value is written back exactly as sent.
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := newObj()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// num reads a JSON number member as a float64.
func num(o *obj, k string) (float64, bool) {
	v, ok := o.get(k)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func str(o *obj, k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

func sub(o *obj, k string) *obj {
	v, _ := o.get(k)
	s, _ := v.(*obj)
	return s
}

func list(o *obj, k string) []any {
	v, _ := o.get(k)
	l, _ := v.([]any)
	return l
}

// strings returns the string members of a list member ("required").
func stringList(o *obj, k string) []string {
	var out []string
	for _, v := range list(o, k) {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
