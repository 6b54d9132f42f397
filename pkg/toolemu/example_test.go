package toolemu

import "testing"

// TestExampleArguments: the seed's sources in order (default, example,
// examples, enum), then type fallbacks; required properties only, in
// property order.
func TestExampleArguments(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"no parameters", `{"type":"object","properties":{}}`, `{}`},
		{"default wins", `{"type":"object","properties":{"x":{"type":"string","default":"d","example":"e","examples":["es"],"enum":["n","d","e","es"]}},"required":["x"]}`, `{"x":"d"}`},
		{"example next", `{"type":"object","properties":{"x":{"type":"string","example":"e","examples":["es"],"enum":["n","d","e","es"]}},"required":["x"]}`, `{"x":"e"}`},
		{"examples next", `{"type":"object","properties":{"x":{"type":"string","examples":["es","other"],"enum":["n","d","e","es"]}},"required":["x"]}`, `{"x":"es"}`},
		{"enum next", `{"type":"object","properties":{"x":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["x"]}`, `{"x":"celsius"}`},
		{"const", `{"type":"object","properties":{"x":{"const":7}},"required":["x"]}`, `{"x":7}`},
		{"type fallbacks", `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},"a":{"type":"array","items":{"type":"string"}},"z":{"type":"null"},"o":{"type":"object","properties":{"k":{"type":"string"},"opt":{"type":"string"}},"required":["k"]}},"required":["s","i","n","b","a","z","o"]}`,
			`{"s":"example","i":0,"n":0,"b":true,"a":[],"z":null,"o":{"k":"example"}}`},
		{"required only, property order", `{"type":"object","properties":{"b":{"type":"string"},"opt":{"type":"string"},"a":{"type":"integer"}},"required":["a","b"]}`, `{"b":"example","a":0}`},
		{"required but undescribed", `{"type":"object","properties":{},"required":["q"]}`, `{"q":"example"}`},
		{"bounds", `{"type":"object","properties":{"i":{"type":"integer","minimum":3},"x":{"type":"integer","exclusiveMinimum":1.5},"n":{"type":"number","maximum":-2},"m":{"type":"integer","exclusiveMaximum":-4}},"required":["i","x","n","m"]}`, `{"i":3,"x":3,"n":-2,"m":-5}`},
		{"minItems", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":2}},"required":["tags"]}`, `{"tags":["a","a"]}`},
		{"nullable type list", `{"type":"object","properties":{"u":{"type":["null","string"]}},"required":["u"]}`, `{"u":"example"}`},
		{"anyOf skips null", `{"type":"object","properties":{"u":{"anyOf":[{"type":"null"},{"type":"integer","minimum":1}]}},"required":["u"]}`, `{"u":1}`},
		{"$ref into $defs", `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}}}`, `{"p":{"x":0,"y":0}}`},
		{"recursive $ref stops", `{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`, ``},
		{"formats and lengths", `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"mail":{"type":"string","format":"email"},"code":{"type":"string","minLength":10},"c":{"type":"string","maxLength":3}},"required":["when","mail","code","c"]}`,
			`{"when":"2025-01-01T00:00:00Z","mail":"user@example.com","code":"examplexxx","c":"exa"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseValue([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			got := stringify(exampleArguments(s))
			if tc.want == "" { // only: it terminates
				return
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			// Schema-conformant, checked by the same validator strict tools use.
			v, err := compileSchema("t", []byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := v.validate(got); err != nil {
				t.Fatalf("example %s does not conform: %v", got, err)
			}
		})
	}
}
