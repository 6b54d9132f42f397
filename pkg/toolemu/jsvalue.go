package toolemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// value is a JSON value that keeps object members in document order. The
// seed prints schemas with JavaScript's JSON.stringify, which keeps key
// order, and the per-tool guidance lists properties in that order; Go maps
// would sort them.
type value struct {
	kind kind
	b    bool
	num  string // a number as written in the document
	str  string
	arr  []value
	obj  []member
}

type member struct {
	key string
	val value
}

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func stringValue(s string) value { return value{kind: kindString, str: s} }

// get returns an object member's value.
func (v value) get(key string) (value, bool) {
	if v.kind != kindObject {
		return value{}, false
	}
	for _, m := range v.obj {
		if m.key == key {
			return m.val, true
		}
	}
	return value{}, false
}

// set adds or replaces an object member, keeping the first position of a
// repeated key (as JSON.parse does).
func (v *value) set(key string, val value) {
	for i := range v.obj {
		if v.obj[i].key == key {
			v.obj[i].val = val
			return
		}
	}
	v.obj = append(v.obj, member{key, val})
}

// float returns a number member as float64.
func (v value) float() (float64, bool) {
	if v.kind != kindNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.num, 64)
	return f, err == nil
}

// parseValue decodes one JSON document.
func parseValue(data []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return value{}, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (value, error) {
	tok, err := dec.Token()
	if err != nil {
		return value{}, err
	}
	switch t := tok.(type) {
	case nil:
		return value{}, nil
	case bool:
		return value{kind: kindBool, b: t}, nil
	case json.Number:
		return value{kind: kindNumber, num: t.String()}, nil
	case string:
		return stringValue(t), nil
	case json.Delim:
		switch t {
		case '[':
			v := value{kind: kindArray, arr: []value{}}
			for dec.More() {
				e, err := decodeValue(dec)
				if err != nil {
					return value{}, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := value{kind: kindObject, obj: []member{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return value{}, err
				}
				e, err := decodeValue(dec)
				if err != nil {
					return value{}, err
				}
				v.set(kt.(string), e)
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// stringify writes v the way JavaScript's JSON.stringify does, since the
// seed's texts are defined by it: no spaces, keys in order, numbers in
// JavaScript's shortest form, and only quote, backslash and control
// characters escaped (no HTML escaping, no \u escapes for non-ASCII).
func stringify(v value) string {
	var sb strings.Builder
	writeValue(&sb, v)
	return sb.String()
}

func writeValue(sb *strings.Builder, v value) {
	switch v.kind {
	case kindNull:
		sb.WriteString("null")
	case kindBool:
		sb.WriteString(strconv.FormatBool(v.b))
	case kindNumber:
		sb.WriteString(jsNumber(v.num))
	case kindString:
		writeString(sb, v.str)
	case kindArray:
		sb.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeValue(sb, e)
		}
		sb.WriteByte(']')
	case kindObject:
		sb.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeString(sb, m.key)
			sb.WriteByte(':')
			writeValue(sb, m.val)
		}
		sb.WriteByte('}')
	}
}

// jsString is JSON.stringify of a string.
func jsString(s string) string {
	var sb strings.Builder
	writeString(&sb, s)
	return sb.String()
}

func writeString(sb *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			if c < 0x20 {
				sb.WriteString(`\u00`)
				sb.WriteByte(hex[c>>4])
				sb.WriteByte(hex[c&0xf])
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
}

// jsNumber formats a JSON number as JavaScript's Number#toString does:
// the shortest digits that round-trip, plain notation for magnitudes in
// [1e-6, 1e21), otherwise exponent notation like 1e+21 or 1.5e-7.
func jsNumber(text string) string {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return text
	}
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}
